// A small Streamable HTTP front for mcpd's Unix socket, so the conformance suite (which
// speaks HTTP only) can test what agents on the socket get. Every MCP answer comes from
// mcpd, through `mcpd connect` (stdio, one JSON-RPC message per line); the bridge only
// carries messages between HTTP requests and those lines. Node 20+, standard library only.
//
//   node socket-bridge.mjs --mcpd BIN --socket SOCK [--port N]
//
// prints `socket-bridge: listening on http://127.0.0.1:PORT/mcp` once it listens (N 0 or
// none: a free port); SIGTERM stops it and every `mcpd connect` it started.
//
// What it does:
// - One `mcpd connect` per legacy session: `initialize` without `Mcp-Session-Id` starts one
//   and names the session; later POSTs, the GET stream and DELETE find it by that header.
//   Request ids pass unchanged (one client per connection).
// - One shared `mcpd connect` for every 2026-07-28 request (a request whose `_meta` names
//   a protocol version, or whose MCP-Protocol-Version header is not a legacy version), as
//   mcpd's own listener shares one stateless connection: ids are renamed on the way in
//   and restored on the way out (also in `_meta` subscription ids).
// - What belongs to HTTP and so cannot come through a socket, as the spec's HTTP binding
//   says and mcpd's listener does: the Host/Origin check (403); refusing batches and
//   non-JSON-RPC bodies; on modern requests the MCP-Protocol-Version / Mcp-Method /
//   Mcp-Name checks (400, -32020; Mcp-Name is `params.taskId` for tasks/get, tasks/update
//   and tasks/cancel), the `Mcp-Param-*` checks of a `tools/call` against the
//   tool's `x-mcp-header` annotations (read with a `tools/list` of the bridge's own on the
//   shared link, before each such call), and the status of an error answer (400 for -32020,
//   -32021, -32022 and a `_meta` key missing, 404 for -32601); a JSON body when the client
//   does not accept SSE or the answer is an HTTP error, an SSE stream otherwise; closing a
//   response stream cancels its request (notifications/cancelled).
// - The socket carries no "this belongs to request N" tag, so a message from mcpd that is
//   not an answer goes where it most likely belongs: by its subscription id or progress
//   token, else to the newest request still open (a log, a server's elicitation request),
//   else to the legacy session's GET stream (list changes, resource updates).
//
// What it does not do: SSE event ids, priming events or `Last-Event-ID` resumption (mcpd's
// listener does not offer them either), bearer tokens, body size limits, more than one GET
// stream per session, or tell which request a log or a server's request belongs to when
// several are open. tests/conformance/socket-bridge-losses.txt lists what this costs.

import { spawn } from "node:child_process";
import { createServer } from "node:http";
import { randomBytes } from "node:crypto";

const say = (...a) => console.error("socket-bridge:", ...a);
const argv = process.argv.slice(2);
const arg = (name, dflt) => {
  const i = argv.indexOf(name);
  return i >= 0 && i + 1 < argv.length ? argv[i + 1] : dflt;
};
const mcpd = arg("--mcpd");
const socketPath = arg("--socket");
const port = Number(arg("--port", "0"));
if (!mcpd || !socketPath || !Number.isInteger(port)) {
  say("usage: node socket-bridge.mjs --mcpd BIN --socket SOCK [--port N]");
  process.exit(2);
}

const LEGACY_VERSIONS = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];
const PV = "io.modelcontextprotocol/protocolVersion";
const SUB = "io.modelcontextprotocol/subscriptionId";
const LOOPBACK = ["localhost", "127.0.0.1", "[::1]"];

// ---------------------------------------------------------------- one `mcpd connect`

class Link {
  constructor(onMessage, onExit) {
    this.child = spawn(mcpd, ["connect", "--socket", socketPath], { stdio: ["pipe", "pipe", "inherit"] });
    this.buf = "";
    this.child.stdout.setEncoding("utf8");
    this.child.stdout.on("data", (chunk) => {
      this.buf += chunk;
      let nl;
      while ((nl = this.buf.indexOf("\n")) >= 0) {
        const line = this.buf.slice(0, nl).trim();
        this.buf = this.buf.slice(nl + 1);
        if (!line) continue;
        try {
          onMessage(JSON.parse(line));
        } catch (e) {
          say(`mcpd connect wrote a line that is not JSON (${e.message}): ${line.slice(0, 200)}`);
        }
      }
    });
    this.child.stdin.on("error", () => {}); // the child is gone; onExit tells the rest
    this.child.on("exit", onExit);
  }
  send(msg) {
    this.child.stdin.write(JSON.stringify(msg) + "\n");
  }
  close() {
    this.child.stdin.end();
    setTimeout(() => this.child.kill("SIGTERM"), 2000).unref();
  }
}

// ---------------------------------------------------------------- HTTP answers

const jsonError = (res, status, id, code, message, data) => {
  const error = data === undefined ? { code, message } : { code, message, data };
  res.writeHead(status, { "content-type": "application/json" });
  res.end(JSON.stringify({ jsonrpc: "2.0", id: id ?? null, error }));
};

function statusOf(msg) {
  const code = msg.error?.code;
  if (code === undefined) return 200;
  if ([-32020, -32021, -32022].includes(code)) return 400;
  if (code === -32601) return 404;
  if (code === -32602 && msg.error?.data?.missing !== undefined) return 400;
  return 200;
}

// A request whose answer is on its way: the HTTP response it goes on.
class Open {
  constructor(res, { id, sse, modern, headers, onGone }) {
    Object.assign(this, { res, id, sse, modern, headers: headers ?? {}, started: false, done: false });
    this.token = undefined;
    res.on("close", () => {
      if (!this.done) {
        this.done = true;
        onGone();
      }
    });
  }
  // Sends one message; `last` ends the response.
  deliver(msg, last) {
    if (this.done) return;
    if (!this.started) {
      const status = last && this.modern ? statusOf(msg) : 200;
      if (last && (!this.sse || status !== 200)) {
        this.done = true;
        this.res.writeHead(status, { "content-type": "application/json", ...this.headers });
        this.res.end(JSON.stringify(msg));
        return;
      }
      if (!this.sse) return; // a JSON response carries the answer only
      this.started = true;
      this.res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache", ...this.headers });
    }
    this.res.write(`event: message\ndata: ${JSON.stringify(msg)}\n\n`);
    if (last) {
      this.done = true;
      this.res.end();
    }
  }
}

// The open request a message that is no answer belongs to: by progress token, else the newest.
function related(opens, msg) {
  const token = msg.params?.progressToken;
  const live = [...opens.values()].filter((o) => !o.done && !o.listen);
  return (token !== undefined && live.find((o) => o.token === token)) || live.at(-1);
}

// ---------------------------------------------------------------- 2026-07-28: one shared link

let shared = null;
const modernOpen = new Map(); // our id -> Open
const ownAsks = new Map(); // our id -> the resolve of the bridge's own request
let nextId = 1;

// A request of the bridge's own on the shared link; resolves to mcpd's answer.
function ask(method, params) {
  return new Promise((resolve) => {
    const id = nextId++;
    ownAsks.set(id, resolve);
    const _meta = { [PV]: "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {} };
    sharedLink().send({ jsonrpc: "2.0", id, method, params: { ...params, _meta } });
  });
}

function sharedLink() {
  if (shared) return shared;
  shared = new Link(
    (msg) => {
      if (msg.method === undefined) {
        const own = ownAsks.get(msg.id);
        if (own) {
          ownAsks.delete(msg.id);
          return own(msg);
        }
        const open = modernOpen.get(msg.id);
        if (!open) return;
        modernOpen.delete(msg.id);
        open.deliver({ ...msg, id: open.id }, true);
      } else if (msg.id !== undefined) {
        shared.send({ jsonrpc: "2.0", id: msg.id, error: { code: -32601, message: "2026-07-28 clients take no requests" } });
      } else {
        const sub = msg.params?._meta?.[SUB];
        const open = sub !== undefined ? modernOpen.get(sub) : related(modernOpen, msg);
        if (!open) return;
        if (sub !== undefined) msg = { ...msg, params: { ...msg.params, _meta: { ...msg.params._meta, [SUB]: open.id } } };
        open.deliver(msg, false);
      }
    },
    (code) => {
      say(`the shared mcpd connect exited (${code})`);
      shared = null;
      for (const open of modernOpen.values()) open.deliver({ jsonrpc: "2.0", id: open.id, error: { code: -32603, message: "mcpd connect exited" } }, true);
      modernOpen.clear();
      for (const own of ownAsks.values()) own({ error: { code: -32603, message: "mcpd connect exited" } });
      ownAsks.clear();
    },
  );
  return shared;
}

// A header value as the client meant it, `=?base64?…?=` unwrapped; null when it is not
// visible ASCII, or the wrapping is not valid base64 of UTF-8.
const decode = (v) => {
  if (!/^[\t\x20-\x7e]*$/.test(v)) return null;
  const m = /^=\?base64\?(.*)\?=$/.exec(v);
  if (!m) return v;
  if (!/^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/.test(m[1])) return null;
  try {
    return new TextDecoder("utf-8", { fatal: true }).decode(Buffer.from(m[1], "base64"));
  } catch {
    return null;
  }
};

// The (argument, header) pairs of a tool's `x-mcp-header` annotations, from mcpd's listing.
async function paramHeaders(tool) {
  let cursor;
  for (let page = 0; page < 50; page++) {
    const answer = await ask("tools/list", cursor ? { cursor } : {});
    const found = (answer.result?.tools ?? []).find((t) => t.name === tool);
    if (found) {
      return Object.entries(found.inputSchema?.properties ?? {})
        .filter(([, p]) => typeof p?.["x-mcp-header"] === "string")
        .map(([arg, p]) => [arg, p["x-mcp-header"]]);
    }
    cursor = answer.result?.nextCursor;
    if (!cursor) break;
  }
  return []; // a tool mcpd does not list gets mcpd's own "unknown tool" answer
}

// The `Mcp-Param-*` checks mcpd's listener makes (agent/http/stateless.rs, check_param_headers).
async function checkParams(req, msg) {
  if (msg.method !== "tools/call" || typeof msg.params?.name !== "string") return null;
  for (const [arg, name] of await paramHeaders(msg.params.name)) {
    const value = msg.params.arguments?.[arg];
    if (value === undefined || value === null) continue;
    const raw = req.headersDistinct[`mcp-param-${name.toLowerCase()}`];
    if (raw === undefined) return [400, -32020, `the Mcp-Param-${name} header is required: argument "${arg}" is present`];
    const got = raw.length === 1 ? decode(raw[0]) : null;
    if (got === null) return [400, -32020, `Mcp-Param-${name} has invalid characters or invalid base64`];
    const same =
      typeof value === "string" ? got === value
      : typeof value === "boolean" ? got === String(value)
      : typeof value === "number" ? Number.isInteger(value) && /^[+-]?\d+$/.test(got) && Number(got) === value
      : true;
    if (!same) return [400, -32020, `Mcp-Param-${name} differs from argument "${arg}"`];
  }
  return null;
}

// The checks of the headers against the body that mcpd's listener makes (agent/http/stateless.rs).
function checkHeaders(req, msg) {
  const version = msg.params?._meta?.[PV];
  if (version === undefined) return [400, -32602, `the request's _meta lacks the required key "${PV}"`, { missing: PV }];
  const one = (name) => {
    const all = req.headersDistinct[name];
    return all === undefined ? undefined : all.length === 1 ? decode(all[0]) : null;
  };
  const mismatch = (why) => [400, -32020, why];
  const v = one("mcp-protocol-version");
  if (v === undefined) return mismatch("the MCP-Protocol-Version header is required");
  if (v !== version) return mismatch(`MCP-Protocol-Version (${v}) differs from _meta's protocol version (${version})`);
  const m = one("mcp-method");
  if (m === undefined) return mismatch("the Mcp-Method header is required");
  if (m !== msg.method) return mismatch(`Mcp-Method differs from the body's method (${msg.method})`);
  const field = {
    "tools/call": "name",
    "prompts/get": "name",
    "resources/read": "uri",
    "tasks/get": "taskId",
    "tasks/update": "taskId",
    "tasks/cancel": "taskId",
  }[msg.method];
  if (field) {
    const n = one("mcp-name");
    if (n === undefined) return mismatch(`the Mcp-Name header is required for ${msg.method}`);
    if (n !== msg.params?.[field]) return mismatch(`Mcp-Name differs from params.${field}`);
  }
  return null;
}

async function modernPost(req, res, msg, sse) {
  if (msg.method === undefined) return jsonError(res, 400, msg.id, -32600, "2026-07-28 clients send no responses");
  if (msg.id === undefined) return res.writeHead(202).end();
  const refused = checkHeaders(req, msg) ?? (await checkParams(req, msg));
  if (refused) return jsonError(res, refused[0], msg.id, refused[1], refused[2], refused[3]);
  const link = sharedLink();
  const ours = nextId++;
  const open = new Open(res, {
    id: msg.id, sse, modern: true,
    onGone: () => {
      modernOpen.delete(ours);
      link.send({ jsonrpc: "2.0", method: "notifications/cancelled", params: { requestId: ours } });
    },
  });
  open.token = msg.params?._meta?.progressToken;
  open.listen = msg.method === "subscriptions/listen";
  modernOpen.set(ours, open);
  link.send({ ...msg, id: ours });
}

// ---------------------------------------------------------------- legacy: a link per session

const sessions = new Map(); // Mcp-Session-Id -> { link, opens: Map<json id, Open>, get: res|null }

function legacyMessage(session, msg) {
  if (msg.method === undefined) {
    const key = JSON.stringify(msg.id);
    const open = session.opens.get(key);
    if (!open) return;
    session.opens.delete(key);
    open.deliver(msg, true);
    return;
  }
  const rides = msg.id !== undefined || msg.method === "notifications/message" || msg.method === "notifications/progress";
  const open = rides ? related(session.opens, msg) : undefined;
  if (open) open.deliver(msg, false);
  else if (session.get) session.get.write(`event: message\ndata: ${JSON.stringify(msg)}\n\n`);
  else if (msg.id !== undefined) session.link.send({ jsonrpc: "2.0", id: msg.id, error: { code: -32603, message: "no open stream to the client" } });
}

function legacyPost(req, res, msg, sse) {
  let id = req.headers["mcp-session-id"];
  let session = id && sessions.get(id);
  const headers = {};
  if (msg.method === "initialize" && !id) {
    id = randomBytes(16).toString("hex");
    session = { opens: new Map(), get: null };
    session.link = new Link((m) => legacyMessage(session, m), () => {
      sessions.delete(id);
      for (const open of session.opens.values()) open.deliver({ jsonrpc: "2.0", id: open.id, error: { code: -32603, message: "mcpd connect exited" } }, true);
      session.get?.end();
    });
    sessions.set(id, session);
    headers["mcp-session-id"] = id;
  } else if (!id) {
    return jsonError(res, 400, msg.id, -32600, "no Mcp-Session-Id header: send initialize first, or use 2026-07-28 with per-request _meta");
  } else if (!session) {
    return jsonError(res, 404, msg.id, -32600, "no such session (it ended, or was never opened); initialize again");
  }
  if (msg.method === undefined || msg.id === undefined) {
    session.link.send(msg);
    return res.writeHead(202).end();
  }
  const key = JSON.stringify(msg.id);
  const open = new Open(res, {
    id: msg.id, sse, modern: false, headers,
    onGone: () => {
      session.opens.delete(key);
      session.link.send({ jsonrpc: "2.0", method: "notifications/cancelled", params: { requestId: msg.id } });
    },
  });
  open.token = msg.params?._meta?.progressToken;
  session.opens.set(key, open);
  session.link.send(msg);
}

// ---------------------------------------------------------------- the server

function hostOf(value) {
  const v = String(value ?? "").trim().toLowerCase();
  if (v.startsWith("[")) return v.slice(0, v.indexOf("]") + 1);
  const m = /^(.*):(\d+)$/.exec(v);
  return m ? m[1] : v;
}

function allowed(req) {
  if (!LOOPBACK.includes(hostOf(req.headers.host))) return false;
  if (req.headers.origin === undefined) return true;
  try {
    const h = new URL(req.headers.origin).hostname.toLowerCase();
    return LOOPBACK.includes(h.includes(":") ? `[${h.replace(/^\[|\]$/g, "")}]` : h);
  } catch {
    return false;
  }
}

const server = createServer((req, res) => {
  if (!allowed(req)) return jsonError(res, 403, null, -32600, "the Host or Origin is not a loopback name (a DNS-rebinding defence)");
  if (new URL(req.url, "http://x").pathname !== "/mcp") return res.writeHead(404).end("the bridge serves /mcp only");
  const sse = String(req.headers.accept ?? "").includes("text/event-stream");
  const version = req.headers["mcp-protocol-version"];
  const modernHeader = version !== undefined && !LEGACY_VERSIONS.includes(version);
  const session = sessions.get(req.headers["mcp-session-id"]);
  if (req.method === "GET") {
    if (modernHeader || !req.headers["mcp-session-id"]) return res.writeHead(405, { allow: "POST" }).end("no GET stream without a session");
    if (!session) return res.writeHead(404).end("no such session");
    if (!sse) return res.writeHead(406).end("the GET stream is text/event-stream");
    if (session.get) return res.writeHead(409).end("this session already has a GET stream");
    res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
    res.flushHeaders();
    session.get = res;
    res.on("close", () => session.get === res && (session.get = null));
    return;
  }
  if (req.method === "DELETE") {
    if (!session) return res.writeHead(404).end("no such session");
    sessions.delete(req.headers["mcp-session-id"]);
    session.link.close();
    return res.writeHead(200).end();
  }
  if (req.method !== "POST") return res.writeHead(405, { allow: "GET, POST, DELETE" }).end();
  const chunks = [];
  req.on("data", (c) => chunks.push(c));
  req.on("end", () => {
    let msg;
    try {
      msg = JSON.parse(Buffer.concat(chunks).toString("utf8"));
    } catch (e) {
      return jsonError(res, 400, null, -32700, `the body is not JSON: ${e.message}`);
    }
    if (msg === null || typeof msg !== "object" || Array.isArray(msg)) {
      return jsonError(res, 400, null, -32600, "the body must be one JSON-RPC message (an object); batches are not supported");
    }
    if (msg.jsonrpc !== "2.0") return jsonError(res, 400, msg.id, -32600, '"jsonrpc" must be "2.0"');
    const modern = msg.params?._meta?.[PV] !== undefined || modernHeader;
    (modern ? modernPost : legacyPost)(req, res, msg, sse);
  });
});

server.listen(port, "127.0.0.1", () => {
  say(`listening on http://127.0.0.1:${server.address().port}/mcp`);
});
const stop = () => {
  shared?.close();
  for (const s of sessions.values()) s.link.close();
  server.close();
  setTimeout(() => process.exit(0), 500).unref();
};
process.on("SIGTERM", stop);
process.on("SIGINT", stop);
