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
import sys
from typing import Any

import helpers
from helpers import dump, list_all, page_params
from mcp import types
from mcp.client.session import ClientSession
from mcp.client.stdio import stdio_client

PROG = "py_surface_client"
USAGE = (
    "usage: py_surface_client.py [--timeout SECS] [--get-prompt NAME JSON]... "
    "[--read-listed SUFFIX]... [--read URI]... -- COMMAND [ARGS...]"
)


def parse_argv(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
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
    ns, command = helpers.parse_with_command(PROG, parser, argv, USAGE)
    ns.prompts = []
    for name, raw in ns.get_prompt:
        try:
            arguments = json.loads(raw)
        except json.JSONDecodeError as e:
            helpers.fail(PROG, f"--get-prompt {name}: arguments are not valid JSON: {e}", 2)
        if not isinstance(arguments, dict) or not all(isinstance(v, str) for v in arguments.values()):
            helpers.fail(PROG, f"--get-prompt {name}: arguments must be a JSON object of strings", 2)
        ns.prompts.append((name, arguments))
    return ns, command


async def run(ns: argparse.Namespace, command: list[str]) -> dict[str, Any]:
    async with stdio_client(helpers.stdio_params(command), errlog=sys.stderr) as (read, write):
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


def main() -> None:
    ns, command = parse_argv(sys.argv[1:])
    helpers.run_and_print(PROG, ns.timeout, lambda: run(ns, command))


if __name__ == "__main__":
    main()
