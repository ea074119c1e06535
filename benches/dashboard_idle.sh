#!/usr/bin/env bash
# What the dashboard costs a daemon nobody is looking at: benches/dashboard_idle.sh [SECONDS]
# (default 60). Builds mcpd and the fixture (release) and runs `mcpd serve` with three
# fixture servers twice, with `[daemon] ui = false` and with `ui = true` (the default).
# After the servers are ready it waits until the daemon is idle (five successive seconds
# without a context switch, within 60 s), then measures for SECONDS:
#   - memory: VmRSS and RssAnon from /proc/PID/status, the median of 5 samples 1 s apart;
#   - wake-ups: the daemon's context switches over the window, summed over
#     /proc/PID/task/*/status (a thread that exits within the window takes its count
#     with it): voluntary ones (a thread slept, then woke: the wake-ups) per window and
#     per second, and nonvoluntary ones (preempted while running: other load on the
#     machine shows up here) beside them.
# With `ui = true` it measures three phases: no page open; one overview page open in
# headless Chromium (tests/webdriver.sh; its event stream asks for changes once a second);
# and after that page is closed (Chromium quits, then the same idle wait). Prints one
# Markdown table. Only the daemon's process is counted, not the servers'. Run it more than
# once: a window holds more or fewer of the servers' liveness pings.
set -euo pipefail

secs="${1:-60}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=tests/webdriver.sh
source "$root/tests/webdriver.sh"
cd "$root"
cargo build --release --locked --bin mcpd --bin mcpd-fixture >&2
bin="$(cargo metadata --format-version 1 --no-deps | jq -r .target_directory)/release"
mcpd="$bin/mcpd"

dir="$(mktemp -d /tmp/mcpd-idle.XXXXXX)"
pid=''
stop_daemon() {
    [[ -n $pid ]] || return 0
    kill "$pid" 2> /dev/null || true
    for _ in $(seq 100); do kill -0 "$pid" 2> /dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2> /dev/null || true
    wait "$pid" 2> /dev/null || true
    pid=''
}
cleanup() {
    set +e
    webdriver_stop
    stop_daemon
    rm -rf "$dir"
}
trap cleanup EXIT

# switches KIND: the daemon's context switches of KIND so far (a regular expression:
# voluntary, nonvoluntary, or (non)?voluntary for both), over every thread it has now.
switches() {
    cat /proc/"$pid"/task/*/status 2> /dev/null |
        awk -v k="$1" '$1 ~ ("^" k "_ctxt_switches:$") { n += $2 } END { print n + 0 }'
}
# median KEY: the median of 5 samples of /proc/PID/status's KEY, in MiB.
median() {
    for _ in 1 2 3 4 5; do
        awk -v k="$1:" '$1 == k { print $2 }' /proc/"$pid"/status
        sleep 1
    done | sort -n | awk '{ v[NR] = $1 } END { printf "%.1f", v[3] / 1024 }'
}
# Idle: five successive seconds without a context switch.
quiet_seconds=0
quiet() {
    local before
    before="$(switches '(non)?voluntary')"
    sleep 1
    if (($(switches '(non)?voluntary') == before)); then quiet_seconds=$((quiet_seconds + 1)); else quiet_seconds=0; fi
    ((quiet_seconds >= 5))
}
settle() {
    quiet_seconds=0
    until_ok 60 "idle daemon" quiet || echo "$0: measuring anyway" >&2
}
# measure UI PHASE: one row of the table.
measure() {
    local rss anon vol non
    rss="$(median VmRSS)" anon="$(median RssAnon)"
    vol="$(switches voluntary)" non="$(switches nonvoluntary)"
    sleep "$secs"
    vol=$(($(switches voluntary) - vol)) non=$(($(switches nonvoluntary) - non))
    printf "| \`ui = %s\` | %s | %s | %s | %s | %s | %s |\n" "$1" "$2" "$rss" "$anon" "$vol" \
        "$(awk -v n="$vol" -v s="$secs" 'BEGIN { printf "%.2f", n / s }')" "$non"
}

start() {
    cat > "$dir/mcpd.toml" << TOML
[daemon]
state_dir = "$dir/state"
ui = $1
[servers.fx1]
command = "$bin/mcpd-fixture"
[servers.fx2]
command = "$bin/mcpd-fixture"
[servers.fx3]
command = "$bin/mcpd-fixture"
TOML
    rm -rf "$dir/state" "$dir/mcpd.sock"
    "$mcpd" serve --config "$dir/mcpd.toml" --socket "$dir/mcpd.sock" > "$dir/daemon.log" 2>&1 &
    pid=$!
    until_ok 60 "ready daemon" ready || { cat "$dir/daemon.log" >&2; exit 1; }
}
ready() {
    kill -0 "$pid" 2> /dev/null || { cat "$dir/daemon.log" >&2; exit 1; }
    "$mcpd" ctl status --json --socket "$dir/mcpd.sock" 2> /dev/null |
        jq -e '[.servers[].state] == ["ready", "ready", "ready"]' > /dev/null
}

echo "# $(git rev-parse --short HEAD), $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg) at the start; ${secs} s per window" >&2
echo "| config | phase | VmRSS MiB | RssAnon MiB | wake-ups in ${secs} s | per s | nonvoluntary |"
echo "|---|---|---|---|---|---|---|"

start false
settle
measure false "no page open"
stop_daemon

start true
settle
measure true "no page open"
webdriver_start "$dir"
goto "$("$mcpd" ctl ui --no-browser --socket "$dir/mcpd.sock" 2> /dev/null)"
live() { js 'var n = document.getElementById("freshness"); return !!n && n.textContent.indexOf("Live") === 0' | grep -qx true; }
until_ok 30 "overview following the event stream" live
measure true "overview open"
webdriver_stop
settle
measure true "page closed"
stop_daemon
echo "# load average $(cut -d' ' -f1-3 /proc/loadavg) at the end" >&2
