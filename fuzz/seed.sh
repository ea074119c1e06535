#!/usr/bin/env bash
# Rebuilds fuzz/corpus/<target>/ from the strings in mcpd's tests (see seed.py).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
exec python3 seed.py "$@"
