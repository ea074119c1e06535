#!/usr/bin/env python3
"""The conformance suite's client driver for mcpd as an MCP client (the non-auth client scenarios).

The suite runs it as

  conformance client --command tests/conformance/client/scenario-driver.py --scenario NAME

and appends the scenario server's URL as the last argument. The driver plays a user with
one agent: it writes an mcpd config whose only server is that URL (`[servers.test]`,
`protocol = "modern"` at 2026-07-28 or later, else "legacy"), starts `mcpd serve`, waits
for `mcpd ctl status` to show the server `ready`, then starts `mcpd connect` and speaks to
it as an agent over stdio (one JSON-RPC message per line) doing what the scenario asks of
a client: calling its tools (under their mcpd names, `test__TOOL`), reading its
resources and prompts, answering elicitations. mcpd is the client the suite checks.

What the agent does, by scenario (every scenario first lists tools):
  the context's toolCalls      (http-custom-headers) each call, as given
  tools_call                   test__add_numbers {a: 2, b: 3}
  elicitation-sep1034-client-defaults
                               call test__test_client_elicitation_defaults; the agent
                               accepts mcpd's elicitation with every field's schema default
                               (what an SDK client with applyDefaults does)
  sse-retry                    call test__test_reconnection
  sep-2322-client-request-state
                               call test__test_mrtr_echo_state, test__test_mrtr_no_state,
                               test__test_mrtr_no_result_type, and test__test_mrtr_unrelated
                               between the echo-state rounds. A modern agent answers each
                               input_required result by retrying with inputResponses (and
                               the requestState it got, untouched); a legacy agent never
                               sees those rounds: mcpd turns them into elicitation requests
                               to the agent and retries itself
  http-standard-headers        call every tool, read every resource, get every prompt
  json-schema-2020-12-preservation
                               call test__json_schema_echo with the inputSchema the agent
                               got for test__json_schema_2020_12_tool
  anything else                call every listed tool, with arguments made from its schema
                               (http-invalid-tool-headers: mcpd must not list the invalid ones)
  initialize, request-metadata and json-schema-ref-no-deref need only the listing.

Environment (set by the suite):
  MCP_CONFORMANCE_SCENARIO          the scenario
  MCP_CONFORMANCE_PROTOCOL_VERSION  the wire version; 2026-07-28 or later: protocol = "modern"
  MCP_CONFORMANCE_CONTEXT           JSON; its toolCalls are made as given
and (optional, set by tests/conformance/client-scenarios.sh or by hand):
  MCPD_BIN                  the mcpd binary (default: target/debug/mcpd)
  MCPD_CLIENT_AGENT         legacy or modern: the agent's era (default: modern at
                            2026-07-28 or later, else legacy)
  MCPD_CLIENT_PROTOCOL      the server's `protocol` setting instead (legacy, modern, auto)
  MCPD_CLIENT_DRIVER_DEADLINE  seconds for the whole run (default 25; the suite kills its
                            client after 30 s)
  MCPD_CLIENT_DRIVER_LOGS   a directory: mcpd's log and config are copied there as
                            <scenario>[.<agent>].* before the temp dir goes
  MCPD_CLIENT_DRIVER_LOG_LEVEL  mcpd's --log-level (default info,mcpd=debug)

Exit status: 0 when every step succeeded; 1 otherwise, with the cause and the end of mcpd's
log on stderr; 2 for a usage error. Python 3.8+ standard library only. Each run has its own
temp dir; the daemon and `mcpd connect` are stopped and the dir removed on every exit.
"""

import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time

PREFIX = "mcpd-client-driver:"
SERVER = "test"
MODERN = "2026-07-28"
LEGACY = "2025-11-25"


def say(*parts):
    print(PREFIX, *parts, file=sys.stderr, flush=True)


class Failure(Exception):
    """A cause the driver reports, then exits 1."""


def cut(text, n=400):
    text = " ".join(str(text).split())
    return text if len(text) <= n else text[:n] + "…"


def toml_str(s):
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in s):
        raise Failure(f"refusing to write a control character into the config: {s!r}")
    return json.dumps(s)  # a JSON string without control characters is a TOML basic string


# ---------------------------------------------------------------- the agent


class Agent:
    """An agent on `mcpd connect`'s stdio, in one era."""

    def __init__(self, proc, era, deadline):
        self.proc, self.era, self.deadline = proc, era, deadline
        self.buf = b""
        self.next_id = 1
        self.fd = proc.stdout.fileno()
        # Run once, before answering mcpd's next elicitation request (a call made while
        # another call waits for the agent's input).
        self.before_elicit = None

    def remaining(self):
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise Failure("the driver's deadline passed while waiting for mcpd")
        return left

    def send(self, msg):
        try:
            self.proc.stdin.write(json.dumps(msg, separators=(",", ":")).encode() + b"\n")
            self.proc.stdin.flush()
        except OSError as e:
            raise Failure(f"mcpd connect no longer reads its input: {e}") from e

    def read_message(self):
        while b"\n" not in self.buf:
            ready, _, _ = select.select([self.fd], [], [], self.remaining())
            if not ready:
                continue
            chunk = os.read(self.fd, 65536)
            if not chunk:
                raise Failure(f"mcpd connect closed its output (exit status {self.proc.poll()})")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        if not line.strip():
            return self.read_message()
        try:
            return json.loads(line)
        except ValueError:
            raise Failure(f"mcpd connect wrote a line that is not JSON: {cut(line.decode('utf-8', 'replace'))}")

    def envelope(self, params):
        params = dict(params or {})
        if self.era == "modern":
            meta = dict(params.get("_meta") or {})
            meta.update(
                {
                    "io.modelcontextprotocol/protocolVersion": MODERN,
                    "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}},
                    "io.modelcontextprotocol/clientInfo": {"name": "mcpd-conformance-agent", "version": "1.0.0"},
                }
            )
            params["_meta"] = meta
        return params

    def request(self, method, params=None):
        """The result of one request; a JSON-RPC error is a Failure."""
        rid = self.next_id
        self.next_id += 1
        self.send({"jsonrpc": "2.0", "id": rid, "method": method, "params": self.envelope(params)})
        while True:
            got = self.read_message()
            if "method" in got:
                self.serve(got)
                continue
            if got.get("id") != rid:
                continue
            if "error" in got:
                err = got["error"] or {}
                data = f" (data: {cut(json.dumps(err.get('data')))})" if err.get("data") is not None else ""
                raise Failure(f"{method} failed with JSON-RPC error {err.get('code')}: {err.get('message')}{data}")
            return got.get("result") or {}

    def serve(self, msg):
        """mcpd's requests to a legacy agent: elicitation is accepted, ping answered."""
        if "id" not in msg:
            return
        method = msg.get("method")
        if method == "elicitation/create":
            hook, self.before_elicit = self.before_elicit, None
            if hook:
                hook()
            result = {"action": "accept", "content": fill(msg.get("params", {}).get("requestedSchema"))}
            say(f"mcpd asked the agent for elicitation; accepting with {json.dumps(result['content'])}")
        elif method == "ping":
            result = {}
        else:
            self.send({"jsonrpc": "2.0", "id": msg["id"],
                       "error": {"code": -32601, "message": f"the conformance agent does not handle {method}"}})
            return
        self.send({"jsonrpc": "2.0", "id": msg["id"], "result": result})

    def listing(self, method, key):
        items, cursor = [], None
        for _ in range(100):
            result = self.request(method, {"cursor": cursor} if cursor else {})
            items += result.get(key) or []
            cursor = result.get("nextCursor")
            if not cursor:
                return items
        raise Failure(f"{method} kept returning a nextCursor (100 pages)")

    def call(self, name, arguments, extra=None):
        params = {"name": name, "arguments": arguments}
        params.update(extra or {})
        result = self.request("tools/call", params)
        if result.get("resultType") == "input_required":
            return result
        if result.get("isError"):
            raise Failure(f"tools/call {name} returned a tool error: {cut(json.dumps(result))}")
        say(f"tools/call {name}: {cut(json.dumps(result.get('content')), 200)}")
        return result

    def call_through(self, name, arguments, between=None):
        """A call, with a modern agent's input_required rounds answered (at most 5)."""
        result = self.call(name, arguments)
        for _ in range(5):
            if result.get("resultType") != "input_required":
                return result
            if between:
                between()
                between = None
            extra = {"inputResponses": answers(result.get("inputRequests") or {})}
            if "requestState" in result:
                extra["requestState"] = result["requestState"]
            say(f"tools/call {name}: input_required; retrying with {json.dumps(extra)}")
            result = self.call(name, arguments, extra)
        raise Failure(f"tools/call {name} still asked for input after 5 rounds")


def fill(schema):
    """Elicitation content: each property's default, else a plain value of its type."""
    content = {}
    for key, prop in ((schema or {}).get("properties") or {}).items():
        if "default" in prop:
            content[key] = prop["default"]
        elif prop.get("enum"):
            content[key] = prop["enum"][0]
        else:
            content[key] = {"boolean": True, "integer": 1, "number": 1, "string": "test"}.get(prop.get("type"), "test")
    return content


def answers(requests):
    """A modern agent's inputResponses for an input_required result's inputRequests."""
    out = {}
    for key, req in requests.items():
        method = (req or {}).get("method")
        if method == "elicitation/create":
            out[key] = {"action": "accept", "content": fill(req.get("params", {}).get("requestedSchema"))}
        else:
            raise Failure(f"the conformance agent cannot answer an input request for {method}")
    return out


def arguments_for(tool):
    """Arguments for a tool from its input schema: a plain value for each required property."""
    schema = tool.get("inputSchema") or {}
    props = schema.get("properties") or {}
    args = {}
    for key in schema.get("required") or []:
        kind = (props.get(key) or {}).get("type")
        args[key] = {"boolean": True, "integer": 1, "number": 1, "object": {}, "array": []}.get(kind, "test")
    return args


# ---------------------------------------------------------------- scenarios


def ours(name):
    return f"{SERVER}__{name}"


def run_scenario(agent, scenario, context):
    tools = agent.listing("tools/list", "tools")
    names = [t.get("name") for t in tools]
    say(f"tools/list: {names}")
    by_name = {t.get("name"): t for t in tools}

    def need(name):
        if ours(name) not in by_name:
            raise Failure(f"{ours(name)} is not listed (tools: {names})")
        return ours(name)

    if context.get("toolCalls"):
        for call in context["toolCalls"]:
            agent.call_through(need(call["name"]), call.get("arguments") or {})
    elif scenario in ("initialize", "request-metadata", "json-schema-ref-no-deref"):
        pass
    elif scenario == "tools_call":
        agent.call_through(need("add_numbers"), {"a": 2, "b": 3})
    elif scenario == "elicitation-sep1034-client-defaults":
        agent.call_through(need("test_client_elicitation_defaults"), {})
    elif scenario == "sse-retry":
        agent.call_through(need("test_reconnection"), {})
    elif scenario == "sep-2322-client-request-state":
        # test_mrtr_unrelated is called while test_mrtr_echo_state waits for input: between
        # a modern agent's rounds, or, for a legacy agent, while mcpd's elicitation request
        # for it is unanswered.
        unrelated = need("test_mrtr_unrelated")
        between = lambda: agent.call_through(unrelated, {})  # noqa: E731
        if agent.era == "legacy":
            agent.before_elicit, between = between, None
        agent.call_through(need("test_mrtr_echo_state"), {}, between=between)
        if agent.before_elicit:
            raise Failure("mcpd never asked the legacy agent for the input test_mrtr_echo_state needs")
        agent.call_through(need("test_mrtr_no_state"), {})
        agent.call_through(need("test_mrtr_no_result_type"), {})
    elif scenario == "json-schema-2020-12-preservation":
        schema = by_name.get(need("json_schema_2020_12_tool"), {}).get("inputSchema")
        agent.call_through(need("json_schema_echo"), {"schema": schema})
    else:
        for tool in tools:
            agent.call_through(tool["name"], arguments_for(tool))
    if scenario == "http-standard-headers":
        for res in agent.listing("resources/list", "resources"):
            agent.request("resources/read", {"uri": res["uri"]})
            say(f"resources/read {res['uri']}: ok")
        for prompt in agent.listing("prompts/list", "prompts"):
            args = {a["name"]: "test" for a in prompt.get("arguments") or [] if a.get("required")}
            agent.request("prompts/get", {"name": prompt["name"], "arguments": args})
            say(f"prompts/get {prompt['name']}: ok")


# ---------------------------------------------------------------- mcpd


def ctl_state(mcpd, sock):
    """The server's row of `mcpd ctl status --json`, or None while the daemon does not answer."""
    try:
        out = subprocess.run([mcpd, "ctl", "--socket", sock, "status", "--json"], stdin=subprocess.DEVNULL,
                             capture_output=True, timeout=5, check=False)
    except subprocess.TimeoutExpired:
        return None
    if out.returncode != 0:
        return None
    try:
        rows = json.loads(out.stdout).get("servers") or []
    except ValueError:
        raise Failure(f"`mcpd ctl status --json` printed something that is not JSON: {cut(out.stdout)}")
    return next((r for r in rows if r.get("name") == SERVER), None)


def wait_ready(mcpd, sock, daemon, by):
    row = None
    while time.monotonic() < by:
        if daemon.poll() is not None:
            raise Failure(f"mcpd serve exited with status {daemon.returncode}")
        row = ctl_state(mcpd, sock)
        state = (row or {}).get("state")
        if state == "ready":
            return row
        if state in ("failed", "needs-login"):
            raise Failure(f"the server is {state}: {row.get('last_error')}")
        time.sleep(0.05)
    raise Failure(f"the server was not ready in time; last status: {row}")


def stop(proc, grace):
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        say(f"pid {proc.pid} did not stop within {grace}s of SIGTERM; killing it")
        proc.kill()
        proc.wait()


def main():
    if len(sys.argv) < 2 or not sys.argv[-1].startswith(("http://", "https://")):
        say(f"usage: {sys.argv[0]} [ARGS...] SERVER_URL (run by: conformance client --command {sys.argv[0]} --scenario NAME)")
        return 2
    url = sys.argv[-1]
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    version = os.environ.get("MCP_CONFORMANCE_PROTOCOL_VERSION") or LEGACY
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    modern = version >= MODERN
    era = os.environ.get("MCPD_CLIENT_AGENT") or ("modern" if modern else "legacy")
    protocol = os.environ.get("MCPD_CLIENT_PROTOCOL") or ("modern" if modern else "legacy")
    if era not in ("legacy", "modern") or protocol not in ("legacy", "modern", "auto"):
        say(f"MCPD_CLIENT_AGENT must be legacy or modern, MCPD_CLIENT_PROTOCOL legacy, modern or auto")
        return 2
    here = os.path.dirname(os.path.abspath(__file__))
    mcpd = os.environ.get("MCPD_BIN") or os.path.join(here, "..", "..", "..", "target", "debug", "mcpd")
    budget = float(os.environ.get("MCPD_CLIENT_DRIVER_DEADLINE") or 25)
    log_level = os.environ.get("MCPD_CLIENT_DRIVER_LOG_LEVEL") or "info,mcpd=debug"
    deadline = time.monotonic() + budget

    work = tempfile.mkdtemp(prefix="mcpd-client.", dir="/tmp")  # short: a socket path has ~108 bytes
    sock, cfg, log = (os.path.join(work, n) for n in ("mcpd.sock", "mcpd.toml", "mcpd.log"))
    daemon = connect = None
    status = 1
    try:
        with open(cfg, "w") as f:
            f.write(f"# written by tests/conformance/client/scenario-driver.py for {scenario or 'a manual run'} ({version})\n")
            f.write(f"[daemon]\nsocket = {toml_str(sock)}\nstate_dir = {toml_str(os.path.join(work, 'state'))}\n")
            f.write('shutdown_grace = "1s"\n\n')
            f.write(f"[servers.{SERVER}]\nurl = {toml_str(url)}\nprotocol = \"{protocol}\"\n")
        say(f"scenario {scenario or '?'} at {version}: server {url}, protocol {protocol}, {era} agent")
        with open(log, "wb") as out:
            daemon = subprocess.Popen([mcpd, "serve", "--config", cfg, "--socket", sock, "--log-level", log_level],
                                      stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT)
        row = wait_ready(mcpd, sock, daemon, min(deadline, time.monotonic() + 15))
        say(f"server ready: era {row.get('era')}, protocol {row.get('protocol_version')}")
        connect = subprocess.Popen([mcpd, "connect", "--socket", sock], stdin=subprocess.PIPE,
                                   stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        agent = Agent(connect, era, deadline)
        if era == "legacy":
            agent.request("initialize", {"protocolVersion": LEGACY, "capabilities": {"elicitation": {}},
                                         "clientInfo": {"name": "mcpd-conformance-agent", "version": "1.0.0"}})
            agent.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        run_scenario(agent, scenario, context)
        say("done")
        status = 0
    except Failure as e:
        say(f"FAILED: {e}")
        if os.path.exists(log):
            say("the end of mcpd's log (less the driver's status polling):")
            with open(log, errors="replace") as f:
                lines = [l for l in f if "method=mcpd/status" not in l and " agent connected" not in l
                         and " agent disconnected" not in l]
            for l in lines[-40:]:
                print("  mcpd|", l.rstrip(), file=sys.stderr)
    finally:
        if connect is not None:
            try:
                connect.stdin.close()
            except OSError:
                pass  # it is already gone
            stop(connect, 3)
        stop(daemon, 8)
        logs = os.environ.get("MCPD_CLIENT_DRIVER_LOGS")
        if logs:
            os.makedirs(logs, exist_ok=True)
            name = (scenario or "manual").replace("/", "_") + ("" if era == ("modern" if modern else "legacy") else f".{era}")
            name += "" if protocol == ("modern" if modern else "legacy") else f".{protocol}"
            for src, suffix in ((log, "mcpd.log"), (cfg, "mcpd.toml")):
                if os.path.exists(src):
                    shutil.copy(src, os.path.join(logs, f"{name}.{suffix}"))
        shutil.rmtree(work, ignore_errors=True)
    return status


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    sys.exit(main())
