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
import os
import signal
import sys
from contextlib import asynccontextmanager
from typing import Any

import helpers
import mcp.client.session as mcp_session
from helpers import MODERN, TapReadStream, Wire, dump, list_all
from mcp import types
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

PROG = "py_era_client"
MODES = ("legacy", "auto", "modern", "modern-direct")
USAGE = (
    "usage: py_era_client.py [--mode legacy|auto|modern|modern-direct] [--timeout SECS] "
    "[--probe-timeout SECS] --call TOOL [--args JSON] -- COMMAND [ARGS...]"
)


def parse_argv(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    parser = argparse.ArgumentParser(prog="py_era_client.py", description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--mode", default="auto", choices=MODES, help="era negotiation")
    parser.add_argument("--call", required=True, metavar="TOOL", help="tool to call")
    parser.add_argument("--args", default="{}", metavar="JSON", help="tool arguments, a JSON object")
    parser.add_argument("--timeout", type=float, default=60.0, metavar="SECS", help="bound on the whole run")
    parser.add_argument("--probe-timeout", type=float, default=None, metavar="SECS", help="server/discover timeout")
    ns, command = helpers.parse_with_command(PROG, parser, argv, USAGE)
    if ns.timeout <= 0 or (ns.probe_timeout is not None and ns.probe_timeout <= 0):
        helpers.fail(PROG, "--timeout and --probe-timeout must be positive", 2)
    ns.tool_args = helpers.tool_args(PROG, ns.args)
    return ns, command


def tapped_stdio(params: StdioServerParameters, wire: Wire) -> Any:
    @asynccontextmanager
    async def transport() -> Any:
        async with stdio_client(params, errlog=sys.stderr) as (read, write):
            yield TapReadStream(read, wire), write

    return transport()


async def run(ns: argparse.Namespace, command: list[str]) -> dict[str, Any]:
    if ns.probe_timeout is not None:
        mcp_session.DISCOVER_TIMEOUT_SECONDS = ns.probe_timeout

    elicitations, on_elicit = helpers.elicitation_answerer()

    wire = Wire()
    params = helpers.stdio_params(command)
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

        tools = await list_all("tools/list", lambda c: client.list_tools(cursor=c), "tools")

        result = await client.call_tool(ns.call, ns.tool_args)
        version = client.protocol_version
        server_info = client.server_info
        return {
            "client": "py",
            "mode": ns.mode,
            "era": "modern" if version == MODERN else "legacy",
            "protocolVersion": version,
            "serverInfo": dump(server_info) if server_info is not None else None,
            "tools": sorted(t.name for t in tools),
            "call": dump(result),
            "elicitations": elicitations,
            "wire": wire.as_json(),
        }


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
    helpers.fail(PROG, msg, code)


def main() -> None:
    ns, command = parse_argv(sys.argv[1:])
    # The handler SIGKILLs the server (which may not watch its stdin) and exits.
    helpers.terminated_with_parent(PROG, lambda: kill_children_and_exit("terminated (parent died?)", 1))
    helpers.run_and_print(
        PROG, ns.timeout, lambda: run(ns, command), on_hard_deadline=kill_children_and_exit, codes=True
    )


if __name__ == "__main__":
    main()
