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
import json
import os
import signal
import sys
import traceback
from typing import Any

import anyio
from mcp import types
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

PROG = "py_client"
MAX_PAGES = 1000


def fail(msg: str, code: int = 1) -> None:
    print(f"{PROG}: error: {msg}", file=sys.stderr, flush=True)
    # os._exit: don't wait on SDK tasks or a stuck child during interpreter teardown.
    os._exit(code)


def parse_argv(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    if "--" not in argv:
        fail("usage: py_client.py [--timeout SECS] --call TOOL [--args JSON] -- COMMAND [ARGS...]", 2)
    split = argv.index("--")
    own, command = argv[:split], argv[split + 1 :]
    parser = argparse.ArgumentParser(prog="py_client.py", description=__doc__.splitlines()[0])
    parser.add_argument("--call", required=True, metavar="TOOL", help="tool to call")
    parser.add_argument("--args", default="{}", metavar="JSON", help="tool arguments, a JSON object")
    parser.add_argument("--timeout", type=float, default=60.0, metavar="SECS", help="bound on the whole run")
    ns = parser.parse_args(own)
    if not command:
        fail("no server COMMAND after --", 2)
    try:
        ns.tool_args = json.loads(ns.args)
    except json.JSONDecodeError as e:
        fail(f"--args is not valid JSON: {e}", 2)
    if not isinstance(ns.tool_args, dict):
        fail("--args must be a JSON object", 2)
    return ns, command


def dump(model: Any) -> Any:
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


async def run(ns: argparse.Namespace, command: list[str]) -> dict[str, Any]:
    params = StdioServerParameters(command=command[0], args=command[1:], env=dict(os.environ))
    async with stdio_client(params, errlog=sys.stderr) as (read, write):
        async with ClientSession(
            read,
            write,
            read_timeout_seconds=ns.timeout,
            client_info=types.Implementation(name="mcpd-interop-py-client", version="0.1.0"),
        ) as session:
            init = await session.initialize()

            tools: list[str] = []
            cursor: str | None = None
            seen_cursors: set[str] = set()
            for _ in range(MAX_PAGES):
                page = await session.list_tools(
                    params=types.PaginatedRequestParams(cursor=cursor) if cursor is not None else None
                )
                tools.extend(t.name for t in page.tools)
                cursor = page.next_cursor
                if cursor is None:
                    break
                if cursor in seen_cursors:
                    raise RuntimeError(f"tools/list returned cursor {cursor!r} twice")
                seen_cursors.add(cursor)
            else:
                raise RuntimeError(f"tools/list did not finish within {MAX_PAGES} pages")

            result = await session.call_tool(ns.call, ns.tool_args)

            return {
                "protocolVersion": session.protocol_version or init.protocol_version,
                "serverInfo": dump(init.server_info),
                "tools": sorted(tools),
                "call": dump(result),
            }


def describe(exc: BaseException) -> str:
    # anyio task groups wrap failures in ExceptionGroups; show the leaves.
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(describe(e) for e in exc.exceptions)
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def main() -> None:
    ns, command = parse_argv(sys.argv[1:])

    # Hard backstop: if the SDK's own shutdown wedges past the deadline, die anyway.
    def on_alarm(_signum: int, _frame: Any) -> None:
        fail(f"timed out after {ns.timeout:g}s (hard deadline)", 124)

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
    sys.stdout.write(json.dumps(out, separators=(",", ":"), sort_keys=False) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
