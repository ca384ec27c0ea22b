#!/usr/bin/env node
// The acpcompact launcher: runs the native acpcompact binary that the
// platform package for this os/cpu (@acpcompact/<platform>-<arch>, an
// optional dependency of this package that npm installs only where its
// os/cpu match) ships, with this process's arguments and stdio, and ends
// as it ends. No download, no postinstall: the binary is inside the
// platform package.
"use strict";

const { spawn } = require("node:child_process");
const os = require("node:os");
const path = require("node:path");

const self = require(path.join(__dirname, "..", "package.json"));
const platformPackage = `@acpcompact/${process.platform}-${process.arch}`;
const exe = process.platform === "win32" ? "acpcompact.exe" : "acpcompact";

// fail exits as a shell does for a command it cannot run: 127 when there
// is nothing to run, 126 when it is there but cannot be started.
function fail(message, status = 127) {
  process.stderr.write(`acpcompact: ${message}\n`);
  process.exit(status);
}

function binaryPath() {
  const supported = Object.keys(self.optionalDependencies || {});
  if (!supported.includes(platformPackage)) {
    fail(
      `no prebuilt binary for ${process.platform}/${process.arch} in ${self.name}@${self.version} ` +
        `(there are: ${supported.map((p) => p.replace("@acpcompact/", "")).join(", ")}); ` +
        `with Go installed: go install github.com/acpcompact/acpcompact/cmd/acpcompact@v${self.version}`,
    );
  }
  try {
    return require.resolve(`${platformPackage}/bin/${exe}`);
  } catch {
    fail(
      `the platform package ${platformPackage}@${self.version} is not installed, so there is no binary to run; ` +
        `npm installs it with ${self.name} unless optional dependencies are left out ` +
        `(--omit=optional, --no-optional, or a lock file made on another platform): ` +
        `reinstall ${self.name}, or install ${platformPackage}@${self.version} beside it`,
    );
  }
}

const child = spawn(binaryPath(), process.argv.slice(2), { stdio: "inherit", windowsHide: true });

// Forwarded, not acted on: the binary decides what each signal means (the
// proxy passes them on to the agent and settles open compactions). A
// handler also keeps Node's default action, dying at once, from leaving
// the binary orphaned.
const forwarded = ["SIGINT", "SIGTERM", "SIGHUP"];
const forward = (signal) => {
  try {
    child.kill(signal);
  } catch {
    // The child is gone; its exit event ends this process.
  }
};
for (const s of forwarded) process.on(s, forward);

child.on("error", (err) => fail(`cannot run ${child.spawnfile}: ${err.message}`, err.code === "ENOENT" ? 127 : 126));

child.on("exit", (code, signal) => {
  if (signal) {
    // Die of the same signal, so that whoever started this process sees
    // the binary's termination, not an exit status standing for it.
    for (const s of forwarded) process.removeListener(s, forward);
    try {
      process.kill(process.pid, signal);
    } catch {
      // Not a signal this platform can send to itself.
    }
    // A signal whose default action is not to terminate (Node ignores
    // SIGPIPE) leaves this process running: exit as a shell reports it.
    // Not at once: the signal sent above may still be on its way.
    setTimeout(() => process.exit(128 + (os.constants.signals[signal] || 0)), 200);
    return;
  }
  process.exit(code ?? 1);
});
