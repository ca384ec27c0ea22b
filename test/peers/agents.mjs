// The recorded agents: how each is started offline (command, environment,
// config files written into its temporary HOME) and which scenarios apply.
// The setups follow /work/shared/spec/peers-observed.md ("How each was run
// offline"). Every key is a dummy; every base URL is the loopback mock.
import fs from "node:fs";
import path from "node:path";

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
const write = (file, content) => {
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, typeof content === "string" ? content : JSON.stringify(content, null, 2));
};
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
  "codex-ts": {
    dir: "codex-acp-ts-2.6.0",
    mock: "responses",
    command: ["node", nm("@agentclientprotocol/codex-acp/dist/index.js")],
    compact: "/compact",
    scenarios: ALL,
    setup: ({ port, home, scenario }) => {
      write(path.join(home, ".codex", "config.toml"), codexConfig(port, scenario.startsWith("auto") ? 1000 : 0, "gpt-6.1-sol"));
      return { env: { CODEX_HOME: path.join(home, ".codex"), MOCK_KEY: "dummy" } };
    },
  },
  "codex-rs": {
    dir: "codex-acp-rs-0.16.0",
    mock: "responses",
    command: ["node", nm("@zed-industries/codex-acp/bin/codex-acp.js")],
    compact: "/compact",
    scenarios: ALL,
    setup: ({ port, home, scenario }) => {
      write(path.join(home, ".codex", "config.toml"), codexConfig(port, scenario.startsWith("auto") ? 1000 : 0, "gpt-5.4"));
      return { env: { CODEX_HOME: path.join(home, ".codex"), MOCK_KEY: "dummy" } };
    },
  },
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
  qwen: {
    dir: "qwen-code-0.24.4",
    mock: "chat",
    command: ["node", nm("@qwen-code/qwen-code/cli-entry.js"), "--acp"],
    compact: "/compress",
    scenarios: ALL,
    setup: ({ port, home }) => {
      write(path.join(home, ".qwen", "settings.json"), {
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
  },
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
};
