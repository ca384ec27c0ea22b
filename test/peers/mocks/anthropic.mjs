// Mock of the Anthropic Messages API (POST /v1/messages, streamed SSE) for
// Claude ACP. A summary request (Claude Code's /compact or automatic
// compaction prompt) gets state.summary; summaryMode "fail" answers 529
// overloaded, "slow" never finishes the stream.
import { serve, note, sse, stall, text, runStandalone } from "./common.mjs";

const isSummary = (b) => /summary of the conversation|create a detailed summary|summariz/i.test(lastUser(b));
const lastUser = (b) => text([...(b?.messages ?? [])].reverse().find((m) => m.role === "user")?.content ?? "");

export function start(state, port = 0) {
  return serve("anthropic", state, async (req, url, body, res) => {
    if (req.method !== "POST") return false;
    if (url.pathname === "/v1/messages/count_tokens") {
      res.writeHead(200, { "content-type": "application/json" });
      return res.end(JSON.stringify({ input_tokens: 100 })), true;
    }
    if (url.pathname !== "/v1/messages") return false;
    const summary = isSummary(body);
    const mode = note("anthropic", state, url.pathname + url.search, summary, lastUser(body));
    if (mode === "fail") {
      res.writeHead(529, { "content-type": "application/json" });
      return res.end(JSON.stringify({ type: "error", error: { type: "overloaded_error", message: "Overloaded" } })), true;
    }
    const out = summary ? `<analysis>mock</analysis>\n<summary>${state.summary}</summary>` : state.reply;
    // The cache fields are always there in the real API; @zed-industries/claude-agent-acp
    // adds them up, and without them reports usage_update.used as null (NaN).
    const usage = { input_tokens: state.bigUsage && !summary ? state.bigUsage : 100, output_tokens: 10, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 };
    const message = { id: `msg_mock_${state.seen.length}`, type: "message", role: "assistant", model: body?.model ?? "mock", content: [], stop_reason: null, stop_sequence: null, usage };
    if (!body?.stream) {
      res.writeHead(200, { "content-type": "application/json" });
      return res.end(JSON.stringify({ ...message, content: [{ type: "text", text: out }], stop_reason: "end_turn" })), true;
    }
    const send = sse(res);
    send("message_start", { type: "message_start", message });
    if (mode === "slow" && !(await stall(res))) return true;
    send("content_block_start", { type: "content_block_start", index: 0, content_block: { type: "text", text: "" } });
    send("content_block_delta", { type: "content_block_delta", index: 0, delta: { type: "text_delta", text: out } });
    send("content_block_stop", { type: "content_block_stop", index: 0 });
    send("message_delta", { type: "message_delta", delta: { stop_reason: "end_turn", stop_sequence: null }, usage: { output_tokens: 10 } });
    send("message_stop", { type: "message_stop" });
    return res.end(), true;
  }, port);
}

if (import.meta.url === `file://${process.argv[1]}`) runStandalone(start, process.argv);
