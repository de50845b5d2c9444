"""A real Python-SDK MCP server for resultbudget's tests (both protocol generations).

Tools: `big_text` (untyped text of n bytes), `rows` (typed: structured list of n rows,
read-only), `mutate_rows` (typed, may change state), `list_things` / `search_things`
(the list-versus-search pair), `recent_events` (a page size named `count`, and a
`limit` that is not one), `crash` (writes half a response and dies), `add_late_tool`
(adds the typed tool `late_rows` and sends `notifications/tools/list_changed`),
`fail_loudly` (a JSON-RPC error of n bytes), `stdout_pipe_bytes` (the capacity of the
pipe the server writes to, on Linux), `ask_client` (asks the client for a sampling message and reports how much came back).
Every request the server receives is appended to $RB_SERVER_LOG when set, so tests can
prove what never reached it. With $RB_TOOLS_PAGE set, tools/list answers in pages of that
many tools. With `--answer-ids-as string|hex`, every answer's id is spelled otherwise
than the request's (see `answer_ids_as`).
"""

import os
import sys
import warnings

from mcp.server.mcpserver import Context, MCPServer
from mcp.shared.exceptions import MCPError
from mcp.types import ListToolsResult, PaginatedRequestParams, SamplingMessage, TextContent, ToolAnnotations

server = MCPServer("rb-test-server")
# The SDK moves the protocol stream off fd 1 when it starts; keep a handle on the wire
# so `crash` can leave half a line on it, as a real crash would.
WIRE = os.dup(1)
LOG = os.environ.get("RB_SERVER_LOG")


def log(what: str) -> None:
    if LOG:
        with open(LOG, "a", encoding="utf-8") as f:
            f.write(what + "\n")


@server.tool(structured_output=False, annotations=ToolAnnotations(readOnlyHint=True))
def big_text(n_bytes: int) -> str:
    """Return n_bytes of text."""
    log(f"big_text {n_bytes}")
    return ("lorem ipsum dolor sit amet " * (n_bytes // 27 + 1))[:n_bytes]


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def rows(n: int) -> list[dict]:
    """Return n rows (typed)."""
    log(f"rows {n}")
    return [{"id": i, "name": f"user{i}", "email": f"user{i}@example.com"} for i in range(n)]


@server.tool(annotations=ToolAnnotations(readOnlyHint=False, destructiveHint=True))
def mutate_rows(n: int) -> list[dict]:
    """Pretend to change n rows and return them all (typed, state-changing)."""
    log(f"mutate_rows {n}")
    return [{"id": i, "changed": True, "note": "x" * 40} for i in range(n)]


@server.tool(structured_output=False, annotations=ToolAnnotations(readOnlyHint=True))
def fail_loudly(n_bytes: int) -> str:
    """Fail with a JSON-RPC error whose message and data are n_bytes each."""
    log(f"fail_loudly {n_bytes}")
    raise MCPError(code=-32603, message="boom " + "e" * n_bytes, data={"trace": "t" * n_bytes})


@server.tool(structured_output=False, annotations=ToolAnnotations(readOnlyHint=True))
def list_things(limit: int = 20, cursor: str | None = None) -> str:
    """Browse things, one page at a time."""
    log(f"list_things limit={limit}")
    return f"{limit} things"


@server.tool(structured_output=False, annotations=ToolAnnotations(readOnlyHint=True))
def search_things(query: str, limit: int = 20, cursor: str | None = None) -> str:
    """Find things by text."""
    log(f"search_things query={query!r} limit={limit}")
    return f"things matching {query}"


@server.tool(structured_output=False, annotations=ToolAnnotations(readOnlyHint=True))
def recent_events(count: int = 5, limit: int | None = None) -> str:
    """The latest events, `count` of them (its page size); `limit` skips events
    older than that many minutes (not a page size)."""
    log(f"recent_events count={count} limit={limit}")
    return f"{count} events"


@server.tool(structured_output=False)
def store(payload: str, items: list[str] | None = None) -> str:
    """Store a payload (a mutation with caps)."""
    log(f"store {len(payload)}")
    return "stored"


@server.tool(structured_output=False)
def crash() -> str:
    """Write half a response, then die."""
    log("crash")
    sys.stdout.flush()
    os.write(WIRE, b'{"jsonrpc":"2.0","id":')
    os._exit(3)


@server.tool(structured_output=False)
def chatty(n_lines: int = 2) -> str:
    """Print stray lines on the protocol's stdout, as servers that log there do,
    then answer."""
    log(f"chatty {n_lines}")
    for i in range(n_lines):
        os.write(WIRE, f"chatty: working on step {i}\n".encode())
    os.write(WIRE, b"{'step': 'done'}\n")
    return "chatty done"


def late_rows(n: int) -> list[dict]:
    """Return n rows (typed; a tool the server adds while it runs)."""
    log(f"late_rows {n}")
    return [{"id": i, "name": f"late{i}"} for i in range(n)]


@server.tool(structured_output=False)
async def add_late_tool(ctx: Context) -> str:
    """Add the typed tool late_rows, and say that the tool list changed."""
    log("add_late_tool")
    server.add_tool(late_rows, annotations=ToolAnnotations(readOnlyHint=True))
    await ctx.session.send_tool_list_changed()
    return "added late_rows"


@server.tool(structured_output=False)
def stdout_pipe_bytes() -> str:
    """The capacity of the pipe this server writes its output into (Linux)."""
    import fcntl

    return str(fcntl.fcntl(WIRE, fcntl.F_GETPIPE_SZ))


@server.tool(structured_output=False)
async def ask_client(prompt: str, ctx: Context, pad: int = 0) -> str:
    """Ask the client for a sampling message (a request from the server, legacy
    protocol) and report the length of the text it answered with (then `pad`
    bytes of padding)."""
    log(f"ask_client {prompt}")
    with warnings.catch_warnings():
        # Sampling is deprecated in 2026-07-28, and live in the generation before it.
        warnings.simplefilter("ignore")
        r = await ctx.session.create_message(
            messages=[SamplingMessage(role="user", content=TextContent(type="text", text=prompt))],
            max_tokens=16,
        )
    text = r.content.text if isinstance(r.content, TextContent) else ""
    log(f"ask_client answered {len(text)}")
    return f"the client answered with {len(text)} characters" + "." * pad


async def paged_list_tools(ctx, params) -> ListToolsResult:
    """tools/list in pages of $RB_TOOLS_PAGE tools, in name order, as a server with
    many tools answers it; the cursor is the index of the page's first tool."""
    tools = sorted(await server.list_tools(), key=lambda t: t.name)
    size = int(os.environ["RB_TOOLS_PAGE"])
    start = int(params.cursor) if params is not None and params.cursor else 0
    log(f"tools/list from {start}")
    end = start + size
    return ListToolsResult(tools=tools[start:end], nextCursor=str(end) if end < len(tools) else None)


if os.environ.get("RB_TOOLS_PAGE"):
    server._lowlevel_server.add_request_handler("tools/list", PaginatedRequestParams, paged_list_tools)


def answer_ids_as(how: str) -> None:
    """Run the server as a child and rewrite the id of each of its answers: `string`
    writes a number id as a string (`7` as `"7"`), as servers that keep ids as strings
    do; `hex` writes it as `"0x7"`, which the TypeScript client, reading an answer's
    id with `Number()`, still takes for its call 7."""
    import json
    import subprocess

    child = subprocess.Popen([sys.executable, __file__], stdout=subprocess.PIPE)
    assert child.stdout is not None
    for line in child.stdout:
        try:
            msg = json.loads(line)
        except ValueError:
            msg = None
        if isinstance(msg, dict) and "method" not in msg and isinstance(msg.get("id"), int):
            i = msg["id"]
            msg["id"] = str(i) if how == "string" else hex(i)
            line = (json.dumps(msg, separators=(",", ":")) + "\n").encode()
        sys.stdout.buffer.write(line)
        sys.stdout.buffer.flush()
    sys.exit(child.wait())


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--answer-ids-as":
        answer_ids_as(sys.argv[2])
    server.run()
