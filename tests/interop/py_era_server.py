#!/usr/bin/env python3
"""Interop peer: a stdio MCP server written with the official Python SDK, serving both eras.

    py_era_server.py

`MCPServer.run("stdio")` drives the SDK's dual-era stream loop (`serve_dual_era_loop` in
`mcp/server/runner.py`): the client's first request decides the era of this process, once.
A request carrying the 2026-07-28 `_meta` envelope (including `server/discover`) opens a
modern connection; anything else (normally `initialize`) opens a legacy one. Afterwards an
`initialize` on a modern connection gets -32022 naming the modern versions, and an enveloped
request on a legacy connection gets -32600. There is no modern-only switch in the SDK.

Tools:
  echo {text}  -> text content `text`
  ask  {}      -> asks for the user's name with a form elicitation (schema {name: string}),
                  then answers `hello, <name>`. Written once with the SDK's resolver injection
                  (`Annotated[Name, Resolve(fn)]`, the resolver returning `Elicit(...)`): on a
                  2026-07-28 request the SDK returns an `input_required` result and resumes when
                  the client retries with `inputResponses`; on a legacy connection it sends a
                  real `elicitation/create` request mid-call. A declined/cancelled elicitation
                  gives an isError result. A client without the elicitation capability gets
                  a -32021 JSON-RPC error (MissingRequiredClientCapability) in both eras.

stderr: one line per tool call naming the protocol version it was served at. The process
exits when stdin reaches EOF, and dies with its parent (PR_SET_PDEATHSIG). Run it with the
interpreter of the venv that .ci/install-peers builds: target/peers/venv/bin/python.
"""

from __future__ import annotations

import sys
from typing import Annotated

import helpers
from pydantic import BaseModel, Field

from mcp.server.mcpserver import Context, Elicit, MCPServer, Resolve

server = MCPServer("mcpd-interop-py-era-server", version="0.1.0")


class Name(BaseModel):
    name: str = Field(description="Your name")


def log(ctx: Context, tool: str) -> None:
    print(f"py_era_server: {tool} at protocol {ctx.protocol_version}", file=sys.stderr, flush=True)


async def ask_name() -> Elicit[Name]:
    return Elicit("What is your name?", Name)


@server.tool()
def echo(text: str, ctx: Context) -> str:
    """Returns its argument."""
    log(ctx, "echo")
    return text


@server.tool()
def ask(name: Annotated[Name, Resolve(ask_name)], ctx: Context) -> str:
    """Asks the user for their name (form elicitation) and greets them."""
    log(ctx, "ask")
    return f"hello, {name.name}"


if __name__ == "__main__":
    if len(sys.argv) > 1:
        print("usage: py_era_server.py (no arguments)", file=sys.stderr)
        sys.exit(2)
    # SIGKILL when the parent dies; stdin EOF (the SDK's stdio loop ends) is the normal way out.
    helpers.killed_with_parent()
    server.run("stdio")
