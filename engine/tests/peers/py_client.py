"""The official Python SDK client, driven by a JSON plan; prints one JSON array of results.

Usage: python py_client.py PLAN.json   (plan: {"command": [...], "calls": [{"name": ..., "arguments": {...}}]})
Optional: "mode" (the SDK's connection mode, e.g. "legacy"), "sampling_text_bytes" (answer the
server's sampling requests with a text of that many bytes), "read_timeout" (seconds, 60).
"""

import asyncio
import json
import sys

from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.types import CreateMessageResult, TextContent


async def main() -> None:
    with open(sys.argv[1], encoding="utf-8") as f:
        plan = json.load(f)
    cmd = plan["command"]
    out = []
    opts = {}
    if "mode" in plan:
        opts["mode"] = plan["mode"]
    if "sampling_text_bytes" in plan:
        n = plan["sampling_text_bytes"]

        async def sample(_context, _params):
            return CreateMessageResult(role="assistant", content=TextContent(type="text", text="s" * n), model="test")

        opts["sampling_callback"] = sample
    try:
        params = StdioServerParameters(command=cmd[0], args=cmd[1:])
        async with Client(params, read_timeout_seconds=plan.get("read_timeout", 60), **opts) as c:
            for call in plan["calls"]:
                try:
                    r = await c.call_tool(call["name"], call.get("arguments") or {})
                    out.append({"ok": True, "result": r.model_dump(by_alias=True, mode="json", exclude_none=True)})
                except BaseException as e:  # noqa: BLE001 - the test reads the failure
                    out.append({"ok": False, "error": f"{type(e).__name__}: {e}"})
    except BaseException as e:  # noqa: BLE001
        out.append({"ok": False, "error": f"session: {type(e).__name__}: {e}"})
    print(json.dumps(out))


asyncio.run(main())
