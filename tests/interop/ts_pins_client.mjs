#!/usr/bin/env node
// Interop peer: the official MCP TypeScript SDK (1.x) as a stdio client that sees a changed tool held, then approved.
//
//   node ts_pins_client.mjs [--timeout SECS] --tool TOOL --poison TEXT -- COMMAND [ARGS...]
//
// The same run as py_pins_client.py: spawns COMMAND (for mcpd's tests: `mcpd connect
// --no-project --socket PATH`) with a `Client` that counts `notifications/tools/list_changed`
// (setNotificationHandler(ToolListChangedNotificationSchema)). It connects, waits until TOOL
// (e.g. `fx__echo`) is listed, and calls `fx__redefine` with `{"tool": "echo", "description":
// TEXT}`: the fixture server changes the description of its echo to the poison. Then it
// lists again after each `notifications/tools/list_changed`, and at least once a second,
// until TOOL is no longer listed or a listed description contains the poison, and calls
// TOOL. It prints one line of JSON and waits for one line on stdin:
//
//   {"stage": "held", "protocolVersion": "...", "toolListed": false, "poisonListed": false,
//    "error": {"code": -32024, "message": "...", "data": ...}, "result": null,
//    "toolsListChanged": N}
//
// `toolListed` is whether TOOL was listed when the wait ended; `poisonListed` whether any
// description listed since the redefinition contained the poison. The call gives `error`
// (the code and message of the SDK's `McpError`; the SDK prefixes the message with
// `MCP error CODE: `) or, when it succeeds, `result`. Once a line arrives on stdin (the test
// runs `mcpd ctl approve fx`, then writes `go`), it lists again the same way until TOOL is
// listed with the poison as its description, calls TOOL with `{"text": "approved"}` and
// prints a second line:
//
//   {"stage": "approved", "description": "...", "toolsListChanged": M, "result": {...}}
//
// `toolsListChanged` there counts the notifications received after the first line.
// Exit codes: 0 both lines printed, 1 failure (`ts_pins_client: error: ...` on stderr;
// stdout has the first line if it was printed), 2 usage, 124 timeout (--timeout, default
// 60 s, the whole run, the wait on stdin included). The server inherits our environment; its
// stderr goes to ours. The SDK is imported from $MCPD_PEERS_DIR/node/node_modules (default
// <repo>/target/peers).

import { createInterface } from "node:readline";
import {
  Changes,
  closeWithin,
  errorText,
  fail as failAs,
  killChildren,
  printAndExit,
  printLine,
  readFlags,
  reportTransportErrors,
  sdkImporter,
  seconds,
  stdioTransport,
  whenParentDies,
} from "./helpers.mjs";

const PROG = "ts_pins_client";
const USAGE = "usage: node ts_pins_client.mjs [--timeout SECS] --tool TOOL --poison TEXT -- COMMAND [ARGS...]";

// The fixture server's tool that changes a definition, and the tool whose definition changes.
const REDEFINE = "fx__redefine";
const CHANGED = "echo";

const fail = (msg, code) => failAs(PROG, msg, code);

function parseArgv(argv) {
  const split = argv.indexOf("--");
  if (split < 0) fail(USAGE, 2);
  const command = argv.slice(split + 1);
  const opts = readFlags(PROG, argv.slice(0, split), ["--tool", "--poison", "--timeout"], { timeout: "60" });
  if (!opts.tool || !opts.poison) fail(USAGE, 2);
  if (command.length === 0) fail("no server COMMAND after --", 2);
  return { tool: opts.tool, poison: opts.poison, timeoutMs: seconds(PROG, "--timeout", opts.timeout), command };
}

// The first line on stdin; fails if stdin ends first.
function readLine() {
  return new Promise((resolve, reject) => {
    const lines = createInterface({ input: process.stdin });
    lines.once("line", (line) => {
      resolve(line);
      lines.close();
    });
    lines.once("close", () => reject(new Error("stdin closed before the go-ahead")));
  });
}

let active = null;

async function main() {
  const { tool, poison, timeoutMs, command } = parseArgv(process.argv.slice(2));
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
  const { McpError, ToolListChangedNotificationSchema } = await importSdk("types.js");

  const transport = stdioTransport(StdioClientTransport, command);
  active = { transport, client: null };
  let protocolVersion = null;
  transport.setProtocolVersion = (v) => {
    protocolVersion = v;
  };

  const client = new Client({ name: "mcpd-interop-ts-pins-client", version: "0.1.0" }, { capabilities: {} });
  active.client = client;
  reportTransportErrors(PROG, client);
  const changes = new Changes();
  client.setNotificationHandler(ToolListChangedNotificationSchema, () => changes.seen());

  const reqOpts = { timeout: timeoutMs };
  await client.connect(transport, reqOpts);

  // Every listed tool's description by name, following nextCursor.
  const listed = async () => {
    const tools = new Map();
    let cursor;
    do {
      const page = await client.listTools(cursor === undefined ? undefined : { cursor }, reqOpts);
      for (const t of page.tools) tools.set(t.name, t.description ?? "");
      cursor = page.nextCursor ?? undefined;
    } while (cursor !== undefined);
    return tools;
  };
  // Lists until `done` holds for the tools; the run's deadline bounds it.
  const waitFor = async (done) => {
    for (;;) {
      const tools = await listed();
      if (done(tools)) return tools;
      await changes.waitFor(changes.count + 1, 1000); // a re-list at least once a second
    }
  };
  const call = async (args) => {
    try {
      return { error: null, result: await client.callTool({ name: tool, arguments: args }, undefined, reqOpts) };
    } catch (e) {
      if (!(e instanceof McpError)) throw e;
      return { error: { code: e.code, message: e.message, data: e.data ?? null }, result: null };
    }
  };

  await waitFor((tools) => tools.has(tool));
  const redefined = await client.callTool(
    { name: REDEFINE, arguments: { tool: CHANGED, description: poison } },
    undefined,
    reqOpts,
  );
  if (redefined.isError) throw new Error(`${REDEFINE} failed: ${JSON.stringify(redefined)}`);

  let poisonListed = false;
  let tools = await waitFor((tools) => {
    poisonListed ||= [...tools.values()].some((d) => d.includes(poison));
    return !tools.has(tool) || poisonListed;
  });
  const heldCall = await call({ text: "held" });
  const before = changes.count;
  await printLine({
    stage: "held",
    protocolVersion,
    toolListed: tools.has(tool),
    poisonListed,
    ...heldCall,
    toolsListChanged: before,
  });
  await readLine();

  tools = await waitFor((tools) => tools.get(tool) === poison);
  const approved = await client.callTool({ name: tool, arguments: { text: "approved" } }, undefined, reqOpts);
  const out = {
    stage: "approved",
    description: tools.get(tool),
    toolsListChanged: changes.count - before,
    result: approved,
  };
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
