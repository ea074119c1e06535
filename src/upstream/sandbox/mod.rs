//! Confining a local server with Landlock.
//!
//! Its profile resolved into paths, the ruleset built in the daemon (only `restrict_self`
//! runs between fork and exec), the clean environment, and what status shows as enforced.
//!
//! Every confined server is restricted in the filesystem (only the profile's paths), in
//! signals and abstract Unix sockets (Landlock scoping: nothing outside its own domain),
//! and, with `network = "none"`, in TCP. Ptrace and the `/proc` files it guards
//! (another process's environment and memory) are out of reach of any Landlock domain.
//! The ruleset is made with hard requirements: a kernel that cannot enforce all of it
//! refuses it, and the server does not start (fail closed). Nothing here widens a
//! profile to make a server work.

mod init;
mod launch_paths;
mod netns;
mod own;
mod paths;
mod private;
mod seccomp;
mod settings;
mod tmp;

pub use launch_paths::outside;
pub use netns::Isolation;
pub use own::{Own, cache_path};
pub use paths::{Paths, paths};
pub use private::{Private, SHM_SHOWN, userns_works};
pub use tmp::{Claim, claim, sweep};

use crate::config::{Network, SandboxProfile, StdioLaunch};
use crate::egress::Allow;
use landlock::{
    ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible, NetPort, PathBeneath, PathFd,
    Ruleset, RulesetAttr, RulesetCreated, RulesetCreatedAttr, Scope,
};
use mcpd_ctl::control_api::SandboxView;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

/// The Landlock ABI mcpd needs: the filesystem with truncation (3), TCP ports (4) and the
/// scoping of signals and abstract Unix sockets (6).
const NEEDED: ABI = ABI::V6;
const NEEDED_N: i32 = 6;

/// Setting this in the daemon's environment makes it take the kernel's Landlock ABI as
/// at most N (tests check the refusal on a kernel without scoping with it).
pub const ABI_OVERRIDE: &str = "MCPD_LANDLOCK_ABI";

/// Variables passed to every confined server (besides `TMPDIR`, set to its own).
const KEPT_ENV: &[&str] = &["PATH", "HOME", "USER", "LOGNAME", "LANG", "TERM", "TZ"];
/// Variables naming the certificates a TLS client trusts (a company's proxy CA): passed
/// on, and the files they name readable.
pub(crate) const CA_ENV: &[&str] = &[
    "NODE_EXTRA_CA_CERTS",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE",
];

/// Why a server cannot be confined as its profile asks (it is then not started).
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    #[error(
        "the sandbox needs Landlock ABI {NEEDED_N} (filesystem, TCP and scoping of signals and abstract sockets); this kernel offers {0}: upgrade the kernel (6.12 or later) or set `sandbox = false` for this server"
    )]
    Kernel(i32),
    #[error("the sandbox path {path:?} cannot be resolved: {why}")]
    Path { path: String, why: String },
    #[error("the sandbox ruleset could not be built: {0}")]
    Ruleset(#[from] landlock::RulesetError),
    #[error("the sandbox's network filter could not be built: {0}")]
    Seccomp(String),
    #[error("the sandbox's network proxy could not be set up: {0}")]
    Proxy(std::io::Error),
    #[error("the sandbox's own namespaces could not be prepared: {0}")]
    Namespace(String),
    #[error("the sandbox's private temporary directory {}: {source}", dir.display())]
    Temp {
        dir: PathBuf,
        source: std::io::Error,
    },
    #[error("the server's private package cache {}: {source}", dir.display())]
    Cache {
        dir: PathBuf,
        source: std::io::Error,
    },
}

/// A server's confinement, ready to apply in its child.
pub struct Prepared {
    /// Taken and applied once, between fork and exec.
    pub ruleset: Option<RulesetCreated>,
    /// The seccomp filter of the sockets it may not make.
    pub seccomp: Option<seccompiler::BpfProgram>,
    /// The whole environment the server gets (the process starts with none).
    pub env: Vec<(OsString, OsString)>,
    pub view: SandboxView,
    /// With a host list: what mcpd's proxy lets through, and where it listens.
    pub egress: Option<Egress>,
    /// Where user namespaces work: its own mounts and processes (`private.rs`).
    pub private: Option<Private>,
}

/// A host-list server's way out: mcpd's filtering proxy.
pub struct Egress {
    pub allow: Arc<Allow>,
    pub via: Via,
}

/// Where the proxy listens for a server.
pub enum Via {
    /// On the loopback of the server's own network namespace: the child makes the
    /// listener before exec and sends it back; nothing else leads out.
    Namespace(Isolation),
    /// On mcpd's loopback, where user namespaces are not available: Landlock then lets
    /// the server connect to this port and the list's ports only, on any host.
    Loopback(std::net::TcpListener),
}

impl Egress {
    /// The proxy's address as the server sees it.
    fn url(&self) -> Result<String, SandboxError> {
        let port = match &self.via {
            Via::Namespace(_) => netns::PROXY_PORT,
            Via::Loopback(l) => l.local_addr().map_err(SandboxError::Proxy)?.port(),
        };
        Ok(format!("http://127.0.0.1:{port}"))
    }
}

/// The kernel's Landlock ABI (0 without Landlock), probed once; at most
/// `MCPD_LANDLOCK_ABI` when that is set.
pub fn kernel_abi() -> i32 {
    static ABI_SEEN: OnceLock<i32> = OnceLock::new();
    *ABI_SEEN.get_or_init(|| {
        // SAFETY: landlock_create_ruleset with a null attribute, size 0 and the version
        // flag only returns the ABI version (or an error); it touches no memory.
        let v = unsafe {
            nix::libc::syscall(
                nix::libc::SYS_landlock_create_ruleset,
                std::ptr::null::<u8>(),
                0usize,
                1u32, // LANDLOCK_CREATE_RULESET_VERSION
            )
        };
        let v = i32::try_from(v).unwrap_or(0).max(0);
        let cap = std::env::var(ABI_OVERRIDE)
            .ok()
            .and_then(|s| s.parse::<i32>().ok());
        cap.map_or(v, |c| v.min(c.max(0)))
    })
}

/// Everything needed to start `launch` confined by `profile`: `server` names its process
/// (`git@/src/app` for an instance), `cache` the private cache it uses (`git`).
pub fn prepare(
    server: &str,
    cache: &str,
    profile: &SandboxProfile,
    launch: &StdioLaunch,
    project: Option<&Path>,
) -> Result<Prepared, SandboxError> {
    let abi = kernel_abi();
    if abi < NEEDED_N {
        return Err(SandboxError::Kernel(abi));
    }
    let tmp = tmp::temp_dir(server)?;
    let settings = own::settings_path(&tmp);
    own::write_settings(&settings).map_err(|source| SandboxError::Temp {
        dir: settings.clone(),
        source,
    })?;
    let cache = own::make_cache(cache).map_err(|source| SandboxError::Cache {
        dir: own::cache_path(cache).unwrap_or_default(),
        source,
    })?;
    let own = Own {
        tmp,
        cache: Some(cache),
        settings,
    };
    let paths = paths(profile, launch, project, &own)?;
    for m in &paths.missing {
        tracing::debug!(upstream = %server, path = %m.display(), "a sandbox path does not exist; it grants nothing");
    }
    let egress = match &profile.network {
        Network::Hosts(rules) => Some(egress(rules)?),
        _ => None,
    };
    let namespace = matches!(
        egress,
        Some(Egress {
            via: Via::Namespace(_),
            ..
        })
    );
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(AccessFs::from_all(NEEDED))?
        .scope(Scope::from_all(NEEDED))?;
    if profile.network == Network::None || (egress.is_some() && !namespace) {
        // Handled: no TCP port may be bound, and only those given rules connected to.
        ruleset = ruleset.handle_access(AccessNet::from_all(NEEDED))?;
    }
    let mut created = ruleset.create()?;
    for (list, access) in [
        (&paths.read, AccessFs::from_read(NEEDED)),
        (&paths.write, AccessFs::from_all(NEEDED)),
    ] {
        for p in list {
            let fd = PathFd::new(p).map_err(|e| SandboxError::Path {
                path: p.display().to_string(),
                why: e.to_string(),
            })?;
            // A file takes only the rights that apply to files.
            let access = if p.is_dir() {
                access
            } else {
                access & AccessFs::from_file(NEEDED)
            };
            created = created.add_rule(PathBeneath::new(fd, access))?;
        }
    }
    if let (
        Some(Egress {
            via: Via::Loopback(l),
            ..
        }),
        Network::Hosts(rules),
    ) = (&egress, &profile.network)
    {
        let proxy = l.local_addr().map_err(SandboxError::Proxy)?.port();
        let mut ports: Vec<u16> = rules.iter().flat_map(|r| r.ports()).collect();
        ports.push(proxy);
        ports.sort_unstable();
        ports.dedup();
        for port in ports {
            created = created.add_rule(NetPort::new(port, AccessNet::ConnectTcp))?;
        }
    }
    // Made after the rules: it holds a second descriptor of the same ruleset, to grant
    // what the child mounts.
    let private = if userns_works() {
        Some(Private::new(&paths.write, &created)?)
    } else {
        None
    };
    let mut env = environment(profile, launch, &own);
    if let Some(e) = &egress {
        let url = OsString::from(e.url()?);
        for name in PROXY_ENV {
            env.push((name.into(), url.clone()));
        }
        // Node 24 and later take the variables above for `fetch` and `http` with this.
        env.push(("NODE_USE_ENV_PROXY".into(), "1".into()));
    }
    let view = view(profile, abi, &paths, &egress, private.as_ref());
    let seccomp = seccomp::filter(seccomp::Refused {
        unix: !profile.unix_sockets,
        ip: profile.network == Network::None,
        udp: egress.is_some() && !namespace,
    })?;
    Ok(Prepared {
        ruleset: Some(created),
        seccomp,
        env,
        view,
        egress,
        private,
    })
}

/// The variables that point HTTP clients at the proxy (curl, Python, Go, Node with
/// `NODE_USE_ENV_PROXY` read one spelling or the other).
const PROXY_ENV: &[&str] = &[
    "HTTPS_PROXY",
    "HTTP_PROXY",
    "ALL_PROXY",
    "https_proxy",
    "http_proxy",
    "all_proxy",
];

/// The proxy of a host list: in a namespace of the server's own where user namespaces
/// work, else on mcpd's loopback with Landlock limiting ports.
fn egress(rules: &[crate::egress::HostRule]) -> Result<Egress, SandboxError> {
    let via = if userns_works() {
        Via::Namespace(Isolation::new().map_err(SandboxError::Proxy)?)
    } else {
        #[allow(
            clippy::disallowed_methods,
            reason = "binding a loopback port does not block"
        )]
        let l = std::net::TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, 0))
            .map_err(SandboxError::Proxy)?;
        l.set_nonblocking(true).map_err(SandboxError::Proxy)?;
        Via::Loopback(l)
    };
    Ok(Egress {
        allow: Arc::new(Allow::new(rules.to_vec())),
        via,
    })
}

/// What a confined server's note says where user namespaces do not work.
pub const NO_USERNS: &str = "no user namespaces here: .git/config and .git/hooks of its writable trees are writable, no /dev/shm, /proc shows every process on the machine";

/// What status shows as enforced.
fn view(
    profile: &SandboxProfile,
    abi: i32,
    paths: &Paths,
    egress: &Option<Egress>,
    private: Option<&Private>,
) -> SandboxView {
    let note = match (&profile.network, egress) {
        (Network::None, _) => Some("no IP sockets: TCP refused by Landlock, IP sockets by seccomp".into()),
        (Network::Hosts(r), Some(Egress { via: Via::Namespace(_), .. })) => Some(format!(
            "own network namespace: {} host rules through mcpd's proxy, nothing else",
            r.len()
        )),
        (Network::Hosts(_), _) => Some(
            "ports only: no user namespaces here, so a direct TCP connection to any host on a listed port is not stopped; UDP refused".into(),
        ),
        _ => None,
    };
    let mut note = note;
    if !profile.unix_sockets {
        let unix = "no Unix sockets but pairs";
        note = Some(note.map_or(unix.into(), |n| format!("{n}; {unix}")));
    }
    let own = match private {
        Some(p) => format!(
            "own mounts and processes: .git/config and .git/hooks read-only ({} repositories), a private /dev/shm of {SHM_SHOWN}, /proc shows its own processes only",
            p.repositories()
        ),
        None => NO_USERNS.into(),
    };
    note = Some(note.map_or_else(|| own.clone(), |n| format!("{n}; {own}")));
    SandboxView {
        mechanism: "landlock".into(),
        abi: abi as u32,
        read: paths.read.len(),
        write: paths.write.len(),
        network: profile.network.as_str().into(),
        note,
    }
}

/// A confined server's whole environment: its own private cache and settings (npm's,
/// uv's, pip's, git's variables), the few variables every program expects, its own
/// private `TMPDIR`, the profile's `env` names, then its config's `env` table. A later
/// entry wins, so a name the user passes on or sets is theirs.
fn environment(
    profile: &SandboxProfile,
    launch: &StdioLaunch,
    own: &Own,
) -> Vec<(OsString, OsString)> {
    let mut env: Vec<(OsString, OsString)> = own::environment(own.cache.as_deref(), &own.settings)
        .into_iter()
        .map(|(k, v)| (OsString::from(k), v.into_os_string()))
        .collect();
    env.push(("TMPDIR".into(), own.tmp.as_os_str().to_owned()));
    env.extend(std::env::vars_os().filter(|(k, _)| {
        let k = k.to_string_lossy();
        KEPT_ENV.contains(&k.as_ref())
            || CA_ENV.contains(&k.as_ref())
            || k.starts_with("LC_")
            || profile.env.iter().any(|n| *n == k)
    }));
    env.extend(
        launch
            .env
            .iter()
            .map(|(k, v)| (OsString::from(k), OsString::from(v))),
    );
    env
}
