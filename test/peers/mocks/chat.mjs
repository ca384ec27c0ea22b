// Mock of OpenAI-compatible chat completions (POST /v1/chat/completions,
// streamed chunks ending in [DONE]) for opencode, Qwen Code, Kimi Code,
// Copilot CLI, pi and Cline. Their summary prompts (opencode's compaction
// agent, Qwen's <state_snapshot> compression, pi's "context summarization
// assistant", …) get state.summary.
import { serve, note, sse, stall, text, runStandalone } from "./common.mjs";

const lastUser = (b) => text([...(b?.messages ?? [])].reverse().find((m) => m.role === "user")?.content ?? "");
const system = (b) => text((b?.messages ?? []).find((m) => m.role === "system")?.content ?? "");
const isSummary = (b) =>
  /summarizes a conversation|anchored summary|summary of (our|the) conversation|state_snapshot|run out of context\. Create a handoff summary/i.test(lastUser(b)) ||
  /context summarization (agent|assistant)/i.test(system(b));

export function start(state, port = 0) {
  return serve("chat", state, async (req, url, body, res) => {
    if (req.method === "GET" && url.pathname === "/v1/models") {
      res.writeHead(200, { "content-type": "application/json" });
      return res.end(JSON.stringify({ object: "list", data: [{ id: "mock-model", object: "model", owned_by: "mock" }] })), true;
    }
    if (req.method !== "POST" || url.pathname !== "/v1/chat/completions") return false;
    const summary = isSummary(body);
    const mode = note("chat", state, url.pathname, summary, lastUser(body));
    if (mode === "fail") {
      res.writeHead(state.failStatus ?? 500, { "content-type": "application/json" });
      return res.end(JSON.stringify({ error: { message: "mock: the model is overloaded", type: "server_error", code: "overloaded" } })), true;
    }
    const n = state.seen.length, id = `chatcmpl-mock-${n}`;
    const out = summary ? `<state_snapshot>${state.summary}</state_snapshot>` : state.reply;
    // A summary request carries the whole history: it reports the largest
    // prompt seen so far (Qwen derives the compressed size from it).
    const prompt = summary ? Math.max(100, state.peakPrompt ?? 0) : state.bigUsage || 100;
    state.peakPrompt = Math.max(prompt, state.peakPrompt ?? 0);
    const usage = { prompt_tokens: prompt, completion_tokens: 10, total_tokens: prompt + 10 };
    const base = { id, object: "chat.completion.chunk", created: 1767225600, model: body?.model ?? "mock-model" };
    if (!body?.stream) {
      res.writeHead(200, { "content-type": "application/json" });
      return res.end(JSON.stringify({ ...base, object: "chat.completion", choices: [{ index: 0, message: { role: "assistant", content: out }, finish_reason: "stop" }], usage })), true;
    }
    const send = sse(res);
    send(null, { ...base, choices: [{ index: 0, delta: { role: "assistant", content: "" }, finish_reason: null }] });
    if (mode === "slow" && !(await stall(res))) return true;
    send(null, { ...base, choices: [{ index: 0, delta: { content: out }, finish_reason: null }] });
    send(null, { ...base, choices: [{ index: 0, delta: {}, finish_reason: "stop" }], usage });
    send(null, "[DONE]");
    return res.end(), true;
  }, port);
}

if (import.meta.url === `file://${process.argv[1]}`) runStandalone(start, process.argv);
