#!/usr/bin/env node
// Interop peer: a Streamable HTTP MCP client written with the official TypeScript SDK v2
// (`@modelcontextprotocol/client`), which speaks both protocol eras.
//
//   node ts2_http_client.mjs [--mode legacy|auto|modern] [--timeout SECS] URL
//
// Connects to the MCP endpoint URL (for mcpd's tests: its HTTP listener, with the fixture
// server `fx` behind it) with the SDK's `StreamableHTTPClientTransport`, authenticating with
// the bearer token in $MCPD_INTEROP_TOKEN (the transport's `authProvider: {token}`, which
// sends `Authorization: Bearer TOKEN` on every request; the variable must be set). It then
// lists every tool (the SDK's aggregating listTools()), calls
// `fx__echo {"text": "hello over http"}`, then `fx__ask {}` (the elicitation handler answers
// form requests with {action: "accept", content: {name: "Ada"}}), and prints exactly one line
// of JSON on stdout:
//
//   {"client":"ts2-http","mode":"modern","era":"modern","protocolVersion":"2026-07-28",
//    "serverInfo":{...}|null,"tools":[sorted names],"echo":{...},
//    "ask":{"call":{...},"elicitations":[{"mode":"form","message":"..."}]},
//    "http":[{"method":"POST","status":200,"mcpMethod":"tools/list","protocolVersion":"2026-07-28",
//             "sessionId":null,"responseSessionId":null,"contentType":"...","authorized":true},...]}
//
// --mode (the SDK's `versionNegotiation.mode`; default modern):
//   legacy  `initialize`, then a session (`Mcp-Session-Id`).
//   auto    probe with `server/discover`, modern if the server offers 2026-07-28, otherwise
//           fall back to `initialize`.
//   modern  `{pin: '2026-07-28'}`: the probe, but no fallback; stateless requests carrying
//           the 2026-07-28 `_meta` envelope and the `Mcp-Protocol-Version`/`Mcp-Method` headers.
//
// `http` lists every HTTP request the transport made (through a wrapping `fetch`), with the
// request's `Mcp-Method`, `Mcp-Protocol-Version` and `Mcp-Session-Id` headers, the response's
// status, `Mcp-Session-Id` and content type, and whether it carried our bearer token.
// `echo` and `ask.call` are the CallToolResults as the SDK returns them.
//
// Exit codes: 0 result printed, 1 any failure (`ts2_http_client: error: ...` on stderr,
// stdout empty), 2 usage, 124 timeout (--timeout, default 60 s, bounds the whole run).
// stdin is never read; the client exits when its parent dies.
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
  v2Importer,
  whenParentDies,
} from "./helpers.mjs";

const PROG = "ts2_http_client";
const TOKEN_ENV = "MCPD_INTEROP_TOKEN";
const USAGE = "usage: node ts2_http_client.mjs [--mode legacy|auto|modern] [--timeout SECS] URL";

const fail = (msg, code) => failAs(PROG, msg, code);

function parseArgv(argv) {
  const rest = [];
  const opts = readFlags(PROG, argv, ["--mode", "--timeout"], { mode: "modern", timeout: "60" }, rest);
  if (rest.length !== 1) fail(USAGE, 2);
  if (!["legacy", "auto", "modern"].includes(opts.mode)) fail(`--mode must be legacy, auto or modern, got ${opts.mode}`, 2);
  const timeoutMs = seconds(PROG, "--timeout", opts.timeout);
  const token = process.env[TOKEN_ENV];
  if (!token) fail(`${TOKEN_ENV} is not set`, 2);
  return { mode: opts.mode, timeoutMs, url: rest[0], token };
}

// A fetch that records every exchange in `log`; `pending` holds the requests whose response
// headers have not arrived yet (e.g. the POST of an elicitation answer, which the SDK does
// not wait for before the tool call's result can arrive).
function loggingFetch(log, pending, token) {
  return (input, init) => {
    const p = logged(log, token, input, init);
    pending.add(p);
    const done = () => pending.delete(p);
    p.then(done, done);
    return p;
  };
}

async function logged(log, token, input, init) {
  const headers = new Headers(init?.headers ?? (input instanceof Request ? input.headers : undefined));
  const method = init?.method ?? (input instanceof Request ? input.method : "GET");
  const entry = {
    method,
    mcpMethod: headers.get("mcp-method"),
    protocolVersion: headers.get("mcp-protocol-version"),
    sessionId: headers.get("mcp-session-id"),
    authorized: headers.get("authorization") === `Bearer ${token}`,
    status: null,
    responseSessionId: null,
    contentType: null,
  };
  log.push(entry);
  const response = await fetch(input, init);
  entry.status = response.status;
  entry.responseSessionId = response.headers.get("mcp-session-id");
  entry.contentType = response.headers.get("content-type");
  return response;
}

let active = null;

async function main() {
  const { mode, timeoutMs, url, token } = parseArgv(process.argv.slice(2));
  const http = [];
  const pending = new Set();
  active = { http, client: null };

  const deadline = setTimeout(() => fail(`timed out after ${timeoutMs / 1000}s; HTTP so far: ${JSON.stringify(http)}`, 124), timeoutMs);

  // Die with our parent: nothing else would stop us.
  whenParentDies(() => process.exit(1));

  const importClient = v2Importer(PROG, "client");
  const { Client, StreamableHTTPClientTransport } = await importClient(".");

  const transport = new StreamableHTTPClientTransport(new URL(url), {
    authProvider: { token: async () => token },
    fetch: loggingFetch(http, pending, token),
  });

  const negotiation = mode === "modern" ? { pin: MODERN } : mode;
  const client = new Client(
    { name: "mcpd-interop-ts2-http-client", version: "0.1.0" },
    {
      capabilities: { elicitation: { form: {} } },
      versionNegotiation: { mode: negotiation },
    },
  );
  active.client = client;
  reportTransportErrors(PROG, client);

  const elicitations = answerElicitations(client);

  const reqOpts = { timeout: timeoutMs };
  await client.connect(transport, reqOpts);

  const { tools } = await client.listTools(undefined, reqOpts);
  const echo = await client.callTool({ name: "fx__echo", arguments: { text: "hello over http" } }, reqOpts);
  const ask = await client.callTool({ name: "fx__ask", arguments: {} }, reqOpts);

  const out = {
    client: "ts2-http",
    mode,
    era: client.getProtocolEra() ?? null,
    protocolVersion: client.getNegotiatedProtocolVersion() ?? null,
    serverInfo: client.getServerVersion() ?? null,
    tools: tools.map((t) => t.name).sort(),
    echo,
    ask: { call: ask, elicitations },
  };

  // Every request made so far has its answer's status before the log is printed.
  await Promise.allSettled([...pending]);
  await client.close();
  out.http = http;
  clearTimeout(deadline);
  printAndExit(out);
}

main().catch(async (e) => {
  const msg = errorText(e);
  await closeWithin(active?.client, 5000);
  fail(`${msg}; HTTP so far: ${JSON.stringify(active?.http ?? [])}`);
});
