#!/usr/bin/env bash
# Regenerates docs/performance.md's table from one full run of the relay benchmark.
#
#   benches/perf-table.sh [relay bench options]     (default: --concurrency 1,8,64 --duration 2)
#
# The bench writes its Markdown (`--table`): calls/s and p50 on every path, including a
# stdio client through `mcpd connect`, the memory figures and each target with PASS/FAIL.
# This script puts it between the `perf-table` markers in docs/performance.md, under a line naming
# the commit it measured. It changes nothing when the bench fails.
set -euo pipefail
cd "$(dirname "$0")/.."

args=("$@")
if [ ${#args[@]} -eq 0 ]; then
    args=(--concurrency 1,8,64 --duration 2)
fi
table="$(mktemp)"
trap 'rm -f "$table"' EXIT

cargo bench --bench relay -- "${args[@]}" --table "$table"

commit="$(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
if ! git diff --quiet HEAD -- src benches 2>/dev/null; then
    commit="$commit with uncommitted changes"
fi
python3 - "$table" "$commit" <<'EOF'
import sys, re
table, commit = open(sys.argv[1]).read().rstrip("\n"), sys.argv[2]
readme = open("docs/performance.md").read()
begin, end = "<!-- perf-table:begin -->", "<!-- perf-table:end -->"
if begin not in readme or end not in readme:
    sys.exit("docs/performance.md has no perf-table markers")
block = f"{begin}\nMeasured at commit `{commit}` with `benches/perf-table.sh`: {table}\n{end}"
head, rest = readme.split(begin, 1)
_, tail = rest.split(end, 1)
open("docs/performance.md", "w").write(head + block + tail)
print("docs/performance.md: performance table updated")
EOF
