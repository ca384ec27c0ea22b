// tsagent: an ACP v1 agent built on the official TypeScript SDK
// (@agentclientprotocol/sdk, AgentApp), for throughput comparisons with
// the Go agents of this repository.
//
//   node test/bench/tsagent/agent.mjs        (speaks ACP on stdin/stdout)
//
// It answers initialize and session/new. A prompt `/compact flood N`
// streams one compaction_update in_progress, N compaction_summary_chunk
// text chunks ("chunk 0 ", "chunk 1 ", ...) and one compaction_update
// completed, awaiting each notify (as fast as the SDK allows), then
// answers end_turn. Any other prompt is echoed as one agent_message_chunk.
// session/cancel stops a flood, which then ends cancelled.
//
// The SDK is resolved from test/interop/node_modules (installed, pinned, by
// `make test-deps`), so this directory needs no package.json of its own.

import { createRequire } from "node:module";
import { Readable, Writable } from "node:stream";
import { pathToFileURL } from "node:url";

const require = createRequire(new URL("../../interop/package.json", import.meta.url));
const acp = await import(pathToFileURL(require.resolve("@agentclientprotocol/sdk")).href);

let sessions = 0;
const cancelled = new Set();

function text(prompt) {
  return prompt
    .filter((b) => b.type === "text")
    .map((b) => b.text)
    .join("");
}

const app = acp
  .agent({ name: "acpcompact-tsagent" })
  .onRequest(acp.methods.agent.initialize, () => ({
    protocolVersion: 1,
    agentCapabilities: { loadSession: false },
    authMethods: [],
    agentInfo: { name: "acpcompact-tsagent", version: "0.0.0" },
  }))
  .onRequest(acp.methods.agent.session.new, () => ({ sessionId: `sess_${++sessions}` }))
  .onNotification(acp.methods.agent.session.cancel, ({ params }) => {
    cancelled.add(params.sessionId);
  })
  .onRequest(acp.methods.agent.session.prompt, async ({ params, client }) => {
    const sessionId = params.sessionId;
    cancelled.delete(sessionId);
    const notify = (update) => client.notify(acp.methods.client.session.update, { sessionId, update });
    const input = text(params.prompt).trim();
    const m = /^\/compact flood (\d+)$/.exec(input);
    if (!m) {
      await notify({ sessionUpdate: "agent_message_chunk", content: { type: "text", text: input } });
      return { stopReason: "end_turn" };
    }
    const n = Number(m[1]);
    const compactionId = `cmp_ts_${sessionId}_${Date.now().toString(36)}`;
    await notify({ sessionUpdate: "compaction_update", compactionId, status: "in_progress" });
    for (let i = 0; i < n; i++) {
      if (cancelled.has(sessionId)) {
        await notify({ sessionUpdate: "compaction_update", compactionId, status: "cancelled" });
        return { stopReason: "cancelled" };
      }
      await notify({ sessionUpdate: "compaction_summary_chunk", compactionId, content: { type: "text", text: `chunk ${i} ` } });
    }
    await notify({ sessionUpdate: "compaction_update", compactionId, status: "completed" });
    return { stopReason: "end_turn" };
  });

const conn = app.connect(acp.ndJsonStream(Writable.toWeb(process.stdout), Readable.toWeb(process.stdin)));
await conn.closed;
