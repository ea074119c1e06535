#!/usr/bin/env python3
"""Collect the `tools/list` result of MCP servers over stdio.

Usage:
    collect.py [--out DIR] [--timeout SECS] [--package NAME=SPEC ...] NAME=COMMAND... ...

Each positional argument is `NAME=COMMAND`, where NAME is the short server
name (used as the mcpd server name and as the file name) and COMMAND is a
shell-style command line (split with shlex, no shell involved) that starts
the server speaking MCP over stdio.  `--package NAME=SPEC` records where the
server came from, e.g. `npm:@modelcontextprotocol/server-memory@2026.8.31`.

For each server this starts the process, sends `initialize` (protocol
version 2025-06-18), the `notifications/initialized` notification, then
`tools/list` repeatedly while the result carries a `nextCursor`, and writes
`DIR/NAME.json`:

    {"server": NAME, "package": SPEC, "tools": [...]}

The tools are written exactly as the server returned them, in its order.
Environment variables for a server can be given with `env K=V ...` as the
start of COMMAND.  Python 3.11, standard library only.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import subprocess
import sys
import threading
import time
from pathlib import Path
from queue import Empty, Queue

PROTOCOL_VERSION = "2025-06-18"
NAME_RE = re.compile(r"^[a-z0-9_-]+$")


class ServerError(Exception):
    pass


class StdioClient:
    def __init__(self, argv: list[str], stderr_path: Path, env: dict[str, str]):
        self.stderr_file = open(stderr_path, "wb")
        self.proc = subprocess.Popen(
            argv,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.stderr_file,
        )
        self.lines: Queue[bytes | None] = Queue()
        self.next_id = 1
        threading.Thread(target=self._reader, daemon=True).start()

    def _reader(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def send(self, msg: dict) -> None:
        assert self.proc.stdin is not None
        data = json.dumps(msg, separators=(",", ":")).encode() + b"\n"
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def request(self, method: str, params: dict | None, deadline: float) -> dict:
        rid = self.next_id
        self.next_id += 1
        msg: dict = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            msg["params"] = params
        self.send(msg)
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise ServerError(f"timed out waiting for {method} response")
            try:
                line = self.lines.get(timeout=left)
            except Empty:
                raise ServerError(f"timed out waiting for {method} response")
            if line is None:
                raise ServerError(
                    f"server closed stdout before answering {method} "
                    f"(exit code {self.proc.poll()})"
                )
            line = line.strip()
            if not line:
                continue
            try:
                reply = json.loads(line)
            except json.JSONDecodeError:
                # Some servers print banners on stdout; skip non-JSON lines.
                print(f"    (skipping non-JSON stdout line: {line[:120]!r})", file=sys.stderr)
                continue
            if not isinstance(reply, dict):
                continue
            if "method" in reply:
                self._handle_server_message(reply)
                continue
            if reply.get("id") != rid:
                continue
            if "error" in reply:
                raise ServerError(f"{method} failed: {json.dumps(reply['error'])}")
            return reply.get("result", {})

    def _handle_server_message(self, msg: dict) -> None:
        if "id" not in msg:
            return  # notification (logging, list_changed, ...): ignore
        if msg["method"] == "ping":
            self.send({"jsonrpc": "2.0", "id": msg["id"], "result": {}})
        else:
            self.send(
                {
                    "jsonrpc": "2.0",
                    "id": msg["id"],
                    "error": {"code": -32601, "message": "method not supported by collector"},
                }
            )

    def close(self) -> None:
        try:
            if self.proc.stdin:
                self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=3)
        except subprocess.TimeoutExpired:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=3)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.stderr_file.close()


def split_env(argv: list[str]) -> tuple[dict[str, str], list[str]]:
    env: dict[str, str] = {}
    if argv and argv[0] == "env":
        argv = argv[1:]
        while argv and "=" in argv[0] and not argv[0].startswith("="):
            k, v = argv[0].split("=", 1)
            env[k] = v
            argv = argv[1:]
    return env, argv


def collect(name: str, command: str, timeout: float, log_dir: Path) -> tuple[dict, list[dict]]:
    env_extra, argv = split_env(shlex.split(command))
    if not argv:
        raise ServerError("empty command")
    env = dict(os.environ)
    env.update(env_extra)
    client = StdioClient(argv, log_dir / f"{name}.stderr.log", env)
    try:
        deadline = time.monotonic() + timeout
        init = client.request(
            "initialize",
            {
                "protocolVersion": PROTOCOL_VERSION,
                "capabilities": {},
                "clientInfo": {"name": "mcpd-discovery-collect", "version": "0.1.0"},
            },
            deadline,
        )
        client.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        tools: list[dict] = []
        cursor = None
        pages = 0
        while True:
            params = {"cursor": cursor} if cursor else {}
            result = client.request("tools/list", params, deadline)
            page = result.get("tools")
            if not isinstance(page, list):
                raise ServerError(f"tools/list result has no tools array: {json.dumps(result)[:200]}")
            tools.extend(page)
            pages += 1
            cursor = result.get("nextCursor")
            if not cursor:
                break
            if pages > 1000:
                raise ServerError("more than 1000 pages of tools; giving up")
        return init, tools
    finally:
        client.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent / "catalog"))
    ap.add_argument("--logs", default=None, help="directory for server stderr logs (default: OUT/../.logs)")
    ap.add_argument("--timeout", type=float, default=60.0)
    ap.add_argument("--package", action="append", default=[], metavar="NAME=SPEC")
    ap.add_argument("specs", nargs="+", metavar="NAME=COMMAND")
    args = ap.parse_args()

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    logs = Path(args.logs) if args.logs else out.parent / ".logs"
    logs.mkdir(parents=True, exist_ok=True)
    packages = {}
    for p in args.package:
        k, _, v = p.partition("=")
        packages[k] = v

    failed = []
    for spec in args.specs:
        name, sep, command = spec.partition("=")
        if not sep or not NAME_RE.match(name):
            print(f"bad spec (want name=command, name [a-z0-9_-]): {spec!r}", file=sys.stderr)
            failed.append(name)
            continue
        print(f"{name}: {command}", file=sys.stderr)
        try:
            init, tools = collect(name, command, args.timeout, logs)
        except (ServerError, OSError) as e:
            print(f"  FAILED: {e} (stderr in {logs / (name + '.stderr.log')})", file=sys.stderr)
            failed.append(name)
            continue
        info = init.get("serverInfo", {})
        print(
            f"  ok: {len(tools)} tools; serverInfo {info.get('name')} {info.get('version')}; "
            f"protocol {init.get('protocolVersion')}",
            file=sys.stderr,
        )
        doc = {"server": name, "package": packages.get(name, ""), "tools": tools}
        with open(out / f"{name}.json", "w", encoding="utf-8") as f:
            json.dump(doc, f, indent=2, ensure_ascii=False)
            f.write("\n")
    if failed:
        print(f"failed: {' '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
