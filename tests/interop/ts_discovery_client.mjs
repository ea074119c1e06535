#!/usr/bin/env node
// Interop peer: a TypeScript SDK v1 stdio client that runs a plan of steps against mcpd's discovery mode.
//
//   node ts_discovery_client.mjs [--timeout SECS] [--wait SECS] --plan JSON -- COMMAND [ARGS...]
//
// Spawns COMMAND as a stdio MCP server (for mcpd's tests: `mcpd connect --socket PATH
// [--profile NAME]`), connects with the 1.x `Client` (initialize at 2025-11-25), runs the
// steps of the JSON array PLAN in order and prints exactly one line of JSON, the same shape
// as py_discovery_client.py:
//
//   {"client":"ts","era":"legacy","protocolVersion":"2025-11-25","serverInfo":{...},
//    "steps":[...],"elicitations":[{"mode":"form","message":"..."}],
//    "wire":{"elicitationRequests":1,"inputRequiredResults":0,"progressNotifications":2,
//            "toolsListChanged":1}}
//
// Steps (see runPlan in helpers.mjs):
//   {"op":"list"}                 -> {"op":"list","tools":[names in the server's order]} (one page)
//   {"op":"call","name":N,"arguments":{...},"progress":true?}
//                                 -> {"op":"call","name":N,"result":{...}} or
//                                    {"op":"call","name":N,"error":{"code","message","data"}},
//                                    with "progress":[{"progress","total","message"}] when asked
//                                    (an `onprogress` callback: the SDK sends a progressToken and
//                                    routes notifications by it)
//   {"op":"changed","count":K}    -> waits (up to --wait, default 10 s) until the handler
//                                    registered with setNotificationHandler(
//                                    ToolListChangedNotificationSchema) has run K times in all:
//                                    {"op":"changed","count":seen} (+ "timedOut":true)
//   {"op":"run","argv":[...]}     -> runs a command to its end: {"op":"run","code":N}
//
// The client declares `elicitation: {form: {}}` and answers every form request with
// {action: "accept", content: {name: "Ada"}}. `wire` counts what arrived from the server
// after connecting. Exit codes: 0 printed, 1 failure (`ts_discovery_client: error: ...` on
// stderr), 2 usage, 124 timeout (--timeout, default 60 s). The SDK is imported from
// $MCPD_PEERS_DIR/node/node_modules (default <repo>/target/peers).

import {
  Changes,
  ELICIT_ANSWER,
  closeWithin,
  errorText,
  fail as failAs,
  planFrom,
  printAndExit,
  readFlags,
  reportTransportErrors,
  runPlan,
  sdkImporter,
  seconds,
  stdioTransport,
  tapDiscoveryWire,
  whenParentDies,
  killChildren,
} from "./helpers.mjs";

const PROG = "ts_discovery_client";
const USAGE = "usage: node ts_discovery_client.mjs [--timeout SECS] [--wait SECS] --plan JSON -- COMMAND [ARGS...]";

const fail = (msg, code) => failAs(PROG, msg, code);

function parseArgv(argv) {
  const split = argv.indexOf("--");
  if (split < 0) fail(USAGE, 2);
  const command = argv.slice(split + 1);
  const opts = readFlags(PROG, argv.slice(0, split), ["--plan", "--timeout", "--wait"], {
    plan: undefined,
    timeout: "60",
    wait: "10",
  });
  if (!opts.plan) fail(USAGE, 2);
  if (command.length === 0) fail("no server COMMAND after --", 2);
  return {
    steps: planFrom(PROG, opts.plan),
    timeoutMs: seconds(PROG, "--timeout", opts.timeout),
    waitMs: seconds(PROG, "--wait", opts.wait),
    command,
  };
}

let active = null;

async function main() {
  const { steps, timeoutMs, waitMs, command } = parseArgv(process.argv.slice(2));
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
  const { CallToolResultSchema, ElicitRequestSchema, ToolListChangedNotificationSchema } = await importSdk("types.js");

  const transport = stdioTransport(StdioClientTransport, command);
  active = { transport, client: null };
  let protocolVersion = null;
  transport.setProtocolVersion = (v) => {
    protocolVersion = v;
  };

  const client = new Client(
    { name: "mcpd-interop-ts-discovery-client", version: "0.1.0" },
    { capabilities: { elicitation: { form: {} } } },
  );
  active.client = client;
  reportTransportErrors(PROG, client);

  const elicitations = [];
  client.setRequestHandler(ElicitRequestSchema, async (request) => {
    const params = request.params ?? {};
    elicitations.push({ mode: params.mode ?? "form", message: params.message });
    return (params.mode ?? "form") === "form" ? ELICIT_ANSWER : { action: "decline" };
  });
  const changes = new Changes();
  client.setNotificationHandler(ToolListChangedNotificationSchema, () => changes.seen());

  const reqOpts = { timeout: timeoutMs };
  await client.connect(transport, reqOpts);
  const wire = tapDiscoveryWire(transport);

  const results = await runPlan(steps, {
    list: async () => (await client.listTools(undefined, reqOpts)).tools.map((t) => t.name),
    call: (name, args, onprogress) =>
      client.callTool({ name, arguments: args }, CallToolResultSchema, { ...reqOpts, onprogress }),
    changes,
    waitMs,
  });

  const out = {
    client: "ts",
    era: "legacy",
    protocolVersion,
    serverInfo: client.getServerVersion() ?? null,
    steps: results,
    elicitations,
    wire,
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
