// Mock of the OpenAI Responses API (POST /v1/responses, streamed) for both
// codex-acp releases. Codex compacts with an ordinary streamed request whose
// last input item is its compaction prompt; that request gets state.summary.
// /v1/responses/compact is answered too, in case a release calls it.
import { serve, note, sse, stall, text, runStandalone } from "./common.mjs";

const lastUser = (b) => {
  const items = Array.isArray(b?.input) ? b.input : [];
  const m = [...items].reverse().find((i) => i.role === "user");
  return text(m?.content ?? "");
};
const isSummary = (b) => /CONTEXT CHECKPOINT COMPACTION|summar/i.test(lastUser(b));

export function start(state, port = 0) {
  return serve("responses", state, async (req, url, body, res) => {
    if (req.method !== "POST" || !url.pathname.startsWith("/v1/responses")) return false;
    const compactEndpoint = url.pathname === "/v1/responses/compact";
    if (url.pathname !== "/v1/responses" && !compactEndpoint) return false;
    const summary = compactEndpoint || isSummary(body);
    const mode = note("responses", state, url.pathname, summary, lastUser(body));
    if (mode === "fail") {
      res.writeHead(500, { "content-type": "application/json" });
      return res.end(JSON.stringify({ error: { message: "mock: the model is overloaded", type: "server_error", code: "server_error" } })), true;
    }
    const n = state.seen.length, id = `msg_mock_${n}`;
    const out = summary ? state.summary : state.reply;
    const total = state.bigUsage && !summary ? state.bigUsage : 110;
    const usage = { input_tokens: total - 10, input_tokens_details: { cached_tokens: 0 }, output_tokens: 10, output_tokens_details: { reasoning_tokens: 0 }, total_tokens: total };
    const item = { type: "message", id, role: "assistant", status: "completed", content: [{ type: "output_text", text: out, annotations: [] }] };
    if (compactEndpoint) {
      res.writeHead(200, { "content-type": "application/json" });
      return res.end(JSON.stringify({ output: [{ type: "message", role: "user", content: [{ type: "input_text", text: out }] }] })), true;
    }
    const send = sse(res);
    send("response.created", { type: "response.created", response: { id: `resp_mock_${n}`, status: "in_progress" } });
    if (mode === "slow" && !(await stall(res))) return true;
    send("response.output_item.added", { type: "response.output_item.added", output_index: 0, item: { ...item, status: "in_progress", content: [] } });
    send("response.output_text.delta", { type: "response.output_text.delta", item_id: id, output_index: 0, content_index: 0, delta: out });
    send("response.output_item.done", { type: "response.output_item.done", output_index: 0, item });
    send("response.completed", { type: "response.completed", response: { id: `resp_mock_${n}`, status: "completed", output: [item], usage } });
    return res.end(), true;
  }, port);
}

if (import.meta.url === `file://${process.argv[1]}`) runStandalone(start, process.argv);
