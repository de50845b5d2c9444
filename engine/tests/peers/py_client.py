"""The official Python SDK client, driven by a JSON plan; prints one JSON array of results.

Usage: python py_client.py PLAN.json   (plan: {"command": [...], "calls": [{"name": ..., "arguments": {...}}]})
"""

import asyncio
import json
import sys

from mcp import Client
from mcp.client.stdio import StdioServerParameters


async def main() -> None:
    with open(sys.argv[1], encoding="utf-8") as f:
        plan = json.load(f)
    cmd = plan["command"]
    out = []
    try:
        async with Client(StdioServerParameters(command=cmd[0], args=cmd[1:]), read_timeout_seconds=60) as c:
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
