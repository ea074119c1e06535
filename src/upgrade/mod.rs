//! `mcpd ctl upgrade`: the daemon re-executes the binary at its own path in the same process.
//!
//! Asked to upgrade, the daemon first checks the binary now at the path it was started
//! from ([`binary`]): it must be there, be executable, be mcpd, and speak this daemon's
//! handover format. Anything else is refused and the daemon goes on serving. A good one
//! gets the answer "upgrading", then the daemon drains as at shutdown (no new requests,
//! calls in flight finish within `shutdown_grace`, servers stop) but keeps its listening
//! socket open, writes the handover ([`handover`]: the socket, the sealing key of task
//! ids and request states, the upgrade count) into a sealed memory file, and `execve`s
//! the new binary: same pid, so systemd sees no restart. The new image takes the socket
//! (connections made meanwhile wait in its backlog) and the key, and starts its servers.
//!
//! What crosses today is the listener and the key, not servers or connections:
//! `mcpd connect` bridges reconnect and replay their sessions (crates/ctl's bridge), so
//! agents behind them see no error; agents on the socket or the HTTP listener see their
//! connection close. docs/operations.md ("Restarts and upgrades") says so.

pub mod binary;
pub mod handover;

use serde_json::{Value, json};
use std::path::PathBuf;
use tokio::sync::{mpsc, oneshot};

/// The handover format this build writes and reads. A new binary that speaks another is
/// refused before the daemon stops anything.
pub const FORMAT: u32 = 1;

/// The line `mcpd handover-check` prints: the format and the version.
pub fn check_line() -> String {
    format!("mcpd-handover {FORMAT} {}", env!("CARGO_PKG_VERSION"))
}

/// An upgrade asked for, with where its answer goes.
pub struct Ask {
    pub reply: oneshot::Sender<Result<Value, String>>,
}

/// The control methods' handle on upgrading: asks go to the daemon's top (`serve`).
#[derive(Clone, Debug)]
pub struct Upgrader {
    tx: mpsc::Sender<Ask>,
}

impl Upgrader {
    pub fn new() -> (Upgrader, mpsc::Receiver<Ask>) {
        let (tx, rx) = mpsc::channel(1);
        (Upgrader { tx }, rx)
    }

    /// Asks for an upgrade: the new binary's version once it was found good, or why not.
    pub async fn upgrade(&self) -> Result<Value, String> {
        let (reply, answer) = oneshot::channel();
        self.tx
            .try_send(Ask { reply })
            .map_err(|_| "an upgrade is already under way".to_owned())?;
        answer
            .await
            .unwrap_or_else(|_| Err("the daemon is shutting down".to_owned()))
    }
}

/// What the daemon knows of itself for upgrading: where its binary is, the file it was
/// started from, and how many upgrades this process has been through.
#[derive(Debug)]
pub struct Itself {
    pub path: Option<PathBuf>,
    pub old: Option<std::os::fd::OwnedFd>,
    pub upgrades: u32,
}

impl Itself {
    /// Read at start, before any package can replace the binary.
    #[allow(
        clippy::disallowed_methods,
        reason = "one open of /proc/self/exe at start, before anything is served"
    )]
    pub fn at_start(upgrades: u32) -> Itself {
        let path = std::env::current_exe()
            .inspect_err(|e| {
                tracing::warn!(
                    "cannot tell where mcpd's binary is ({e}); `mcpd ctl upgrade` will be refused"
                )
            })
            .ok();
        let old = std::fs::File::open("/proc/self/exe")
            .ok()
            .map(std::os::fd::OwnedFd::from);
        Itself {
            path,
            old,
            upgrades,
        }
    }

    /// Executes the new binary with the handover; if that fails, the old one, so the
    /// daemon comes back as it was. Returns only when both failed.
    pub fn exec(&self, out: &handover::Outgoing) -> std::io::Error {
        use std::os::fd::AsFd;
        let Some(path) = &self.path else {
            return std::io::Error::other("no path to execute");
        };
        let e = handover::exec(&handover::Target::Path(path), out);
        tracing::error!(path = %path.display(), "cannot execute the new binary ({e}); coming back as the old one");
        match &self.old {
            Some(old) => handover::exec(&handover::Target::Old(old.as_fd()), out),
            None => e,
        }
    }
}

/// Answers asks until one names a good binary: that one's version. A bad one is answered
/// with why, and the daemon goes on.
pub async fn wait_for_good_ask(asks: &mut mpsc::Receiver<Ask>, me: &Itself) -> binary::Checked {
    loop {
        let Some(ask) = asks.recv().await else {
            return std::future::pending().await;
        };
        let Some(path) = &me.path else {
            let _ = ask.reply.send(Err("cannot tell where this daemon's binary is; restart instead (systemctl --user restart mcpd)".to_owned()));
            continue;
        };
        match binary::check(path).await {
            Ok(checked) => {
                tracing::info!(
                    path = %path.display(),
                    to = %checked.version,
                    "upgrading: draining, then executing the new binary"
                );
                let _ = ask.reply.send(Ok(json!({
                    "path": path,
                    "from": env!("CARGO_PKG_VERSION"),
                    "to": checked.version,
                    "upgrades": me.upgrades,
                })));
                return checked;
            }
            Err(e) => {
                tracing::warn!("upgrade refused: {e}");
                let _ = ask.reply.send(Err(e.to_string()));
            }
        }
    }
}
