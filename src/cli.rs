//! The command-line model.
//!
//! `mcpd serve | connect | ctl | check-config | import | completions | man`, and the
//! completion scripts and man page generated from it.

use clap::{Args, CommandFactory, Parser, Subcommand};
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
    /// Agent socket path [default: daemon.socket from the config, else
    /// $XDG_RUNTIME_DIR/mcpd/mcpd.sock, else /tmp/mcpd-$UID/mcpd.sock; `connect` and `ctl`
    /// also look in /run/user/$UID/mcpd/mcpd.sock and take the first socket found]
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
        /// The project the client works in, for servers run per project (`share =
        /// "project"`) [default: the directory this command was started in]
        #[arg(long, value_name = "DIR", conflicts_with = "no_project")]
        project: Option<PathBuf>,
        /// Tell the daemon no project (MCP roots or a profile may still give one)
        #[arg(long)]
        no_project: bool,
        /// End when the daemon goes, instead of reconnecting and keeping the client's
        /// session (docs/operations.md, Restarts and upgrades)
        #[arg(long)]
        no_reconnect: bool,
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
    /// Copy the MCP servers of other clients (Claude Desktop, Claude Code, Cursor, VS Code,
    /// Gemini CLI, Codex) into mcpd's config
    #[command(long_about = IMPORT_HELP)]
    Import {
        /// A client (claude-desktop, claude-code, cursor, vscode, gemini, codex) or a JSON or
        /// TOML file to read; repeatable [default: every known client file that exists]
        #[arg(long, value_name = "CLIENT|FILE")]
        from: Vec<String>,
        /// mcpd's config file to append to; created if missing [default: $XDG_CONFIG_HOME/mcpd/mcpd.toml, else ~/.config/mcpd/mcpd.toml]
        #[arg(long, env = "MCPD_CONFIG")]
        config: Option<PathBuf>,
        /// Print the text that would be appended; write nothing
        #[arg(long)]
        dry_run: bool,
    },
    /// Print the completion script for SHELL
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the man page mcpd(1) as roff; with --dir, write it and a page per command
    Man {
        /// Write mcpd.1, mcpd-ctl-status.1 … into this directory, e.g. ~/.local/share/man/man1
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
    },
    /// Internal: the helper that stops servers' process groups if the daemon dies
    #[command(name = "__sentinel", hide = true)]
    Sentinel,
    /// Internal: prints the upgrade handover format this binary speaks, for a daemon
    /// about to execute it (`mcpd ctl upgrade`)
    #[command(name = "handover-check", hide = true)]
    HandoverCheck,
}

const IMPORT_HELP: &str = "\
Copy the MCP servers of other clients into mcpd's config.

Reads Claude Desktop (claude_desktop_config.json), Claude Code (~/.claude.json and the
project's .mcp.json), Cursor (~/.cursor/mcp.json and .cursor/mcp.json), VS Code (user
mcp.json and .vscode/mcp.json), Gemini CLI (~/.gemini/settings.json and
.gemini/settings.json) and Codex ($CODEX_HOME/config.toml, default ~/.codex/config.toml,
and .codex/config.toml) files. A FILE named *.toml, or holding an [mcp_servers] table, is
read as Codex's; any other as JSON, its layout detected by its top-level key
(\"mcpServers\", \"servers\" or \"projects\"). Names are made valid for mcpd (lowercase,
other characters to '-', at most 32 characters, -2, -3... on collisions) and the mapping
is printed.

New [servers.NAME] tables are appended to the end of the config file under a
'# imported from SOURCE' comment; the rest of the file is kept as it is. A server whose
name is already configured is never overwritten: it is reported as already present (same
definition) or skipped (different definition; rename one and import again). Literal
header values and OAuth client secrets are not copied: they become IMPORTED_NAME_KEY
variables. A local server's env values are copied as they are (mcpd does not expand
${VAR} there). The merged config is validated before anything is written. The output
ends with one line per server that will not start (or will lack a variable) until
something is set in mcpd's environment, and how to set it.

Exit codes: 0 success (also when entries were skipped), 64 usage error, 78 a source file
that cannot be read or is not valid JSON or TOML, or a merged config that would be
invalid, 1 otherwise.";

#[derive(Debug, Subcommand)]
pub enum CtlCommand {
    /// Show the daemon and every server: state, pid, tools, restarts, errors
    Status {
        /// Print the raw `mcpd/status` result as JSON
        #[arg(long)]
        json: bool,
    },
    /// List the tools agents see (qualified names and descriptions), optionally of one server
    Tools {
        server: Option<String>,
        /// Rank the tools for what you want to do, as agents' mcpd__find_tools does
        #[arg(long, value_name = "QUERY")]
        search: Option<String>,
        /// How many matches --search shows (1-50)
        #[arg(long, default_value_t = 10, requires = "search")]
        limit: usize,
    },
    /// Call a tool and print its result; exits 1 when the tool reports an error
    Call {
        /// The qualified tool name, e.g. files__read_file
        tool: String,
        /// The arguments as a JSON object
        #[arg(default_value = "{}")]
        args: String,
    },
    /// The connected agents: pid and executable (behind `mcpd connect`, the client that
    /// started it), client name and version, era, calls in flight
    Agents {
        /// Print the raw `mcpd/agents` result as JSON
        #[arg(long)]
        json: bool,
    },
    /// Cancel an agent's request in flight (the server is told to stop it; the agent gets
    /// an error saying so). `mcpd ctl agents` lists agents and their requests
    Cancel {
        /// The agent's number, from `mcpd ctl agents`
        agent: u64,
        /// The request's id as `mcpd ctl agents` shows it (a number, or a quoted string)
        id: String,
    },
    /// Counters in Prometheus text format: calls, errors and latency per server and method,
    /// restarts, in-flight requests, agents, bytes to and from agents
    Metrics,
    /// A server's lifecycle events and captured stderr
    Logs {
        name: String,
        /// How many of the latest lines of each to show
        #[arg(short = 'n', long, default_value_t = 20)]
        lines: usize,
        /// Keep printing new lines as they come (until interrupted)
        #[arg(long)]
        follow: bool,
    },
    /// Re-read the config file and apply what changed (added, removed and changed servers);
    /// exits 78 with the reason when the new config is invalid
    Reload,
    /// Execute the mcpd binary now installed at the daemon's path in place of the
    /// running one (same pid): checks it first, drains calls, keeps the socket; agents
    /// through `mcpd connect` carry on (docs/operations.md, Restarts and upgrades)
    Upgrade,
    /// Show each held definition of a server (new, or changed since it was approved)
    /// beside its approved version
    Diff { name: String },
    /// Approve a server's held definitions: all, or those named (tool and prompt names,
    /// resource URIs, as `ctl diff` shows them); agents are then told its lists changed
    Approve {
        name: String,
        /// The definitions to approve (all when none is named)
        names: Vec<String>,
    },
    /// Drop a server's pins: what it shows now counts as its first listing (approved
    /// under `pin = "trust-first"`, held under `"approve"`)
    Forget { name: String },
    /// Set, list or remove the secrets servers' settings refer to as `${secret:NAME}`
    #[command(subcommand)]
    Secret(SecretCommand),
    /// Restart one server now (also clears a crash loop)
    Restart { name: String },
    /// Stop one server until `mcpd ctl start`
    Stop { name: String },
    /// Start a stopped or failed server
    Start { name: String },
    /// Log in to a remote server that needs OAuth: prints the authorization URL, opens it
    /// in a browser when there is a display, and waits until the daemon has the tokens
    /// (exit 0) or the login failed (exit 1, with the reason). For a server with a machine
    /// grant (`grant = "client_credentials"` or `"jwt_bearer"`): runs the grant now
    Login {
        name: String,
        /// Do not open a browser; only print the URL
        #[arg(long)]
        no_browser: bool,
        /// For hosts the browser cannot reach (SSH, WSL, containers): paste the URL the
        /// browser was redirected to (http://127.0.0.1:PORT/callback?…) on stdin
        #[arg(long)]
        paste: bool,
    },
    /// Forget a remote server's OAuth login (revoking its tokens where the server offers it)
    Logout { name: String },
    /// Print the HTTP listener's bearer token (and, with --url, its URL) for HTTP clients
    HttpToken {
        /// Also print the URL, as `URL TOKEN`
        #[arg(long)]
        url: bool,
    },
    /// Open the dashboard: prints a loopback address that logs one browser in (once,
    /// within two minutes), and opens it with xdg-open when there is a display
    Ui {
        /// Do not open a browser; only print the address
        #[arg(long)]
        no_browser: bool,
    },
}

/// `mcpd ctl secret …`.
#[derive(Debug, Subcommand)]
pub enum SecretCommand {
    /// Store a secret: the value is typed at the terminal (not shown) or read from
    /// standard input, never taken from the command line; servers waiting for it start
    Set {
        /// 1-128 of A-Z a-z 0-9 _ - . (not starting with .)
        name: String,
    },
    /// The secrets there are and the store each is in; never their values
    List,
    /// Remove a secret from the keyring and mcpd's file store
    #[command(alias = "remove")]
    Rm { name: String },
}

/// The completion script for `shell`, generated from the command-line model.
pub fn completions(shell: clap_complete::Shell) -> Vec<u8> {
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut public_command(), "mcpd", &mut script);
    script
}

/// mcpd(1) as roff: the commands, each with its first help line.
pub fn man_page() -> std::io::Result<Vec<u8>> {
    let mut page = Vec::new();
    clap_mangen::Man::new(public_command()).render(&mut page)?;
    Ok(page)
}

/// Writes mcpd(1) and a page for every command below it (mcpd-ctl-status(1) …) into `dir`:
/// the pages mcpd(1) refers to.
pub fn man_pages(dir: &std::path::Path) -> std::io::Result<()> {
    clap_mangen::generate_to(public_command(), dir)
}

/// The command-line model as users see it: without the hidden `__sentinel` (clap_complete's
/// bash script would offer it) and without the `help` subcommand (`--help` says the same,
/// and a man page for it would only repeat mcpd(1)).
fn public_command() -> clap::Command {
    let full = Cli::command();
    let visible = full
        .get_subcommands()
        .filter(|c| !c.is_hide_set())
        .cloned()
        .collect::<Vec<_>>();
    let mut public = clap::Command::new("mcpd")
        .version(env!("CARGO_PKG_VERSION"))
        .subcommand_required(true)
        .disable_help_subcommand(true)
        .subcommands(visible);
    if let Some(about) = full.get_about() {
        public = public.about(about.clone());
    }
    public
}
