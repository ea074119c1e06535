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
import ctypes
import json
import os
import signal
import sys
import traceback
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx2
from mcp import types
from mcp.client import Client
from mcp.client.session import ClientRequestContext
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

PROG = "py_http_client"
MODERN = "2026-07-28"
MAX_PAGES = 1000
TOKEN_ENV = "MCPD_INTEROP_TOKEN"


def fail(msg: str, code: int = 1) -> None:
    print(f"{PROG}: error: {msg}", file=sys.stderr, flush=True)
    # os._exit: don't wait on SDK tasks during interpreter teardown.
    os._exit(code)


def parse_argv(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="py_http_client.py", description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--mode", default="legacy", choices=("legacy", "auto"), help="era negotiation")
    parser.add_argument("--timeout", type=float, default=60.0, metavar="SECS", help="bound on the whole run")
    parser.add_argument("url", metavar="URL", help="the MCP endpoint")
    ns = parser.parse_args(argv)
    if ns.timeout <= 0:
        fail("--timeout must be positive", 2)
    ns.token = os.environ.get(TOKEN_ENV, "")
    if not ns.token:
        fail(f"{TOKEN_ENV} is not set", 2)
    return ns


def dump(model: Any) -> Any:
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


class Wire:
    """Counts what the SDK reads from the transport once armed."""

    def __init__(self) -> None:
        self.armed = False
        self.elicitation_requests = 0
        self.input_required_results = 0
        self.progress_notifications = 0

    def record(self, item: Any) -> None:
        if not self.armed:
            return
        message = getattr(item, "message", None)
        if isinstance(message, types.JSONRPCRequest) and message.method == "elicitation/create":
            self.elicitation_requests += 1
        elif isinstance(message, types.JSONRPCNotification) and message.method == "notifications/progress":
            self.progress_notifications += 1
        elif isinstance(message, types.JSONRPCResponse) and message.result.get("resultType") == "input_required":
            self.input_required_results += 1

    def as_json(self) -> dict[str, int]:
        return {
            "elicitationRequests": self.elicitation_requests,
            "inputRequiredResults": self.input_required_results,
            "progressNotifications": self.progress_notifications,
        }


class TapReadStream:
    """A read stream that shows every item to `Wire` on its way to the SDK."""

    def __init__(self, inner: Any, wire: Wire) -> None:
        self._inner = inner
        self._wire = wire

    async def receive(self) -> Any:
        item = await self._inner.receive()
        self._wire.record(item)
        return item

    def __aiter__(self) -> TapReadStream:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> TapReadStream:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


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
    elicitations: list[dict[str, Any]] = []

    async def on_elicit(
        _ctx: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult | types.ErrorData:
        mode = getattr(params, "mode", None) or "form"
        elicitations.append({"mode": mode, "message": params.message})
        if mode != "form":
            return types.ElicitResult(action="decline")
        return types.ElicitResult(action="accept", content={"name": "Ada"})

    updates: list[dict[str, Any]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        updates.append({"progress": progress, "total": total, "message": message})

    wire = Wire()
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

        tools: list[str] = []
        cursor: str | None = None
        seen: set[str] = set()
        for _ in range(MAX_PAGES):
            page = await client.list_tools(cursor=cursor)
            tools.extend(t.name for t in page.tools)
            cursor = page.next_cursor
            if cursor is None:
                break
            if cursor in seen:
                raise RuntimeError(f"tools/list returned cursor {cursor!r} twice")
            seen.add(cursor)
        else:
            raise RuntimeError(f"tools/list did not finish within {MAX_PAGES} pages")

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
            "tools": sorted(tools),
            "echo": dump(echo),
            "progress": {"call": dump(progress), "updates": updates},
            "ask": {"call": dump(ask), "elicitations": elicitations},
            "wire": wire.as_json(),
        }
    # After the client closed, so a legacy session's DELETE is in the log.
    out["http"] = log.as_json()
    return out


def describe(exc: BaseException) -> str:
    # anyio task groups wrap failures in ExceptionGroups; show the leaves.
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(describe(e) for e in exc.exceptions)
    code = getattr(getattr(exc, "error", None), "code", None)
    text = str(exc)
    name = type(exc).__name__ + (f" (code {code})" if code is not None else "")
    return f"{name}: {text}" if text else name


def die_with_parent() -> None:
    # SIGTERM from the kernel when the parent dies (PR_SET_PDEATHSIG is 1). Also catch a
    # parent that died before the prctl call.
    parent = os.getppid()
    signal.signal(signal.SIGTERM, lambda _s, _f: fail("terminated (parent died?)", 1))
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)
    if os.getppid() != parent:
        fail("parent died")


def main() -> None:
    ns = parse_argv(sys.argv[1:])
    die_with_parent()

    # Hard backstop: if the SDK's own shutdown wedges past the deadline, die anyway.
    signal.signal(signal.SIGALRM, lambda _s, _f: fail(f"timed out after {ns.timeout:g}s (hard deadline)", 124))
    signal.alarm(int(ns.timeout) + 10)

    log = HttpLog()

    async def bounded() -> dict[str, Any]:
        with anyio.fail_after(ns.timeout):
            return await run(ns, log)

    try:
        out = anyio.run(bounded)
    except TimeoutError:
        fail(f"timed out after {ns.timeout:g}s; HTTP so far: {json.dumps(log.as_json())}", 124)
    except BaseException as e:  # noqa: BLE001 - report everything, including ExceptionGroups
        if os.environ.get("MCPD_INTEROP_DEBUG"):
            traceback.print_exception(e)
        fail(f"{describe(e)}; HTTP so far: {json.dumps(log.as_json())}")
    signal.alarm(0)
    sys.stdout.write(json.dumps(out, separators=(",", ":")) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
