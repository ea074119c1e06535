#!/usr/bin/env bash
# The conformance comparison with a second, independently written upstream: the Python SDK
# fixture (fixture/py_server.py, a low-level `Server` serving both eras). Runs the suite
# directly against it over Streamable HTTP, then through mcpd's HTTP listener with it as
# mcpd's stdio upstream, and requires every check that passed directly to pass through
# mcpd, except those mcpd-py-known-losses.txt lists with a reason.
#
#   tests/conformance/via-mcpd-python.sh [REV...]      (default: 2025-11-25 2026-07-28)
#
# The same as `direct.sh --fixture py REV... && via-mcpd.sh --fixture py REV...`: results in
# target/conformance/direct-py-<rev>/ and target/conformance/mcpd-py-<rev>/, logs in
# target/conformance/direct-py-fixture.log and target/conformance/mcpd-py.log. Needs what
# direct.sh and via-mcpd.sh need (.ci/install-peers, .ci/install-conformance, cargo build).
set -euo pipefail

here="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd -P)"
status=0
"$here/direct.sh" --fixture py "$@" || status=1
"$here/via-mcpd.sh" --fixture py "$@" || status=1
exit "$status"
