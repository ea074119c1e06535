#!/usr/bin/env bash
# Runs a command beside a throwaway desktop keyring: a private D-Bus session bus
# (dbus-run-session) with gnome-keyring-daemon's Secret Service on it, its login keyring
# created and unlocked with a fixed password, all under a fresh HOME and XDG directories
# in a temporary directory, so the user's own keyring is never touched. The bus and the
# keyring end with the command.
#
#   tests/keyring/with-keyring.sh COMMAND [ARG...]
#   MCPD_REQUIRE_KEYRING=1 tests/keyring/with-keyring.sh \
#       cargo nextest run --locked -E 'test(/^secrets::keyring_tests::/)'
#
# The command sees DBUS_SESSION_BUS_ADDRESS (the private bus), whatever
# gnome-keyring-daemon prints for its clients, and MCPD_TEST_KEYRING=1, which tells the
# keyring tests (src/secrets/keyring_tests.rs) that this bus is theirs to write to.
# CARGO_HOME and RUSTUP_HOME stay where they were, so cargo keeps its toolchain and cache.
# Needs dbus-run-session and gnome-keyring-daemon: .ci/install-keyring installs them.
set -euo pipefail

die() { echo "with-keyring: error: $*" >&2; exit 1; }

if [ "${1:-}" = "--inside-session" ]; then
    shift
    # Creates the login keyring (the default collection) at first use, unlocked, and
    # prints the variables its clients need, if any (none for the secrets component).
    # It forks a daemon that lives as long as the bus.
    env_lines="$(printf '%s' "$MCPD_KEYRING_PASSWORD" \
        | gnome-keyring-daemon --unlock --components=secrets)" \
        || die "gnome-keyring-daemon --unlock failed"
    unset MCPD_KEYRING_PASSWORD
    while IFS='=' read -r key value; do
        [ -n "$key" ] && export "$key=$value"
    done <<<"$env_lines"
    # The daemon owns org.freedesktop.secrets before --unlock returns; wait a little all
    # the same, so a slow machine fails here, with this message, not in a test.
    for _ in $(seq 50); do
        if dbus-send --session --print-reply --dest=org.freedesktop.DBus /org/freedesktop/DBus \
            org.freedesktop.DBus.NameHasOwner string:org.freedesktop.secrets 2>/dev/null \
            | grep -q 'boolean true'; then
            export MCPD_TEST_KEYRING=1
            exec "$@"
        fi
        sleep 0.1
    done
    die "no Secret Service on the session bus 5 s after gnome-keyring-daemon started"
fi

[ $# -gt 0 ] || die "usage: $0 COMMAND [ARG...]"
for tool in dbus-run-session dbus-send gnome-keyring-daemon; do
    command -v "$tool" >/dev/null 2>&1 || die "no $tool on PATH: run .ci/install-keyring (apt-get install dbus gnome-keyring)"
done

tmp="$(mktemp -d "${TMPDIR:-/tmp}/mcpd-keyring.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
mkdir -m 700 "$tmp/home" "$tmp/data" "$tmp/config" "$tmp/cache" "$tmp/runtime"
script="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)/$(basename "${BASH_SOURCE[0]}")"

# dbus-daemon may warn that it cannot raise its open-files limit in a container; the
# session bus works without. Without a display, an unlock prompt is dismissed at once
# (gcr-prompter cannot open one) rather than shown on a developer's screen.
env -u DISPLAY -u WAYLAND_DISPLAY \
CARGO_HOME="${CARGO_HOME:-$HOME/.cargo}" \
RUSTUP_HOME="${RUSTUP_HOME:-$HOME/.rustup}" \
HOME="$tmp/home" \
XDG_DATA_HOME="$tmp/data" \
XDG_CONFIG_HOME="$tmp/config" \
XDG_CACHE_HOME="$tmp/cache" \
XDG_RUNTIME_DIR="$tmp/runtime" \
MCPD_KEYRING_PASSWORD="mcpd-test-keyring" \
    dbus-run-session -- "$script" --inside-session "$@"
