//! The pointer to its socket a daemon under an unusual `XDG_RUNTIME_DIR` leaves for clients.
//!
//! The pointer is left where clients without that variable look last
//! (`/tmp/mcpd-UID/mcpd.sock`), so they find it; it never displaces a daemon listening
//! there, gives the place up to one that binds it, and removes its pointer at exit. Each
//! case runs in a mount namespace with its own `/tmp` and `/run/user`.

use crate::cli::first_contact::in_namespace;
use crate::support::*;
use serde_json::Value;

/// What every script starts with: private `/tmp` and `/run/user`, a config in `$HOME`
/// serving the fixture, `short` (the environment the official SDKs give a server),
/// `wait_for` (a condition awaited for 30 s at most), and `status NAME` (the answer of
/// `mcpd ctl status --json` from that short environment, between markers).
const SETUP: &str = r#"
set -u
mount -t tmpfs -o mode=1777 tmpfs /tmp || { echo "SETUP: cannot mount /tmp"; exit 90; }
mount -t tmpfs -o mode=755 tmpfs /run/user || { echo "SETUP: cannot mount /run/user"; exit 90; }
uid=$(id -u)
export HOME=/tmp/home RUST_LOG=mcpd=info
mkdir -p "$HOME/.config/mcpd" && mkdir -m 700 /tmp/rt
printf '[servers.fx]\ncommand = "%s"\n' "$FIXTURE" >"$HOME/.config/mcpd/mcpd.toml"
place="/tmp/mcpd-$uid/mcpd.sock"
short() { env -i HOME="$HOME" LOGNAME=me PATH="$PATH" SHELL=/bin/sh TERM=dumb USER=me "$@"; }
wait_for() { for _ in $(seq 600); do "$@" && return 0; sleep 0.05; done; echo "SETUP: timed out: $*"; return 1; }
status() { echo "== status $1"; short "$MCPD" ctl status --json; echo "== end rc=$?"; }
in_rt() { XDG_RUNTIME_DIR=/tmp/rt "$MCPD" serve >>"$HOME/rt.log" 2>&1 & }
in_fallback() { env -u XDG_RUNTIME_DIR "$MCPD" serve >>"$HOME/fallback.log" 2>&1 & }
"#;

/// Runs `SETUP` and then `script`; returns stdout, after checking it ran through.
async fn run(script: &str) -> String {
    let (code, out, err) = in_namespace(
        &format!("{SETUP}{script}"),
        &[("MCPD", mcpd_bin()), ("FIXTURE", fixture_bin())],
    )
    .await;
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    assert!(!out.contains("SETUP:"), "{out}\n{err}");
    out
}

/// The daemon pid of the status printed as `== status NAME`.
fn status_pid(out: &str, name: &str) -> Option<u64> {
    let start = out.find(&format!("== status {name}\n"))?;
    let rest = &out[start..];
    let body = &rest[rest.find('\n')? + 1..rest.find("== end")?];
    let v: Value = serde_json::from_str(body).ok()?;
    v["daemon"]["pid"].as_u64()
}

/// The number after `KEY=` on its own line.
fn number(out: &str, key: &str) -> u64 {
    out.lines()
        .find_map(|l| l.strip_prefix(&format!("{key}=")))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("{key}= in:\n{out}"))
}

#[tokio::test]
async fn clients_without_xdg_runtime_dir_find_a_daemon_under_another_one_through_its_pointer() {
    let out = run(r#"
in_rt; a=$!; echo "a=$a"
wait_for [ -L "$place" ] || { cat "$HOME/rt.log"; exit 1; }
echo "pointer -> $(readlink "$place")"
status a
kill -TERM $a; wait $a; echo "a exit=$?"
if [ -e "$place" ] || [ -L "$place" ]; then echo "the pointer stayed"; else echo "the pointer went"; fi
"#)
    .await;
    assert!(
        out.contains("pointer -> /tmp/rt/mcpd/mcpd.sock"),
        "the pointer names the socket:\n{out}"
    );
    assert_eq!(
        status_pid(&out, "a"),
        Some(number(&out, "a")),
        "a client without XDG_RUNTIME_DIR reached the daemon:\n{out}"
    );
    assert!(out.contains("a exit=0"), "{out}");
    assert!(out.contains("the pointer went"), "removed at exit:\n{out}");
}

#[tokio::test]
async fn a_pointer_never_displaces_a_daemon_at_the_fallback_and_gives_way_to_one_that_binds_it() {
    let out = run(r#"
# A daemon listening at the fallback place keeps it.
in_fallback; b=$!; echo "b=$b"
wait_for [ -S "$place" ]
in_rt; c=$!
wait_for grep -q "another daemon answers" "$HOME/rt.log" || { cat "$HOME/rt.log"; exit 1; }
[ -L "$place" ] && echo "b lost the place"
status kept
kill -TERM $c; wait $c
[ -S "$place" ] && [ ! -L "$place" ] && echo "b's socket stayed"
kill -TERM $b; wait $b

# A daemon that binds the fallback place takes it from a pointer, which its daemon
# then leaves alone.
in_rt; c=$!
wait_for [ -L "$place" ]
in_fallback; d=$!; echo "d=$d"
wait_for [ -S "$place" -a ! -L "$place" ] || { cat "$HOME/fallback.log"; exit 1; }
status taken
kill -TERM $c; wait $c
[ -S "$place" ] && [ ! -L "$place" ] && echo "d's socket stayed"
status after
kill -TERM $d; wait $d
"#)
    .await;
    assert!(!out.contains("b lost the place"), "{out}");
    assert_eq!(status_pid(&out, "kept"), Some(number(&out, "b")), "{out}");
    assert!(out.contains("b's socket stayed"), "{out}");
    assert_eq!(status_pid(&out, "taken"), Some(number(&out, "d")), "{out}");
    assert!(out.contains("d's socket stayed"), "{out}");
    assert_eq!(status_pid(&out, "after"), Some(number(&out, "d")), "{out}");
}
