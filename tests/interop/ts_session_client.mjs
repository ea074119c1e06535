#!/usr/bin/env node
// Interop peer: the official MCP TypeScript SDK (1.x) as a long-lived stdio client, driven one step at a time.
//
//   node ts_session_client.mjs -- COMMAND [ARGS...]
//
// The same steps as py_session_client.py: spawns COMMAND (for mcpd's tests: `mcpd connect
// --no-project --socket PATH`) with one `Client`, connects, prints
// `{"ready": true, "protocolVersion": "..."}`, then reads steps from stdin, one JSON object
// a line, each with a `tag`:
//
//   {"op": "call", "tag": T, "tool": NAME, "args": {...}} -> {"tag": T, "result": {...}}
//   {"op": "list", "tag": T}                              -> {"tag": T, "tools": [names]}
//   {"op": "subscribe", "tag": T, "uri": URI}             -> {"tag": T, "result": {}}
//   {"op": "events", "tag": T}                            -> {"tag": T, "toolsListChanged": N, "updated": [uris]}
//
// A failed step prints `{"tag": T, "error": {"code": C, "message": M}}` (code null when it
// is not a JSON-RPC error). Steps run concurrently. It exits 0 at stdin's end. The SDK is
// imported from $MCPD_PEERS_DIR/node/node_modules (default <repo>/target/peers).

import { createInterface } from "node:readline";
import {
  errorText,
  fail as failAs,
  killChildren,
  printLine,
  reportTransportErrors,
  sdkImporter,
  stdioTransport,
  whenParentDies,
} from "./helpers.mjs";

const PROG = "ts_session_client";
const fail = (msg, code) => failAs(PROG, msg, code);
// Each request may wait this long: across a daemon restart, not forever.
const REQUEST_TIMEOUT_MS = 120_000;

let active = null;

async function step(client, events, msg) {
  const tag = msg.tag;
  const opts = { timeout: REQUEST_TIMEOUT_MS };
  try {
    if (msg.op === "call") {
      const result = await client.callTool({ name: msg.tool, arguments: msg.args ?? {} }, undefined, opts);
      await printLine({ tag, result });
    } else if (msg.op === "list") {
      const tools = [];
      let cursor;
      do {
        const page = await client.listTools(cursor === undefined ? undefined : { cursor }, opts);
        tools.push(...page.tools.map((t) => t.name));
        cursor = page.nextCursor ?? undefined;
      } while (cursor !== undefined);
      await printLine({ tag, tools });
    } else if (msg.op === "subscribe") {
      await client.subscribeResource({ uri: msg.uri }, opts);
      await printLine({ tag, result: {} });
    } else if (msg.op === "events") {
      await printLine({ tag, toolsListChanged: events.toolsChanged, updated: events.updated });
    } else {
      await printLine({ tag, error: { code: null, message: `unknown op ${msg.op}` } });
    }
  } catch (e) {
    await printLine({ tag, error: { code: typeof e?.code === "number" ? e.code : null, message: errorText(e) } });
  }
}

async function main() {
  const argv = process.argv.slice(2);
  const split = argv.indexOf("--");
  const command = split < 0 ? [] : argv.slice(split + 1);
  if (command.length === 0) fail("usage: node ts_session_client.mjs -- COMMAND [ARGS...]", 2);
  whenParentDies(() => {
    killChildren(active?.transport);
    process.exit(1);
  });
  const importSdk = sdkImporter(PROG);
  const { Client } = await importSdk("client/index.js");
  const { StdioClientTransport } = await importSdk("client/stdio.js");
  const { ToolListChangedNotificationSchema, ResourceUpdatedNotificationSchema } = await importSdk("types.js");
  const transport = stdioTransport(StdioClientTransport, command);
  active = { transport };
  let protocolVersion = null;
  transport.setProtocolVersion = (v) => {
    protocolVersion = v;
  };
  const client = new Client({ name: "mcpd-interop-ts-session-client", version: "0.1.0" }, { capabilities: {} });
  reportTransportErrors(PROG, client);
  const events = { toolsChanged: 0, updated: [] };
  client.setNotificationHandler(ToolListChangedNotificationSchema, () => {
    events.toolsChanged++;
  });
  client.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => {
    events.updated.push(n.params.uri);
  });
  await client.connect(transport, { timeout: REQUEST_TIMEOUT_MS });
  await printLine({ ready: true, protocolVersion });
  const pending = [];
  for await (const line of createInterface({ input: process.stdin })) {
    if (line.trim()) pending.push(step(client, events, JSON.parse(line)));
  }
  await Promise.all(pending);
  await client.close();
  process.exit(0);
}

main().catch((e) => {
  killChildren(active?.transport);
  fail(errorText(e));
});
