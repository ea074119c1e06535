#!/usr/bin/env node
// Interop peer: a stdio MCP client written with the official TypeScript SDK v2
// (`@modelcontextprotocol/client`), which speaks both protocol eras.
//
//   node ts2_client.mjs [--mode legacy|auto|modern] [--timeout SECS] [--probe-timeout SECS]
//                       --call TOOL [--args JSON] -- COMMAND [ARGS...]
//
// Spawns COMMAND as a stdio MCP server (for mcpd's tests: `mcpd connect --socket PATH`),
// connects in the chosen era mode, lists every tool (the SDK's aggregating listTools(),
// which follows nextCursor for up to 64 pages), calls TOOL with the JSON object ARGS,
// and prints exactly one line of JSON on stdout:
//
//   {"client":"ts2","mode":"auto","era":"modern","protocolVersion":"2026-07-28",
//    "serverInfo":{...}|null,"tools":[sorted names],"call":{...},
//    "elicitations":[{"mode":"form","message":"..."}],
//    "wire":{"elicitationRequests":0,"inputRequiredResults":1}}
//
// --mode (the SDK's `versionNegotiation.mode`; default auto):
//   legacy  plain `initialize` handshake, no probe (the SDK's own default).
//   auto    probe with `server/discover`; modern if the server offers 2026-07-28, otherwise
//           fall back to `initialize`. For the SDK's StdioClientTransport the probe runs on a
//           short-lived SIBLING process started from the same command (stderr discarded),
//           so COMMAND is spawned twice per run; the session process never sees the probe.
//   modern  `{pin: '2026-07-28'}`: the same sibling probe, but no fallback; a server that
//           does not offer 2026-07-28 fails the connect (exit 1, EraNegotiationFailed).
// --probe-timeout bounds the probe (default 10 s; the SDK would use the whole request
// timeout). On stdio a probe that times out counts as a legacy verdict.
//
// Elicitation: the client declares `elicitation: {form: {}}` and registers an
// `elicitation/create` handler that answers every form request with
// {action: "accept", content: {name: "Ada"}}. The SDK calls the same handler for a legacy
// server->client `elicitation/create` request and for the requests embedded in a modern
// `input_required` result (which it then retries with `inputResponses`, inside callTool).
// `elicitations` lists what the handler was asked; `wire` counts, after connect, the
// server->client `elicitation/create` requests (legacy path) and the `input_required`
// results (modern path) that arrived on the session pipe.
//
// `call` is the CallToolResult as the SDK returns it. A tool result with isError=true is
// printed and exits 0. Exit codes otherwise as ts_client.mjs: 1 any failure (message on
// stderr as `ts2_client: error: ...`, stdout empty), 2 usage, 124 timeout (--timeout, default
// 60 s, bounds the whole run). On timeout, failure or parent death every child process of
// ours (the server, and a probe sibling still running) gets SIGKILL. The server inherits our
// whole environment; its stderr goes to our stderr. stdin is never read.
//
// SDK location: imported by absolute path from $MCPD_PEERS_DIR/node/node_modules (default
// <repo>/target/peers), as installed by .ci/install-peers (ESM ignores NODE_PATH).

import { existsSync, readFileSync, readdirSync } from "node:fs";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const PROG = "ts2_client";
const MODERN = "2026-07-28";
const USAGE =
  "usage: node ts2_client.mjs [--mode legacy|auto|modern] [--timeout SECS] [--probe-timeout SECS] --call TOOL [--args JSON] -- COMMAND [ARGS...]";
const ELICIT_ANSWER = { action: "accept", content: { name: "Ada" } };

function fail(msg, code = 1) {
  process.stderr.write(`${PROG}: error: ${msg}\n`);
  process.exit(code);
}

function seconds(flag, value) {
  const n = Number(value);
  if (!(n > 0)) fail(`${flag} must be a positive number of seconds, got ${value}`, 2);
  return n * 1000;
}

function parseArgv(argv) {
  const split = argv.indexOf("--");
  if (split < 0) fail(USAGE, 2);
  const own = argv.slice(0, split);
  const command = argv.slice(split + 1);
  const opts = { mode: "auto", call: undefined, args: "{}", timeout: "60", "probe-timeout": "10" };
  for (let i = 0; i < own.length; i++) {
    const flag = own[i];
    const value = own[i + 1];
    if (!["--mode", "--call", "--args", "--timeout", "--probe-timeout"].includes(flag)) fail(`unknown option ${flag}`, 2);
    if (value === undefined) fail(`${flag} needs a value`, 2);
    opts[flag.slice(2)] = value;
    i++;
  }
  if (!opts.call) fail(USAGE, 2);
  if (!["legacy", "auto", "modern"].includes(opts.mode)) fail(`--mode must be legacy, auto or modern, got ${opts.mode}`, 2);
  if (command.length === 0) fail("no server COMMAND after --", 2);
  let toolArgs;
  try {
    toolArgs = JSON.parse(opts.args);
  } catch (e) {
    fail(`--args is not valid JSON: ${e.message}`, 2);
  }
  if (toolArgs === null || typeof toolArgs !== "object" || Array.isArray(toolArgs)) fail("--args must be a JSON object", 2);
  return {
    mode: opts.mode,
    tool: opts.call,
    toolArgs,
    timeoutMs: seconds("--timeout", opts.timeout),
    probeTimeoutMs: seconds("--probe-timeout", opts["probe-timeout"]),
    command,
  };
}

// Import `@modelcontextprotocol/<pkg>` (sub-path `sub`, e.g. "." or "./stdio") from the peers
// install by absolute path, through the package's own "exports" map.
function v2Importer(pkg) {
  const here = path.dirname(fileURLToPath(import.meta.url));
  const peers = process.env.MCPD_PEERS_DIR || path.resolve(here, "..", "..", "target", "peers");
  const pkgDir = path.join(peers, "node", "node_modules", "@modelcontextprotocol", pkg);
  const pkgJson = path.join(pkgDir, "package.json");
  if (!existsSync(pkgJson)) {
    fail(`@modelcontextprotocol/${pkg} is not installed at ${pkgDir}; run .ci/install-peers (or set MCPD_PEERS_DIR)`);
  }
  const manifest = JSON.parse(readFileSync(pkgJson, "utf8"));
  return (sub) => {
    const entry = manifest.exports?.[sub];
    const target = entry?.import?.default ?? entry?.import ?? entry?.default;
    if (typeof target !== "string") fail(`cannot map @modelcontextprotocol/${pkg} ${sub} through its exports`);
    return import(pathToFileURL(path.join(pkgDir, target)).href);
  };
}

// The live transport/client, so failure paths can shut the server down.
let active = null;

// Our direct children (Linux /proc): the session server and, while `auto`/`modern` probe,
// the SDK's sibling probe process, which the transport does not expose.
function childPids() {
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

function killServer(signal) {
  const pids = new Set(childPids());
  const pid = active?.transport?.pid;
  if (pid) pids.add(pid);
  for (const p of pids) {
    try {
      process.kill(p, signal);
    } catch {
      // already gone
    }
  }
}

// Count what arrives on the session pipe once connected: server->client elicitation
// requests (legacy era) and input_required results (modern era).
function tapWire(transport, wire) {
  const inner = transport.onmessage;
  if (typeof inner !== "function") return;
  transport.onmessage = (message, ...rest) => {
    if (message && typeof message === "object") {
      if (message.method === "elicitation/create" && message.id !== undefined) wire.elicitationRequests++;
      if (message.result && message.result.resultType === "input_required") wire.inputRequiredResults++;
    }
    return inner.call(transport, message, ...rest);
  };
}

async function main() {
  const { mode, tool, toolArgs, timeoutMs, probeTimeoutMs, command } = parseArgv(process.argv.slice(2));

  // Whole-run bound: on expiry, kill the server (it may be wedged) and exit 124.
  const deadline = setTimeout(() => {
    killServer("SIGKILL");
    fail(`timed out after ${timeoutMs / 1000}s`, 124);
  }, timeoutMs);

  // Die with our parent: nothing else would stop us (stdin is not ours to watch).
  const parent = process.ppid;
  setInterval(() => {
    if (process.ppid !== parent) {
      killServer("SIGKILL");
      process.exit(1);
    }
  }, 500).unref();

  const importClient = v2Importer("client");
  const { Client } = await importClient(".");
  const { StdioClientTransport } = await importClient("./stdio");

  const transport = new StdioClientTransport({
    command: command[0],
    args: command.slice(1),
    env: { ...process.env },
    stderr: "inherit",
  });
  active = { transport, client: null };

  const negotiation = mode === "modern" ? { pin: MODERN } : mode;
  const client = new Client(
    { name: "mcpd-interop-ts2-client", version: "0.1.0" },
    {
      capabilities: { elicitation: { form: {} } },
      versionNegotiation: { mode: negotiation, probe: { timeoutMs: probeTimeoutMs } },
    },
  );
  active.client = client;
  client.onerror = (e) => process.stderr.write(`${PROG}: transport error: ${e?.message ?? e}\n`);

  const elicitations = [];
  client.setRequestHandler("elicitation/create", async (request) => {
    const params = request.params ?? {};
    elicitations.push({ mode: params.mode ?? "form", message: params.message });
    if ((params.mode ?? "form") !== "form") return { action: "decline" };
    return ELICIT_ANSWER;
  });

  const reqOpts = { timeout: timeoutMs };
  await client.connect(transport, reqOpts);

  const wire = { elicitationRequests: 0, inputRequiredResults: 0 };
  tapWire(transport, wire);

  const { tools } = await client.listTools(undefined, reqOpts);
  const call = await client.callTool({ name: tool, arguments: toolArgs }, reqOpts);

  const out = {
    client: "ts2",
    mode,
    era: client.getProtocolEra() ?? null,
    protocolVersion: client.getNegotiatedProtocolVersion() ?? null,
    serverInfo: client.getServerVersion() ?? null,
    tools: tools.map((t) => t.name).sort(),
    call,
    elicitations,
    wire,
  };

  await client.close();
  clearTimeout(deadline);
  process.stdout.write(JSON.stringify(out) + "\n", () => process.exit(0));
}

main().catch(async (e) => {
  if (process.env.MCPD_INTEROP_DEBUG) console.error(e);
  const code = e?.code !== undefined ? ` (code ${e.code})` : "";
  const msg = `${e?.name ?? "Error"}${code}: ${e?.message ?? e}`;
  // Let the SDK close the server as on success (stdin EOF, then SIGTERM, then SIGKILL),
  // but give it at most 5 s before killing it ourselves.
  if (active?.client) {
    await Promise.race([active.client.close().catch(() => {}), new Promise((r) => setTimeout(r, 5000).unref())]);
  }
  killServer("SIGKILL");
  fail(msg);
});
