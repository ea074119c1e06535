#!/usr/bin/env python3
"""Interop peer: the official MCP Python SDK as a stdio client.

    py_client.py [--timeout SECS] --call TOOL [--args JSON] -- COMMAND [ARGS...]

Spawns COMMAND as a stdio MCP server (for mcpd's tests: `mcpd connect --socket PATH`),
runs the `initialize` handshake, lists every tool (following `nextCursor`), calls TOOL
with the JSON object ARGS, and prints exactly one line of JSON on stdout:

    {"protocolVersion": "...", "serverInfo": {...}, "tools": [sorted names], "call": {...}}

`call` is the SDK's CallToolResult dumped with
`model_dump(mode="json", by_alias=True, exclude_none=True)`. by_alias gives the wire's
camelCase names (isError, structuredContent); the 2.x SDK's models use snake_case
attributes. Note that the 2.x SDK always fills `resultType: "complete"` in, even when the
server did not send it.

A tool result with isError=true is printed and exits 0 (that is a result, not a client
failure). Any other failure (spawn, handshake, JSON-RPC error, bad result, timeout) exits
non-zero with a message on stderr and nothing on stdout. The whole run is bounded by
--timeout (default 60 s).

The server inherits this process's whole environment (the SDK would otherwise pass only
HOME, PATH, SHELL, TERM, USER, LOGNAME) and its stderr goes to our stderr.

Run it with the interpreter of the venv that .ci/install-peers builds:
target/peers/venv/bin/python.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import helpers
from helpers import dump, list_all, page_params
from mcp import types
from mcp.client.session import ClientSession
from mcp.client.stdio import stdio_client

PROG = "py_client"
USAGE = "usage: py_client.py [--timeout SECS] --call TOOL [--args JSON] -- COMMAND [ARGS...]"


def parse_argv(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    parser = argparse.ArgumentParser(prog="py_client.py", description=__doc__.splitlines()[0])
    parser.add_argument("--call", required=True, metavar="TOOL", help="tool to call")
    parser.add_argument("--args", default="{}", metavar="JSON", help="tool arguments, a JSON object")
    parser.add_argument("--timeout", type=float, default=60.0, metavar="SECS", help="bound on the whole run")
    ns, command = helpers.parse_with_command(PROG, parser, argv, USAGE)
    ns.tool_args = helpers.tool_args(PROG, ns.args)
    return ns, command


async def run(ns: argparse.Namespace, command: list[str]) -> dict[str, Any]:
    async with stdio_client(helpers.stdio_params(command), errlog=sys.stderr) as (read, write):
        async with ClientSession(
            read,
            write,
            read_timeout_seconds=ns.timeout,
            client_info=types.Implementation(name="mcpd-interop-py-client", version="0.1.0"),
        ) as session:
            init = await session.initialize()

            tools = await list_all("tools/list", lambda c: session.list_tools(params=page_params(c)), "tools")

            result = await session.call_tool(ns.call, ns.tool_args)

            return {
                "protocolVersion": session.protocol_version or init.protocol_version,
                "serverInfo": dump(init.server_info),
                "tools": sorted(t.name for t in tools),
                "call": dump(result),
            }


def main() -> None:
    ns, command = parse_argv(sys.argv[1:])
    helpers.run_and_print(PROG, ns.timeout, lambda: run(ns, command))


if __name__ == "__main__":
    main()
