//! Links release builds with the functions the daemon runs at start-up and on common calls side by side (`link/text-order.txt`), so an idle daemon keeps about 3 MiB less of its code resident.
//!
//! The kernel maps a program's code 64 KiB at a time around each page it first runs. The
//! functions an idle daemon has run (about 1.9 MB of an 8 MB `.text`) lay scattered
//! through the binary, so about 5 MiB of code was resident; listed first, in one run,
//! they take about 2 MiB. The list is made by `link/text-order.sh` (see its header); names
//! it lists that a build no longer has are skipped, so a stale list costs memory, never
//! a failed build.
//!
//! Not every linker takes `--symbol-ordering-file` (lld does: Rust's default linker for
//! x86_64-unknown-linux-gnu from 1.90; GNU ld does not). So the script first links an
//! empty program with the option, the same compiler and the build's own flags, and passes
//! it on only if that worked. `MCPD_TEXT_ORDER=0` turns it off.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

/// The linker options that order the code by `list`.
fn order_args(list: &Path) -> [String; 2] {
    [
        format!("-Wl,--symbol-ordering-file={}", list.display()),
        "-Wl,--no-warn-symbol-ordering".to_owned(),
    ]
}

#[allow(
    clippy::disallowed_macros,
    reason = "cargo reads a build script's instructions from its stdout"
)]
fn main() {
    println!("cargo:rerun-if-changed=link/text-order.txt");
    println!("cargo:rerun-if-env-changed=MCPD_TEXT_ORDER");
    let env = |k: &str| std::env::var(k).unwrap_or_default();
    // The probe's answer depends on the linker and the flags: probe again when they change.
    let triple = env("TARGET").to_uppercase().replace('-', "_");
    for var in [
        "RUSTFLAGS".to_owned(),
        "CARGO_BUILD_RUSTFLAGS".to_owned(),
        format!("CARGO_TARGET_{triple}_RUSTFLAGS"),
        format!("CARGO_TARGET_{triple}_LINKER"),
    ] {
        println!("cargo:rerun-if-env-changed={var}");
    }
    if env("PROFILE") != "release" || env("MCPD_TEXT_ORDER") == "0" {
        return;
    }
    let list = Path::new(&env("CARGO_MANIFEST_DIR")).join("link/text-order.txt");
    let args = order_args(&list);
    if !list.is_file() || !links_with(&args) {
        // A warning would show on every build with such a linker; the idle-RSS figure shows it.
        return;
    }
    for arg in args {
        println!("cargo:rustc-link-arg-bins={arg}");
    }
}

/// Whether an empty program links with `args` added, built as this crate is (the same
/// compiler, target, linker and flags).
fn links_with(args: &[String]) -> bool {
    let env = |k: &str| std::env::var(k).unwrap_or_default();
    let out = Path::new(&env("OUT_DIR")).join("text-order-probe");
    let mut rustc = Command::new(std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into()));
    rustc
        .args(["--crate-name", "text_order_probe", "--crate-type", "bin"])
        .args(["--target", &env("TARGET"), "-o"])
        .arg(&out)
        .arg("-");
    for flag in env("CARGO_ENCODED_RUSTFLAGS")
        .split('\x1f')
        .filter(|f| !f.is_empty())
    {
        rustc.arg(flag);
    }
    if let Some(linker) = std::env::var_os("RUSTC_LINKER") {
        let mut flag = std::ffi::OsString::from("linker=");
        flag.push(linker);
        rustc.arg("-C").arg(flag);
    }
    for arg in args {
        rustc.arg("-C").arg(format!("link-arg={arg}"));
    }
    let Ok(mut child) = rustc
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
    else {
        return false;
    };
    let wrote = child
        .stdin
        .take()
        .is_some_and(|mut stdin| stdin.write_all(b"fn main() {}\n").is_ok());
    child.wait().is_ok_and(|s| s.success()) && wrote
}
