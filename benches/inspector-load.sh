#!/usr/bin/env bash
# The MCP Inspector's load mode on the four stdio paths of issue 19 (not run in CI).
#
#   benches/inspector-load.sh [CONCURRENCY...]        (default: 1 8 64)
#
# A stdio client (the published @modelcontextprotocol/inspector, `--cli --load`) calls a
# fast echo tool (`mcpd-fixture`'s `echo`) REQUESTS times at each concurrency, REPEATS
# times, on four paths, and prints the median calls/s of each:
#
#   direct          inspector -> mcpd-fixture (its own stdio server)
#   socat hop       inspector -> socat - UNIX-CONNECT:relay.sock -> socat UNIX-LISTEN,fork
#                   -> EXEC:mcpd-fixture (a bare socket hop: the floor for any daemon)
#   mcpd connect    inspector -> mcpd connect -> mcpd.sock -> mcpd -> mcpd-fixture
#   socat -> mcpd   inspector -> socat - UNIX-CONNECT:mcpd.sock -> mcpd -> mcpd-fixture
#
# and the two ratios the issue's targets are about: mcpd connect ÷ socat into mcpd (the
# shim, ≥ 0.95) and mcpd connect ÷ socat hop (end to end, ≥ 0.9). The Inspector starts
# each path's command itself, over Node's child-process stdio (a socketpair, not a pipe).
#
# Needs: socat, Node.js and npm (the Inspector is installed once into target/inspector,
# pinned to INSPECTOR_VERSION; its package asks for Node 22.19, its CLI runs on Node 20),
# and release binaries (built with `cargo build --release --bins` when missing).
# Environment: REQUESTS (default 3000), REPEATS (3), SHIM (the mcpd binary whose `connect`
# the mcpd-connect path runs; default target/release/mcpd, to compare another build), MCPD
# and FIXTURE (the daemon and server binaries; default target/release/mcpd, mcpd-fixture).
set -euo pipefail

INSPECTOR_VERSION=2.12.0
REQUESTS=${REQUESTS:-3000}
REPEATS=${REPEATS:-3}
CONCURRENCY=("${@:-1 8 64}")
# shellcheck disable=SC2206 # the default is one word list
CONCURRENCY=(${CONCURRENCY[*]})

root=$(cd "$(dirname "$0")/.." && pwd)
mcpd=${MCPD:-$root/target/release/mcpd}
fixture=${FIXTURE:-$root/target/release/mcpd-fixture}
shim=${SHIM:-$mcpd}
prefix=$root/target/inspector

command -v socat >/dev/null || { echo "error: socat is not installed" >&2; exit 69; }
command -v npm >/dev/null || { echo "error: npm (Node.js) is not installed" >&2; exit 69; }
if [[ ! -x $mcpd || ! -x $fixture ]]; then
    (cd "$root" && cargo build --release --bins)
fi
inspector=$prefix/node_modules/@modelcontextprotocol/inspector/clients/launcher/build/index.js
if [[ ! -f $inspector ]] || ! grep -q "\"version\": \"$INSPECTOR_VERSION\"" \
    "$prefix/node_modules/@modelcontextprotocol/inspector/package.json"; then
    npm install --prefix "$prefix" --no-audit --no-fund --loglevel=error \
        "@modelcontextprotocol/inspector@$INSPECTOR_VERSION"
fi

work=$(mktemp -d /tmp/mcpd-inspector.XXXXXX)
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

cat >"$work/mcpd.toml" <<EOF
[daemon]
state_dir = "$work/state"

[servers.fx]
command = "$fixture"
EOF
"$mcpd" serve --config "$work/mcpd.toml" --socket "$work/mcpd.sock" 2>"$work/mcpd.log" &
pids+=($!)
socat "UNIX-LISTEN:$work/relay.sock,fork" "EXEC:$fixture" 2>"$work/relay.log" &
pids+=($!)
for _ in $(seq 100); do
    [[ -S $work/mcpd.sock && -S $work/relay.sock ]] && "$mcpd" ctl status --socket "$work/mcpd.sock" 2>/dev/null | grep -q ready && break
    sleep 0.1
done
"$mcpd" ctl status --socket "$work/mcpd.sock" | grep -q ready || { cat "$work/mcpd.log"; exit 1; }

# One load run: prints its calls/s, or fails with the Inspector's output when any call failed.
load() {
    local c=$1 tool=$2; shift 2
    local out
    out=$(node "$inspector" --cli --method tools/call --tool-name "$tool" --tool-arg text=hi \
        --load --load-concurrency "$c" --load-requests "$REQUESTS" --format json -- "$@" \
        2>>"$work/inspector.log")
    node -e '
        const out = JSON.parse(process.argv[1]), s = out.result ?? out;
        if (s.ok !== s.requests) { console.error("calls failed:", JSON.stringify(s)); process.exit(1); }
        console.log(s.throughput);' "$out"
}

median() { printf '%s\n' "$@" | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

paths=(direct "socat hop" "mcpd connect" "socat -> mcpd")
run_path() {
    local c=$1 path=$2
    case $path in
        direct) load "$c" echo "$fixture" ;;
        "socat hop") load "$c" echo socat - "UNIX-CONNECT:$work/relay.sock" ;;
        "mcpd connect") load "$c" fx__echo "$shim" connect --socket "$work/mcpd.sock" ;;
        "socat -> mcpd") load "$c" fx__echo socat - "UNIX-CONNECT:$work/mcpd.sock" ;;
    esac
}

echo "inspector $INSPECTOR_VERSION --cli --load: $REQUESTS tools/call of echo per run, median of $REPEATS"
echo "node $(node --version); $(socat -V | grep -m1 'socat version'); shim: $shim; $(nproc) cores; loadavg $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-4s %14s %14s %14s %14s %12s %12s\n' c direct "socat hop" "mcpd connect" "socat->mcpd" "shim ratio" "e2e ratio"
for c in "${CONCURRENCY[@]}"; do
    declare -A med=()
    # Interleaved, so that a slow spell on the machine falls on every path alike.
    declare -A runs=()
    for _ in $(seq "$REPEATS"); do
        for p in "${paths[@]}"; do runs[$p]+="$(run_path "$c" "$p") "; done
    done
    for p in "${paths[@]}"; do
        # shellcheck disable=SC2086 # a list of numbers
        med[$p]=$(median ${runs[$p]})
    done
    ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
    printf '%-4s %14s %14s %14s %14s %12s %12s\n' "$c" "${med[direct]}" "${med[socat hop]}" \
        "${med[mcpd connect]}" "${med[socat -> mcpd]}" \
        "$(ratio "${med[mcpd connect]}" "${med[socat -> mcpd]}")" \
        "$(ratio "${med[mcpd connect]}" "${med[socat hop]}")"
    unset med runs
done
echo "shim ratio = mcpd connect ÷ socat -> mcpd (target ≥ 0.95); e2e ratio = mcpd connect ÷ socat hop (target ≥ 0.9 at c=1, 8)"
echo "loadavg at end $(cut -d' ' -f1-3 /proc/loadavg)"
