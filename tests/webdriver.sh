# shellcheck shell=bash
# Sourced by tests/screenshots.sh and benches/dashboard_idle.sh: deadline waits, and a
# headless Chromium driven through chromedriver's WebDriver API with curl and jq, with the
# flags the browser tests use (tests/it/dashboard/browser.rs), so nothing reaches the network.
# `webdriver_start DIR` starts chromedriver (its HOME, profile and log under DIR) and opens
# a session (`$sid`); `wd`, `js` and `goto` speak to it; `webdriver_stop` ends the session
# and kills chromedriver's process group (Chromium's processes are in it). Callers run
# `webdriver_stop` from their exit trap.

driver='' driver_pid='' sid=''

# until_ok SECONDS WHAT COMMAND…: runs COMMAND until it succeeds; fails naming WHAT after SECONDS.
until_ok() {
    local secs=$1 what=$2
    local deadline=$((SECONDS + secs))
    shift 2
    until "$@"; do
        if ((SECONDS >= deadline)); then
            echo "$0: no $what within ${secs}s" >&2
            return 1
        fi
        sleep 0.2
    done
}

# wd METHOD PATH [JSON]: one WebDriver command; prints its value, fails on an error.
wd() {
    local reply
    reply="$(curl -sS -m 60 -X "$1" -H 'Content-Type: application/json' ${3:+--data "$3"} "$driver/$2")" || return 1
    if jq -e '.value | type == "object" and has("error")' <<< "$reply" > /dev/null; then
        echo "$0: WebDriver $1 $2: $(jq -r '.value | .error + ": " + .message' <<< "$reply" | head -n 1)" >&2
        return 1
    fi
    jq -c .value <<< "$reply"
}
# js SCRIPT: runs SCRIPT (a function body) in the page; prints what it returns, as JSON.
js() { wd POST "session/$sid/execute/sync" "$(jq -cn --arg s "$1" '{script: $s, args: []}')"; }
# goto URL: opens URL and waits for it to load.
goto() { wd POST "session/$sid/url" "$(jq -cn --arg u "$1" '{url: $u}')" > /dev/null; }

webdriver_start() {
    local dir=$1 tool
    for tool in chromium chromedriver curl jq; do
        command -v "$tool" > /dev/null || { echo "$0: $tool not found (.ci/install-browser)" >&2; return 1; }
    done
    mkdir -p "$dir/home"
    # --port=0: chromedriver binds a free port itself and says which on stdout.
    HOME="$dir/home" XDG_CONFIG_HOME="$dir/home/.config" XDG_CACHE_HOME="$dir/home/.cache" \
        setsid chromedriver --port=0 --log-path="$dir/chromedriver.log" \
        > "$dir/chromedriver.out" 2>&1 < /dev/null &
    driver_pid=$!
    until_ok 60 "chromedriver" _webdriver_ready "$dir"
    # Chromium's first start on a loaded machine sometimes fails; a later one does not.
    until_ok 120 "Chromium session" _webdriver_session "$dir"
}
_webdriver_ready() {
    local port
    # The file appears once the background shell has opened it.
    port="$(sed -n 's/.*started successfully on port \([0-9]*\).*/\1/p' "$1/chromedriver.out" 2> /dev/null)"
    [[ -n $port ]] && driver="http://127.0.0.1:$port" &&
        curl -sf -m 5 "$driver/status" | jq -e .value.ready > /dev/null
}
_webdriver_session() {
    local caps
    caps="$(jq -cn --arg profile "$1/profile-$RANDOM" '{capabilities: {alwaysMatch: {
        browserName: "chrome", timeouts: {pageLoad: 20000},
        "goog:chromeOptions": {binary: "/usr/bin/chromium", args: ["--headless", "--no-sandbox",
            "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--no-proxy-server", "--hide-scrollbars",
            "--window-size=1280,900", "--user-data-dir=" + $profile]}}}}')"
    sid="$(wd POST session "$caps" | jq -r .sessionId)"
}

webdriver_stop() {
    # Chromium quits when its session ends; whatever is left dies with the group.
    if [[ -n $sid ]]; then
        curl -s -m 10 -X DELETE "$driver/session/$sid" > /dev/null || true
        sid=''
    fi
    if [[ -n $driver_pid ]]; then
        kill -9 -- "-$driver_pid" 2> /dev/null || true
        wait "$driver_pid" 2> /dev/null || true
        driver_pid=''
    fi
}
