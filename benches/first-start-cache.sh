#!/usr/bin/env bash
# What a confined server's private package cache costs: the time from the daemon's start
# to an `npx` server being ready, and the disk its cache takes, in three cases:
#   user-warm     unconfined, `npx` using a warm `~/.npm` (what every start was before)
#   private-cold  confined, its private cache empty (a server's first start)
#   private-warm  confined, its private cache filled by the run before
# Each is run RUNS times; the home is a temporary one whose `~/.npm` an untimed
# unconfined run fills first. Needs the network (the npm registry) and jq.
#
#   benches/first-start-cache.sh [PACKAGE] [RUNS] [MCPD_BINARY]
#
# Defaults: @modelcontextprotocol/server-memory, 3 runs, target/debug/mcpd (the time is
# npm's; the daemon's part is a few milliseconds).
set -euo pipefail
cd "$(dirname "$0")/.."

pkg="${1:-@modelcontextprotocol/server-memory}"
runs="${2:-3}"
mcpd="$(realpath "${3:-target/debug/mcpd}")"
dir="$(mktemp -d /tmp/mcpd-fsc.XXXXXX)"
pid=""
cleanup() {
    if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
    rm -rf "$dir"
}
trap cleanup EXIT
mkdir -p "$dir/home"

# Starts a daemon with the server (`sandbox` true or false, XDG_CACHE_HOME as given),
# prints the seconds until it is ready, and stops the daemon.
start() {
    local sandbox="$1" cache="$2"
    cat > "$dir/mcpd.toml" <<TOML
[daemon]
sandbox = $sandbox
state_dir = "$dir/state"
[servers.mem]
command = "npx"
args = ["-y", "$pkg"]
TOML
    rm -f "$dir/s.sock"
    local t0 t1
    t0=$(date +%s.%N)
    HOME="$dir/home" XDG_CACHE_HOME="$cache" "$mcpd" serve --config "$dir/mcpd.toml" \
        --socket "$dir/s.sock" 2>>"$dir/daemon.log" &
    pid=$!
    for _ in $(seq 1 1200); do
        if state=$("$mcpd" ctl status --json --socket "$dir/s.sock" 2>/dev/null |
            jq -r '.servers[] | select(.name == "mem") | .state'); then
            case "$state" in
                ready) break ;;
                failed)
                    # This runs in a subshell: the trap does not know this daemon.
                    tail -20 "$dir/daemon.log" >&2
                    kill "$pid"; wait "$pid" 2>/dev/null || true
                    echo "mem failed" >&2; exit 1 ;;
            esac
        fi
        sleep 0.05
    done
    t1=$(date +%s.%N)
    kill "$pid"; wait "$pid" 2>/dev/null || true; pid=""
    echo "$t1 - $t0" | bc
}

start false "$dir/home/.cache" >/dev/null # fills ~/.npm, untimed
for i in $(seq 1 "$runs"); do
    echo "user-warm    run $i: $(start false "$dir/home/.cache") s"
done
for i in $(seq 1 "$runs"); do
    cache="$dir/cold-$i"
    echo "private-cold run $i: $(start true "$cache") s"
    echo "private-warm run $i: $(start true "$cache") s"
done
echo "disk: user ~/.npm $(du -sh "$dir/home/.npm" | cut -f1)," \
    "one server's private cache $(du -sh "$dir/cold-1/mcpd/servers/mem" | cut -f1)"
