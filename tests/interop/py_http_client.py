#!/usr/bin/env python3
"""Interop peer: a Streamable HTTP MCP client written with the official Python SDK.

    py_http_client.py [--mode legacy|auto] [--timeout SECS] URL

Connects to the MCP endpoint URL (for mcpd's tests: its HTTP listener, with the fixture
server `fx` behind it) with the SDK's `streamable_http_client` and high-level `mcp.Client`,
sending `Authorization: Bearer $MCPD_INTEROP_TOKEN` on every request (the variable must be
set). It then, in order:

  1. lists every tool (following `nextCursor`);
  2. calls `fx__echo {"text": "hello over http"}`;
  3. calls `fx__progress {"steps": 3, "ms": 0}` with a progress callback;
  4. calls `fx__ask {}`; the elicitation callback answers form requests with
     {action: "accept", content: {name: "Ada"}} (URL requests are declined).

and prints exactly one line of JSON on stdout:

    {"client":"py-http","mode":"legacy","era":"legacy","protocolVersion":"2025-11-25",
     "serverInfo":{...}|null,"tools":[sorted names],
     "echo":{...},"progress":{"call":{...},"updates":[{"progress":1,"total":3,"message":"step 1"},...]},
     "ask":{"call":{...},"elicitations":[{"mode":"form","message":"..."}]},
     "wire":{"elicitationRequests":1,"inputRequiredResults":0,"progressNotifications":3},
     "http":{"sessionIds":["..."],"statuses":{"POST":[200,202,...],"GET":[...],"DELETE":[...]},
             "unauthorized":0}}

--mode (default legacy; `Client(mode=...)`):
  legacy  `initialize`, then a session (`Mcp-Session-Id`), the SDK's GET stream, and a
          DELETE of the session when the client closes.
  auto    `server/discover` first; modern (2026-07-28, stateless) if the server offers it,
          otherwise `initialize`.

Results (`echo`, `progress.call`, `ask.call`) are the SDK's CallToolResult dumped with
by_alias=True, exclude_none=True. `wire` counts, after connect, what the SDK read from the
transport: server->client `elicitation/create` requests (legacy path), results with
`resultType: input_required` (modern path) and `notifications/progress`. `http` records
every HTTP exchange: the distinct `Mcp-Session-Id` response headers, the status codes per
method, and how many answers were 401. The response cache is disabled (`cache=None`).

Exit codes: 0 result printed, 1 any failure (`py_http_client: error: ...` on stderr, stdout
empty), 2 usage, 124 timeout (--timeout, default 60 s; a hard SIGALRM stop at timeout +
10 s). stdin is never read; when our parent dies (PR_SET_PDEATHSIG -> SIGTERM) we exit 1.
Run it with target/peers/venv/bin/python.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from contextlib import asynccontextmanager
from typing import Any

import helpers
import httpx2
from helpers import MODERN, TapReadStream, Wire, dump, list_all
from mcp import types
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

PROG = "py_http_client"
TOKEN_ENV = "MCPD_INTEROP_TOKEN"


def parse_argv(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="py_http_client.py", description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--mode", default="legacy", choices=("legacy", "auto"), help="era negotiation")
    parser.add_argument("--timeout", type=float, default=60.0, metavar="SECS", help="bound on the whole run")
    parser.add_argument("url", metavar="URL", help="the MCP endpoint")
    ns = parser.parse_args(argv)
    if ns.timeout <= 0:
        helpers.fail(PROG, "--timeout must be positive", 2)
    ns.token = os.environ.get(TOKEN_ENV, "")
    if not ns.token:
        helpers.fail(PROG, f"{TOKEN_ENV} is not set", 2)
    return ns


class HttpLog:
    """Every HTTP exchange the SDK makes, seen through httpx2 response hooks."""

    def __init__(self) -> None:
        self.session_ids: list[str] = []
        self.statuses: dict[str, list[int]] = {}
        self.unauthorized = 0

    async def on_response(self, response: httpx2.Response) -> None:
        method = response.request.method
        self.statuses.setdefault(method, []).append(response.status_code)
        if response.status_code == 401:
            self.unauthorized += 1
        sid = response.headers.get("mcp-session-id")
        if sid and sid not in self.session_ids:
            self.session_ids.append(sid)

    def as_json(self) -> dict[str, Any]:
        return {"sessionIds": self.session_ids, "statuses": self.statuses, "unauthorized": self.unauthorized}


def tapped_http(url: str, token: str, wire: Wire, log: HttpLog) -> Any:
    @asynccontextmanager
    async def transport() -> Any:
        http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
        http.event_hooks = {"request": [], "response": [log.on_response]}
        async with http:
            async with streamable_http_client(url, http_client=http) as (read, write):
                yield TapReadStream(read, wire), write

    return transport()


async def run(ns: argparse.Namespace, log: HttpLog) -> dict[str, Any]:
    elicitations, on_elicit = helpers.elicitation_answerer()

    updates: list[dict[str, Any]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        updates.append({"progress": progress, "total": total, "message": message})

    wire = Wire(progress=True)
    client = Client(
        tapped_http(ns.url, ns.token, wire, log),
        mode=ns.mode,
        read_timeout_seconds=ns.timeout,
        client_info=types.Implementation(name="mcpd-interop-py-http-client", version="0.1.0"),
        elicitation_callback=on_elicit,
        cache=None,
    )
    async with client:
        wire.armed = True

        tools = await list_all("tools/list", lambda c: client.list_tools(cursor=c), "tools")

        echo = await client.call_tool("fx__echo", {"text": "hello over http"})
        progress = await client.call_tool("fx__progress", {"steps": 3, "ms": 0}, progress_callback=on_progress)
        ask = await client.call_tool("fx__ask", {})

        version = client.protocol_version
        server_info = client.server_info
        out = {
            "client": "py-http",
            "mode": ns.mode,
            "era": "modern" if version == MODERN else "legacy",
            "protocolVersion": version,
            "serverInfo": dump(server_info) if server_info is not None else None,
            "tools": sorted(t.name for t in tools),
            "echo": dump(echo),
            "progress": {"call": dump(progress), "updates": updates},
            "ask": {"call": dump(ask), "elicitations": elicitations},
            "wire": wire.as_json(),
        }
    # After the client closed, so a legacy session's DELETE is in the log.
    out["http"] = log.as_json()
    return out


def main() -> None:
    ns = parse_argv(sys.argv[1:])
    helpers.terminated_with_parent(PROG, lambda: helpers.fail(PROG, "terminated (parent died?)", 1))
    log = HttpLog()
    helpers.run_and_print(
        PROG,
        ns.timeout,
        lambda: run(ns, log),
        codes=True,
        so_far=lambda: f"; HTTP so far: {json.dumps(log.as_json())}",
    )


if __name__ == "__main__":
    main()
