#!/usr/bin/env node
// Interop peer: a stdio MCP server written with the official TypeScript SDK v2
// (`@modelcontextprotocol/server`), which speaks both protocol eras.
//
//   node ts2_server.mjs [--legacy serve|reject]
//
// Served with `serveStdio(factory, { legacy })`: the client's opening exchange picks the era
// for this process. `initialize` pins the legacy (2025) era; a request carrying the
// 2026-07-28 `_meta` envelope pins the modern era; `server/discover` is answered without
// pinning, so a client can still fall back to `initialize`. With `--legacy reject` (a
// modern-only server) a legacy opening is answered with -32022 "Unsupported protocol
// version" naming the modern revisions; the default `serve` is dual-era.
//
// Tools:
//   echo {text}  -> text content `text`
//   ask  {}      -> asks for the user's name with a form elicitation (schema
//                   {name: string}), then answers `hello, <name>`. Written once, as the v2 SDK
//                   intends: the handler returns `inputRequired(...)`. On a modern connection
//                   that goes to the client as an `input_required` result and the client
//                   retries with `inputResponses`; on a legacy connection the SDK's legacy shim
//                   sends a real `elicitation/create` request to the client and re-enters the
//                   handler with the answer. A declined/cancelled elicitation gives an isError
//                   result `elicitation <action>`. A client without the elicitation capability
//                   gets an error (modern: -32021; legacy: an isError result from the shim).
//
// stderr: one line per server instance the factory builds, `ts2_server: instance for the
// <era> era`, and any transport errors. The process exits when stdin reaches EOF (the SDK's
// StdioServerTransport closes itself) or when its parent process goes away.
//
// SDK location: imported by absolute path from $MCPD_PEERS_DIR/node/node_modules (default
// <repo>/target/peers), as installed by .ci/install-peers (ESM ignores NODE_PATH).

import { fail as failAs, v2Importer, whenParentDies } from "./helpers.mjs";

const PROG = "ts2_server";

const fail = (msg, code) => failAs(PROG, msg, code);

function parseArgv(argv) {
  const opts = { legacy: "serve" };
  for (let i = 0; i < argv.length; i++) {
    const flag = argv[i];
    if (flag !== "--legacy") fail(`unknown argument ${flag}; usage: node ts2_server.mjs [--legacy serve|reject]`, 2);
    const value = argv[++i];
    if (value !== "serve" && value !== "reject") fail(`--legacy must be serve or reject, got ${value}`, 2);
    opts.legacy = value;
  }
  return opts;
}

const text = (t) => ({ content: [{ type: "text", text: t }] });

async function main() {
  const { legacy } = parseArgv(process.argv.slice(2));
  // Exit when the parent goes away (our stdin EOF normally covers that, but a parent that
  // leaked our stdin's write end elsewhere would not close it).
  whenParentDies(() => process.exit(0));

  const importServer = v2Importer(PROG, "server");
  const { McpServer, fromJsonSchema, inputRequired, inputResponse } = await importServer(".");
  const { serveStdio } = await importServer("./stdio");

  const factory = ({ era } = {}) => {
    process.stderr.write(`${PROG}: instance for the ${era ?? "unknown"} era\n`);
    const server = new McpServer(
      { name: "mcpd-interop-ts2-server", version: "0.1.0" },
      { capabilities: { tools: {} } },
    );

    server.registerTool(
      "echo",
      {
        description: "Returns its argument.",
        inputSchema: fromJsonSchema({
          type: "object",
          properties: { text: { type: "string" } },
          required: ["text"],
        }),
      },
      async ({ text: t }) => text(t),
    );

    server.registerTool(
      "ask",
      {
        description: "Asks the user for their name (form elicitation) and greets them.",
        inputSchema: fromJsonSchema({ type: "object", properties: {} }),
      },
      async (_args, ctx) => {
        const answer = inputResponse(ctx.mcpReq.inputResponses, "name");
        if (answer.kind === "elicit") {
          const name = answer.content?.name;
          if (answer.action === "accept" && typeof name === "string") return text(`hello, ${name}`);
          return { ...text(`elicitation ${answer.action}`), isError: true };
        }
        return inputRequired({
          inputRequests: {
            name: inputRequired.elicit({
              message: "What is your name?",
              requestedSchema: {
                type: "object",
                properties: { name: { type: "string", description: "Your name" } },
                required: ["name"],
              },
            }),
          },
        });
      },
    );
    return server;
  };

  serveStdio(factory, {
    legacy,
    onerror: (e) => process.stderr.write(`${PROG}: ${e?.message ?? e}\n`),
  });
}

main().catch((e) => {
  if (process.env.MCPD_INTEROP_DEBUG) console.error(e);
  fail(`${e?.name ?? "Error"}: ${e?.message ?? e}`);
});
