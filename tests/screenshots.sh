#!/usr/bin/env bash
# Renders the dashboard's screenshots for the docs: tests/screenshots.sh [OUT_DIR]
# (default docs/images) writes dashboard-overview.png and dashboard-server.png there.
#
# It builds mcpd and the fixture server (debug), starts `mcpd serve` in a scratch
# directory with three fixture servers (`notes` with several tools, `search` with
# `pin = "approve"` so its definitions are held, `broken`, which exits during its
# handshake and ends up failed), makes a few calls so the latency chart has data, and
# keeps one agent (`mcpd connect`) with a call to `notes__hang` in flight. Then headless
# Chromium, driven over chromedriver's WebDriver API with curl (tests/webdriver.sh),
# visits the login address `mcpd ctl ui --no-browser` prints (which sets the session
# cookie), then the overview and the `notes` server page, and saves each as a PNG (the
# window as tall as the page). Every wait has a deadline; on exit a trap ends the
# browser, the agent and the daemon and removes the scratch directory.
#
# Needs Debian's chromium and chromium-driver (.ci/install-browser), curl, jq and base64.
# Not part of .ci/run: rerun it by hand when the pages change, and look at the images.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${1:-$root/docs/images}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
# shellcheck source=tests/webdriver.sh
source "$root/tests/webdriver.sh"

cd "$root"
cargo build --locked --bin mcpd --bin mcpd-fixture >&2
bin="$(cargo metadata --format-version 1 --no-deps | jq -r .target_directory)/debug"
mcpd="$bin/mcpd"

dir="$(mktemp -d /tmp/mcpd-shots.XXXXXX)"
daemon_pid='' agent_pid=''
# stop PID: SIGTERM, up to 5 s to exit, then SIGKILL; reaps it.
stop() {
    kill "$1" 2> /dev/null || return 0
    for _ in $(seq 50); do kill -0 "$1" 2> /dev/null || break; sleep 0.1; done
    kill -9 "$1" 2> /dev/null || true
    wait "$1" 2> /dev/null || true
}
cleanup() {
    set +e
    webdriver_stop
    exec 3>&- 2> /dev/null
    [[ -n $agent_pid ]] && stop "$agent_pid"
    [[ -n $daemon_pid ]] && stop "$daemon_pid"
    rm -rf "$dir"
}
trap cleanup EXIT
fail() {
    echo "$0: $1; the daemon's log ends:" >&2
    tail -n 20 "$dir/daemon.log" >&2
    exit 1
}

# The fixture is found in PATH, so the pages show `mcpd-fixture`, not a build path.
cat > "$dir/mcpd.toml" << TOML
[daemon]
state_dir = "$dir/state"
shutdown_grace = "1s"

[servers.notes]
command = "mcpd-fixture"
args = ["--tools", "echo,add,sleep,hang,structured,image", "--label", "notes"]
timeout = "10m"

[servers.search]
command = "mcpd-fixture"
args = ["--tools", "echo,add"]
pin = "approve"

[servers.broken]
command = "mcpd-fixture"
args = ["--exit-during-handshake", "--stderr-noise", "1"]
restart = { max_restarts = 1 }
TOML
export MCPD_SOCKET="$dir/mcpd.sock" MCPD_CONFIG="$dir/mcpd.toml"
PATH="$bin:$PATH" "$mcpd" serve > "$dir/daemon.log" 2>&1 &
daemon_pid=$!

status() { "$mcpd" ctl status --json 2> /dev/null; }
settled() {
    kill -0 "$daemon_pid" 2> /dev/null || fail "the daemon exited"
    status | jq -e '.daemon.ui != null and
        ([.servers[] | {(.name): .state}] | add) == {notes: "ready", search: "ready", broken: "failed"}' > /dev/null
}
until_ok 60 "ready daemon (notes and search ready, broken failed)" settled || fail "not ready"

for i in $(seq 20); do "$mcpd" ctl call notes__echo "{\"text\": \"call $i\"}" > /dev/null; done
for ms in 2 5 10 20 40; do "$mcpd" ctl call notes__sleep "{\"ms\": $ms}" > /dev/null; done

# One agent, as a client runs it, with a call that never ends.
mkfifo "$dir/agent.in"
(cd "$dir" && exec "$mcpd" connect < agent.in > agent.out 2> agent.err) &
agent_pid=$!
exec 3> "$dir/agent.in"
printf '%s\n' \
    '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"example-agent","version":"1.0"}}}' \
    '{"jsonrpc":"2.0","method":"notifications/initialized"}' \
    '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"notes__hang","arguments":{}}}' >&3
in_flight() { status | jq -e '.servers[] | select(.name == "notes") | .in_flight == 1' > /dev/null; }
until_ok 30 "call in flight" in_flight || fail "the agent's call is not in flight"

webdriver_start "$dir"

# shoot FILE: makes the window as tall as the page (at least 900 px), then saves it.
shoot() {
    local height
    height="$(js 'return document.documentElement.scrollHeight + window.outerHeight - window.innerHeight')"
    wd POST "session/$sid/window/rect" "{\"width\": 1280, \"height\": $((height > 900 ? height : 900))}" > /dev/null
    wd GET "session/$sid/screenshot" | jq -r . | base64 -d > "$out/$1"
    echo "$out/$1: $(($(stat -c %s "$out/$1") / 1024)) KiB" >&2
}

goto "$("$mcpd" ctl ui --no-browser 2> /dev/null)"
live() { js 'var n = document.getElementById("freshness"); return !!n && n.textContent.indexOf("Live") === 0' | grep -qx true; }
until_ok 30 "overview following the event stream (login refused?)" live
shoot dashboard-overview.png

goto "$(status | jq -r .daemon.ui)servers/notes"
loaded() { js 'return document.images.length > 0 && Array.from(document.images).every(function (i) { return i.complete && i.naturalWidth > 0 })' | grep -qx true; }
until_ok 30 "server page with its chart" loaded
shoot dashboard-server.png
