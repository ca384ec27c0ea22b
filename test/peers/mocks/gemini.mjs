// Mock of the Gemini API (POST /v1beta/models/M:streamGenerateContent?alt=sse,
// plus :generateContent and :countTokens) for Gemini CLI. Its chat
// compression prompt (<state_snapshot>) gets state.summary.
import { serve, note, sse, stall, text, runStandalone } from "./common.mjs";

const lastUser = (b) => text([...(b?.contents ?? [])].reverse().find((c) => c.role === "user")?.parts ?? "");
const isSummary = (b) => /state_snapshot/.test(JSON.stringify(b?.systemInstruction ?? "") + lastUser(b));

// fill answers a JSON-mode request (Gemini CLI's model router, next-speaker
// check) with a minimal value of the requested schema.
const fill = (sc) => {
  const t = String(sc?.type ?? "").toLowerCase();
  if (sc?.enum) return sc.enum[0];
  if (t === "object") return Object.fromEntries(Object.entries(sc.properties ?? {}).map(([k, v]) => [k, fill(v)]));
  if (t === "array") return [];
  if (t === "integer" || t === "number") return 10;
  if (t === "boolean") return false;
  return "mock";
};

export function start(state, port = 0) {
  return serve("gemini", state, async (req, url, body, res) => {
    const m = /^\/v1(beta|alpha)?\/models\/([^:]+):(streamGenerateContent|generateContent|countTokens)$/.exec(url.pathname);
    if (req.method !== "POST" || !m) return false;
    if (m[3] === "countTokens") {
      res.writeHead(200, { "content-type": "application/json" });
      return res.end(JSON.stringify({ totalTokens: 100 })), true;
    }
    const summary = isSummary(body);
    const mode = note("gemini", state, url.pathname, summary, lastUser(body));
    if (mode === "fail") {
      res.writeHead(503, { "content-type": "application/json" });
      return res.end(JSON.stringify({ error: { code: 503, message: "mock: the model is overloaded", status: "UNAVAILABLE" } })), true;
    }
    const json = body?.generationConfig?.responseMimeType === "application/json";
    const out = json ? JSON.stringify(fill(body.generationConfig.responseJsonSchema ?? body.generationConfig.responseSchema)) : summary ? `<state_snapshot>${state.summary}</state_snapshot>` : state.reply;
    const prompt = state.bigUsage && !summary ? state.bigUsage : 100;
    const chunk = { candidates: [{ content: { role: "model", parts: [{ text: out }] }, finishReason: "STOP", index: 0 }], usageMetadata: { promptTokenCount: prompt, candidatesTokenCount: 10, totalTokenCount: prompt + 10 }, modelVersion: m[2] };
    if (m[3] === "generateContent") {
      res.writeHead(200, { "content-type": "application/json" });
      return res.end(JSON.stringify(chunk)), true;
    }
    const send = sse(res);
    if (mode === "slow" && !(await stall(res))) return true;
    send(null, chunk);
    return res.end(), true;
  }, port);
}

if (import.meta.url === `file://${process.argv[1]}`) runStandalone(start, process.argv);
