#!/usr/bin/env bash
# Run the whole benchmark suite and regenerate docs/performance.md and
# docs/performance-chart.svg. About 14–19 minutes on 2 cores.
#
#   bash benches/run.sh
#   BENCH_ARGS="--warm-up-time 2 --measurement-time 5" bash benches/run.sh
set -euo pipefail
cd "$(dirname "$0")/.."
target=${CARGO_TARGET_DIR:-target}
args=${BENCH_ARGS:---warm-up-time 1 --measurement-time 3}
command="cargo build --release -p resultbudget && cargo bench -p resultbudget-benches -- $args"

# Build first, so the build is not mistaken for load.
cargo build --release -p resultbudget
cargo bench -p resultbudget-benches --no-run

mkdir -p "$target"
# Fresh criterion results for this suite's groups only.
for g in twitter citm_catalog canada mcp_text mcp_list mcp_deep mcp_image skip_list skip_text skip_code \
  cut_text_128k cut_text_512k cut_text_2m cut_list_128k cut_list_512k cut_list_2m; do
  rm -rf "$target/criterion/$g"
done
rm -f "$target/rb-proxy-bench.json" "$target/rb-chunk-ratio.json" "$target/rb-pairs.json"

commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
if [ -n "$(git status --porcelain -- engine 2>/dev/null)" ]; then commit="$commit (engine/ modified)"; fi
start=$(date -u +%Y-%m-%dT%H:%M:%SZ)
load_before=$(cut -d' ' -f1-3 /proc/loadavg)

# Note which other processes use a CPU while the benches run.
others_log=$(mktemp)
(
  while sleep 20; do
    ps -eo pcpu=,comm= --sort=-pcpu | head -8 |
      awk '$1 >= 25 && $2 !~ /^(throughput|proxy|pairs|chunk-ratio|resultbudget|rb-bench-server|rb-bench-relay|ps|cargo)/ {print $2}'
  done
) >"$others_log" &
sampler=$!
trap 'kill "$sampler" 2>/dev/null || true; rm -f "$others_log"' EXIT

# shellcheck disable=SC2086
cargo bench -p resultbudget-benches -- $args
# The 4 KiB/64 KiB ratio once more, in alternating pairs (see chunk-ratio.rs).
cargo run --release -q -p resultbudget-benches --bin chunk-ratio -- 5 --json "$target/rb-chunk-ratio.json"

end=$(date -u +%Y-%m-%dT%H:%M:%SZ)
load_after=$(cut -d' ' -f1-3 /proc/loadavg)
kill "$sampler" 2>/dev/null || true
others=$(sort "$others_log" | uniq -c | sort -rn | awk '{printf "%s%s (%d samples)", (NR>1?", ":""), $2, $1}')

python3 - "$target/rb-bench-env.json" "$command" "$start" "$end" "$load_before" "$load_after" "$others" "$commit" <<'EOF'
import json, sys
path, command, start, end, lb, la, others, commit = sys.argv[1:]
json.dump({"command": command, "start": start, "end": end, "load_before": lb,
           "load_after": la, "others": others, "commit": commit}, open(path, "w"), indent=1)
EOF

python3 benches/report.py --target "$target"
