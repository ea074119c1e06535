//! The command-line model: `mcpd serve | connect | ctl | check-config`.

use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;

#[derive(Debug, Parser)]
#[command(
    name = "mcpd",
    version,
    about = "A local MCP multiplexer: one daemon supervises your MCP servers, every agent connects to one socket",
    long_about = None,
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Args, Clone, Default)]
pub struct Paths {
    /// Agent socket path [default: $XDG_RUNTIME_DIR/mcpd/mcpd.sock, else /tmp/mcpd-$UID/mcpd.sock]
    #[arg(long, env = "MCPD_SOCKET", global = true)]
    pub socket: Option<PathBuf>,
    /// Config file [default: $XDG_CONFIG_HOME/mcpd/mcpd.toml, else ~/.config/mcpd/mcpd.toml]
    #[arg(long, env = "MCPD_CONFIG", global = true)]
    pub config: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the daemon in the foreground (systemd runs this)
    Serve {
        #[command(flatten)]
        paths: Paths,
        /// Log filter, e.g. "info" or "mcpd=debug" [default: $RUST_LOG, else info]
        #[arg(long)]
        log_level: Option<String>,
    },
    /// Bridge stdin/stdout to the daemon's socket: use `mcpd connect` as the stdio
    /// command of any MCP client
    Connect {
        #[command(flatten)]
        paths: Paths,
        /// Show the client only this profile's servers and tools (`[profiles.NAME]`)
        #[arg(long, value_name = "NAME")]
        profile: Option<String>,
    },
    /// Inspect and control a running daemon
    Ctl {
        #[command(flatten)]
        paths: Paths,
        #[command(subcommand)]
        command: CtlCommand,
    },
    /// Validate the config file and print what it configures; exits 78 when invalid
    CheckConfig {
        #[command(flatten)]
        paths: Paths,
    },
    /// Internal: the helper that stops servers' process groups if the daemon dies
    #[command(name = "__sentinel", hide = true)]
    Sentinel,
}

#[derive(Debug, Subcommand)]
pub enum CtlCommand {
    /// Show the daemon and every server: state, pid, tools, restarts, errors
    Status {
        /// Print the raw `mcpd/status` result as JSON
        #[arg(long)]
        json: bool,
    },
    /// List the tools agents see (qualified names and descriptions), optionally of one server
    Tools { server: Option<String> },
    /// Call a tool and print its result; exits 1 when the tool reports an error
    Call {
        /// The qualified tool name, e.g. files__read_file
        tool: String,
        /// The arguments as a JSON object
        #[arg(default_value = "{}")]
        args: String,
    },
    /// Re-read the config file and apply what changed (added, removed and changed servers);
    /// exits 78 with the reason when the new config is invalid
    Reload,
    /// Restart one server now (also clears a crash loop)
    Restart { name: String },
    /// Stop one server until `mcpd ctl start`
    Stop { name: String },
    /// Start a stopped or failed server
    Start { name: String },
}
