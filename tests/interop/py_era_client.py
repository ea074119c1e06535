#!/usr/bin/env python3
"""Interop peer: a stdio MCP client written with the official Python SDK, both eras.

    py_era_client.py [--mode legacy|auto|modern|modern-direct] [--timeout SECS]
                     [--probe-timeout SECS] --call TOOL [--args JSON] -- COMMAND [ARGS...]

Spawns COMMAND as a stdio MCP server (for mcpd's tests: `mcpd connect --socket PATH`) with
the SDK's high-level `mcp.Client`, connects in the chosen era mode, lists every tool
(following `nextCursor`), calls TOOL with the JSON object ARGS, and prints exactly one line
of JSON on stdout, the same shape as ts2_client.mjs:

    {"client":"py","mode":"auto","era":"modern","protocolVersion":"2026-07-28",
     "serverInfo":{...}|null,"tools":[sorted names],"call":{...},
     "elicitations":[{"mode":"form","message":"..."}],
     "wire":{"elicitationRequests":0,"inputRequiredResults":1}}

--mode (default auto; `Client(mode=...)` in mcp/client/client.py):
  legacy         mode="legacy": plain `initialize` handshake.
  auto           mode="auto" (the SDK's default): `server/discover` IN PLACE on the session
                 process (no sibling process, unlike the TS SDK), with a 10 s timeout; any
                 JSON-RPC error (or a timeout) falls back to `initialize` on the same pipe,
                 except -32022 naming only modern versions this client lacks. A server that
                 exits on the probe fails the run.
  modern         mode="2026-07-28" (the SDK adopts the version without any wire traffic),
                 then an explicit `server/discover` (`session.send_discover`) whose result is
                 adopted, so a legacy server fails the run clearly (like the TS `{pin}` mode)
                 and `serverInfo` is the server's. No fallback.
  modern-direct  mode="2026-07-28" alone: no probe at all; the first request on the wire is
                 `tools/list` with the 2026-07-28 `_meta` envelope. `serverInfo` is null.
--probe-timeout sets the SDK's probe timeout (module constant
`mcp.client.session.DISCOVER_TIMEOUT_SECONDS`, default 10 s) for auto and modern.

Elicitation: an `elicitation_callback` (which makes the client declare
`elicitation: {form: {}, url: {}}`) answers every form request with
{action: "accept", content: {name: "Ada"}} and declines URL requests. The SDK routes both a
legacy server->client `elicitation/create` request and the requests embedded in a modern
`input_required` result (`Client.call_tool` retries with `inputResponses`) through it.
`elicitations` lists what it was asked; `wire` counts, after connect, the server->client
`elicitation/create` requests and the `input_required` results read from the server.

`call` is the SDK's CallToolResult dumped with by_alias=True, exclude_none=True; the 2.x
SDK always adds "isError": false and "resultType": "complete". The response cache is
disabled (`cache=None`). Exit codes as py_client.py: 0 result printed (check
call.isError), 1 any failure (`py_era_client: error: ...` on stderr, stdout empty),
2 usage, 124 timeout (--timeout, default 60 s; a hard SIGALRM stop at timeout + 10 s).
The server inherits our whole environment; its stderr goes to our stderr. stdin is never
read. When our parent dies (PR_SET_PDEATHSIG -> SIGTERM), on SIGTERM, and at the hard
deadline, we SIGKILL our child processes (the server) and exit 1 (124 at the deadline).
Run it with target/peers/venv/bin/python.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import signal
import sys
import traceback
from contextlib import asynccontextmanager
from typing import Any

import anyio
import mcp.client.session as mcp_session
from mcp import types
from mcp.client import Client
from mcp.client.session import ClientRequestContext
from mcp.client.stdio import StdioServerParameters, stdio_client

PROG = "py_era_client"
MODERN = "2026-07-28"
MAX_PAGES = 1000
MODES = ("legacy", "auto", "modern", "modern-direct")
USAGE = (
    "usage: py_era_client.py [--mode legacy|auto|modern|modern-direct] [--timeout SECS] "
    "[--probe-timeout SECS] --call TOOL [--args JSON] -- COMMAND [ARGS...]"
)


def fail(msg: str, code: int = 1) -> None:
    print(f"{PROG}: error: {msg}", file=sys.stderr, flush=True)
    # os._exit: don't wait on SDK tasks or a stuck child during interpreter teardown.
    os._exit(code)


def parse_argv(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    if "--" not in argv:
        fail(USAGE, 2)
    split = argv.index("--")
    own, command = argv[:split], argv[split + 1 :]
    parser = argparse.ArgumentParser(prog="py_era_client.py", description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--mode", default="auto", choices=MODES, help="era negotiation")
    parser.add_argument("--call", required=True, metavar="TOOL", help="tool to call")
    parser.add_argument("--args", default="{}", metavar="JSON", help="tool arguments, a JSON object")
    parser.add_argument("--timeout", type=float, default=60.0, metavar="SECS", help="bound on the whole run")
    parser.add_argument("--probe-timeout", type=float, default=None, metavar="SECS", help="server/discover timeout")
    ns = parser.parse_args(own)
    if not command:
        fail("no server COMMAND after --", 2)
    if ns.timeout <= 0 or (ns.probe_timeout is not None and ns.probe_timeout <= 0):
        fail("--timeout and --probe-timeout must be positive", 2)
    try:
        ns.tool_args = json.loads(ns.args)
    except json.JSONDecodeError as e:
        fail(f"--args is not valid JSON: {e}", 2)
    if not isinstance(ns.tool_args, dict):
        fail("--args must be a JSON object", 2)
    return ns, command


def dump(model: Any) -> Any:
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


class Wire:
    """Counts server->client elicitation requests and input_required results."""

    def __init__(self) -> None:
        self.armed = False
        self.elicitation_requests = 0
        self.input_required_results = 0

    def record(self, item: Any) -> None:
        if not self.armed:
            return
        message = getattr(item, "message", None)
        if isinstance(message, types.JSONRPCRequest) and message.method == "elicitation/create":
            self.elicitation_requests += 1
        elif isinstance(message, types.JSONRPCResponse) and message.result.get("resultType") == "input_required":
            self.input_required_results += 1

    def as_json(self) -> dict[str, int]:
        return {"elicitationRequests": self.elicitation_requests, "inputRequiredResults": self.input_required_results}


class TapReadStream:
    """A read stream that shows every item to `Wire` on its way to the SDK."""

    def __init__(self, inner: Any, wire: Wire) -> None:
        self._inner = inner
        self._wire = wire

    async def receive(self) -> Any:
        item = await self._inner.receive()
        self._wire.record(item)
        return item

    def __aiter__(self) -> TapReadStream:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> TapReadStream:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()

    def __getattr__(self, name: str) -> Any:  # e.g. last_context
        return getattr(self._inner, name)


def tapped_stdio(params: StdioServerParameters, wire: Wire) -> Any:
    @asynccontextmanager
    async def transport() -> Any:
        async with stdio_client(params, errlog=sys.stderr) as (read, write):
            yield TapReadStream(read, wire), write

    return transport()


async def run(ns: argparse.Namespace, command: list[str]) -> dict[str, Any]:
    if ns.probe_timeout is not None:
        mcp_session.DISCOVER_TIMEOUT_SECONDS = ns.probe_timeout

    elicitations: list[dict[str, Any]] = []

    async def on_elicit(
        _ctx: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult | types.ErrorData:
        mode = getattr(params, "mode", None) or "form"
        elicitations.append({"mode": mode, "message": params.message})
        if mode != "form":
            return types.ElicitResult(action="decline")
        return types.ElicitResult(action="accept", content={"name": "Ada"})

    wire = Wire()
    params = StdioServerParameters(command=command[0], args=command[1:], env=dict(os.environ))
    sdk_mode = ns.mode if ns.mode in ("legacy", "auto") else MODERN
    client = Client(
        tapped_stdio(params, wire),
        mode=sdk_mode,
        read_timeout_seconds=ns.timeout,
        client_info=types.Implementation(name="mcpd-interop-py-era-client", version="0.1.0"),
        elicitation_callback=on_elicit,
        cache=None,
    )
    async with client:
        session = client.session
        if ns.mode == "modern":
            # The SDK's pin adopts without wire traffic; verify it against the server.
            raw = await session.send_discover(MODERN)
            session.adopt(types.DiscoverResult.model_validate(raw))
        wire.armed = True

        tools: list[str] = []
        cursor: str | None = None
        seen: set[str] = set()
        for _ in range(MAX_PAGES):
            page = await client.list_tools(cursor=cursor)
            tools.extend(t.name for t in page.tools)
            cursor = page.next_cursor
            if cursor is None:
                break
            if cursor in seen:
                raise RuntimeError(f"tools/list returned cursor {cursor!r} twice")
            seen.add(cursor)
        else:
            raise RuntimeError(f"tools/list did not finish within {MAX_PAGES} pages")

        result = await client.call_tool(ns.call, ns.tool_args)
        version = client.protocol_version
        server_info = client.server_info
        return {
            "client": "py",
            "mode": ns.mode,
            "era": "modern" if version == MODERN else "legacy",
            "protocolVersion": version,
            "serverInfo": dump(server_info) if server_info is not None else None,
            "tools": sorted(tools),
            "call": dump(result),
            "elicitations": elicitations,
            "wire": wire.as_json(),
        }


def describe(exc: BaseException) -> str:
    # anyio task groups wrap failures in ExceptionGroups; show the leaves.
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(describe(e) for e in exc.exceptions)
    code = getattr(getattr(exc, "error", None), "code", None)
    text = str(exc)
    name = type(exc).__name__ + (f" (code {code})" if code is not None else "")
    return f"{name}: {text}" if text else name


def child_pids() -> list[int]:
    """Our direct children (Linux /proc): the server process."""
    me, pids = os.getpid(), []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", encoding="utf-8", errors="replace") as f:
                stat = f.read()
        except OSError:
            continue
        # pid (comm) state ppid ...; comm may contain spaces and parentheses.
        if int(stat[stat.rindex(")") + 2 :].split()[1]) == me:
            pids.append(int(name))
    return pids


def kill_children_and_exit(msg: str, code: int) -> None:
    for pid in child_pids():
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    fail(msg, code)


def die_with_parent() -> None:
    # SIGTERM from the kernel when the parent dies (PR_SET_PDEATHSIG is 1); the handler
    # SIGKILLs the server (which may not watch its stdin) and exits. Also catch a parent that
    # died before the prctl call.
    parent = os.getppid()
    signal.signal(signal.SIGTERM, lambda _s, _f: kill_children_and_exit("terminated (parent died?)", 1))
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)
    if os.getppid() != parent:
        fail("parent died")


def main() -> None:
    ns, command = parse_argv(sys.argv[1:])
    die_with_parent()

    # Hard backstop: if the SDK's own shutdown wedges past the deadline, die anyway.
    def on_alarm(_signum: int, _frame: Any) -> None:
        kill_children_and_exit(f"timed out after {ns.timeout:g}s (hard deadline)", 124)

    signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(int(ns.timeout) + 10)

    async def bounded() -> dict[str, Any]:
        with anyio.fail_after(ns.timeout):
            return await run(ns, command)

    try:
        out = anyio.run(bounded)
    except TimeoutError:
        fail(f"timed out after {ns.timeout:g}s", 124)
    except BaseException as e:  # noqa: BLE001 - report everything, including ExceptionGroups
        if os.environ.get("MCPD_INTEROP_DEBUG"):
            traceback.print_exception(e)
        fail(describe(e))
    signal.alarm(0)
    sys.stdout.write(json.dumps(out, separators=(",", ":")) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
