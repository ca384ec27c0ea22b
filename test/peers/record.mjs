#!/usr/bin/env node
// Records real ACP transcripts of the pinned agent releases (README.md).
//
//   node record.mjs                      every agent, every scenario, cap and nocap
//   node record.mjs claude compact       one agent, one scenario (both modes)
//   node record.mjs qwen --nocap         one agent, all its scenarios, nocap only
//
// It re-executes itself in a fresh network namespace that has only a
// loopback interface (unshare -rn), so neither an agent nor a mock can reach
// anything but 127.0.0.1. Each run: start the model-API mock, spawn the
// agent in its own process group with a temporary HOME, play the scenario
// as a raw newline-delimited JSON-RPC client, and write every line exactly
// as sent or received to testdata/<agent>-<version>/<scenario>-<cap|nocap>.jsonl.
import { spawn, spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { agents } from "./agents.mjs";
import { newState, waitFor } from "./mocks/common.mjs";

const HERE = import.meta.dirname;
const SCENARIO_TIMEOUT_MS = Number(process.env.PEERS_TIMEOUT_MS ?? 120000);
// Inside the private network namespace a fixed port is free and keeps the
// port that some agents quote in their messages stable across recordings.
const MOCK_PORT = Number(process.env.PEERS_MOCK_PORT ?? 41414);
const GRACE_MS = 2500; // listen this long after the last response for trailing updates (an agent's tailMs overrides it)
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

if (process.env.PEERS_NETNS !== "1") {
  const r = spawnSync("unshare", ["-rn", "sh", "-c", 'ip link set lo up && exec "$0" "$@"', process.execPath, ...process.argv.slice(1)], {
    stdio: "inherit",
    env: { ...process.env, PEERS_NETNS: "1" },
  });
  if (r.error) {
    console.error(`record.mjs: cannot isolate the network (unshare -rn; ip from iproute2): ${r.error.message}`);
    process.exit(2);
  }
  process.exit(r.status ?? 1);
}

const mocks = {
  anthropic: () => import("./mocks/anthropic.mjs"),
  responses: () => import("./mocks/responses.mjs"),
  chat: () => import("./mocks/chat.mjs"),
  gemini: () => import("./mocks/gemini.mjs"),
  augment: () => import("./mocks/augment.mjs"),
};

// Conn is one agent process and the transcript of its stdio.
class Conn {
  constructor(agent, env, cwd, lines, logFile) {
    this.lines = lines;
    this.tailMs = agent.tailMs ?? GRACE_MS;
    this.timeoutMs = agent.timeoutMs ?? SCENARIO_TIMEOUT_MS;
    this.nextId = 0;
    this.pending = new Map();
    this.listeners = [];
    this.exited = false;
    const [cmd, ...args] = agent.command;
    this.proc = spawn(cmd === "node" ? process.execPath : cmd, args, { cwd, env, detached: true, stdio: ["pipe", "pipe", "pipe"] });
    this.proc.stderr.pipe(fs.createWriteStream(logFile, { flags: "a" }));
    this.proc.on("exit", (code, sig) => {
      this.exited = true;
      this.lines.push(`# agent process exited (${sig ?? code})`);
    });
    this.proc.stdin.on("error", () => {});
    let buf = "";
    this.proc.stdout.on("data", (d) => {
      buf += d.toString("utf8");
      let i;
      while ((i = buf.indexOf("\n")) >= 0) {
        this.onLine(buf.slice(0, i).replace(/\r$/, ""));
        buf = buf.slice(i + 1);
      }
    });
  }

  onLine(line) {
    if (!line.trim()) return;
    let msg;
    try { msg = JSON.parse(line); } catch {}
    if (!msg || typeof msg !== "object" || Array.isArray(msg)) {
      this.lines.push(`# agent stdout, not JSON-RPC: ${line}`);
      return;
    }
    this.lines.push(`agent ${line}`);
    if (msg.method && msg.id !== undefined) return this.answer(msg);
    if (msg.method) return this.listeners.forEach((f) => f(msg));
    const p = this.pending.get(msg.id);
    if (p) this.pending.delete(msg.id), p(msg);
  }

  // answer the agent's own requests so that nothing hangs.
  answer(msg) {
    const reply = (result, error) => this.send(error ? { jsonrpc: "2.0", id: msg.id, error } : { jsonrpc: "2.0", id: msg.id, result });
    switch (msg.method) {
      case "session/request_permission": {
        const opts = msg.params?.options ?? [];
        const o = opts.find((x) => x.kind === "allow_once") ?? opts.find((x) => x.kind?.startsWith("allow")) ?? opts[0];
        return reply(o ? { outcome: { outcome: "selected", optionId: o.optionId } } : { outcome: { outcome: "cancelled" } });
      }
      case "fs/read_text_file": {
        let content = "";
        try { content = fs.readFileSync(msg.params.path, "utf8"); } catch {}
        return reply({ content });
      }
      case "fs/write_text_file":
        return reply(null);
      default:
        return reply(undefined, { code: -32601, message: `Method not found: ${msg.method}` });
    }
  }

  send(obj) {
    const line = JSON.stringify(obj);
    this.lines.push(`client ${line}`);
    if (!this.exited) this.proc.stdin.write(line + "\n");
  }

  request(method, params, ms = this.timeoutMs) {
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      const t = setTimeout(() => (this.pending.delete(id), reject(new Error(`${method}: no response in ${ms} ms`))), ms);
      this.pending.set(id, (m) => (clearTimeout(t), resolve(m)));
      this.send({ jsonrpc: "2.0", id, method, params });
    });
  }

  notify(method, params) { this.send({ jsonrpc: "2.0", method, params }); }

  // resolves with the first notification after now that pred accepts, or
  // null after ms.
  waitNotification(pred, ms) {
    return new Promise((resolve) => {
      const f = (m) => { if (pred(m)) done(m); };
      const done = (m) => { clearTimeout(t); this.listeners = this.listeners.filter((x) => x !== f); resolve(m); };
      const t = setTimeout(() => done(null), ms);
      this.listeners.push(f);
    });
  }

  async close() {
    await sleep(this.tailMs);
    this.lines.push("# client closes stdin");
    this.proc.stdin.end();
    for (let i = 0; i < 10 && !this.exited; i++) await sleep(100);
    try { process.kill(-this.proc.pid, "SIGTERM"); } catch {}
    for (let i = 0; i < 20 && !this.exited; i++) await sleep(100);
    try { process.kill(-this.proc.pid, "SIGKILL"); } catch {}
    // Keep only what arrived so far: nothing after the kill is the agent's own.
    this.proc.stdout.removeAllListeners("data");
  }
}

// Session helpers shared by the scenarios.
function client(conn, ctx) {
  const must = (m, what) => {
    if (m.error) throw new Error(`${what}: ${JSON.stringify(m.error)}`);
    return m.result;
  };
  return {
    async init() {
      const clientCapabilities = { fs: { readTextFile: true, writeTextFile: true }, terminal: false };
      if (ctx.cap) clientCapabilities.session = { compaction: {} };
      // A client that says who it is there (JetBrains AIR: _meta.jetbrains.air).
      if (ctx.agent.clientMeta) clientCapabilities._meta = ctx.agent.clientMeta;
      const r = must(await conn.request("initialize", { protocolVersion: 1, clientCapabilities, clientInfo: { name: "acpcompact-record-peers", version: "1" } }, 60000), "initialize");
      if (ctx.authenticate && (r.authMethods ?? []).some((m) => m.id === ctx.authenticate)) must(await conn.request("authenticate", { methodId: ctx.authenticate }), "authenticate");
      return r;
    },
    async newSession() {
      return must(await conn.request("session/new", { cwd: ctx.cwd, mcpServers: [] }, 60000), "session/new").sessionId;
    },
    async load(sessionId) {
      return conn.request("session/load", { sessionId, cwd: ctx.cwd, mcpServers: [] }, 60000);
    },
    prompt(sessionId, text, ms) {
      return conn.request("session/prompt", { sessionId, prompt: [{ type: "text", text }] }, ms);
    },
  };
}

// The prompts before a manual compaction: one, or the agent's `warmup` (Claude
// ACP 0.74's Claude Code refuses to compact a single exchange).
async function warmup(c, s, agent) {
  for (const text of agent.warmup ?? ["Say hello."]) await c.prompt(s, text);
}

// Before the overflowing prompt of auto*: all but the last warmup prompt, so
// that it is the second exchange for an agent with a two-prompt warmup.
async function autoWarmup(c, s, ctx) {
  const pre = (ctx.agent.warmup ?? []).slice(0, -1);
  for (const text of pre) await c.prompt(s, text);
  if (pre.length) ctx.conn.lines.push(`# ${pre.length} warmup prompt(s) before the overflowing one (agents.mjs warmup)`);
}

// The manual command with instructions longer than Qwen Code's 2000-character
// limit for them (its truncation notice).
const LONG_INSTRUCTIONS = "Keep every detail of the greetings exchanged so far, word for word. ".repeat(32).trim();

async function compactWith(c, ctx, command) {
  const s = await c.init().then(() => c.newSession());
  await warmup(c, s, ctx.agent);
  await c.prompt(s, command);
  return s;
}

// For an agent that counts its context itself instead of believing the
// usage the mock reports (Copilot CLI): a reply long enough to fill the
// small window the agent was given (agent.autoReply characters).
function longReply(ctx) {
  const line = "Hello! This line only fills the context window of the agent under test.\n";
  ctx.state.reply = line.repeat(Math.ceil(ctx.agent.autoReply / line.length));
  ctx.conn.lines.push(`# mock: the next reply is ${ctx.state.reply.length} characters long`);
}

const scenarios = {
  async hello(c) {
    const s = await c.init().then(() => c.newSession());
    await c.prompt(s, "Say hello.");
  },
  async compact(c, { agent }) {
    const s = await c.init().then(() => c.newSession());
    await warmup(c, s, agent);
    await c.prompt(s, agent.compact);
    return s;
  },
  // Qwen Code: /compress with instructions over its limit (the notice), and
  // with a compaction model too small for the payload (the warning; agents.mjs
  // configures it for scenarios whose name says "warning").
  async "compact-notice"(c, ctx) {
    return compactWith(c, ctx, `${ctx.agent.compact} ${LONG_INSTRUCTIONS}`);
  },
  async "compact-warning"(c, ctx) {
    return compactWith(c, ctx, ctx.agent.compact);
  },
  // the manual command after a single exchange, for an agent with a warmup.
  async "compact-early"(c, { agent }) {
    const s = await c.init().then(() => c.newSession());
    await c.prompt(s, "Say hello.");
    await c.prompt(s, agent.compact);
  },
  async "compact-fail"(c, ctx) {
    const s = await c.init().then(() => c.newSession());
    await warmup(c, s, ctx.agent);
    ctx.state.summaryMode = "fail";
    await c.prompt(s, ctx.agent.compact);
  },
  async "compact-cancel"(c, ctx) {
    const s = await c.init().then(() => c.newSession());
    await warmup(c, s, ctx.agent);
    ctx.state.summaryMode = "slow";
    const p = c.prompt(s, ctx.agent.compact);
    const seen = await waitFor(ctx.state, (e) => e.summary, 30000);
    ctx.conn.lines.push(`# mock: ${seen ? "the summary request arrived and is held (PEERS_SLOW_MS, 10 s)" : "no summary request within 30 s"}; the client cancels 1 s later`);
    await sleep(1000);
    ctx.conn.notify("session/cancel", { sessionId: s });
    await p;
  },
  // Kimi Code: /compact ends its turn at once and compacts in the
  // background; wait for the text that reports the outcome, then prompt.
  async "compact-then-hello"(c, ctx) {
    const s = await c.init().then(() => c.newSession());
    await warmup(c, s, ctx.agent);
    const outcome = ctx.conn.waitNotification((m) => /^Compaction (completed|cancelled)/.test(m.params?.update?.content?.text ?? ""), 60000);
    await c.prompt(s, ctx.agent.compact);
    const seen = await outcome;
    ctx.conn.lines.push(`# ${seen ? "the compaction's outcome arrived after the turn" : "no outcome text within 60 s"}; the client prompts again`);
    await c.prompt(s, "Say hello.");
  },
  // Kimi Code: a second /compact while the first is still running.
  async "compact-twice"(c, ctx) {
    const s = await c.init().then(() => c.newSession());
    await warmup(c, s, ctx.agent);
    ctx.state.summaryMode = "slow";
    await c.prompt(s, ctx.agent.compact);
    const seen = await waitFor(ctx.state, (e) => e.summary, 30000);
    ctx.conn.lines.push(`# mock: ${seen ? "the summary request arrived and is held (PEERS_SLOW_MS, 10 s)" : "no summary request within 30 s"}; the client compacts again`);
    await c.prompt(s, ctx.agent.compact);
  },
  async auto(c, ctx) {
    const s = await c.init().then(() => c.newSession());
    await autoWarmup(c, s, ctx);
    ctx.state.bigUsage = ctx.agent.autoUsage ?? 190000;
    ctx.conn.lines.push("# mock: the next reply reports a nearly full context window");
    if (ctx.agent.autoReply) longReply(ctx);
    await c.prompt(s, "Say hello.");
    ctx.state.reply = newState().reply;
    ctx.state.bigUsage = 0;
    await c.prompt(s, "Say hello again.");
  },
  async "auto-fail"(c, ctx) {
    const s = await c.init().then(() => c.newSession());
    await autoWarmup(c, s, ctx);
    ctx.state.bigUsage = ctx.agent.autoUsage ?? 190000;
    ctx.state.summaryMode = "fail";
    ctx.conn.lines.push("# mock: the next reply reports a nearly full context window; every summary request fails");
    if (ctx.agent.autoReply) longReply(ctx);
    await c.prompt(s, "Say hello.");
    ctx.state.reply = newState().reply;
    // opencode compacts inside the turn that overflowed; a second prompt would only retry.
    if (ctx.state.seen.some((e) => e.summary)) return;
    ctx.state.bigUsage = 0;
    await c.prompt(s, "Say hello again.");
  },
  async "legacy-prose"(c, ctx) {
    const s = await c.init().then(() => c.newSession());
    ctx.state.reply = "Context compacted\n";
    ctx.conn.lines.push('# mock: the model replies exactly "Context compacted\\n"');
    await c.prompt(s, "Say: Context compacted");
    ctx.state.reply = "Compacting...";
    ctx.conn.lines.push('# mock: the model replies exactly "Compacting..."');
    await c.prompt(s, "Say: Compacting...");
  },
};

// load is special: a first process compacts, a fresh one loads the session.
// load-<x> compacts as compact-<x> does (files load-<x>-before-*, load-<x>-*).
const loads = {
  load: scenarios.compact,
  "load-notice-warning": (c, ctx) => compactWith(c, ctx, `${ctx.agent.compact} ${LONG_INSTRUCTIONS}`),
};

async function recordLoad(scenario, run) {
  const first = await run(`${scenario}-before`, loads[scenario]);
  if (!first.result) throw new Error(`${scenario}: the first process did not compact`);
  return run(scenario, async (c) => {
    const r = await c.init();
    if (!r.agentCapabilities?.loadSession) throw new Error("agent does not advertise loadSession");
    await c.load(first.result);
  });
}

async function recordOne(name, scenario, cap) {
  const agent = agents[name];
  const mode = cap ? "cap" : "nocap";
  const base = path.join(os.tmpdir(), "acpcompact-peers", `${name}-${scenario}-${mode}`);
  fs.rmSync(base, { recursive: true, force: true });
  const home = path.join(base, "home"), cwd = path.join(base, "work");
  fs.mkdirSync(home, { recursive: true });
  fs.mkdirSync(cwd, { recursive: true });
  fs.mkdirSync(path.join(HERE, "logs"), { recursive: true });
  const logFile = path.join(HERE, "logs", `${name}-${scenario}-${mode}.log`);
  fs.writeFileSync(logFile, "");
  process.env.PEERS_LOG = logFile; // the mock's request log goes there too (mocks/common.mjs)
  const outDir = path.join(HERE, "testdata", agent.dir);
  fs.mkdirSync(outDir, { recursive: true });

  const state = newState();
  const mock = await (await mocks[agent.mock]()).start(state, MOCK_PORT);
  const setup = agent.setup({ port: mock.port, home, cwd, scenario });
  const env = {
    PATH: process.env.PATH,
    HOME: home,
    USER: "peers",
    LANG: "C.UTF-8",
    TERM: "dumb",
    TMPDIR: path.join(base, "tmp"),
    XDG_CONFIG_HOME: path.join(home, ".config"),
    XDG_DATA_HOME: path.join(home, ".local", "share"),
    XDG_STATE_HOME: path.join(home, ".local", "state"),
    XDG_CACHE_HOME: path.join(home, ".cache"),
    DO_NOT_TRACK: "1",
    NO_UPDATE_NOTIFIER: "1",
    CI: "1",
    ...setup.env,
  };
  fs.mkdirSync(env.TMPDIR, { recursive: true });
  setup.withEnv?.(env); // an agent whose child needs the environment it was given (agents.mjs)

  const started = Date.now();
  const run = async (file, play) => {
    const lines = [
      `# ${agent.dir} ${file} ${mode}: recorded by test/peers/record.mjs (see test/peers/README.md)`,
      `# initialize ${cap ? "carries" : "does not carry"} clientCapabilities.session.compaction; model API: mocks/${agent.mock}.mjs on 127.0.0.1`,
    ];
    if (agent.clientMeta) lines.push(`# initialize also carries clientCapabilities._meta ${JSON.stringify(agent.clientMeta)}`);
    fs.appendFileSync(logFile, `==== ${file}\n`);
    const conn = new Conn(agent, env, cwd, lines, logFile);
    const ctx = { agent, state, cap, cwd, conn, authenticate: setup.authenticate };
    let result, error;
    const limit = agent.timeoutMs ?? SCENARIO_TIMEOUT_MS;
    const timer = new Promise((_, rej) => setTimeout(() => rej(new Error(`scenario timeout ${limit} ms`)), limit));
    try {
      result = await Promise.race([play(client(conn, ctx), ctx), timer]);
    } catch (e) {
      error = e;
      lines.push(`# recording error: ${e.message}`);
    }
    await conn.close();
    const out = path.join(outDir, `${file}-${mode}.jsonl`);
    fs.writeFileSync(out, lines.join("\n") + "\n");
    return { result, error, out };
  };

  try {
    const r = loads[scenario] ? await recordLoad(scenario, run) : await run(scenario, scenarios[scenario]);
    const secs = ((Date.now() - started) / 1000).toFixed(1);
    console.log(`${r.error ? "FAIL" : "ok  "} ${name} ${scenario} ${mode} ${secs}s ${path.relative(HERE, r.out)}${r.error ? `: ${r.error.message}` : ""}`);
    return !r.error;
  } catch (e) {
    console.log(`FAIL ${name} ${scenario} ${mode}: ${e.message}`);
    return false;
  } finally {
    mock.close();
  }
}

const args = process.argv.slice(2);
const pick = args.filter((a) => agents[a]);
const only = args.filter((a) => scenarios[a] || loads[a]);
const modes = args.includes("--cap") ? [true] : args.includes("--nocap") ? [false] : [true, false];
const unknown = args.filter((a) => !agents[a] && !scenarios[a] && !loads[a] && !a.startsWith("--"));
if (unknown.length) {
  console.error(`unknown: ${unknown.join(" ")}\nagents: ${Object.keys(agents).join(" ")}\nscenarios: ${[...Object.keys(scenarios), ...Object.keys(loads)].join(" ")}`);
  process.exit(2);
}
let failed = 0;
const t0 = Date.now();
for (const name of pick.length ? pick : Object.keys(agents)) {
  for (const sc of agents[name].scenarios.filter((s) => !only.length || only.includes(s))) {
    for (const cap of modes) if (!(await recordOne(name, sc, cap))) failed++;
  }
}
console.log(`recorded in ${((Date.now() - t0) / 1000).toFixed(0)} s, ${failed} failed`);
process.exit(failed ? 1 : 0);
