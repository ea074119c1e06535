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

import {
  MODERN,
  answerElicitations,
  closeWithin,
  errorText,
  fail as failAs,
  printAndExit,
  readFlags,
  reportTransportErrors,
  seconds,
  stdioTransport,
  toolArgsFrom,
  v2Importer,
  whenParentDies,
  killChildren,
} from "./helpers.mjs";

const PROG = "ts2_client";
const USAGE =
  "usage: node ts2_client.mjs [--mode legacy|auto|modern] [--timeout SECS] [--probe-timeout SECS] --call TOOL [--args JSON] -- COMMAND [ARGS...]";

const fail = (msg, code) => failAs(PROG, msg, code);

function parseArgv(argv) {
  const split = argv.indexOf("--");
  if (split < 0) fail(USAGE, 2);
  const own = argv.slice(0, split);
  const command = argv.slice(split + 1);
  const opts = readFlags(PROG, own, ["--mode", "--call", "--args", "--timeout", "--probe-timeout"], {
    mode: "auto",
    call: undefined,
    args: "{}",
    timeout: "60",
    "probe-timeout": "10",
  });
  if (!opts.call) fail(USAGE, 2);
  if (!["legacy", "auto", "modern"].includes(opts.mode)) fail(`--mode must be legacy, auto or modern, got ${opts.mode}`, 2);
  if (command.length === 0) fail("no server COMMAND after --", 2);
  const toolArgs = toolArgsFrom(PROG, opts.args);
  return {
    mode: opts.mode,
    tool: opts.call,
    toolArgs,
    timeoutMs: seconds(PROG, "--timeout", opts.timeout),
    probeTimeoutMs: seconds(PROG, "--probe-timeout", opts["probe-timeout"]),
    command,
  };
}

// The live transport/client, so failure paths can shut the server down.
let active = null;

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
    killChildren(active?.transport, "SIGKILL");
    fail(`timed out after ${timeoutMs / 1000}s`, 124);
  }, timeoutMs);

  // Die with our parent: nothing else would stop us (stdin is not ours to watch).
  whenParentDies(() => {
    killChildren(active?.transport, "SIGKILL");
    process.exit(1);
  });

  const importClient = v2Importer(PROG, "client");
  const { Client } = await importClient(".");
  const { StdioClientTransport } = await importClient("./stdio");

  const transport = stdioTransport(StdioClientTransport, command);
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
  reportTransportErrors(PROG, client);

  const elicitations = answerElicitations(client);

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
