#!/usr/bin/env node
// Interop peer: the official MCP TypeScript SDK (1.x) as a stdio client.
//
//   node ts_client.mjs [--timeout SECS] --call TOOL [--args JSON] -- COMMAND [ARGS...]
//
// Spawns COMMAND as a stdio MCP server (for mcpd's tests: `mcpd connect --socket PATH`),
// runs the initialize handshake (Client.connect), lists every tool (following
// nextCursor), calls TOOL with the JSON object ARGS, and prints exactly one line of JSON:
//
//   {"protocolVersion": "...", "serverInfo": {...}, "tools": [sorted names], "call": {...}}
//
// `call` is the CallToolResult as the SDK returns it (parsed by its zod schema).
// protocolVersion: the 1.x Client has no public getter for the negotiated version, but
// after a successful initialize it calls the optional Transport.setProtocolVersion(v)
// hook (part of the SDK's public Transport interface, used by the HTTP transports); we
// install that hook on the stdio transport to capture it. It would be null only if a
// future SDK stopped calling the hook.
//
// A tool result with isError=true is printed and exits 0 (a result, not a client failure).
// Any other failure exits non-zero with a message on stderr and nothing on stdout. The
// whole run is bounded by --timeout (default 60 s; exit code 124 on timeout).
//
// The server inherits this process's whole environment (the SDK alone would pass only
// HOME, LOGNAME, PATH, SHELL, TERM, USER) and its stderr goes to our stderr.
//
// SDK location: ESM `import` ignores NODE_PATH, so the SDK is imported by absolute path
// from $MCPD_PEERS_DIR/node/node_modules (default: <repo>/target/peers, i.e. two levels
// above this file's directory, then target/peers), as installed by .ci/install-peers.

import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const PROG = "ts_client";
const MAX_PAGES = 1000;

function fail(msg, code = 1) {
  process.stderr.write(`${PROG}: error: ${msg}\n`);
  process.exit(code);
}

function usage() {
  fail("usage: node ts_client.mjs [--timeout SECS] --call TOOL [--args JSON] -- COMMAND [ARGS...]", 2);
}

function parseArgv(argv) {
  const split = argv.indexOf("--");
  if (split < 0) usage();
  const own = argv.slice(0, split);
  const command = argv.slice(split + 1);
  const opts = { call: undefined, args: "{}", timeout: 60 };
  for (let i = 0; i < own.length; i++) {
    const flag = own[i];
    const value = own[i + 1];
    if (!["--call", "--args", "--timeout"].includes(flag)) fail(`unknown option ${flag}`, 2);
    if (value === undefined) fail(`${flag} needs a value`, 2);
    opts[flag.slice(2)] = value;
    i++;
  }
  if (!opts.call) usage();
  if (command.length === 0) fail("no server COMMAND after --", 2);
  let toolArgs;
  try {
    toolArgs = JSON.parse(opts.args);
  } catch (e) {
    fail(`--args is not valid JSON: ${e.message}`, 2);
  }
  if (toolArgs === null || typeof toolArgs !== "object" || Array.isArray(toolArgs)) {
    fail("--args must be a JSON object", 2);
  }
  const timeout = Number(opts.timeout);
  if (!(timeout > 0)) fail(`--timeout must be a positive number of seconds, got ${opts.timeout}`, 2);
  return { tool: opts.call, toolArgs, timeoutMs: timeout * 1000, command };
}

// Import `@modelcontextprotocol/sdk/<sub>` from the peers install by absolute path,
// mapping <sub> through the package's own "exports" ("./*" -> import target).
function sdkImporter() {
  const here = path.dirname(fileURLToPath(import.meta.url));
  const peers = process.env.MCPD_PEERS_DIR || path.resolve(here, "..", "..", "target", "peers");
  const pkgDir = path.join(peers, "node", "node_modules", "@modelcontextprotocol", "sdk");
  const pkgJson = path.join(pkgDir, "package.json");
  if (!existsSync(pkgJson)) {
    fail(`the MCP TypeScript SDK is not installed at ${pkgDir}; run .ci/install-peers (or set MCPD_PEERS_DIR)`);
  }
  const pkg = JSON.parse(readFileSync(pkgJson, "utf8"));
  return async (sub) => {
    const entry = pkg.exports?.[`./${sub}`] ?? pkg.exports?.["./*"];
    const target = typeof entry === "string" ? entry : entry?.import;
    if (!target) fail(`cannot map @modelcontextprotocol/sdk/${sub} through the SDK's exports`);
    const file = path.join(pkgDir, target.replace("*", sub));
    return import(pathToFileURL(file).href);
  };
}

// The live transport/client, so failure paths can shut the server down.
let active = null;

function killServer(signal) {
  const pid = active?.transport?.pid;
  if (pid) {
    try {
      process.kill(pid, signal);
    } catch {
      // already gone
    }
  }
}

async function main() {
  const { tool, toolArgs, timeoutMs, command } = parseArgv(process.argv.slice(2));

  // Whole-run bound: on expiry, kill the server (it may be wedged) and exit 124.
  const deadline = setTimeout(() => {
    killServer("SIGKILL");
    fail(`timed out after ${timeoutMs / 1000}s`, 124);
  }, timeoutMs);

  const importSdk = sdkImporter();
  const { Client } = await importSdk("client/index.js");
  const { StdioClientTransport } = await importSdk("client/stdio.js");

  const transport = new StdioClientTransport({
    command: command[0],
    args: command.slice(1),
    env: { ...process.env },
    stderr: "inherit",
  });
  active = { transport, client: null };
  let protocolVersion = null;
  transport.setProtocolVersion = (v) => {
    protocolVersion = v;
  };

  const client = new Client({ name: "mcpd-interop-ts-client", version: "0.1.0" }, { capabilities: {} });
  active.client = client;
  client.onerror = (e) => process.stderr.write(`${PROG}: transport error: ${e?.message ?? e}\n`);
  const reqOpts = { timeout: timeoutMs };

  await client.connect(transport, reqOpts);

  const tools = [];
  const seen = new Set();
  let cursor;
  for (let page = 0; ; page++) {
    if (page >= MAX_PAGES) throw new Error(`tools/list did not finish within ${MAX_PAGES} pages`);
    const res = await client.listTools(cursor === undefined ? undefined : { cursor }, reqOpts);
    for (const t of res.tools) tools.push(t.name);
    cursor = res.nextCursor;
    if (cursor === undefined || cursor === null) break;
    if (seen.has(cursor)) throw new Error(`tools/list returned cursor ${JSON.stringify(cursor)} twice`);
    seen.add(cursor);
  }

  const call = await client.callTool({ name: tool, arguments: toolArgs }, undefined, reqOpts);

  const out = {
    protocolVersion,
    serverInfo: client.getServerVersion() ?? null,
    tools: tools.sort(),
    call,
  };

  await client.close();
  clearTimeout(deadline);
  process.stdout.write(JSON.stringify(out) + "\n", () => process.exit(0));
}

main().catch(async (e) => {
  if (process.env.MCPD_INTEROP_DEBUG) console.error(e);
  const code = e?.code !== undefined ? ` (code ${e.code})` : "";
  const msg = `${e?.name ?? "Error"}${code}: ${e?.message ?? e}`;
  // Let the SDK close the server as on success (stdin EOF, then SIGTERM, then
  // SIGKILL), but give it at most 5 s before killing it ourselves.
  if (active?.client) {
    await Promise.race([active.client.close().catch(() => {}), new Promise((r) => setTimeout(r, 5000).unref())]);
  }
  killServer("SIGKILL");
  fail(msg);
});
