#!/usr/bin/env python3
"""Interop peer: the official MCP Python SDK as a stdio client that sees a changed tool held, then approved.

    py_pins_client.py [--timeout SECS] --tool TOOL --poison TEXT -- COMMAND [ARGS...]

Spawns COMMAND (for mcpd's tests: `mcpd connect --no-project --socket PATH`) with a
`ClientSession` whose `message_handler` counts `notifications/tools/list_changed`. It
initializes, waits until TOOL (e.g. `fx__echo`) is listed, and calls `fx__redefine` with
`{"tool": "echo", "description": TEXT}`: the fixture server changes the description of its
echo to the poison. Then it lists again after each `notifications/tools/list_changed`, and
at least once a second, until TOOL is no longer listed or a listed description contains
the poison, and calls TOOL. It prints one line of JSON and waits for one line on stdin:

    {"stage": "held", "protocolVersion": "...", "toolListed": false, "poisonListed": false,
     "error": {"code": -32024, "message": "...", "data": ...}, "result": null,
     "toolsListChanged": N}

`toolListed` is whether TOOL was listed when the wait ended; `poisonListed` whether any
description listed since the redefinition contained the poison. The call gives `error`
(the code and message of the SDK's `MCPError`) or, when it succeeds, `result`. Once a line
arrives on stdin (the test runs `mcpd ctl approve fx`, then writes `go`), it lists again
the same way until TOOL is listed with the poison as its description, calls TOOL with
`{"text": "approved"}` and prints a second line:

    {"stage": "approved", "description": "...", "toolsListChanged": M, "result": {...}}

`toolsListChanged` there counts the notifications received after the first line.
Exit codes: 0 both lines printed, 1 failure (`py_pins_client: error: ...` on stderr; stdout
has the first line if it was printed), 2 usage, 124 timeout (--timeout, default 60 s, the
whole run, the wait on stdin included). The server inherits our environment; its stderr
goes to ours. Run it with target/peers/venv/bin/python.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

import anyio
import helpers
from helpers import dump
from mcp import MCPError, types
from mcp.client.session import ClientSession
from mcp.client.stdio import stdio_client

PROG = "py_pins_client"
USAGE = "usage: py_pins_client.py [--timeout SECS] --tool TOOL --poison TEXT -- COMMAND [ARGS...]"

# The fixture server's tool that changes a definition, and the tool whose definition changes.
REDEFINE = "fx__redefine"
CHANGED = "echo"


def parse_argv(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    parser = argparse.ArgumentParser(prog="py_pins_client.py", description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--tool", required=True, metavar="TOOL", help="the tool whose definition changes")
    parser.add_argument("--poison", required=True, metavar="TEXT", help="its new description")
    parser.add_argument("--timeout", type=float, default=60.0, metavar="SECS", help="bound on the whole run")
    return helpers.parse_with_command(PROG, parser, argv, USAGE)


class Changes:
    """The tools/list_changed notifications the SDK delivered, and an event for the next."""

    def __init__(self) -> None:
        self.count = 0
        self.event = anyio.Event()

    async def on_message(self, message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            self.count += 1
            self.event.set()
            self.event = anyio.Event()


async def listed(session: ClientSession) -> dict[str, str]:
    """Every listed tool's description by name, following nextCursor."""
    tools = await helpers.list_all(
        "tools/list", lambda c: session.list_tools(params=helpers.page_params(c)), "tools"
    )
    return {t.name: t.description or "" for t in tools}


async def wait_for(
    session: ClientSession, changes: Changes, done: Callable[[dict[str, str]], bool]
) -> dict[str, str]:
    """Lists until `done` holds for the tools (the run's deadline bounds it)."""
    while True:
        tools = await listed(session)
        if done(tools):
            return tools
        with anyio.move_on_after(1.0):  # a re-list at least once a second, not a fixed wait
            await changes.event.wait()


async def call(session: ClientSession, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    """{"error": {code, message, data}, "result": None} for a JSON-RPC error, else the result."""
    try:
        result = await session.call_tool(tool, args)
    except MCPError as e:
        return {"error": {"code": e.code, "message": e.message, "data": e.data}, "result": None}
    return {"error": None, "result": dump(result)}


async def run(ns: argparse.Namespace, command: list[str]) -> dict[str, Any]:
    changes = Changes()
    tool, poison = ns.tool, ns.poison
    async with stdio_client(helpers.stdio_params(command), errlog=sys.stderr) as (read, write):
        async with ClientSession(
            read,
            write,
            read_timeout_seconds=ns.timeout,
            message_handler=changes.on_message,
            client_info=types.Implementation(name="mcpd-interop-py-pins-client", version="0.1.0"),
        ) as session:
            init = await session.initialize()
            await wait_for(session, changes, lambda tools: tool in tools)
            redefined = await session.call_tool(REDEFINE, {"tool": CHANGED, "description": poison})
            if redefined.is_error:
                raise RuntimeError(f"{REDEFINE} failed: {dump(redefined)}")

            poison_listed = False

            def held(tools: dict[str, str]) -> bool:
                nonlocal poison_listed
                poison_listed = poison_listed or any(poison in d for d in tools.values())
                return tool not in tools or poison_listed

            tools = await wait_for(session, changes, held)
            held_call = await call(session, tool, {"text": "held"})
            before = changes.count
            helpers.print_json_line(
                {
                    "stage": "held",
                    "protocolVersion": session.protocol_version or init.protocol_version,
                    "toolListed": tool in tools,
                    "poisonListed": poison_listed,
                    **held_call,
                    "toolsListChanged": before,
                }
            )
            line = await anyio.to_thread.run_sync(sys.stdin.readline, abandon_on_cancel=True)
            if not line:
                raise RuntimeError("stdin closed before the go-ahead")

            tools = await wait_for(session, changes, lambda tools: tools.get(tool) == poison)
            approved = await session.call_tool(tool, {"text": "approved"})
            return {
                "stage": "approved",
                "description": tools[tool],
                "toolsListChanged": changes.count - before,
                "result": dump(approved),
            }


def main() -> None:
    ns, command = parse_argv(sys.argv[1:])
    helpers.run_and_print(PROG, ns.timeout, lambda: run(ns, command), codes=True)


if __name__ == "__main__":
    main()
