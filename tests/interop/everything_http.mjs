#!/usr/bin/env node
// Interop peer launcher: runs the published @modelcontextprotocol/server-everything, unchanged,
// in one of its HTTP modes, for mcpd's HTTP interop tests.
//
//   node everything_http.mjs ENTRY MODE PORT
//
// ENTRY is the package's dist/index.js, MODE is `streamableHttp` (serves /mcp) or `sse`
// (serves GET /sse and POST /message), PORT the TCP port. The server itself takes its
// mode from argv and its port from $PORT; this launcher adds two things it lacks:
//
// - It listens on 127.0.0.1 only. The server calls `app.listen(PORT)`, which binds every
//   interface; a test has no business opening a port to the network.
// - It exits when its parent dies. Node has no parent-death signal, so it polls its parent
//   pid; a test process killed without cleanup must not leave a server behind.
//
// SIGTERM ends it (Node's default action; the server handles only SIGINT).

import net from "node:net";
import { pathToFileURL } from "node:url";

import { whenParentDies } from "./helpers.mjs";

const [entry, mode, port] = process.argv.slice(2);
if (!entry || !["streamableHttp", "sse"].includes(mode) || !/^\d+$/.test(port ?? "")) {
  process.stderr.write("usage: node everything_http.mjs ENTRY streamableHttp|sse PORT\n");
  process.exit(2);
}

const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  // listen(port[, cb]) gains a host; any other form is left as the caller wrote it.
  const portOnly = typeof args[0] === "number" || (typeof args[0] === "string" && /^\d+$/.test(args[0]));
  if (portOnly && typeof args[1] !== "string") args.splice(1, 0, "127.0.0.1");
  return listen.apply(this, args);
};

whenParentDies(() => process.exit(0), 200);

process.env.PORT = port;
process.argv = [process.argv[0], entry, mode];
await import(pathToFileURL(entry).href);
