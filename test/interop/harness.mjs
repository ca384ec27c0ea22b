// Interop harness: the official ACP TypeScript SDK (@agentclientprotocol/sdk)
// as the client of an agent process.
//
//   node harness.mjs [--protocol 1|2] [--capability KIND] [--scenario NAME | --steps JSON]
//                    [--timeout MS] -- AGENT [ARGS...]
//
// It spawns AGENT, speaks ACP to it over its stdio through the SDK's
// ndJsonStream, runs the steps of a scenario and prints one JSON object on
// stdout (see `result` below): every update the SDK delivered to the
// session/update handler, in order; each step's response with the number of
// updates delivered before it; the SDK's rejections ("Error handling
// notification", logged with console.error, which this process intercepts);
// and the raw wire, both directions, as the client saw it.
//
// Delivery order: the SDK dispatches notifications asynchronously, so a
// response could overtake the notifications read before it. A gate between
// the parsed stream and the SDK holds each response back until every
// session/update read before it has been delivered or rejected, which makes
// "updates before the response" exact.
//
// --capability (v1 only) sets clientCapabilities.session.compaction:
//   object  {"session":{"compaction":{}}}      (support)
//   absent  no session key                     (no support)
//   session-null {"session":null}
//   null    {"session":{"compaction":null}}
//   false   {"session":{"compaction":false}}   (not support: only an object is)
//   true    {"session":{"compaction":true}}
// Scenarios: see SCENARIOS. A step is {"prompt": TEXT, "cancel": "first-update" |
// "first-compaction" | "immediate"} or {"load": true} (v1 session/load; v2
// session/resume with replayFrom start) or {"newSession": true}.
// "first-compaction" and "first-update" wait for the prompt's work to show
// (see runStep), so the cancel reaches an agent that has started it.

import { spawn } from "node:child_process";
import { Writable } from "node:stream";
import * as acp1 from "@agentclientprotocol/sdk";
import * as acp2 from "@agentclientprotocol/sdk/experimental/v2";

const SCENARIOS = {
  echo: [{ prompt: "hello" }],
  compact: [{ prompt: "/compact" }],
  nosummary: [{ prompt: "/compact nosummary" }],
  fail: [{ prompt: "/compact fail" }],
  failearly: [{ prompt: "/compact failearly" }],
  "cancel-slow": [{ prompt: "/compact slow", cancel: "first-compaction" }],
  twice: [{ prompt: "/compact twice" }],
  load: [{ prompt: "/compact" }, { load: true }],
  flood: [{ prompt: "/compact flood 100" }],
};

const CAPABILITIES = {
  object: { session: { compaction: {} } },
  absent: {},
  "session-null": { session: null },
  null: { session: { compaction: null } },
  false: { session: { compaction: false } },
  true: { session: { compaction: true } },
};

function usage(msg) {
  process.stderr.write(`harness: ${msg}\n`);
  process.exit(2);
}

function parseArgs(argv) {
  const o = { protocol: 1, capability: "object", scenario: "compact", steps: null, timeout: 60000, agent: [] };
  let i = 0;
  for (; i < argv.length; i++) {
    const a = argv[i];
    const next = () => {
      if (i + 1 >= argv.length) usage(`${a} needs a value`);
      return argv[++i];
    };
    if (a === "--") {
      o.agent = argv.slice(i + 1);
      break;
    } else if (a === "--protocol") o.protocol = Number(next());
    else if (a === "--capability") o.capability = next();
    else if (a === "--scenario") o.scenario = next();
    else if (a === "--steps") o.steps = JSON.parse(next());
    else if (a === "--timeout") o.timeout = Number(next());
    else usage(`unknown argument ${a}`);
  }
  if (o.agent.length === 0) usage("missing -- AGENT [ARGS...]");
  if (o.protocol !== 1 && o.protocol !== 2) usage("--protocol must be 1 or 2");
  if (!(o.capability in CAPABILITIES)) usage(`unknown --capability ${o.capability}`);
  if (!o.steps) {
    o.steps = SCENARIOS[o.scenario];
    if (!o.steps) usage(`unknown --scenario ${o.scenario} (known: ${Object.keys(SCENARIOS).join(", ")})`);
  }
  return o;
}

const opts = parseArgs(process.argv.slice(2));
const acp = opts.protocol === 2 ? acp2 : acp1;

const result = {
  protocol: opts.protocol,
  capability: opts.capability,
  scenario: opts.steps === SCENARIOS[opts.scenario] ? opts.scenario : "custom",
  initialize: null,
  sessionId: null,
  updates: [], // {sessionId, update} as delivered to the handler
  steps: [], // one per step, see runStep
  rejected: 0, // "Error handling notification" logs: updates the SDK dropped
  consoleErrors: [], // everything the SDK logged with console.error / console.warn
  gateStalls: 0, // responses released although earlier updates never settled
  wire: [], // {dir: "client" | "agent", line}
  error: null,
  exitCode: null,
  signal: null,
};

// Intercept the SDK's logging: a dropped notification is only visible here.
const fmt = (args) =>
  args
    .map((a) => {
      if (typeof a === "string") return a;
      if (a instanceof Error) return `${a.name}: ${a.message}`;
      try {
        return JSON.stringify(a);
      } catch {
        return String(a);
      }
    })
    .join(" ");
console.error = (...args) => {
  const s = fmt(args);
  if (s.startsWith("Error handling notification")) result.rejected++;
  result.consoleErrors.push(s);
};
console.warn = (...args) => result.consoleErrors.push("warn: " + fmt(args));

// The agent process. Its stderr goes to ours, so the Go test sees its logs.
const child = spawn(opts.agent[0], opts.agent.slice(1), { stdio: ["pipe", "pipe", "inherit"] });
const exited = new Promise((resolve) => {
  child.on("exit", (code, signal) => {
    result.exitCode = code;
    result.signal = signal;
    resolve();
  });
  child.on("error", (err) => {
    result.error = result.error ?? `spawn: ${err.message}`;
    resolve();
  });
});
child.stdin.on("error", () => {}); // EPIPE when the agent dies first is reported via exit

// Splits a byte stream into lines for the wire record.
const requestMethods = new Map(); // JSON-RPC id -> method, from the client's writes

// record keeps one wire line, and remembers the ids of the client's
// requests (the SDK picks them) to label their responses.
function record(dir, line) {
  result.wire.push({ dir, line });
  if (dir !== "client") return;
  try {
    const m = JSON.parse(line);
    if (m && m.method && m.id !== undefined) requestMethods.set(JSON.stringify(m.id), m.method);
  } catch {
    // not JSON: the agent will say so
  }
}

function lineRecorder(dir) {
  const dec = new TextDecoder();
  let buf = "";
  return {
    push(bytes) {
      buf += dec.decode(bytes, { stream: true });
      let nl;
      while ((nl = buf.indexOf("\n")) >= 0) {
        const line = buf.slice(0, nl).replace(/\r$/, "");
        buf = buf.slice(nl + 1);
        if (line.trim() !== "") record(dir, line);
      }
    },
    flush() {
      if (buf.trim() !== "") record(dir, buf);
      buf = "";
    },
  };
}

// Agent -> client bytes, teed into the wire record as they arrive.
const agentLines = lineRecorder("agent");
// Once the SDK closes the connection it cancels this stream; what the agent
// still writes is recorded but goes nowhere.
let agentOutOpen = true;
const agentOut = new ReadableStream({
  start(controller) {
    child.stdout.on("data", (b) => {
      agentLines.push(b);
      if (agentOutOpen) controller.enqueue(new Uint8Array(b));
    });
    child.stdout.on("end", () => {
      agentLines.flush();
      if (agentOutOpen) controller.close();
      agentOutOpen = false;
    });
    child.stdout.on("error", (e) => {
      if (agentOutOpen) controller.error(e);
      agentOutOpen = false;
    });
  },
  cancel() {
    agentOutOpen = false;
  },
});

// Client -> agent bytes, teed into the wire record as the SDK writes them.
const clientLines = lineRecorder("client");
const agentIn = Writable.toWeb(child.stdin);
const clientOut = new WritableStream({
  async write(chunk) {
    clientLines.push(chunk);
    const writer = agentIn.getWriter();
    try {
      await writer.write(chunk);
    } finally {
      writer.releaseLock();
    }
  },
  async close() {
    clientLines.flush();
    child.stdin.end();
  },
  abort() {
    child.stdin.destroy();
  },
});

// The gate: see the file comment.
const responsesSeen = new Map(); // JSON-RPC id -> updates delivered before it
let wireUpdates = 0;
const settled = () => result.updates.length + result.rejected;
async function drain() {
  for (let i = 0; i < 10000 && settled() < wireUpdates; i++) {
    await new Promise((r) => setImmediate(r));
  }
  if (settled() < wireUpdates) result.gateStalls++;
}
const base = acp.ndJsonStream(clientOut, agentOut);
const gated = base.readable.pipeThrough(
  new TransformStream({
    async transform(msg, controller) {
      const isObj = msg && typeof msg === "object" && !Array.isArray(msg);
      if (isObj && !("method" in msg) && "id" in msg) {
        await drain();
        responsesSeen.set(JSON.stringify(msg.id), result.updates.length);
      }
      if (isObj && msg.method === "session/update" && !("id" in msg)) wireUpdates++;
      controller.enqueue(msg);
    },
  }),
);
const stream = { readable: gated, writable: base.writable };

// Waiters for delivered updates (v2 turns end with an idle state_update).
let waiters = [];
function notifyWaiters() {
  waiters = waiters.filter((w) => !w());
}
function waitFor(pred) {
  return new Promise((resolve) => {
    const check = () => {
      const v = pred();
      if (v !== undefined && v !== false) {
        resolve(v);
        return true;
      }
      return false;
    };
    if (!check()) waiters.push(check);
  });
}

const isCompaction = (u) => u && (u.sessionUpdate === "compaction_update" || u.sessionUpdate === "compaction_summary_chunk");
const PROGRESS = new Set([
  "compaction_update",
  "compaction_summary_chunk",
  "tool_call",
  "tool_call_update",
  "session_info_update",
  "agent_message_chunk",
  "agent_message",
]);
const isProgress = (u) => u && PROGRESS.has(u.sessionUpdate);

function lastRequestId(method) {
  let id;
  for (const [k, m] of requestMethods) if (m === method) id = k;
  return id;
}

async function request(agent, method, params, step) {
  const rec = { method, params, response: null, error: null, updatesBefore: null };
  step.requests.push(rec);
  try {
    rec.response = await agent.request(method, params);
  } catch (e) {
    rec.error = { message: e?.message ?? String(e), code: e?.code ?? null, data: e?.data ?? null };
  }
  const id = lastRequestId(method);
  rec.id = id === undefined ? null : JSON.parse(id);
  rec.updatesBefore = id !== undefined && responsesSeen.has(id) ? responsesSeen.get(id) : result.updates.length;
  return rec;
}

const cwd = process.cwd();

async function runStep(agent, s) {
  const step = { step: s, requests: [], cancelSentAfter: null, idleIndex: null, startIndex: result.updates.length };
  result.steps.push(step);
  if (s.newSession) {
    const rec = await request(agent, acp.methods.agent.session.new, newSessionParams(), step);
    if (rec.response) result.sessionId = rec.response.sessionId;
    return;
  }
  if (s.load) {
    if (opts.protocol === 1) {
      await request(agent, acp.methods.agent.session.load, { sessionId: result.sessionId, cwd, mcpServers: [] }, step);
    } else {
      await request(
        agent,
        acp.methods.agent.session.resume,
        { sessionId: result.sessionId, cwd, replayFrom: { type: "start" } },
        step,
      );
    }
    return;
  }
  const start = result.updates.length;
  let cancelTrigger = null;
  if (s.cancel) {
    const sendCancel = async () => {
      step.cancelSentAfter = result.updates.length;
      await agent.notify(acp.methods.agent.session.cancel, { sessionId: result.sessionId });
    };
    if (s.cancel === "immediate") {
      cancelTrigger = Promise.resolve().then(sendCancel);
    } else {
      // "first-compaction" waits for a compaction update, or, for a v1 client
      // without the capability (which gets none), for the first sign of the
      // script under way (a fallback form, agent text); "first-update" for
      // the latter in any case. Session state such as
      // available_commands_update may precede the prompt's work and does not
      // count. When nothing shows (a fallback of "none"), cancel after a
      // short pause.
      const capable = opts.protocol === 2 || opts.capability === "object";
      const want = s.cancel === "first-compaction" && capable ? isCompaction : isProgress;
      cancelTrigger = Promise.race([
        waitFor(() => result.updates.slice(start).some((u) => want(u.update))),
        new Promise((r) => setTimeout(r, 1500)),
      ]).then(sendCancel);
    }
  }
  const prompt = request(
    agent,
    acp.methods.agent.session.prompt,
    { sessionId: result.sessionId, prompt: [{ type: "text", text: s.prompt }] },
    step,
  );
  if (opts.protocol === 2) {
    // The v2 turn ends with the idle state_update, not with the response.
    step.idleIndex = await waitFor(() => {
      for (let i = start; i < result.updates.length; i++) {
        const u = result.updates[i].update;
        if (u.sessionUpdate === "state_update" && u.state === "idle") return i + 1;
      }
      return undefined;
    }).then((n) => n - 1);
  }
  await prompt;
  if (cancelTrigger) await cancelTrigger;
}

function newSessionParams() {
  return opts.protocol === 1 ? { cwd, mcpServers: [] } : { cwd };
}

function initializeParams() {
  if (opts.protocol === 2) {
    return { protocolVersion: 2, info: { name: "acpcompact-interop", version: "0.0.0" }, capabilities: {} };
  }
  return {
    protocolVersion: 1,
    clientCapabilities: { fs: { readTextFile: false, writeTextFile: false }, terminal: false, ...CAPABILITIES[opts.capability] },
    clientInfo: { name: "acpcompact-interop", version: "0.0.0" },
  };
}

const app = acp
  .client({ name: "acpcompact-interop" })
  .onNotification(acp.methods.client.session.update, ({ params }) => {
    result.updates.push({ sessionId: params.sessionId, update: params.update });
    notifyWaiters();
  })
  .onRequest(acp.methods.client.session.requestPermission, () => ({ outcome: { outcome: "cancelled" } }));

const guard = setTimeout(() => {
  result.error = result.error ?? `harness: timed out after ${opts.timeout} ms`;
  finish(1);
}, opts.timeout);

let finished = false;
function finish(code) {
  if (finished) return;
  finished = true;
  clearTimeout(guard);
  if (result.exitCode === null && !result.signal) child.kill("SIGKILL");
  process.stdout.write(JSON.stringify(result) + "\n", () => process.exit(code));
}

try {
  await app.connectWith(stream, async (agent) => {
    const init = { step: { initialize: true }, requests: [], startIndex: 0 };
    result.steps.push(init);
    const rec = await request(agent, acp.methods.agent.initialize, initializeParams(), init);
    if (rec.error) throw new Error(`initialize failed: ${rec.error.message}`);
    result.initialize = rec.response;
    await runStep(agent, { newSession: true });
    if (!result.sessionId) throw new Error("session/new failed");
    for (const s of opts.steps) await runStep(agent, s);
  });
} catch (e) {
  result.error = result.error ?? (e?.stack ?? String(e));
}
// Let the agent see end of input and exit on its own; kill it if it hangs.
child.stdin.end();
await Promise.race([exited, new Promise((r) => setTimeout(r, 5000))]);
clientLines.flush();
finish(0);
