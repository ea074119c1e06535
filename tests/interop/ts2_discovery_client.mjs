#!/usr/bin/env node
// Interop peer: a TypeScript SDK v2 stdio client, either era, that runs a plan of steps against mcpd's discovery mode.
//
//   node ts2_discovery_client.mjs [--mode legacy|modern] [--timeout SECS] [--wait SECS]
//                                 --plan JSON -- COMMAND [ARGS...]
//
// Spawns COMMAND as a stdio MCP server (for mcpd's tests: `mcpd connect --socket PATH
// [--profile NAME]`), connects with `@modelcontextprotocol/client`, runs the steps of the
// JSON array PLAN in order and prints exactly one line of JSON, the same shape as
// ts_discovery_client.mjs (whose header lists the steps), plus what the SDK's list-change
// machinery did:
//
//   {"client":"ts2","mode":"modern","era":"modern","protocolVersion":"2026-07-28",
//    "serverInfo":{...},"steps":[...],"elicitations":[...],"wire":{...},
//    "subscription":{"toolsListChanged":true}|null,"refreshed":[[names]...]}
//
// --mode (the SDK's `versionNegotiation.mode`; default modern):
//   legacy  plain `initialize` (2025-11-25).
//   modern  `{pin: '2026-07-28'}`: `server/discover` on a sibling process (COMMAND is
//           spawned twice), then the modern era on the session process; no fallback.
//
// List changes: the client is built with the SDK's own `listChanged.tools` option
// ({autoRefresh: true, debounceMs: 0}). On a legacy connection the SDK registers a
// notifications/tools/list_changed handler; on a modern one it also opens a
// `subscriptions/listen` stream with {toolsListChanged: true} during connect (its
// honoured filter is `subscription`, null if none was opened) and the notifications come
// on that stream. Each time the SDK reports a change, `onChanged` counts it (the `changed`
// step waits for that count) and records the tool list the SDK refetched in `refreshed`.
//
// Elicitation: `elicitation: {form: {}}` is declared and every form request is answered
// {action: "accept", content: {name: "Ada"}}; on 2026-07-28 the SDK gets it as an
// `input_required` result, asks the same handler and retries inside callTool. `wire`
// counts what arrived on the session pipe after connecting. Exit codes: 0 printed,
// 1 failure (`ts2_discovery_client: error: ...` on stderr), 2 usage, 124 timeout (--timeout,
// default 60 s). On failure or timeout the child processes (the server, a probe sibling)
// get SIGKILL. The SDK is imported from $MCPD_PEERS_DIR/node/node_modules.

import {
  Changes,
  MODERN,
  answerElicitations,
  closeWithin,
  errorText,
  fail as failAs,
  planFrom,
  printAndExit,
  readFlags,
  reportTransportErrors,
  runPlan,
  seconds,
  stdioTransport,
  tapDiscoveryWire,
  v2Importer,
  whenParentDies,
  killChildren,
} from "./helpers.mjs";

const PROG = "ts2_discovery_client";
const USAGE =
  "usage: node ts2_discovery_client.mjs [--mode legacy|modern] [--timeout SECS] [--wait SECS] --plan JSON -- COMMAND [ARGS...]";

const fail = (msg, code) => failAs(PROG, msg, code);

function parseArgv(argv) {
  const split = argv.indexOf("--");
  if (split < 0) fail(USAGE, 2);
  const command = argv.slice(split + 1);
  const opts = readFlags(PROG, argv.slice(0, split), ["--mode", "--plan", "--timeout", "--wait"], {
    mode: "modern",
    plan: undefined,
    timeout: "60",
    wait: "10",
  });
  if (!opts.plan) fail(USAGE, 2);
  if (!["legacy", "modern"].includes(opts.mode)) fail(`--mode must be legacy or modern, got ${opts.mode}`, 2);
  if (command.length === 0) fail("no server COMMAND after --", 2);
  return {
    mode: opts.mode,
    steps: planFrom(PROG, opts.plan),
    timeoutMs: seconds(PROG, "--timeout", opts.timeout),
    waitMs: seconds(PROG, "--wait", opts.wait),
    command,
  };
}

let active = null;

async function main() {
  const { mode, steps, timeoutMs, waitMs, command } = parseArgv(process.argv.slice(2));
  const deadline = setTimeout(() => {
    killChildren(active?.transport);
    fail(`timed out after ${timeoutMs / 1000}s`, 124);
  }, timeoutMs);
  whenParentDies(() => {
    killChildren(active?.transport);
    process.exit(1);
  });

  const importClient = v2Importer(PROG, "client");
  const { Client } = await importClient(".");
  const { StdioClientTransport } = await importClient("./stdio");

  const transport = stdioTransport(StdioClientTransport, command);
  active = { transport, client: null };

  const changes = new Changes();
  const refreshed = [];
  const client = new Client(
    { name: "mcpd-interop-ts2-discovery-client", version: "0.1.0" },
    {
      capabilities: { elicitation: { form: {} } },
      versionNegotiation: { mode: mode === "modern" ? { pin: MODERN } : "legacy" },
      listChanged: {
        tools: {
          autoRefresh: true,
          debounceMs: 0,
          onChanged: (error, tools) => {
            refreshed.push(error ? { error: errorText(error) } : (tools ?? []).map((t) => t.name));
            changes.seen();
          },
        },
      },
    },
  );
  active.client = client;
  reportTransportErrors(PROG, client);
  const elicitations = answerElicitations(client);

  const reqOpts = { timeout: timeoutMs };
  await client.connect(transport, reqOpts);
  const wire = tapDiscoveryWire(transport);

  const results = await runPlan(steps, {
    // The SDK's default cache mode: a list_changed must evict what it holds.
    list: async () => (await client.listTools(undefined, reqOpts)).tools.map((t) => t.name),
    call: (name, args, onprogress) => client.callTool({ name, arguments: args }, { ...reqOpts, onprogress }),
    changes,
    waitMs,
  });

  const out = {
    client: "ts2",
    mode,
    era: client.getProtocolEra() ?? null,
    protocolVersion: client.getNegotiatedProtocolVersion() ?? null,
    serverInfo: client.getServerVersion() ?? null,
    steps: results,
    elicitations,
    wire,
    subscription: client.autoOpenedSubscription?.honoredFilter ?? null,
    refreshed,
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
