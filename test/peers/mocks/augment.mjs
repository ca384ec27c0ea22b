// Mock of the Augment backend for Auggie (its tenant URL): POST /chat-stream
// answers with newline-delimited JSON objects, the reply's text with a
// token-usage node (type 10), then a final object with stop_reason. Its
// other calls (indexing, feature flags, reporting) get the 404 of every mock.
import { serve, note, stall, runStandalone } from "./common.mjs";

// The user's text: `message`, or (Auggie 0.36) the request's text nodes.
const userText = (b) => String(b?.message || (b?.nodes ?? []).map((n) => n?.text_node?.content ?? "").join(""));
const isSummary = (b) => /summar/i.test(userText(b));

export function start(state, port = 0) {
  return serve("augment", state, async (req, url, body, res) => {
    if (req.method !== "POST" || url.pathname !== "/chat-stream") return false;
    const summary = isSummary(body);
    const mode = note("augment", state, url.pathname, summary, userText(body));
    if (mode === "fail") {
      res.writeHead(503, { "content-type": "application/json" });
      return res.end(JSON.stringify({ error: "mock: the model is overloaded" })), true;
    }
    const out = summary ? state.summary : state.reply;
    const input = state.bigUsage && !summary ? state.bigUsage : 100;
    res.writeHead(200, { "content-type": "application/json" });
    if (mode === "slow" && !(await stall(res))) return true;
    res.write(JSON.stringify({ text: out, nodes: [{ id: 1, type: 0, content: out }, { id: 2, type: 10, token_usage: { input_tokens: input, output_tokens: 10 } }] }) + "\n");
    res.write(JSON.stringify({ text: "", stop_reason: 1 }) + "\n");
    return res.end(), true;
  }, port);
}

if (import.meta.url === `file://${process.argv[1]}`) runStandalone(start, process.argv);
