#!/usr/bin/env bash
# Regenerates link/text-order.txt, the functions release builds link first (build.rs).
#
# Runs the daemon under callgrind with ten fixture servers, asks for its status (what
# `mcpd ctl status` asks), waits until an agent sees all their tools, makes the calls
# agents commonly make (tools/list, tools/call with a small and a 1 MiB result,
# resources, prompts, ping), then stops it. Every function of the mcpd binary that ran is
# listed, by its symbol name. Rerun it after changes to
# start-up or to the call path, or after updating the compiler or dependencies (their
# symbol names change): the relay benchmark's idle-RSS target shows when it is due.
#
# A symbol's name carries a hash of how its crate was built, and two builds of mcpd are
# made often: `cargo build --release` (also what `cargo install` makes) and the one
# `cargo bench` measures (the bench profile, with the dev-dependencies' features). Both
# are profiled, and the list holds the names of each. Since both write
# target/release/mcpd, the script ends with the bench build there.
#
# Needs valgrind (apt package valgrind), python3 and nm (binutils). Usage:
#   link/text-order.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

for tool in valgrind python3 nm; do
    command -v "$tool" >/dev/null || { echo "text-order: $tool is needed" >&2; exit 1; }
done
work="$(mktemp -d /tmp/mcpd-order.XXXXXX)"
daemon=
cleanup() {
    if [ -n "$daemon" ]; then kill -KILL "$daemon" 2>/dev/null || true; fi
    rm -rf "$work"
}
trap cleanup EXIT

# Runs target/release/mcpd under callgrind through start-up and the calls, and writes the
# functions of it that ran to $1.
profile() {
    local out="$1" mcpd="$PWD/target/release/mcpd" fixture="$PWD/target/release/mcpd-fixture"
    rm -rf "$work/state" "$work/mcpd.sock"
    {
        echo "[daemon]"
        echo "state_dir = \"$work/state\""
        for i in 0 1 2 3 4 5 6 7 8 9; do
            printf '\n[servers.idle0%s]\ncommand = "%s"\nargs = []\n' "$i" "$fixture"
        done
    } >"$work/mcpd.toml"
    valgrind --tool=callgrind --demangle=no --compress-strings=no \
        --callgrind-out-file="$work/callgrind.out" \
        "$mcpd" serve --config "$work/mcpd.toml" --socket "$work/mcpd.sock" \
        >"$work/daemon.log" 2>&1 &
    daemon=$!
    python3 - "$work/mcpd.sock" <<'PY'
import json, os, socket, sys, time

path = sys.argv[1]
deadline = time.monotonic() + 120  # the daemon runs about 50 times slower under callgrind
while not os.path.exists(path):
    if time.monotonic() > deadline:
        sys.exit("text-order: the daemon's socket never appeared")
    time.sleep(0.1)
s = socket.socket(socket.AF_UNIX)
s.connect(path)
f = s.makefile("rwb")
next_id = 0

def request(method, params=None):
    global next_id
    next_id += 1
    msg = {"jsonrpc": "2.0", "id": next_id, "method": method}
    if params is not None:
        msg["params"] = params
    f.write((json.dumps(msg) + "\n").encode())
    f.flush()
    while True:
        line = f.readline()
        if not line:
            sys.exit("text-order: the daemon closed the connection")
        m = json.loads(line)
        if m.get("id") == next_id:
            if "error" in m:
                sys.exit(f"text-order: {method}: {m['error']}")
            return m["result"]

request("mcpd/status")  # what `mcpd ctl status` asks, before any initialize
request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                       "clientInfo": {"name": "text-order", "version": "1"}})
f.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
f.flush()
while True:
    names = {t["name"] for t in request("tools/list")["tools"]}
    if all(f"idle0{i}__echo" in names for i in range(10)):
        break
    if time.monotonic() > deadline:
        sys.exit("text-order: the servers' tools never all appeared")
    time.sleep(0.2)
for i in range(3):
    request("tools/call", {"name": f"idle0{i}__echo", "arguments": {"message": "hello"}})
request("tools/call", {"name": "idle00__big", "arguments": {"bytes": 1048576}})
request("resources/list")
request("prompts/list")
request("ping")
PY
    kill -TERM "$daemon"
    wait "$daemon" || true
    daemon=
    python3 - "$work/callgrind.out" "$mcpd" "$out" <<'PY'
import subprocess, sys

profile, binary, out = sys.argv[1:]
ran, obj = set(), None
for line in open(profile):
    if line.startswith("ob="):
        obj = line[3:].strip()
    elif line.startswith("fn=") and obj == binary:
        # callgrind marks recursion depth with a quote suffix: the symbol is before it.
        ran.add(line[3:].strip().split("'")[0])
sizes = {}
nm = subprocess.run(["nm", "-S", binary], capture_output=True, text=True, check=True)
for line in nm.stdout.splitlines():
    parts = line.split()
    if len(parts) == 4 and parts[2] in "tT":
        sizes[parts[3]] = int(parts[1], 16)
listed = sorted(n for n in ran if n in sizes)
with open(out, "w") as f:
    f.write("".join(n + "\n" for n in listed))
total = sum(sizes[n] for n in listed)
text = sum(sizes.values())
print(f"text-order: {len(listed)} functions ran, {total / 1e6:.2f} MB of {text / 1e6:.2f} MB of code")
PY
}

# A build that is up to date does not write target/release/mcpd again: removing it makes
# cargo put this build's binary there.
rm -f target/release/mcpd
cargo build --release --locked --bins
profile "$work/release.txt"
rm -f target/release/mcpd
cargo bench --locked --bench relay --no-run
profile "$work/bench.txt"
sort -u "$work/release.txt" "$work/bench.txt" >link/text-order.txt
echo "text-order: $(wc -l <link/text-order.txt) names in link/text-order.txt"
