#!/usr/bin/env python3
"""Interop peer: the official MCP Python SDK as a stdio client of prompts and resources.

    py_surface_client.py [--timeout SECS] [--get-prompt NAME JSON]... [--read-listed SUFFIX]...
                         [--read URI]... -- COMMAND [ARGS...]

Spawns COMMAND as a stdio MCP server (for mcpd's tests: `mcpd connect --socket PATH`),
runs the `initialize` handshake, lists every prompt, resource and resource template
(following `nextCursor`), and then, in this order:

- `--get-prompt NAME JSON`: gets prompt NAME with the arguments JSON (an object of
  strings);
- `--read-listed SUFFIX`: reads the one listed resource whose URI ends with SUFFIX, by the
  URI exactly as listed (it fails if no listed URI, or more than one, ends with SUFFIX);
- `--read URI`: reads URI as given (say, an expansion of a resource template).

It prints exactly one line of JSON on stdout:

    {"protocolVersion": "...", "serverInfo": {...}, "capabilities": {...},
     "prompts": [...], "resources": [...], "resourceTemplates": [...],
     "gets": [{"name": ..., "arguments": {...}, "result": {...}}],
     "reads": [{"uri": ..., "listed": SUFFIX or null, "result": {...}}]}

The lists are the SDK's models in the server's order, and every result is dumped with
`model_dump(mode="json", by_alias=True, exclude_none=True)`, so names are the wire's
camelCase ones (mimeType, uriTemplate, nextCursor).

Any failure (spawn, handshake, JSON-RPC error, bad result, timeout) exits non-zero with a
message on stderr and nothing on stdout: 1 for a failure, 2 for a usage error, 124 for a
timeout. The whole run is bounded by --timeout (default 60 s).

The server inherits this process's whole environment and its stderr goes to our stderr.
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
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
from mcp import types
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

PROG = "py_surface_client"
MAX_PAGES = 1000
USAGE = (
    "usage: py_surface_client.py [--timeout SECS] [--get-prompt NAME JSON]... "
    "[--read-listed SUFFIX]... [--read URI]... -- COMMAND [ARGS...]"
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
    parser = argparse.ArgumentParser(prog="py_surface_client.py", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--get-prompt",
        nargs=2,
        action="append",
        default=[],
        metavar=("NAME", "JSON"),
        help="prompt to get, with its arguments (a JSON object of strings)",
    )
    parser.add_argument(
        "--read-listed",
        action="append",
        default=[],
        metavar="SUFFIX",
        help="read the one listed resource whose URI ends with SUFFIX",
    )
    parser.add_argument("--read", action="append", default=[], metavar="URI", help="read URI as given")
    parser.add_argument("--timeout", type=float, default=60.0, metavar="SECS", help="bound on the whole run")
    ns = parser.parse_args(own)
    if not command:
        fail("no server COMMAND after --", 2)
    ns.prompts = []
    for name, raw in ns.get_prompt:
        try:
            arguments = json.loads(raw)
        except json.JSONDecodeError as e:
            fail(f"--get-prompt {name}: arguments are not valid JSON: {e}", 2)
        if not isinstance(arguments, dict) or not all(isinstance(v, str) for v in arguments.values()):
            fail(f"--get-prompt {name}: arguments must be a JSON object of strings", 2)
        ns.prompts.append((name, arguments))
    return ns, command


def dump(model: Any) -> Any:
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


async def list_all(what: str, fetch: Callable[[str | None], Awaitable[Any]], items: str) -> list[Any]:
    """Every item of a paginated list, following nextCursor."""
    out: list[Any] = []
    cursor: str | None = None
    seen_cursors: set[str] = set()
    for _ in range(MAX_PAGES):
        page = await fetch(cursor)
        out.extend(getattr(page, items))
        cursor = page.next_cursor
        if cursor is None:
            return out
        if cursor in seen_cursors:
            raise RuntimeError(f"{what} returned cursor {cursor!r} twice")
        seen_cursors.add(cursor)
    raise RuntimeError(f"{what} did not finish within {MAX_PAGES} pages")


def page_params(cursor: str | None) -> types.PaginatedRequestParams | None:
    return types.PaginatedRequestParams(cursor=cursor) if cursor is not None else None


async def run(ns: argparse.Namespace, command: list[str]) -> dict[str, Any]:
    params = StdioServerParameters(command=command[0], args=command[1:], env=dict(os.environ))
    async with stdio_client(params, errlog=sys.stderr) as (read, write):
        async with ClientSession(
            read,
            write,
            read_timeout_seconds=ns.timeout,
            client_info=types.Implementation(name="mcpd-interop-py-surface-client", version="0.1.0"),
        ) as session:
            init = await session.initialize()

            prompts = await list_all(
                "prompts/list", lambda c: session.list_prompts(params=page_params(c)), "prompts"
            )
            resources = await list_all(
                "resources/list", lambda c: session.list_resources(params=page_params(c)), "resources"
            )
            templates = await list_all(
                "resources/templates/list",
                lambda c: session.list_resource_templates(params=page_params(c)),
                "resource_templates",
            )

            gets = []
            for name, arguments in ns.prompts:
                result = await session.get_prompt(name, arguments)
                gets.append({"name": name, "arguments": arguments, "result": dump(result)})

            reads = []
            for suffix in ns.read_listed:
                matches = [r.uri for r in resources if str(r.uri).endswith(suffix)]
                if len(matches) != 1:
                    raise RuntimeError(
                        f"--read-listed {suffix}: {len(matches)} listed URIs end with it: {matches}"
                    )
                uri = str(matches[0])
                reads.append({"uri": uri, "listed": suffix, "result": dump(await session.read_resource(uri))})
            for uri in ns.read:
                reads.append({"uri": uri, "listed": None, "result": dump(await session.read_resource(uri))})

            return {
                "protocolVersion": session.protocol_version or init.protocol_version,
                "serverInfo": dump(init.server_info),
                "capabilities": dump(init.capabilities),
                "prompts": [dump(p) for p in prompts],
                "resources": [dump(r) for r in resources],
                "resourceTemplates": [dump(t) for t in templates],
                "gets": gets,
                "reads": reads,
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
