"""Shared by the Python interop peers (py_*.py): failing with a message, argument checks,
paging through lists, counting what the SDK reads, answering elicitations, dying with the
parent, printing a line of JSON, and running a client under a deadline that prints one.

The peers import it as `helpers` from their own directory (Python puts a script's
directory first on sys.path). Run them with target/peers/venv/bin/python.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import signal
import sys
import traceback
from collections.abc import Awaitable, Callable
from typing import Any, NoReturn

import anyio
from mcp import types
from mcp.client.session import ClientRequestContext
from mcp.client.stdio import StdioServerParameters

MODERN = "2026-07-28"
MAX_PAGES = 1000


def fail(prog: str, msg: str, code: int = 1) -> NoReturn:
    print(f"{prog}: error: {msg}", file=sys.stderr, flush=True)
    # os._exit: don't wait on SDK tasks or a stuck child during interpreter teardown.
    os._exit(code)


def parse_with_command(
    prog: str, parser: argparse.ArgumentParser, argv: list[str], usage: str
) -> tuple[argparse.Namespace, list[str]]:
    """Parses `OPTIONS -- COMMAND [ARGS...]`: the options with `parser`, then requires a
    COMMAND (usage errors exit 2)."""
    if "--" not in argv:
        fail(prog, usage, 2)
    split = argv.index("--")
    own, command = argv[:split], argv[split + 1 :]
    ns = parser.parse_args(own)
    if not command:
        fail(prog, "no server COMMAND after --", 2)
    return ns, command


def tool_args(prog: str, raw: str) -> dict[str, Any]:
    """The `--args JSON` of a tool call: a JSON object (usage errors exit 2)."""
    try:
        args = json.loads(raw)
    except json.JSONDecodeError as e:
        fail(prog, f"--args is not valid JSON: {e}", 2)
    if not isinstance(args, dict):
        fail(prog, "--args must be a JSON object", 2)
    return args


def stdio_params(command: list[str]) -> StdioServerParameters:
    """COMMAND as a stdio server that inherits our whole environment (the SDK would
    otherwise pass only HOME, PATH, SHELL, TERM, USER, LOGNAME). With
    MCPD_INTEROP_DEFAULT_ENV=1 it gets what the SDK gives by default instead, as every
    client built on the SDK starts its servers: no XDG_RUNTIME_DIR, no MCPD_SOCKET."""
    if os.environ.get("MCPD_INTEROP_DEFAULT_ENV") == "1":
        return StdioServerParameters(command=command[0], args=command[1:])
    return StdioServerParameters(command=command[0], args=command[1:], env=dict(os.environ))


def dump(model: Any) -> Any:
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


def page_params(cursor: str | None) -> types.PaginatedRequestParams | None:
    return types.PaginatedRequestParams(cursor=cursor) if cursor is not None else None


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


class Wire:
    """Counts, once armed, the server->client elicitation requests and input_required
    results the SDK reads (and, with `progress`, the progress notifications)."""

    def __init__(self, progress: bool = False) -> None:
        self.armed = False
        self.progress = progress
        self.elicitation_requests = 0
        self.input_required_results = 0
        self.progress_notifications = 0

    def record(self, item: Any) -> None:
        if not self.armed:
            return
        message = getattr(item, "message", None)
        if isinstance(message, types.JSONRPCRequest) and message.method == "elicitation/create":
            self.elicitation_requests += 1
        elif (
            self.progress
            and isinstance(message, types.JSONRPCNotification)
            and message.method == "notifications/progress"
        ):
            self.progress_notifications += 1
        elif isinstance(message, types.JSONRPCResponse) and message.result.get("resultType") == "input_required":
            self.input_required_results += 1

    def as_json(self) -> dict[str, int]:
        out = {"elicitationRequests": self.elicitation_requests, "inputRequiredResults": self.input_required_results}
        if self.progress:
            out["progressNotifications"] = self.progress_notifications
        return out


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

    def __getattr__(self, name: str) -> Any:  # e.g. last_context
        return getattr(self._inner, name)


def elicitation_answerer() -> tuple[
    list[dict[str, Any]],
    Callable[[ClientRequestContext, types.ElicitRequestParams], Awaitable[types.ElicitResult | types.ErrorData]],
]:
    """An elicitation callback that accepts every form request with {name: "Ada"} and
    declines URL requests, and the list of what it was asked."""
    elicitations: list[dict[str, Any]] = []

    async def on_elicit(
        _ctx: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult | types.ErrorData:
        mode = getattr(params, "mode", None) or "form"
        elicitations.append({"mode": mode, "message": params.message})
        if mode != "form":
            return types.ElicitResult(action="decline")
        return types.ElicitResult(action="accept", content={"name": "Ada"})

    return elicitations, on_elicit


def describe(exc: BaseException, codes: bool = False) -> str:
    """An exception for stderr; with `codes`, a JSON-RPC error's code too."""
    # anyio task groups wrap failures in ExceptionGroups; show the leaves.
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(describe(e, codes) for e in exc.exceptions)
    text = str(exc)
    name = type(exc).__name__
    if codes:
        code = getattr(getattr(exc, "error", None), "code", None)
        name += f" (code {code})" if code is not None else ""
    return f"{name}: {text}" if text else name


def set_parent_death_signal(sig: int) -> None:
    # prctl(PR_SET_PDEATHSIG, sig): PR_SET_PDEATHSIG is 1.
    ctypes.CDLL(None, use_errno=True).prctl(1, sig)


def killed_with_parent() -> None:
    """For a server: SIGKILL when the parent dies, and exit 1 at once if the parent died
    before the prctl call."""
    parent = os.getppid()
    set_parent_death_signal(signal.SIGKILL)
    if os.getppid() != parent:
        sys.exit(1)


def terminated_with_parent(prog: str, on_term: Callable[[], None]) -> None:
    """For a client: SIGTERM when the parent dies, handled by `on_term`; fails at once if
    the parent died before the prctl call."""
    parent = os.getppid()
    signal.signal(signal.SIGTERM, lambda _s, _f: on_term())
    set_parent_death_signal(signal.SIGTERM)
    if os.getppid() != parent:
        fail(prog, "parent died")


def print_json_line(out: dict[str, Any]) -> None:
    """`out` as one line of compact JSON on stdout, flushed."""
    sys.stdout.write(json.dumps(out, separators=(",", ":")) + "\n")
    sys.stdout.flush()


def run_and_print(
    prog: str,
    timeout: float,
    run: Callable[[], Awaitable[dict[str, Any]]],
    *,
    on_hard_deadline: Callable[[str, int], None] | None = None,
    codes: bool = False,
    so_far: Callable[[], str] = lambda: "",
) -> None:
    """Runs `run()` bounded by `timeout` seconds (exit 124) and prints its result as one line
    of JSON; any failure exits 1 with the reason (and `so_far()`) on stderr. A SIGALRM at
    timeout + 10 s stops a wedged SDK shutdown: `on_hard_deadline(msg, 124)`, by default a
    plain failure."""

    # Hard backstop: if the SDK's own shutdown wedges past the deadline, die anyway.
    def on_alarm(_signum: int, _frame: Any) -> None:
        msg = f"timed out after {timeout:g}s (hard deadline)"
        if on_hard_deadline is not None:
            on_hard_deadline(msg, 124)
        fail(prog, msg, 124)

    signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(int(timeout) + 10)

    async def bounded() -> dict[str, Any]:
        with anyio.fail_after(timeout):
            return await run()

    try:
        out = anyio.run(bounded)
    except TimeoutError:
        fail(prog, f"timed out after {timeout:g}s{so_far()}", 124)
    except BaseException as e:  # noqa: BLE001 - report everything, including ExceptionGroups
        if os.environ.get("MCPD_INTEROP_DEBUG"):
            traceback.print_exception(e)
        fail(prog, f"{describe(e, codes)}{so_far()}")
    signal.alarm(0)
    print_json_line(out)
