#!/usr/bin/env python3
"""Interop peer: the official MCP Python SDK as a long-lived stdio client, driven one step at a time.

    py_session_client.py -- COMMAND [ARGS...]

Spawns COMMAND (for mcpd's tests: `mcpd connect --no-project --socket PATH`) with one
`ClientSession`, initializes, prints `{"ready": true, "protocolVersion": "..."}`, then
reads steps from stdin, one JSON object a line, each with a `tag`:

    {"op": "call", "tag": T, "tool": NAME, "args": {...}}   -> {"tag": T, "result": {...}}
    {"op": "list", "tag": T}                                -> {"tag": T, "tools": [names]}
    {"op": "subscribe", "tag": T, "uri": URI}               -> {"tag": T, "result": {}}
    {"op": "events", "tag": T}                              -> {"tag": T, "toolsListChanged": N,
                                                                "updated": [uris]}

A failed step prints `{"tag": T, "error": {"code": C, "message": M}}` (code null when the
failure is not a JSON-RPC error). Steps run concurrently, so a call may wait while later
steps are answered. It exits 0 at stdin's end. The session is the SDK's own: no reconnect
logic of ours, so whatever survives a daemon restart is `mcpd connect`'s doing. Run it
with target/peers/venv/bin/python.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from typing import Any

import anyio
import helpers
from helpers import dump
from mcp import types
from mcp.client.session import ClientSession
from mcp.client.stdio import stdio_client

PROG = "py_session_client"


class Events:
    """The notifications the session received."""

    def __init__(self) -> None:
        self.tools_changed = 0
        self.updated: list[str] = []

    async def on_message(self, message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            self.tools_changed += 1
        elif isinstance(message, types.ResourceUpdatedNotification):
            self.updated.append(str(message.params.uri))


def out(obj: dict[str, Any]) -> None:
    print(json.dumps(obj), flush=True)


async def step(session: ClientSession, events: Events, msg: dict[str, Any]) -> None:
    tag = msg.get("tag")
    try:
        op = msg.get("op")
        if op == "call":
            r = await session.call_tool(msg["tool"], msg.get("args", {}))
            out({"tag": tag, "result": dump(r)})
        elif op == "list":
            tools = await helpers.list_all(
                "tools/list", lambda c: session.list_tools(params=helpers.page_params(c)), "tools"
            )
            out({"tag": tag, "tools": [t.name for t in tools]})
        elif op == "subscribe":
            await session.subscribe_resource(msg["uri"])
            out({"tag": tag, "result": {}})
        elif op == "events":
            out({"tag": tag, "toolsListChanged": events.tools_changed, "updated": events.updated})
        else:
            out({"tag": tag, "error": {"code": None, "message": f"unknown op {op!r}"}})
    except Exception as e:  # every failure is the step's answer
        code = getattr(getattr(e, "error", None), "code", None)
        out({"tag": tag, "error": {"code": code, "message": helpers.describe(e)}})


async def run(command: list[str]) -> None:
    events = Events()
    async with stdio_client(helpers.stdio_params(command), errlog=sys.stderr) as (read, write):
        async with ClientSession(
            read,
            write,
            message_handler=events.on_message,
            client_info=types.Implementation(name="mcpd-interop-py-session-client", version="0.1.0"),
        ) as session:
            init = await session.initialize()
            out({"ready": True, "protocolVersion": session.protocol_version or init.protocol_version})
            stdin = anyio.wrap_file(sys.stdin)
            async with anyio.create_task_group() as tg:
                while line := await stdin.readline():
                    if line.strip():
                        tg.start_soon(step, session, events, json.loads(line))


def main() -> None:
    argv = sys.argv[1:]
    if "--" not in argv or argv.index("--") == len(argv) - 1:
        helpers.fail(PROG, "usage: py_session_client.py -- COMMAND [ARGS...]", 2)
    helpers.set_parent_death_signal(signal.SIGKILL)
    try:
        anyio.run(run, argv[argv.index("--") + 1 :])
    except Exception as e:
        helpers.fail(PROG, helpers.describe(e, codes=True))
    os._exit(0)


if __name__ == "__main__":
    main()
