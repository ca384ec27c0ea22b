// Shared skeleton of the model-API mocks: a loopback-only HTTP server whose
// behaviour the recorder switches per scenario through `state`. A mock never
// calls anything; every unknown path is a 404.
import fs from "node:fs";
import http from "node:http";

export function newState() {
  return {
    reply: "Hello! How can I help?", // text of an ordinary model reply
    summary: "MOCK SUMMARY: the user said hello and the assistant greeted them.",
    summaryMode: "ok", // ok | fail | slow: how a summary/compaction request is answered
    replyMode: "ok", // ok | fail | slow: how any other request is answered
    bigUsage: 0, // if set, the input tokens an ordinary reply reports (a nearly full context window triggers automatic compaction)
    seen: [], // one entry per request: {path, summary}
    waiters: [],
  };
}

// Resolves once a summary request has arrived (used to time session/cancel).
export function waitFor(state, pred, ms) {
  return new Promise((resolve) => {
    if (state.seen.some(pred)) return resolve(true);
    const t = setTimeout(() => resolve(false), ms);
    state.waiters.push({ pred, resolve: (v) => (clearTimeout(t), resolve(v)) });
  });
}

// serve(name, state, route): route(req, url, body, res) returns true when it
// answered; otherwise 404. Resolves to {port, close}.
export function serve(name, state, route, port = 0) {
  const open = new Set();
  const server = http.createServer((req, res) => {
    const chunks = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", async () => {
      const url = new URL(req.url, "http://127.0.0.1");
      let body = null;
      try { body = chunks.length ? JSON.parse(Buffer.concat(chunks).toString("utf8")) : null; } catch {}
      // PEERS_DUMP=file appends every request (path and body) there, to see what an agent sends.
      if (process.env.PEERS_DUMP) fs.appendFileSync(process.env.PEERS_DUMP, JSON.stringify({ path: req.url, body }) + "\n");
      try {
        if (!(await route(req, url, body, res))) {
          log(name, `${req.method} ${url.pathname}${url.search} -> 404`);
          res.writeHead(404, { "content-type": "application/json" });
          res.end(JSON.stringify({ error: { message: `mock ${name}: no route ${req.method} ${url.pathname}` } }));
        }
      } catch (e) {
        log(name, `handler error: ${e.stack}`);
        if (!res.headersSent) res.writeHead(500);
        res.end();
      }
    });
  });
  server.on("connection", (s) => { open.add(s); s.on("close", () => open.delete(s)); });
  return new Promise((resolve) => {
    server.listen(port, "127.0.0.1", () => {
      const { port } = server.address();
      resolve({ port, close: () => { for (const s of open) s.destroy(); server.close(); } });
    });
  });
}

export function log(name, msg) {
  if (process.env.PEERS_QUIET !== "1") process.stderr.write(`[mock ${name}] ${msg}\n`);
  // PEERS_LOG: the running scenario's log file (record.mjs), next to the agent's stderr.
  if (process.env.PEERS_LOG) fs.appendFileSync(process.env.PEERS_LOG, `[mock ${name}] ${msg}\n`);
}

// note records a request and wakes waiters; returns the mode that applies.
export function note(name, state, path, isSummary, digest) {
  const entry = { path, summary: isSummary };
  state.seen.push(entry);
  state.waiters = state.waiters.filter((w) => (w.pred(entry) ? (w.resolve(true), false) : true));
  const mode = isSummary ? state.summaryMode : state.replyMode;
  if (isSummary) state.bigUsage = 0; // the context is small again once summarised
  log(name, `POST ${path} ${isSummary ? "[summary] " : ""}mode=${mode} last=${JSON.stringify(digest.slice(0, 100))}`);
  return mode;
}

export function sse(res) {
  res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache", connection: "keep-alive" });
  return (event, data) => res.write(`${event ? `event: ${event}\n` : ""}data: ${typeof data === "string" ? data : JSON.stringify(data)}\n\n`);
}

// slow: hold the response for ms (a cancel usually aborts it first); resolves
// true if the client is still there and the answer should follow.
export function stall(res, ms = Number(process.env.PEERS_SLOW_MS ?? 10000)) {
  return new Promise((resolve) => {
    const t = setTimeout(() => resolve(true), ms);
    res.on("close", () => (clearTimeout(t), resolve(false)));
  });
}

export const text = (v) => (typeof v === "string" ? v : Array.isArray(v) ? v.map((p) => p?.text ?? p?.content ?? "").join("") : v?.text ?? "");

// runStandalone: `node mocks/X.mjs [summaryMode]` prints the port and serves until killed.
export async function runStandalone(start, argv) {
  const state = newState();
  if (argv[2]) state.summaryMode = argv[2];
  const { port } = await start(state);
  console.log(port);
}
