#!/usr/bin/env python3
"""Interop peer: a Python SDK stdio client that runs a plan of steps against mcpd's discovery mode.

    py_discovery_client.py [--timeout SECS] [--wait SECS] --plan JSON -- COMMAND [ARGS...]

Spawns COMMAND as a stdio MCP server (for mcpd's tests: `mcpd connect --socket PATH
[--profile NAME]`), runs the `initialize` handshake (protocol 2025-11-25) with
`ClientSession`, then runs the steps of the JSON array PLAN in order, and prints exactly one
line of JSON on stdout (the same shape as ts_discovery_client.mjs and
ts2_discovery_client.mjs):

    {"client":"py","era":"legacy","protocolVersion":"2025-11-25","serverInfo":{...},
     "steps":[...one result per step...],"elicitations":[{"mode":"form","message":"..."}],
     "wire":{"elicitationRequests":1,"inputRequiredResults":0,"progressNotifications":2,
            "toolsListChanged":1}}

Steps and what each one records:
  {"op":"list"}                       -> {"op":"list","tools":[names in the server's order]}
                                         (one page; mcpd's discovery list has no cursor)
  {"op":"call","name":N,"arguments":{...},"progress":true?}
                                      -> {"op":"call","name":N,"result":{...}} or
                                         {"op":"call","name":N,"error":{"code","message","data"}}
                                         plus "progress":[{"progress","total","message"}]
                                         with "progress": true (a progress callback, so the
                                         SDK sends a progressToken and routes by it)
  {"op":"changed","count":K}          -> waits (up to --wait, default 10 s) until the
                                         message handler has seen K
                                         notifications/tools/list_changed in all:
                                         {"op":"changed","count":seen} (+ "timedOut":true)
  {"op":"run","argv":[...]}           -> runs a command to its end: {"op":"run","code":N}

Elicitation: every form request is answered {"action":"accept","content":{"name":"Ada"}}.
A JSON-RPC error of a call is a step result, not a failure. Exit codes: 0 printed, 1 any
failure (reason on stderr as `py_discovery_client: error: ...`), 2 usage, 124 timeout.
The server inherits our environment; its stderr goes to ours. Run it with
target/peers/venv/bin/python.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import anyio
import helpers
from helpers import TapReadStream, Wire, dump
from mcp import types
from mcp.client.session import ClientSession
from mcp.client.stdio import stdio_client
from mcp.shared.exceptions import MCPError

PROG = "py_discovery_client"
USAGE = "usage: py_discovery_client.py [--timeout SECS] [--wait SECS] --plan JSON -- COMMAND [ARGS...]"


class DiscoveryWire(Wire):
    """`Wire`, also counting notifications/tools/list_changed as read from the server."""

    def __init__(self) -> None:
        super().__init__(progress=True)
        self.tools_list_changed = 0

    def record(self, item: Any) -> None:
        super().record(item)
        message = getattr(item, "message", None)
        if (
            self.armed
            and isinstance(message, types.JSONRPCNotification)
            and message.method == "notifications/tools/list_changed"
        ):
            self.tools_list_changed += 1

    def as_json(self) -> dict[str, int]:
        return {**super().as_json(), "toolsListChanged": self.tools_list_changed}


def parse_argv(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    parser = argparse.ArgumentParser(prog="py_discovery_client.py", description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--plan", required=True, metavar="JSON", help="the steps, a JSON array")
    parser.add_argument("--timeout", type=float, default=60.0, metavar="SECS", help="bound on the whole run")
    parser.add_argument("--wait", type=float, default=10.0, metavar="SECS", help="bound on each changed step")
    ns, command = helpers.parse_with_command(PROG, parser, argv, USAGE)
    try:
        ns.steps = json.loads(ns.plan)
    except json.JSONDecodeError as e:
        helpers.fail(PROG, f"--plan is not valid JSON: {e}", 2)
    if not isinstance(ns.steps, list) or not all(isinstance(s, dict) for s in ns.steps):
        helpers.fail(PROG, "--plan must be a JSON array of objects", 2)
    return ns, command


class Changes:
    """What the message handler saw of notifications/tools/list_changed."""

    def __init__(self) -> None:
        self.count = 0
        self.event = anyio.Event()

    async def handler(self, message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            self.count += 1
            self.event.set()
            self.event = anyio.Event()

    async def wait_for(self, count: int, limit: float) -> dict[str, Any]:
        with anyio.move_on_after(limit):
            while self.count < count:
                await self.event.wait()
        out: dict[str, Any] = {"op": "changed", "count": self.count}
        if self.count < count:
            out["timedOut"] = True
        return out


async def call_step(session: ClientSession, step: dict[str, Any]) -> dict[str, Any]:
    name = step["name"]
    out: dict[str, Any] = {"op": "call", "name": name}
    progress: list[dict[str, Any]] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append({"progress": value, "total": total, "message": message})

    callback = on_progress if step.get("progress") else None
    try:
        result = await session.call_tool(name, step.get("arguments", {}), progress_callback=callback)
        out["result"] = dump(result)
    except MCPError as e:
        out["error"] = dump(e.error)
    if step.get("progress"):
        out["progress"] = progress
    return out


async def run_command(argv: list[str]) -> dict[str, Any]:
    done = await anyio.run_process(argv, check=False, stdout=sys.stderr, stderr=sys.stderr)
    return {"op": "run", "code": done.returncode}


async def run(ns: argparse.Namespace, command: list[str]) -> dict[str, Any]:
    elicitations, on_elicit = helpers.elicitation_answerer()
    changes = Changes()
    wire = DiscoveryWire()
    async with stdio_client(helpers.stdio_params(command), errlog=sys.stderr) as (read, write):
        async with ClientSession(
            TapReadStream(read, wire),
            write,
            read_timeout_seconds=ns.timeout,
            elicitation_callback=on_elicit,
            message_handler=changes.handler,
            client_info=types.Implementation(name="mcpd-interop-py-discovery-client", version="0.1.0"),
        ) as session:
            init = await session.initialize()
            wire.armed = True
            steps: list[dict[str, Any]] = []
            for step in ns.steps:
                op = step.get("op")
                if op == "list":
                    page = await session.list_tools()
                    steps.append({"op": "list", "tools": [t.name for t in page.tools]})
                elif op == "call":
                    steps.append(await call_step(session, step))
                elif op == "changed":
                    steps.append(await changes.wait_for(int(step["count"]), ns.wait))
                elif op == "run":
                    steps.append(await run_command([str(a) for a in step["argv"]]))
                else:
                    raise ValueError(f"unknown step {step!r}")
            return {
                "client": "py",
                "era": "legacy",
                "protocolVersion": session.protocol_version or init.protocol_version,
                "serverInfo": dump(init.server_info),
                "steps": steps,
                "elicitations": elicitations,
                "wire": wire.as_json(),
            }


def main() -> None:
    ns, command = parse_argv(sys.argv[1:])
    helpers.run_and_print(PROG, ns.timeout, lambda: run(ns, command), codes=True)


if __name__ == "__main__":
    main()
