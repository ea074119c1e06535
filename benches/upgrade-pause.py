#!/usr/bin/env python3
"""The pause an upgrade in place makes: AGENTS agents, each through its own `mcpd connect`,
call a tool in a loop (one call at a time) while `mcpd ctl upgrade` runs once.

    benches/upgrade-pause.py [--agents 20] [--servers 30] [--seconds 6] [--mcpd target/release/mcpd]

The daemon runs from a copy of MCPD in a temporary directory, with SERVERS fixture
servers (target/*/mcpd-fixture beside MCPD), so the upgrade executes that copy. After a
third of the run the upgrade is asked for; calls go on to the end. Prints the calls made,
the calls that failed (any answer but the tool's result), the longest call, the longest
call before the upgrade, and how long `mcpd ctl upgrade` took. Standard library only.
"""

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--agents", type=int, default=20)
    ap.add_argument("--servers", type=int, default=30)
    ap.add_argument("--seconds", type=float, default=6.0)
    ap.add_argument("--mcpd", default="target/release/mcpd")
    ns = ap.parse_args()
    mcpd_src = os.path.realpath(ns.mcpd)
    fixture = os.path.join(os.path.dirname(mcpd_src), "mcpd-fixture")
    tmp = tempfile.mkdtemp(prefix="mcpd-up.", dir="/tmp")
    mcpd = os.path.join(tmp, "mcpd")
    shutil.copy(mcpd_src, mcpd)
    sock = os.path.join(tmp, "s.sock")
    with open(os.path.join(tmp, "mcpd.toml"), "w") as f:
        f.write(f'[daemon]\nstate_dir = "{tmp}/state"\npin = "off"\n')
        for i in range(ns.servers):
            f.write(f'[servers.s{i}]\ncommand = "{fixture}"\nargs = ["--tools", "echo"]\n')
    daemon = subprocess.Popen(
        [mcpd, "serve", "--config", os.path.join(tmp, "mcpd.toml"), "--socket", sock],
        stdout=subprocess.DEVNULL,
        stderr=open(os.path.join(tmp, "daemon.log"), "w"),
    )
    try:
        run(ns, mcpd, sock)
    finally:
        daemon.terminate()
        daemon.wait(timeout=30)
        shutil.rmtree(tmp, ignore_errors=True)


def ready(mcpd: str, sock: str, servers: int) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        r = subprocess.run([mcpd, "ctl", "--socket", sock, "status", "--json"], capture_output=True, text=True)
        if r.returncode == 0:
            rows = json.loads(r.stdout).get("servers", [])
            if len(rows) == servers and all(row.get("state") == "ready" for row in rows):
                return
        time.sleep(0.05)
    sys.exit("the servers did not get ready within 60 s")


def agent(n: int, mcpd: str, sock: str, servers: int, stop: threading.Event, out: list) -> None:
    p = subprocess.Popen([mcpd, "connect", "--no-project", "--socket", sock], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert p.stdin and p.stdout
    def send(msg: dict) -> None:
        p.stdin.write((json.dumps(msg) + "\n").encode())
        p.stdin.flush()
    def answer(i: int) -> dict:
        while True:
            m = json.loads(p.stdout.readline())
            if m.get("id") == i and "method" not in m:
                return m
    send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": f"bench{n}", "version": "1"}}})
    answer(0)
    send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    i = 0
    while not stop.is_set():
        i += 1
        tool = f"s{(n + i) % servers}__echo"
        t0 = time.monotonic()
        send({"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {"name": tool, "arguments": {"text": "x"}}})
        m = answer(i)
        ok = m.get("result", {}).get("content", [{}])[0].get("text") == "x"
        out.append((t0, time.monotonic() - t0, ok, m if not ok else None))
    p.stdin.close()
    p.wait(timeout=10)


def run(ns: argparse.Namespace, mcpd: str, sock: str) -> None:
    deadline = time.monotonic() + 60
    while not os.path.exists(sock) and time.monotonic() < deadline:
        time.sleep(0.02)
    ready(mcpd, sock, ns.servers)
    stop = threading.Event()
    results: list = []
    threads = [threading.Thread(target=agent, args=(n, mcpd, sock, ns.servers, stop, results)) for n in range(ns.agents)]
    for t in threads:
        t.start()
    time.sleep(ns.seconds / 3)
    t_up = time.monotonic()
    r = subprocess.run([mcpd, "ctl", "--socket", sock, "upgrade"], capture_output=True, text=True)
    up_took = time.monotonic() - t_up
    time.sleep(ns.seconds * 2 / 3)
    stop.set()
    for t in threads:
        t.join(timeout=30)
    before = [d for (t0, d, _, _) in results if t0 + d < t_up]
    failed = [m for (_, _, ok, m) in results if not ok]
    print(f"agents {ns.agents}, servers {ns.servers}, {ns.seconds:g} s; ctl upgrade exit {r.returncode} in {up_took * 1000:.0f} ms")
    print(f"calls {len(results)}, failed {len(failed)}")
    print(f"longest call {max(d for (_, d, _, _) in results) * 1000:.0f} ms; longest before the upgrade {max(before) * 1000:.1f} ms")
    for m in failed[:5]:
        print(f"  failed: {m}")
    if r.returncode != 0:
        print(r.stdout + r.stderr)


if __name__ == "__main__":
    main()
