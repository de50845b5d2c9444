// The official TypeScript SDK client, driven by a JSON plan; prints one JSON array of results.
// Usage: node ts_client.mjs PLAN.json   (plan: {"command": [...], "calls": [{"name", "arguments"}], "timeout_ms"})
// Optional: "sampling_text_bytes" (answer the server's sampling requests with a text of that many bytes).
// A lone surrogate (which a plan, being JSON read by serde_json, cannot hold) is written `<U+D83D>`:
// in arguments it is sent as that UTF-16 unit, and in the output each one is shown that way.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { CreateMessageRequestSchema } from "@modelcontextprotocol/sdk/types.js";

import { readFileSync } from "node:fs";
const plan = JSON.parse(readFileSync(process.argv[2], "utf8"));
const transport = new StdioClientTransport({
  command: plan.command[0],
  args: plan.command.slice(1),
  stderr: "inherit",
});
const errors = [];
transport.onerror = (e) => errors.push(String(e?.message ?? e));
const sampling = plan.sampling_text_bytes !== undefined;
const client = new Client(
  { name: "resultbudget-test", version: "0.0.0" },
  sampling ? { capabilities: { sampling: {} } } : undefined,
);
if (sampling) {
  client.setRequestHandler(CreateMessageRequestSchema, async () => ({
    role: "assistant",
    model: "test",
    content: { type: "text", text: "s".repeat(plan.sampling_text_bytes) },
  }));
}
const LONE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;
const unmark = (v) =>
  typeof v === "string"
    ? v.replace(/<U\+(D[89A-F][0-9A-F]{2})>/g, (_, h) => String.fromCharCode(parseInt(h, 16)))
    : Array.isArray(v)
      ? v.map(unmark)
      : v && typeof v === "object"
        ? Object.fromEntries(Object.entries(v).map(([k, x]) => [unmark(k), unmark(x)]))
        : v;
const mark = (_k, v) =>
  typeof v === "string"
    ? v.replace(LONE, (c) => `<U+${c.charCodeAt(0).toString(16).toUpperCase()}>`)
    : v;
const out = [];
try {
  await client.connect(transport);
  const one = async (call) => {
    try {
      const r = await client.callTool(
        { name: call.name, arguments: unmark(call.arguments ?? {}) },
        undefined,
        { timeout: plan.timeout_ms ?? 30000 },
      );
      return { ok: true, result: r };
    } catch (e) {
      return { ok: false, error: String(e?.message ?? e), transport_errors: [...errors] };
    }
  };
  if (plan.list_first) await client.listTools();
  if (plan.parallel) {
    out.push(...(await Promise.all(plan.calls.map(one))));
  } else {
    for (const call of plan.calls) out.push(await one(call));
  }
} catch (e) {
  out.push({ ok: false, error: "session: " + String(e?.message ?? e) });
}
console.log(JSON.stringify(out, mark));
await client.close().catch(() => {});
process.exit(0);
