//! `mcpd ctl secret set`, `list` and `rm`.
//!
//! A secret's value read from the terminal without echo or from standard input (never
//! from the command line, which every user can read), handed to the daemon, which stores
//! it where its servers' starts look.

use super::{CtlError, Out, at, request};
use crate::control_api::SECRETS;
use serde_json::{Value, json};
use std::io::{IsTerminal, Read};
use std::path::Path;

/// The largest value read, as the stores take it (64 KiB).
const MAX_VALUE: usize = 64 * 1024;

/// `mcpd ctl secret set NAME`.
pub async fn set(socket: &Path, name: &str) -> Result<(), CtlError> {
    let value = read_value(name)?;
    let r = request(
        socket,
        SECRETS,
        Some(json!({ "op": "set", "name": name, "value": value })),
    )
    .await?;
    let store = at(&r, "store").as_str().unwrap_or("?");
    crate::errln!("stored secret {name} in {}", describe(store));
    let names = |key: &str| -> Vec<String> {
        at(&r, key)
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect()
    };
    let (started, running) = (names("started"), names("running"));
    if !started.is_empty() {
        crate::errln!("starting {}, which waited for it", started.join(", "));
    }
    for server in running {
        crate::errln!(
            "{server} is running with the value it started with: `mcpd ctl restart {server}` gives it the new one"
        );
    }
    Ok(())
}

/// `mcpd ctl secret list`: names and stores, never values.
pub async fn list(socket: &Path) -> Result<(), CtlError> {
    let r = request(socket, SECRETS, Some(json!({ "op": "list" }))).await?;
    let mut out = Out::lock();
    let all = at(&r, "secrets").as_array().cloned().unwrap_or_default();
    let width = all
        .iter()
        .filter_map(|s| at(s, "name").as_str())
        .map(str::len)
        .max()
        .unwrap_or(4)
        .max(4);
    if all.is_empty() {
        writeln!(out, "no secrets stored")?;
    } else {
        writeln!(out, "{:width$}  STORE", "NAME")?;
    }
    for s in &all {
        let name = at(s, "name").as_str().unwrap_or("?");
        let store = at(s, "store").as_str().unwrap_or("?");
        writeln!(out, "{name:width$}  {store}")?;
    }
    let setting = at(&r, "setting").as_str().unwrap_or("?");
    let default = at(&r, "default").as_str().unwrap_or("?");
    let new = match setting {
        "auto" => format!("{} ([daemon] secrets = \"auto\")", describe(default)),
        other => format!("{} ([daemon] secrets = \"{other}\")", describe(other)),
    };
    writeln!(out, "\n`mcpd ctl secret set` stores in {new}")?;
    Ok(())
}

/// `mcpd ctl secret rm NAME`.
pub async fn remove(socket: &Path, name: &str) -> Result<(), CtlError> {
    let r = request(
        socket,
        SECRETS,
        Some(json!({ "op": "remove", "name": name })),
    )
    .await?;
    let removed: Vec<&str> = at(&r, "removed")
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(describe)
        .collect();
    if removed.is_empty() {
        return Err(CtlError::Unexpected(format!(
            "no secret {name:?} in the keyring or mcpd's file store (`mcpd ctl secret list` shows what there is; systemd credentials are the unit's to change)"
        )));
    }
    crate::errln!("removed secret {name} from {}", removed.join(" and "));
    Ok(())
}

fn describe(store: &str) -> &str {
    match store {
        "keyring" => "the keyring",
        "file" => "mcpd's file store",
        "credentials" => "systemd credentials",
        other => other,
    }
}

/// A line typed at the controlling terminal, not echoed. Echo is turned off before the
/// prompt is shown, so nothing typed after the prompt can appear (a password reader that
/// prompts first leaves a moment in which a fast typist's, or a script's, input is
/// echoed: the reason this is not `rpassword`). The terminal's settings are restored
/// however the read ends.
#[allow(
    clippy::disallowed_methods,
    reason = "a command of its own, not the daemon: nothing else runs on its runtime while a person types"
)]
fn read_hidden(prompt: &str) -> Result<String, CtlError> {
    use nix::sys::termios::{LocalFlags, SetArg, tcgetattr, tcsetattr};
    use std::io::{BufRead, Write};
    let tty = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/tty")?;
    let saved = tcgetattr(&tty).map_err(std::io::Error::from)?;
    let mut hidden = saved.clone();
    hidden.local_flags.remove(LocalFlags::ECHO);
    // The Enter that ends the line still moves to the next one.
    hidden.local_flags.insert(LocalFlags::ECHONL);
    tcsetattr(&tty, SetArg::TCSANOW, &hidden).map_err(std::io::Error::from)?;
    struct Restore<'a>(&'a std::fs::File, nix::sys::termios::Termios);
    impl Drop for Restore<'_> {
        fn drop(&mut self) {
            let _ = tcsetattr(self.0, SetArg::TCSANOW, &self.1);
        }
    }
    let _restore = Restore(&tty, saved);
    (&tty).write_all(prompt.as_bytes())?;
    let mut line = String::new();
    std::io::BufReader::new(&tty)
        .take(MAX_VALUE as u64 + 2)
        .read_line(&mut line)?;
    while line.ends_with(['\n', '\r']) {
        line.pop();
    }
    Ok(line)
}

/// The value: typed at the terminal without echo, or read from standard input when it
/// is not a terminal (one trailing newline dropped).
fn read_value(name: &str) -> Result<String, CtlError> {
    let value = if std::io::stdin().is_terminal() {
        read_hidden(&format!("value of secret {name} (not shown): "))?
    } else {
        let mut bytes = Vec::new();
        std::io::stdin()
            .lock()
            .take(MAX_VALUE as u64 + 2)
            .read_to_end(&mut bytes)?;
        let mut text = String::from_utf8(bytes).map_err(|_| {
            CtlError::Unexpected("the value on standard input is not UTF-8 text".into())
        })?;
        if text.ends_with('\n') {
            text.pop();
            if text.ends_with('\r') {
                text.pop();
            }
        }
        text
    };
    if value.is_empty() {
        return Err(CtlError::Unexpected(format!(
            "no value given for secret {name}: type it when asked, or pipe it in (`mcpd ctl secret set {name} < file`)"
        )));
    }
    if value.len() > MAX_VALUE {
        return Err(CtlError::Unexpected(format!(
            "the value of secret {name} is over {} KiB",
            MAX_VALUE / 1024
        )));
    }
    Ok(value)
}
