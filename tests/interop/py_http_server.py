#!/usr/bin/env python3
"""Interop peer: a Streamable HTTP MCP server written with the official MCP Python SDK.

    py_http_server.py PORT

Serves stateful sessions at http://127.0.0.1:PORT/mcp with two tools, `echo(text)` and
`add(a, b)`. It dies with its parent (Linux parent-death signal), and SIGTERM stops it.
Run it with the interpreter of the venv that .ci/install-peers builds.
"""

import sys

import helpers
from mcp.server.mcpserver import MCPServer

server = MCPServer("py-http-interop")


@server.tool()
def echo(text: str) -> str:
    """Returns its argument."""
    return text


@server.tool()
def add(a: int, b: int) -> int:
    """Returns a + b."""
    return a + b


if __name__ == "__main__":
    port = int(sys.argv[1])
    # A test killed without cleanup must not leave a server behind: SIGKILL when the
    # parent dies.
    helpers.killed_with_parent()
    server.run("streamable-http", host="127.0.0.1", port=port, stateless_http=False)
