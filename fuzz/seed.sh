#!/usr/bin/env bash
# Build the seed corpora under fuzz/corpus/<target>/ (git-ignored).
#
#   tokenizer  every JSONTestSuite test_parsing file, as is
#   budget     the same files behind a config header (raw mode)
#   mcp        every response line of ../shared/captures/*.jsonl, behind a header
#   guard      every tools/call request line of the captures, behind a header,
#              plus a few hand-written requests
#
# The structured targets read their first 64 bytes as a config (see
# fuzz/checks.rs, HEADER); its first byte's low bit selects raw mode, in which
# the rest of the input is the document. The other header bytes are random, so
# each seed also starts from some random limits and split points.
#
# Usage: fuzz/seed.sh   (from anywhere; needs python3 to unwrap capture lines)
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
shared="${SHARED:-$here/../../shared}"
suite="$shared/corpora/JSONTestSuite/test_parsing"
captures="$shared/captures"
corpus="$here/corpus"

for d in "$suite" "$captures"; do
    [ -d "$d" ] || { echo "seed.sh: missing $d" >&2; exit 1; }
done

mkdir -p "$corpus"/{tokenizer,budget,mcp,guard}

# header FILE: a 64-byte config header with raw mode set.
header() {
    printf '\001' >"$1"
    head -c 63 /dev/urandom >>"$1"
}

n=0
for f in "$suite"/*.json; do
    name="$(basename "$f" .json)"
    cp "$f" "$corpus/tokenizer/$name"
    header "$corpus/budget/$name"
    cat "$f" >>"$corpus/budget/$name"
    n=$((n + 1))
done
echo "tokenizer, budget: $n JSONTestSuite files"

# One message per line; the tee captures wrap each as {"dir":…,"line":"…"}.
python3 - "$captures" "$corpus" <<'PY'
import json, os, sys

captures, corpus = sys.argv[1], sys.argv[2]
counts = {"mcp": 0, "guard": 0}

def header():
    return b"\x01" + os.urandom(63)

def put(target, name, line):
    with open(os.path.join(corpus, target, name), "wb") as f:
        f.write(header() + line)
    counts[target] += 1

for fn in sorted(os.listdir(captures)):
    if not fn.endswith(".jsonl"):
        continue
    with open(os.path.join(captures, fn), "rb") as f:
        for i, raw in enumerate(f):
            raw = raw.rstrip(b"\r\n")
            if not raw:
                continue
            try:
                msg = json.loads(raw)
            except ValueError:
                continue
            if isinstance(msg, dict) and isinstance(msg.get("line"), str):
                raw = msg["line"].encode()
                try:
                    msg = json.loads(raw)
                except ValueError:
                    continue
            if not isinstance(msg, dict):
                continue
            stem = f"{fn[:-6]}-{i}"
            if msg.get("method") == "tools/call":
                put("guard", stem, raw)
            elif "result" in msg or "error" in msg:
                put("mcp", stem, raw)

extra = [
    b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"list_items","arguments":{"limit":500,"q":"x"}}}',
    b'{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"search_docs","arguments":{"query":"","tags":["a","b"]}}}',
    b'{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"},"name":"echo","arguments":{"message":"h\\u00e9llo \\ud83d\\ude00","nested":{"a":[[[]]]}}}}',
    b'{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"echo","arguments":{"a":1},"arguments":{"b":"' + b"x" * 300 + b'"}}}',
]
for i, line in enumerate(extra):
    put("guard", f"hand-{i}", line)
print(f"mcp: {counts['mcp']} capture lines; guard: {counts['guard']} requests")
PY
