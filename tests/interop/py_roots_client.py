#!/usr/bin/env python3
"""Interop peer: the official MCP Python SDK as a stdio client that declares MCP roots and changes them.

    py_roots_client.py [--timeout SECS] --root DIR --then-root DIR --call TOOL [--args JSON] -- COMMAND [ARGS...]

Spawns COMMAND (for mcpd's tests: `mcpd connect --no-project --socket PATH`) with a
`ClientSession` whose `list_roots_callback` answers one root, `file://` + the first --root
(the SDK then declares `roots: {listChanged: true}`). It initializes, waits until TOOL is
listed (listing again after each `notifications/tools/list_changed`, and at least once a
second), and calls TOOL with ARGS: `first`. Then the callback answers the --then-root
instead, the client sends `notifications/roots/list_changed` with the SDK's
`send_roots_list_changed()`, and calls TOOL again: `second`. Prints one line of JSON:

    {"protocolVersion": "...", "first": {...}, "second": {...},
     "rootsAnswered": ["file:///a", "file:///b"], "toolsListChanged": N}

`rootsAnswered` lists the root the callback gave, once per `roots/list` request it got.
Exit codes: 0 printed (a tool result with isError too), 1 failure (`py_roots_client: error:
...` on stderr), 2 usage, 124 timeout (--timeout, default 60 s). The server inherits our
environment; its stderr goes to ours. Run it with target/peers/venv/bin/python.
"""

from __future__ import annotations

import argparse
import pathlib
import sys
import warnings
from typing import Any

import anyio
import helpers
from helpers import dump
from mcp import types
from mcp.client.session import ClientRequestContext, ClientSession
from mcp.client.stdio import stdio_client

PROG = "py_roots_client"
USAGE = "usage: py_roots_client.py [--timeout SECS] --root DIR --then-root DIR --call TOOL [--args JSON] -- COMMAND [ARGS...]"


def parse_argv(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    parser = argparse.ArgumentParser(prog="py_roots_client.py", description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--root", required=True, metavar="DIR", help="the root listed first")
    parser.add_argument("--then-root", required=True, metavar="DIR", help="the root listed after the change")
    parser.add_argument("--call", required=True, metavar="TOOL", help="tool to call, before and after")
    parser.add_argument("--args", default="{}", metavar="JSON", help="tool arguments, a JSON object")
    parser.add_argument("--timeout", type=float, default=60.0, metavar="SECS", help="bound on the whole run")
    ns, command = helpers.parse_with_command(PROG, parser, argv, USAGE)
    ns.tool_args = helpers.tool_args(PROG, ns.args)
    return ns, command


class State:
    """The root the callback answers now, what it answered, and the tools/list_changed seen."""

    def __init__(self, root: str) -> None:
        self.root = pathlib.Path(root).as_uri()
        self.answered: list[str] = []
        self.changed = 0
        self.event = anyio.Event()

    async def list_roots(self, _ctx: ClientRequestContext) -> types.ListRootsResult:
        self.answered.append(self.root)
        return types.ListRootsResult(roots=[types.Root(uri=self.root, name="project")])

    async def on_message(self, message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            self.changed += 1
            self.event.set()
            self.event = anyio.Event()


async def wait_listed(session: ClientSession, state: State, tool: str) -> None:
    """Until TOOL is listed (the run's deadline bounds it)."""
    while True:
        cursor: str | None = None
        names: list[str] = []
        while True:
            page = await session.list_tools(params=helpers.page_params(cursor))
            names += [t.name for t in page.tools]
            cursor = page.next_cursor
            if cursor is None:
                break
        if tool in names:
            return
        with anyio.move_on_after(1.0):  # a re-list at least once a second, not a fixed wait
            await state.event.wait()


async def run(ns: argparse.Namespace, command: list[str]) -> dict[str, Any]:
    state = State(ns.root)
    async with stdio_client(helpers.stdio_params(command), errlog=sys.stderr) as (read, write):
        async with ClientSession(
            read,
            write,
            read_timeout_seconds=ns.timeout,
            list_roots_callback=state.list_roots,
            message_handler=state.on_message,
            client_info=types.Implementation(name="mcpd-interop-py-roots-client", version="0.1.0"),
        ) as session:
            init = await session.initialize()
            await wait_listed(session, state, ns.call)
            first = await session.call_tool(ns.call, ns.tool_args)
            state.root = pathlib.Path(ns.then_root).as_uri()
            with warnings.catch_warnings():  # roots are deprecated as of 2026-07-28, not at 2025-11-25
                warnings.simplefilter("ignore")
                await session.send_roots_list_changed()
            second = await session.call_tool(ns.call, ns.tool_args)
            return {
                "protocolVersion": session.protocol_version or init.protocol_version,
                "first": dump(first),
                "second": dump(second),
                "rootsAnswered": state.answered,
                "toolsListChanged": state.changed,
            }


def main() -> None:
    ns, command = parse_argv(sys.argv[1:])
    helpers.run_and_print(PROG, ns.timeout, lambda: run(ns, command), codes=True)


if __name__ == "__main__":
    main()
