//! Links release builds with the functions the daemon runs at start-up and on common calls side by side (`link/text-order.txt`), so an idle daemon keeps about 3 MiB less of its code resident.
//!
//! The kernel maps a program's code 64 KiB at a time around each page it first runs. The
//! functions an idle daemon has run (about 1.6 MB of an 8 MB `.text`) lay scattered
//! through the binary, so about 5 MiB of code was resident; listed first, in one run,
//! they take about 2 MiB. The list is made by `link/text-order.sh` (see its header); names
//! it lists that a build no longer has are skipped, so a stale list costs memory, never
//! a failed build.
//!
//! Only `lld` takes `--symbol-ordering-file`. It is Rust's default linker for
//! x86_64-unknown-linux-gnu from 1.90; the list is used only there, when no other linker
//! was chosen, and never when `MCPD_TEXT_ORDER=0`.

use std::path::Path;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=link/text-order.txt");
    println!("cargo:rerun-if-env-changed=MCPD_TEXT_ORDER");
    println!("cargo:rerun-if-env-changed=CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_LINKER");
    let env = |k: &str| std::env::var(k).unwrap_or_default();
    let wanted = env("PROFILE") == "release"
        && env("MCPD_TEXT_ORDER") != "0"
        && env("TARGET") == "x86_64-unknown-linux-gnu"
        && std::env::var_os("RUSTC_LINKER").is_none()
        && !env("CARGO_ENCODED_RUSTFLAGS").contains("link")
        && rustc_minor().is_some_and(|minor| minor >= 90);
    if !wanted {
        return;
    }
    let list = Path::new(&env("CARGO_MANIFEST_DIR")).join("link/text-order.txt");
    if !list.is_file() {
        return;
    }
    println!(
        "cargo:rustc-link-arg-bins=-Wl,--symbol-ordering-file={}",
        list.display()
    );
    println!("cargo:rustc-link-arg-bins=-Wl,--no-warn-symbol-ordering");
}

/// The minor version of the compiler building this crate (`rustc 1.95.0 (…)` → 95).
fn rustc_minor() -> Option<u32> {
    let rustc = std::env::var_os("RUSTC")?;
    let out = Command::new(rustc).arg("--version").output().ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    let version = text.split_whitespace().nth(1)?;
    let mut parts = version.split('.');
    (parts.next()? == "1").then_some(())?;
    parts.next()?.parse().ok()
}
