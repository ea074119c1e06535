#!/usr/bin/env node
// Interop peer: the official MCP TypeScript SDK (1.x) as a stdio client that declares MCP roots and changes them.
//
//   node ts_roots_client.mjs [--timeout SECS] --root DIR --then-root DIR --call TOOL [--args JSON] -- COMMAND [ARGS...]
//
// The same run as py_roots_client.py: spawns COMMAND (for mcpd's tests: `mcpd connect
// --no-project --socket PATH`) with a `Client` that declares `roots: {listChanged: true}`
// and answers `roots/list` (setRequestHandler(ListRootsRequestSchema)) with one root,
// `file://` + the first --root. It connects, waits until TOOL is listed (listing again after
// each `notifications/tools/list_changed`, and at least once a second), and calls TOOL with
// ARGS: `first`. Then the handler answers the --then-root instead, the client sends
// `notifications/roots/list_changed` with the SDK's `sendRootsListChanged()`, and calls TOOL
// again: `second`. Prints one line of JSON:
//
//   {"protocolVersion": "...", "first": {...}, "second": {...},
//    "rootsAnswered": ["file:///a", "file:///b"], "toolsListChanged": N}
//
// `rootsAnswered` lists the root the handler gave, once per `roots/list` request it got.
// Exit codes: 0 printed (a tool result with isError too), 1 failure (`ts_roots_client:
// error: ...` on stderr), 2 usage, 124 timeout (--timeout, default 60 s). The server inherits
// our environment; its stderr goes to ours. The SDK is imported from
// $MCPD_PEERS_DIR/node/node_modules (default <repo>/target/peers).

import { pathToFileURL } from "node:url";
import {
  Changes,
  closeWithin,
  errorText,
  fail as failAs,
  killChildren,
  printAndExit,
  readFlags,
  reportTransportErrors,
  sdkImporter,
  seconds,
  stdioTransport,
  toolArgsFrom,
  whenParentDies,
} from "./helpers.mjs";

const PROG = "ts_roots_client";
const USAGE =
  "usage: node ts_roots_client.mjs [--timeout SECS] --root DIR --then-root DIR --call TOOL [--args JSON] -- COMMAND [ARGS...]";

const fail = (msg, code) => failAs(PROG, msg, code);

function parseArgv(argv) {
  const split = argv.indexOf("--");
  if (split < 0) fail(USAGE, 2);
  const command = argv.slice(split + 1);
  const opts = readFlags(PROG, argv.slice(0, split), ["--root", "--then-root", "--call", "--args", "--timeout"], {
    args: "{}",
    timeout: "60",
  });
  if (!opts.root || !opts["then-root"] || !opts.call) fail(USAGE, 2);
  if (command.length === 0) fail("no server COMMAND after --", 2);
  return {
    roots: [opts.root, opts["then-root"]].map((d) => pathToFileURL(d).href),
    tool: opts.call,
    toolArgs: toolArgsFrom(PROG, opts.args),
    timeoutMs: seconds(PROG, "--timeout", opts.timeout),
    command,
  };
}

let active = null;

async function main() {
  const { roots, tool, toolArgs, timeoutMs, command } = parseArgv(process.argv.slice(2));
  const deadline = setTimeout(() => {
    killChildren(active?.transport);
    fail(`timed out after ${timeoutMs / 1000}s`, 124);
  }, timeoutMs);
  whenParentDies(() => {
    killChildren(active?.transport);
    process.exit(1);
  });

  const importSdk = sdkImporter(PROG);
  const { Client } = await importSdk("client/index.js");
  const { StdioClientTransport } = await importSdk("client/stdio.js");
  const { ListRootsRequestSchema, ToolListChangedNotificationSchema } = await importSdk("types.js");

  const transport = stdioTransport(StdioClientTransport, command);
  active = { transport, client: null };
  let protocolVersion = null;
  transport.setProtocolVersion = (v) => {
    protocolVersion = v;
  };

  const client = new Client(
    { name: "mcpd-interop-ts-roots-client", version: "0.1.0" },
    { capabilities: { roots: { listChanged: true } } },
  );
  active.client = client;
  reportTransportErrors(PROG, client);

  let root = roots[0];
  const rootsAnswered = [];
  client.setRequestHandler(ListRootsRequestSchema, async () => {
    rootsAnswered.push(root);
    return { roots: [{ uri: root, name: "project" }] };
  });
  const changes = new Changes();
  client.setNotificationHandler(ToolListChangedNotificationSchema, () => changes.seen());

  const reqOpts = { timeout: timeoutMs };
  await client.connect(transport, reqOpts);

  // Until TOOL is listed; the run's deadline bounds it.
  for (;;) {
    const names = [];
    let cursor;
    do {
      const page = await client.listTools(cursor === undefined ? undefined : { cursor }, reqOpts);
      names.push(...page.tools.map((t) => t.name));
      cursor = page.nextCursor ?? undefined;
    } while (cursor !== undefined);
    if (names.includes(tool)) break;
    await changes.waitFor(changes.count + 1, 1000); // a re-list at least once a second
  }

  const first = await client.callTool({ name: tool, arguments: toolArgs }, undefined, reqOpts);
  root = roots[1];
  await client.sendRootsListChanged();
  const second = await client.callTool({ name: tool, arguments: toolArgs }, undefined, reqOpts);

  const out = { protocolVersion, first, second, rootsAnswered, toolsListChanged: changes.count };
  await client.close();
  clearTimeout(deadline);
  printAndExit(out);
}

main().catch(async (e) => {
  const msg = errorText(e);
  await closeWithin(active?.client, 5000);
  killChildren(active?.transport);
  fail(msg);
});
