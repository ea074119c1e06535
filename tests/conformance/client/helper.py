#!/usr/bin/env python3
"""The small pieces of tests/conformance/client/driver.sh that bash cannot do portably.

Python 3.8+ standard library only (CI has no curl). Every wait has a deadline. Messages
go to stderr, prefixed "mcpd-auth-driver:"; results go to stdout.

  helper.py redirect URL
      GET URL without following redirects. It must answer 3xx with a Location: prints
      the Location (made absolute) on stdout. Exit 1 otherwise, with the status and the
      start of the body on stderr.

  helper.py get URL
      GET URL (no redirects). Prints "STATUS BODY" (body cut to 300 bytes, one line) on
      stdout. Exit 0 on 2xx, 1 otherwise.

  helper.py wait-state --mcpd BIN --socket SOCK --server NAME --want STATE --deadline SECS
      Polls `mcpd ctl status --json` until the server's state is STATE. Exit 0 then;
      exit 1 at once if it is "failed", or when the deadline passes (with the last state
      and error seen).

  helper.py call --mcpd BIN --socket SOCK --server NAME --tool TOOL --deadline SECS
      Speaks to mcpd as an agent over its Unix socket (one JSON-RPC message per line):
      initialize (protocolVersion 2025-11-25), notifications/initialized, then tools/list
      until TOOL is listed, then tools/call TOOL {}. While waiting for the tool it also
      watches `ctl status`: a server in needs-login, or ready with its tool list refused
      for a login (see cmd_call), needs another login. Exit codes:
        0  the call succeeded (its text content on stdout)
        3  mcpd says a login is needed: an error whose message contains "mcpd ctl login",
           or `ctl status` asking for one while TOOL is missing (the reason on stderr)
        1  anything else (the cause on stderr)

  helper.py context --scenario NAME --dir DIR
      Reads the scenario's MCP_CONFORMANCE_CONTEXT (JSON, from the environment; never an
      argument) and writes its key and token material into DIR, one file each, created
      0600 (the driver's $CREDENTIALS_DIRECTORY; see CONTEXT_FILES). Prints the one-line
      values the config names (client_id, the IdP's issuer ...) as KEY=VALUE lines on
      stdout. Exit 1 when a value the scenario needs is missing or not a string.
"""

import argparse
import http.client
import json
import os
import socket
import subprocess
import sys
import time
import urllib.parse

PREFIX = "mcpd-auth-driver:"
LOGIN_HINT = "mcpd ctl login"
EXIT_OK, EXIT_FAIL, EXIT_LOGIN = 0, 1, 3


def say(*parts):
    print(PREFIX, *parts, file=sys.stderr, flush=True)


class Failure(Exception):
    """A cause the driver reports, then exits 1."""


class NeedsLogin(Exception):
    """mcpd asks for `mcpd ctl login`."""


def cut(text, n=300):
    text = " ".join(str(text).split())
    return text if len(text) <= n else text[:n] + "…"


# ---------------------------------------------------------------- HTTP, no redirects


def http_get(url, timeout):
    """One GET, redirects never followed. Returns (status, headers, body bytes)."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise Failure(f"not an http(s) URL: {url!r}")
    conn_class = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    conn = conn_class(parts.hostname, parts.port, timeout=timeout)
    target = parts.path or "/"
    if parts.query:
        target += "?" + parts.query
    try:
        conn.request("GET", target, headers={"Accept": "*/*", "User-Agent": "mcpd-conformance-driver"})
        resp = conn.getresponse()
        body = resp.read(64 * 1024)
        return resp.status, resp, body
    except OSError as e:
        raise Failure(f"GET {url} failed: {e}") from e
    finally:
        conn.close()


def cmd_redirect(args):
    status, resp, body = http_get(args.url, timeout=10)
    location = resp.getheader("Location")
    if not (300 <= status < 400) or not location:
        raise Failure(
            f"GET {args.url} answered {status} without a redirect"
            f"{' (Location: ' + location + ')' if location else ''}: {cut(body.decode('utf-8', 'replace'))}"
        )
    print(urllib.parse.urljoin(args.url, location))
    return EXIT_OK


def cmd_get(args):
    status, _resp, body = http_get(args.url, timeout=10)
    print(status, cut(body.decode("utf-8", "replace")))
    return EXIT_OK if 200 <= status < 300 else EXIT_FAIL


# ---------------------------------------------------------------- mcpd ctl status


def server_status(mcpd, sock, server, timeout):
    """The server's row of `mcpd ctl status --json`, or None if the daemon does not answer."""
    try:
        out = subprocess.run(
            [mcpd, "ctl", "--socket", sock, "status", "--json"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=max(timeout, 0.5),
            check=False,
        )
    except subprocess.TimeoutExpired:
        return None
    if out.returncode != 0:
        return None
    try:
        status = json.loads(out.stdout)
    except ValueError:
        raise Failure(f"`mcpd ctl status --json` printed something that is not JSON: {cut(out.stdout)}")
    for row in status.get("servers") or []:
        if row.get("name") == server:
            return row
    raise Failure(f"`mcpd ctl status --json` lists no server {server!r}: {cut(out.stdout)}")


def describe(row):
    if row is None:
        return "no status (the daemon did not answer)"
    bits = [f"state {row.get('state')}"]
    for key in ("last_error", "catalog_error"):
        if row.get(key):
            bits.append(f"{key}: {row[key]}")
    return "; ".join(bits)


def login_hint(row):
    """What in a status row asks for `mcpd ctl login`, or None."""
    if not row:
        return None
    if row.get("state") == "needs-login":
        return row.get("last_error") or "needs-login"
    if row.get("state") == "ready" and LOGIN_HINT in str(row.get("catalog_error") or ""):
        return row.get("catalog_error")
    return None


def cmd_wait_state(args):
    deadline = time.monotonic() + args.deadline
    row = None
    while True:
        row = server_status(args.mcpd, args.socket, args.server, deadline - time.monotonic())
        state = row.get("state") if row else None
        if state == args.want:
            print(describe(row))
            return EXIT_OK
        if state == "failed":
            raise Failure(f"server {args.server!r} failed while waiting for {args.want}: {describe(row)}")
        if time.monotonic() >= deadline:
            raise Failure(
                f"server {args.server!r} did not reach {args.want} within {args.deadline:g} s; last seen: {describe(row)}"
            )
        time.sleep(0.1)


# ---------------------------------------------------------------- the scenario's context

# What each scenario's context must carry: values printed for the config, and values
# written to a file in --dir (name -> file). A scenario not listed here gets the
# pre-registered client of auth/pre-registration when its context has a client_id.
CONTEXT_PRINTED = {
    "auth/client-credentials-basic": ["client_id"],
    "auth/client-credentials-jwt": ["client_id"],
    "auth/wif-jwt-bearer": ["client_id"],
    "auth/enterprise-managed-authorization": ["client_id", "idp_issuer", "idp_client_id", "idp_token_endpoint"],
}
CONTEXT_FILES = {
    "auth/client-credentials-basic": {"client_secret": "conformance-client"},
    "auth/client-credentials-jwt": {"private_key_pem": "conformance-key.pem"},
    "auth/wif-jwt-bearer": {"valid_jwt": "conformance-assertion.jwt"},
    "auth/enterprise-managed-authorization": {
        "client_secret": "conformance-client",
        "idp_id_token": "conformance-id-token",
    },
}


def write_secret(path, text):
    """Creates PATH 0600 (never replacing a file) and writes TEXT."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.fchmod(fd, 0o600)
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def cmd_context(args):
    raw = os.environ.get("MCP_CONFORMANCE_CONTEXT") or ""
    try:
        ctx = json.loads(raw) if raw else {}
    except ValueError:
        raise Failure("MCP_CONFORMANCE_CONTEXT is not JSON")
    if not isinstance(ctx, dict):
        raise Failure("MCP_CONFORMANCE_CONTEXT is not a JSON object")

    def value(key, one_line=True, required=True):
        v = ctx.get(key)
        if v is None or v == "":
            if required:
                raise Failure(f"the context of {args.scenario} has no {key}")
            return ""
        if not isinstance(v, str) or (one_line and "\n" in v):
            raise Failure(f"the context's {key} is not a {'one-line ' if one_line else ''}string")
        return v

    if args.scenario in CONTEXT_PRINTED:
        printed = {k: value(k) for k in CONTEXT_PRINTED[args.scenario]}
        files, required = CONTEXT_FILES[args.scenario], True
        if args.scenario == "auth/client-credentials-jwt":
            alg = value("signing_algorithm", required=False)
            if alg not in ("", "ES256"):
                raise Failure(f"the context asks for {alg}; the driver configures its P-256 key (ES256)")
            if "-----BEGIN PRIVATE KEY-----" not in value("private_key_pem", one_line=False):
                raise Failure("the context's private_key_pem is not a PKCS#8 PEM")
    else:
        # auth/pre-registration, or any other context with a client: a pre-registered client,
        # with its secret when it has one.
        printed = {"client_id": value("client_id", required=False)}
        files = {"client_secret": "conformance-client"} if printed["client_id"] else {}
        required = False
    for key, name in files.items():
        text = value(key, one_line=key != "private_key_pem", required=required)
        if text:
            write_secret(os.path.join(args.dir, name), text)
            printed[key + "_file"] = name
    for k, v in printed.items():
        print(f"{k}={v}")
    return EXIT_OK


# ---------------------------------------------------------------- the agent


class Agent:
    """A line-speaking JSON-RPC client on mcpd's Unix socket."""

    def __init__(self, path, deadline):
        self.deadline = deadline
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.remaining())
        try:
            self.sock.connect(path)
        except OSError as e:
            raise Failure(f"cannot connect to mcpd's socket {path}: {e}") from e
        self.buf = b""
        self.next_id = 1

    def remaining(self):
        return max(self.deadline - time.monotonic(), 0.01)

    def send(self, msg):
        self.sock.settimeout(self.remaining())
        self.sock.sendall(json.dumps(msg, separators=(",", ":")).encode() + b"\n")

    def read_message(self):
        while b"\n" not in self.buf:
            self.sock.settimeout(self.remaining())
            try:
                chunk = self.sock.recv(65536)
            except socket.timeout:
                raise Failure("mcpd did not answer before the driver's deadline")
            if not chunk:
                raise Failure(f"mcpd closed the agent connection{': ' + cut(self.buf) if self.buf else ''}")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        line = line.strip()
        if not line:
            return self.read_message()
        try:
            return json.loads(line)
        except ValueError:
            raise Failure(f"mcpd sent a line that is not JSON: {cut(line.decode('utf-8', 'replace'))}")

    def request(self, method, params=None):
        """The result of one request; a JSON-RPC error is raised as NeedsLogin or Failure."""
        rid = self.next_id
        self.next_id += 1
        msg = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            msg["params"] = params
        self.send(msg)
        while True:
            got = self.read_message()
            if "method" in got:
                self.answer(got)
                continue
            if got.get("id") != rid:
                continue  # a reply to nothing we sent: ignore it
            if "error" in got:
                err = got["error"] or {}
                text = f"{method} failed with JSON-RPC error {err.get('code')}: {err.get('message')}"
                if err.get("data") is not None:
                    text += f" (data: {cut(json.dumps(err['data']))})"
                if LOGIN_HINT in str(err.get("message", "")):
                    raise NeedsLogin(text)
                raise Failure(text)
            return got.get("result")

    def answer(self, msg):
        """Requests from mcpd to the agent: ping is answered, the rest refused; notifications ignored."""
        if "id" not in msg:
            return
        if msg.get("method") == "ping":
            self.send({"jsonrpc": "2.0", "id": msg["id"], "result": {}})
        else:
            self.send(
                {
                    "jsonrpc": "2.0",
                    "id": msg["id"],
                    "error": {"code": -32601, "message": f"the conformance driver does not handle {msg.get('method')}"},
                }
            )

    def notify(self, method, params=None):
        msg = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            msg["params"] = params
        self.send(msg)

    def tool_names(self):
        names, cursor = [], None
        for _ in range(100):
            result = self.request("tools/list", {"cursor": cursor} if cursor else {})
            names += [t.get("name") for t in (result or {}).get("tools") or []]
            cursor = (result or {}).get("nextCursor")
            if not cursor:
                return names
        raise Failure("tools/list kept returning a nextCursor (100 pages)")


def cmd_call(args):
    deadline = time.monotonic() + args.deadline
    agent = Agent(args.socket, deadline)
    init = agent.request(
        "initialize",
        {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "mcpd-conformance-auth-driver", "version": "1.0.0"},
        },
    )
    say(f"agent initialized (mcpd {cut(json.dumps((init or {}).get('serverInfo')), 120)})")
    agent.notify("notifications/initialized")

    # The server may need a moment after the login to be ready and list its tools. While
    # the tool is missing, `ctl status` may say that mcpd wants another login: the server
    # is in needs-login, or it is ready but its tool list was refused for want of a login
    # or of scope (a catalog_error naming `mcpd ctl login`). Right after a login such a
    # status may still be the one from before it (the daemon starts the server after it
    # answers ctl login), so it counts once the status has changed since this call began,
    # or has stayed as it is for --settle seconds.
    began = time.monotonic()
    first = None
    changed = False
    row = None
    while True:
        names = agent.tool_names()
        if args.tool in names:
            break
        row = server_status(args.mcpd, args.socket, args.server, min(agent.remaining(), 5))
        state = row.get("state") if row else None
        if state == "failed":
            raise Failure(f"server {args.server!r} failed before listing {args.tool}: {describe(row)}")
        hint = login_hint(row)
        seen = (state, hint)
        if first is None:
            first = seen
        elif seen != first:
            changed = True
        if hint and (changed or time.monotonic() - began >= args.settle):
            raise NeedsLogin(f"{args.tool} is not listed and `mcpd ctl status` asks for a login: {describe(row)}")
        if time.monotonic() >= deadline:
            raise Failure(
                f"{args.tool} was not listed before the deadline (tools listed: {names or 'none'}); "
                f"server {args.server!r}: {describe(row)}"
            )
        time.sleep(0.2)

    result = agent.request("tools/call", {"name": args.tool, "arguments": {}}) or {}
    texts = [c.get("text", "") for c in result.get("content") or [] if c.get("type") == "text"]
    if result.get("isError"):
        raise Failure(f"tools/call {args.tool} returned a tool error: {cut(' '.join(texts) or json.dumps(result))}")
    print(" ".join(texts) if texts else json.dumps(result))
    return EXIT_OK


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("redirect")
    r.add_argument("url")
    g = sub.add_parser("get")
    g.add_argument("url")
    c = sub.add_parser("context")
    c.add_argument("--scenario", required=True)
    c.add_argument("--dir", required=True, help="where the key and token files go (it exists)")
    for name in ("wait-state", "call"):
        s = sub.add_parser(name)
        s.add_argument("--mcpd", required=True)
        s.add_argument("--socket", required=True)
        s.add_argument("--server", required=True)
        s.add_argument("--deadline", type=float, required=True, help="seconds")
        if name == "wait-state":
            s.add_argument("--want", required=True)
        else:
            s.add_argument("--tool", required=True)
            s.add_argument("--settle", type=float, default=3.0,
                           help="seconds after which an unchanged status asking for a login counts (default 3)")
    args = p.parse_args()
    run = {"redirect": cmd_redirect, "get": cmd_get, "wait-state": cmd_wait_state, "call": cmd_call,
           "context": cmd_context}[args.cmd]
    try:
        return run(args)
    except NeedsLogin as e:
        say(str(e))
        return EXIT_LOGIN
    except Failure as e:
        say(str(e))
        return EXIT_FAIL
    except OSError as e:
        say(f"{args.cmd}: {e}")
        return EXIT_FAIL
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
