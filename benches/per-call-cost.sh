#!/usr/bin/env bash
# What one tools/call costs the daemon, in counts that do not depend on how busy the
# machine is: instructions (callgrind) and minor page faults and CPU ticks (/proc), for
# a small echo or a 1 MiB result from the fixture server, over N sequential calls of one
# agent on mcpd's socket. (The relay bench times calls; on a shared machine its times
# move from run to run, these counts do not, or barely.)
#
#   benches/per-call-cost.sh [echo|1MiB|call-tool] [CALLS] [MCPD_BINARY]
#
# `call-tool` is the echo call made through the discovery meta-tool `mcpd__call_tool`.
# Defaults: echo, 2000 calls (200 for 1MiB), target/release/mcpd (built if missing, with
# the fixture). Needs valgrind and python3. Compare two builds by passing the other's
# binary as the third argument; the fixture is always this checkout's. With CALLGRIND_OUT
# set, the profile of the measured calls is kept there (read it with callgrind_annotate).
set -euo pipefail
cd "$(dirname "$0")/.."

payload="${1:-echo}"
case "$payload" in
    echo | call-tool) calls="${2:-2000}" ;;
    1MiB) calls="${2:-200}" ;;
    *) echo "usage: $0 [echo|1MiB|call-tool] [CALLS] [MCPD_BINARY]" >&2; exit 2 ;;
esac
mcpd="${3:-target/release/mcpd}"
. benches/one-fixture.sh
cat > "$dir/client.py" <<'PY'
import json, socket, sys, time
sock, n, payload = sys.argv[1], int(sys.argv[2]), sys.argv[3]
s = socket.socket(socket.AF_UNIX); s.connect(sock); f = s.makefile("rwb", buffering=1 << 20)
def req(i, method, params):
    f.write((json.dumps({"jsonrpc": "2.0", "id": i, "method": method, "params": params}) + "\n").encode()); f.flush()
    while True:
        m = json.loads(f.readline())
        if m.get("id") == i:
            return m
req(0, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "cost", "version": "1"}})
f.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n'); f.flush()
for _ in range(400):
    if any(t["name"] == "fx__big" for t in req(1, "tools/list", {})["result"]["tools"]):
        break
    time.sleep(0.05)
name, args = {
    "echo": ("fx__echo", {"message": "hello"}),
    "call-tool": ("mcpd__call_tool", {"name": "fx__echo", "arguments": {"message": "hello"}}),
    "1MiB": ("fx__big", {"bytes": 1048576}),
}[payload]
for i in range(n):
    r = req(10 + i, "tools/call", {"name": name, "arguments": args})
    assert "result" in r, r
PY

# Instructions: callgrind counts from after a warm-up to after the calls.
start_daemon valgrind --tool=callgrind --callgrind-out-file="$dir/cg.out" "$mcpd"
vg=$pid
python3 "$dir/client.py" "$dir/mcpd.sock" 20 "$payload"
callgrind_control -z "$vg" > /dev/null
python3 "$dir/client.py" "$dir/mcpd.sock" "$calls" "$payload"
callgrind_control -d "$vg" > /dev/null
kill "$vg"; wait "$vg" 2>/dev/null || true
ir="$(grep -h '^summary:' "$dir"/cg.out.* | head -1 | cut -d' ' -f2)"
if [ -n "${CALLGRIND_OUT:-}" ]; then
    cp "$(grep -l '^summary:' "$dir"/cg.out.* | head -1)" "$CALLGRIND_OUT"
fi

# Page faults and CPU ticks, without valgrind.
start_daemon "$mcpd"
python3 "$dir/client.py" "$dir/mcpd.sock" 20 "$payload"
read -r f0 u0 s0 <<< "$(awk '{print $10, $14, $15}' "/proc/$pid/stat")"
python3 "$dir/client.py" "$dir/mcpd.sock" "$calls" "$payload"
read -r f1 u1 s1 <<< "$(awk '{print $10, $14, $15}' "/proc/$pid/stat")"
kill "$pid"; wait "$pid" 2>/dev/null || true

echo "mcpd $("$mcpd" --version 2>/dev/null || echo "$mcpd"), $payload, $calls calls of one agent"
echo "  instructions per call (callgrind):  $((ir / calls))"
echo "  minor page faults per call:         $(( (f1 - f0) / calls )).$(( (f1 - f0) * 10 / calls % 10 ))"
echo "  CPU ticks (user+system) for all:    $(( (u1 - u0) + (s1 - s0) )) (of $(getconf CLK_TCK) a second)"
