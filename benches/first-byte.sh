#!/usr/bin/env bash
# When an agent gets a large result: the time from sending a tools/call to the first
# byte of its response, and to its last, for 1 MiB results from the fixture server
# through mcpd's socket (one agent, sequential calls; medians and 90th percentiles).
# With cut-through the first byte comes as soon as the server has written the head of
# its line; before, only after its last byte.
#
#   benches/first-byte.sh [CALLS] [MCPD_BINARY]
#
# Defaults: 200 calls, target/release/mcpd (built with the fixture). Needs python3.
# Compare two builds by passing the other's binary.
set -euo pipefail
cd "$(dirname "$0")/.."

calls="${1:-200}"
mcpd="${2:-target/release/mcpd}"
. benches/one-fixture.sh
cat > "$dir/client.py" <<'PY'
import json, socket, sys, time
sock, n = sys.argv[1], int(sys.argv[2])
s = socket.socket(socket.AF_UNIX); s.connect(sock)
buf = b""
def line():
    global buf
    while b"\n" not in buf:
        chunk = s.recv(1 << 20)
        assert chunk, "mcpd closed the connection"
        buf += chunk
    l, _, buf = buf.partition(b"\n")
    return l
def req(i, method, params):
    s.sendall((json.dumps({"jsonrpc": "2.0", "id": i, "method": method, "params": params}) + "\n").encode())
    while True:
        m = json.loads(line())
        if m.get("id") == i:
            return m
req(0, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "first-byte", "version": "1"}})
s.sendall(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
for _ in range(400):
    if any(t["name"] == "fx__big" for t in req(1, "tools/list", {})["result"]["tools"]):
        break
    time.sleep(0.05)
first, last = [], []
for i in range(n):
    call = json.dumps({"jsonrpc": "2.0", "id": 10 + i, "method": "tools/call",
                       "params": {"name": "fx__big", "arguments": {"bytes": 1048576}}}) + "\n"
    t0 = time.perf_counter()
    s.sendall(call.encode())
    got = s.recv(1 << 20)
    t1 = time.perf_counter()
    assert got, "mcpd closed the connection"
    head, size = got[:200], len(got)
    while not got.endswith(b"\n"):
        got = s.recv(1 << 20)
        assert got, "mcpd closed the connection"
        size += len(got)
    t2 = time.perf_counter()
    assert size > 1048576 and b'"result"' in head, head
    first.append((t1 - t0) * 1e6); last.append((t2 - t0) * 1e6)
def pct(xs, p):
    xs = sorted(xs); return xs[min(len(xs) - 1, int(len(xs) * p))]
print(f"  first byte: p50 {pct(first, .5):7.0f} µs   p90 {pct(first, .9):7.0f} µs")
print(f"  last byte:  p50 {pct(last, .5):7.0f} µs   p90 {pct(last, .9):7.0f} µs")
PY

start_daemon "$mcpd"
python3 "$dir/client.py" "$dir/mcpd.sock" 20 > /dev/null
echo "mcpd $("$mcpd" --version 2>/dev/null || echo "$mcpd"), $calls sequential 1 MiB calls of one agent"
python3 "$dir/client.py" "$dir/mcpd.sock" "$calls"
kill "$pid"; wait "$pid" 2>/dev/null || true
