// Shared by the Node interop peers (ts*_*.mjs, everything_http.mjs): failing with a message,
// reading options, importing the pinned SDKs from the peers install, answering elicitations,
// exiting with the parent, killing the server (and a probe sibling) on a failure path, the
// closing steps of a client run, printing lines of JSON, and the plan runner of the
// discovery clients (ts*_discovery_client.mjs).
//
// SDK location: ESM `import` ignores NODE_PATH, so the SDKs are imported by absolute path
// from $MCPD_PEERS_DIR/node/node_modules (default: <repo>/target/peers, i.e. two levels
// above this file's directory, then target/peers), as installed by .ci/install-peers.

import { existsSync, readFileSync, readdirSync } from "node:fs";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

export const MODERN = "2026-07-28";
export const ELICIT_ANSWER = { action: "accept", content: { name: "Ada" } };

export function fail(prog, msg, code = 1) {
  process.stderr.write(`${prog}: error: ${msg}\n`);
  process.exit(code);
}

// Reads `--flag value` pairs into `opts` (flags must be in `allowed`); with `rest`, other
// arguments are collected there, without it they are unknown options. Usage errors exit 2.
export function readFlags(prog, args, allowed, opts, rest) {
  for (let i = 0; i < args.length; i++) {
    const flag = args[i];
    if (rest && !flag.startsWith("--")) {
      rest.push(flag);
      continue;
    }
    if (!allowed.includes(flag)) fail(prog, `unknown option ${flag}`, 2);
    const value = args[i + 1];
    if (value === undefined) fail(prog, `${flag} needs a value`, 2);
    opts[flag.slice(2)] = value;
    i++;
  }
  return opts;
}

// A positive number of seconds, in milliseconds.
export function seconds(prog, flag, value) {
  const n = Number(value);
  if (!(n > 0)) fail(prog, `${flag} must be a positive number of seconds, got ${value}`, 2);
  return n * 1000;
}

// The `--args JSON` of a tool call: a JSON object.
export function toolArgsFrom(prog, raw) {
  let toolArgs;
  try {
    toolArgs = JSON.parse(raw);
  } catch (e) {
    fail(prog, `--args is not valid JSON: ${e.message}`, 2);
  }
  if (toolArgs === null || typeof toolArgs !== "object" || Array.isArray(toolArgs)) fail(prog, "--args must be a JSON object", 2);
  return toolArgs;
}

function peersPackageDir(name) {
  const here = path.dirname(fileURLToPath(import.meta.url));
  const peers = process.env.MCPD_PEERS_DIR || path.resolve(here, "..", "..", "target", "peers");
  return path.join(peers, "node", "node_modules", "@modelcontextprotocol", name);
}

// Import `@modelcontextprotocol/sdk/<sub>` (the 1.x SDK) from the peers install by absolute
// path, mapping <sub> through the package's own "exports" ("./*" -> import target).
export function sdkImporter(prog) {
  const pkgDir = peersPackageDir("sdk");
  const pkgJson = path.join(pkgDir, "package.json");
  if (!existsSync(pkgJson)) {
    fail(prog, `the MCP TypeScript SDK is not installed at ${pkgDir}; run .ci/install-peers (or set MCPD_PEERS_DIR)`);
  }
  const pkg = JSON.parse(readFileSync(pkgJson, "utf8"));
  return async (sub) => {
    const entry = pkg.exports?.[`./${sub}`] ?? pkg.exports?.["./*"];
    const target = typeof entry === "string" ? entry : entry?.import;
    if (!target) fail(prog, `cannot map @modelcontextprotocol/sdk/${sub} through the SDK's exports`);
    const file = path.join(pkgDir, target.replace("*", sub));
    return import(pathToFileURL(file).href);
  };
}

// Import `@modelcontextprotocol/<pkg>` (a v2 package; sub-path `sub`, e.g. "." or "./stdio")
// from the peers install by absolute path, through the package's own "exports" map.
export function v2Importer(prog, pkg) {
  const pkgDir = peersPackageDir(pkg);
  const pkgJson = path.join(pkgDir, "package.json");
  if (!existsSync(pkgJson)) {
    fail(prog, `@modelcontextprotocol/${pkg} is not installed at ${pkgDir}; run .ci/install-peers (or set MCPD_PEERS_DIR)`);
  }
  const manifest = JSON.parse(readFileSync(pkgJson, "utf8"));
  return (sub) => {
    const entry = manifest.exports?.[sub];
    const target = entry?.import?.default ?? entry?.import ?? entry?.default;
    if (typeof target !== "string") fail(prog, `cannot map @modelcontextprotocol/${pkg} ${sub} through its exports`);
    return import(pathToFileURL(path.join(pkgDir, target)).href);
  };
}

// Runs `action` once the parent process is gone (Node has no parent-death signal, so the
// parent pid is polled every `everyMs`). The timer does not keep the process alive.
export function whenParentDies(action, everyMs = 500) {
  const parent = process.ppid;
  setInterval(() => {
    if (process.ppid !== parent) action();
  }, everyMs).unref();
}

// A stdio transport for COMMAND that inherits our whole environment (the SDK alone would
// pass only HOME, LOGNAME, PATH, SHELL, TERM, USER) and whose stderr goes to ours. With
// MCPD_INTEROP_DEFAULT_ENV=1 it gets what the SDK gives by default instead, as every
// client built on the SDK starts its servers: no XDG_RUNTIME_DIR, no MCPD_SOCKET.
export function stdioTransport(StdioClientTransport, command) {
  const sdkDefault = process.env.MCPD_INTEROP_DEFAULT_ENV === "1";
  return new StdioClientTransport({
    command: command[0],
    args: command.slice(1),
    ...(sdkDefault ? {} : { env: { ...process.env } }),
    stderr: "inherit",
  });
}

// Answers every form `elicitation/create` with ELICIT_ANSWER and declines the others;
// returns the list of what was asked.
export function answerElicitations(client) {
  const elicitations = [];
  client.setRequestHandler("elicitation/create", async (request) => {
    const params = request.params ?? {};
    elicitations.push({ mode: params.mode ?? "form", message: params.message });
    if ((params.mode ?? "form") !== "form") return { action: "decline" };
    return ELICIT_ANSWER;
  });
  return elicitations;
}

// Reports SDK transport errors on stderr.
export function reportTransportErrors(prog, client) {
  client.onerror = (e) => process.stderr.write(`${prog}: transport error: ${e?.message ?? e}\n`);
}

// A failure for stderr: the error's name, its JSON-RPC code if any, and its message. With
// MCPD_INTEROP_DEBUG set, the whole error goes to stderr first.
export function errorText(e) {
  if (process.env.MCPD_INTEROP_DEBUG) console.error(e);
  const code = e?.code !== undefined ? ` (code ${e.code})` : "";
  return `${e?.name ?? "Error"}${code}: ${e?.message ?? e}`;
}

// Lets the SDK close the client (for stdio: stdin EOF, then SIGTERM, then SIGKILL of the
// server) as on success, but waits at most `ms`.
export async function closeWithin(client, ms = 5000) {
  if (client) {
    await Promise.race([client.close().catch(() => {}), new Promise((r) => setTimeout(r, ms).unref())]);
  }
}

// Prints `out` as one line of JSON; resolves once it is written.
export function printLine(out) {
  return new Promise((resolve) => process.stdout.write(JSON.stringify(out) + "\n", resolve));
}

// Prints the result as one line of JSON and exits 0 once it is written.
export function printAndExit(out) {
  printLine(out).then(() => process.exit(0));
}

// --- The discovery clients' plans (ts*_discovery_client.mjs) ---------------------------

// The `--plan JSON` of a discovery client: a JSON array of step objects.
export function planFrom(prog, raw) {
  let steps;
  try {
    steps = JSON.parse(raw);
  } catch (e) {
    fail(prog, `--plan is not valid JSON: ${e.message}`, 2);
  }
  if (!Array.isArray(steps) || !steps.every((s) => s !== null && typeof s === "object" && !Array.isArray(s))) {
    fail(prog, "--plan must be a JSON array of objects", 2);
  }
  return steps;
}

// Counts notifications/tools/list_changed as the SDK delivers them, and waits for a count.
export class Changes {
  count = 0;
  #waiters = [];

  seen() {
    this.count++;
    for (const w of this.#waiters.splice(0)) w();
  }

  // {"op":"changed","count":seen}, with "timedOut": true if `want` was not reached in `ms`.
  async waitFor(want, ms) {
    const deadline = Date.now() + ms;
    while (this.count < want) {
      const left = deadline - Date.now();
      if (left <= 0) return { op: "changed", count: this.count, timedOut: true };
      await new Promise((resolve) => {
        const timer = setTimeout(resolve, left);
        this.#waiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
    return { op: "changed", count: this.count };
  }
}

// Runs `argv` to its end, its output on our stderr: {"op":"run","code":N}.
export async function runCommand(argv) {
  const { spawn } = await import("node:child_process");
  return new Promise((resolve, reject) => {
    const child = spawn(argv[0], argv.slice(1), { stdio: ["ignore", process.stderr, process.stderr] });
    child.on("error", reject);
    child.on("exit", (code, signal) => resolve({ op: "run", code: code ?? `signal ${signal}` }));
  });
}

// Counts, once installed, what arrives from the server on `transport`: server->client
// elicitation requests, input_required results, progress and tools/list_changed
// notifications.
export function tapDiscoveryWire(transport) {
  const wire = { elicitationRequests: 0, inputRequiredResults: 0, progressNotifications: 0, toolsListChanged: 0 };
  const inner = transport.onmessage;
  if (typeof inner !== "function") throw new Error("the transport has no message handler to tap");
  transport.onmessage = (message, ...rest) => {
    if (message && typeof message === "object") {
      if (message.method === "elicitation/create" && message.id !== undefined) wire.elicitationRequests++;
      if (message.method === "notifications/progress") wire.progressNotifications++;
      if (message.method === "notifications/tools/list_changed") wire.toolsListChanged++;
      if (message.result && message.result.resultType === "input_required") wire.inputRequiredResults++;
    }
    return inner.call(transport, message, ...rest);
  };
  return wire;
}

// Runs the steps of a plan (see ts_discovery_client.mjs) with the client's own `list()`
// (names in order) and `call(name, args, onprogress)`; a JSON-RPC error of a call is a step
// result ({code, message, data}), anything else fails the run.
export async function runPlan(steps, { list, call, changes, waitMs }) {
  const out = [];
  for (const step of steps) {
    switch (step.op) {
      case "list":
        out.push({ op: "list", tools: await list() });
        break;
      case "call": {
        const progress = [];
        const onprogress = step.progress
          ? (p) => progress.push({ progress: p.progress, total: p.total ?? null, message: p.message ?? null })
          : undefined;
        const rec = { op: "call", name: step.name };
        try {
          rec.result = await call(step.name, step.arguments ?? {}, onprogress);
        } catch (e) {
          if (typeof e?.code !== "number") throw e;
          rec.error = { code: e.code, message: e.message, data: e.data ?? null };
        }
        if (step.progress) rec.progress = progress;
        out.push(rec);
        break;
      }
      case "changed":
        out.push(await changes.waitFor(Number(step.count), waitMs));
        break;
      case "run":
        out.push(await runCommand(step.argv.map(String)));
        break;
      default:
        throw new Error(`unknown step ${JSON.stringify(step)}`);
    }
  }
  return out;
}

// Our direct children (Linux /proc): the server the transport started and, for the v2
// SDK's `auto`/`modern` probing, the sibling probe process the transport does not expose.
export function childPids() {
  const pids = [];
  let entries = [];
  try {
    entries = readdirSync("/proc");
  } catch {
    return pids;
  }
  for (const name of entries) {
    if (!/^[0-9]+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, "utf8");
      // pid (comm) state ppid ...; comm may contain spaces and parentheses.
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      if (ppid === process.pid) pids.push(Number(name));
    } catch {
      // exited meanwhile
    }
  }
  return pids;
}

// Sends `signal` to every direct child and to the transport's server, so that a failure
// path never leaves a server behind.
export function killChildren(transport, signal = "SIGKILL") {
  const pids = new Set(childPids());
  const pid = transport?.pid;
  if (pid) pids.add(pid);
  for (const p of pids) {
    try {
      process.kill(p, signal);
    } catch {
      // already gone
    }
  }
}
