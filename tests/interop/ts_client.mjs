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

import {
  closeWithin,
  errorText,
  fail as failAs,
  printAndExit,
  readFlags,
  reportTransportErrors,
  sdkImporter,
  seconds,
  stdioTransport,
  toolArgsFrom,
  killChildren,
} from "./helpers.mjs";

const PROG = "ts_client";
const MAX_PAGES = 1000;

const fail = (msg, code) => failAs(PROG, msg, code);

function usage() {
  fail("usage: node ts_client.mjs [--timeout SECS] --call TOOL [--args JSON] -- COMMAND [ARGS...]", 2);
}

function parseArgv(argv) {
  const split = argv.indexOf("--");
  if (split < 0) usage();
  const own = argv.slice(0, split);
  const command = argv.slice(split + 1);
  const opts = readFlags(PROG, own, ["--call", "--args", "--timeout"], { call: undefined, args: "{}", timeout: 60 });
  if (!opts.call) usage();
  if (command.length === 0) fail("no server COMMAND after --", 2);
  const toolArgs = toolArgsFrom(PROG, opts.args);
  return { tool: opts.call, toolArgs, timeoutMs: seconds(PROG, "--timeout", opts.timeout), command };
}

// The live transport/client, so failure paths can shut the server down.
let active = null;

async function main() {
  const { tool, toolArgs, timeoutMs, command } = parseArgv(process.argv.slice(2));

  // Whole-run bound: on expiry, kill the server (it may be wedged) and exit 124.
  const deadline = setTimeout(() => {
    killChildren(active?.transport, "SIGKILL");
    fail(`timed out after ${timeoutMs / 1000}s`, 124);
  }, timeoutMs);

  const importSdk = sdkImporter(PROG);
  const { Client } = await importSdk("client/index.js");
  const { StdioClientTransport } = await importSdk("client/stdio.js");

  const transport = stdioTransport(StdioClientTransport, command);
  active = { transport, client: null };
  let protocolVersion = null;
  transport.setProtocolVersion = (v) => {
    protocolVersion = v;
  };

  const client = new Client({ name: "mcpd-interop-ts-client", version: "0.1.0" }, { capabilities: {} });
  active.client = client;
  reportTransportErrors(PROG, client);
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
  printAndExit(out);
}

main().catch(async (e) => {
  const msg = errorText(e);
  // Let the SDK close the server as on success, but give it at most 5 s before killing it
  // ourselves.
  await closeWithin(active?.client, 5000);
  killChildren(active?.transport, "SIGKILL");
  fail(msg);
});
