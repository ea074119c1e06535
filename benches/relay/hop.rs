//! The stdio hops a client can start in front of a socket: `mcpd connect`, and socat (or,
//! where socat is not installed, this bench's own socat-like pump, `socat_pump.rs`).

use crate::client::Client;
use crate::mcpd_bin;
use crate::process::Proc;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// The commands of the stdio hops.
pub struct Hops {
    /// The `mcpd` binary whose `connect` the shim rows run.
    shim: PathBuf,
    /// Where the shim runs, when not here: `mcpd connect` tells mcpd the directory it
    /// runs in as the agent's project.
    shim_dir: Option<PathBuf>,
    socat: Socat,
}

enum Socat {
    /// `socat - UNIX-CONNECT:SOCKET`, from `PATH`.
    Installed(PathBuf),
    /// This bench binary, re-run as `--socat-pump SOCKET`.
    BuiltIn(PathBuf),
}

impl Hops {
    /// `shim` overrides the `mcpd` binary of the shim rows (another build's, to compare).
    pub fn find(shim: Option<PathBuf>) -> Result<Hops, String> {
        let socat = match on_path("socat") {
            Some(p) => Socat::Installed(p),
            None => Socat::BuiltIn(
                std::env::current_exe().map_err(|e| format!("the bench's own path: {e}"))?,
            ),
        };
        Ok(Hops {
            shim: shim.unwrap_or_else(|| PathBuf::from(mcpd_bin())),
            shim_dir: None,
            socat,
        })
    }

    /// Runs the shim in `dir`, so its agents work in that project: with a per-project
    /// server configured, in the one whose instance is already running, rather than
    /// starting another in the bench's own directory while a row is measured.
    pub fn shim_in(mut self, dir: &Path) -> Hops {
        self.shim_dir = Some(dir.to_owned());
        self
    }

    /// One line for the report: which programs the hop rows ran.
    pub fn describe(&self) -> String {
        let socat = match &self.socat {
            Socat::Installed(p) => format!("{} - UNIX-CONNECT:SOCKET", p.display()),
            Socat::BuiltIn(_) => "socat is not installed: the bench's own socat-like pump \
                                  (one thread polling both sides, 8 KiB reads, as socat 1.7 does)"
                .to_owned(),
        };
        let dir = self
            .shim_dir
            .as_ref()
            .map_or(String::new(), |d| format!(" (run in {})", d.display()));
        format!(
            "stdio hops: shim = {} connect --socket SOCKET{dir}; socat = {socat}",
            self.shim.display()
        )
    }

    /// A client that talks to `socket` through `mcpd connect`.
    pub fn shim(&self, socket: &Path, buf: usize) -> Result<Client, String> {
        let mut cmd = Command::new(&self.shim);
        cmd.arg("connect")
            .arg("--socket")
            .arg(socket)
            .env_remove("MCPD_SOCKET")
            .env_remove("MCPD_CONFIG")
            .env_remove("RUST_LOG");
        if let Some(dir) = &self.shim_dir {
            cmd.current_dir(dir);
        }
        over(cmd, "mcpd connect", buf)
    }

    /// A client that talks to `socket` through socat or its stand-in.
    pub fn socat(&self, socket: &Path, buf: usize) -> Result<Client, String> {
        let cmd = match &self.socat {
            Socat::Installed(p) => {
                let mut cmd = Command::new(p);
                let mut address = std::ffi::OsString::from("UNIX-CONNECT:");
                address.push(socket);
                cmd.arg("-").arg(address);
                cmd
            }
            Socat::BuiltIn(exe) => {
                let mut cmd = Command::new(exe);
                cmd.arg("--socat-pump").arg(socket);
                cmd
            }
        };
        over(cmd, "socat", buf)
    }
}

/// Starts `cmd` with piped stdin and stdout and a client on them.
fn over(mut cmd: Command, what: &'static str, buf: usize) -> Result<Client, String> {
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    let mut proc = Proc::spawn(&mut cmd, what, Duration::ZERO)?;
    let (tx, rx) = proc.take_pipes()?;
    Ok(Client::new(Box::new(rx), Box::new(tx), buf, Some(proc)))
}

fn on_path(name: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
}
