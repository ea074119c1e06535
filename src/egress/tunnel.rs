//! One proxy connection.
//!
//! Its request read and judged, the upstream resolved and connected to as the rules
//! allow, then bytes copied both ways until a side closes or the proxy stops.

use super::address::permitted;
use super::allow::{Allow, HostRule};
use super::host::{Host, Target};
use super::request::{self, HeadError, Request};
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::Semaphore;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// How long resolving a name may take.
const RESOLVE_TIMEOUT: Duration = Duration::from_secs(5);
/// How long connecting to the upstream may take, over every address tried.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Most addresses read from a name's answer.
const MAX_ANSWERS: usize = 64;
/// Most addresses judged permitted that are kept, and so most connections tried.
const MAX_ADDRESSES: usize = 16;
/// Name lookups in flight per proxy. `getaddrinfo` cannot be cancelled: each lookup holds
/// a blocking thread until the resolver gives up, whatever the timeout here, so a server
/// asking for names that never resolve could otherwise pile up threads.
const MAX_LOOKUPS: usize = 8;
/// How long writing a refusal may take.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(5);
/// After a refusal, what the client still sends is read and dropped for this long (and
/// up to `LINGER_BYTES`) before closing: closing with unread bytes makes the kernel
/// reset the connection, which can destroy the answer before the client reads it.
const LINGER: Duration = Duration::from_secs(2);
const LINGER_BYTES: usize = 64 * 1024;
/// Refusals logged as warnings per proxy; the rest go to debug, since the server
/// behind the proxy is untrusted and could otherwise fill the log.
pub const MAX_WARNINGS: usize = 20;

/// How names are resolved.
#[derive(Debug, Clone)]
pub enum Resolver {
    /// The system's resolver (`getaddrinfo`, on a blocking thread).
    System,
    /// A fixed table, so tests can make a name resolve to loopback.
    #[cfg(test)]
    Fixed(Vec<(&'static str, IpAddr)>),
}

impl Resolver {
    /// The addresses of `name`, at most `MAX_ANSWERS` of them.
    async fn resolve(
        &self,
        name: &str,
        port: u16,
        lookups: &Arc<Semaphore>,
    ) -> Result<Vec<IpAddr>, String> {
        match self {
            Resolver::System => {
                let lookup = async {
                    // The permit lives in the blocking task, so it is given back when
                    // `getaddrinfo` returns, not when this future is dropped: a lookup that
                    // outlives its timeout still counts.
                    let permit = Arc::clone(lookups).acquire_owned().await.ok();
                    let name = name.to_owned();
                    mcpd_runtime::tracker::spawn_blocking(move || {
                        let _permit = permit;
                        (name.as_str(), port).to_socket_addrs().map(|addrs| {
                            addrs.map(|a| a.ip()).take(MAX_ANSWERS).collect::<Vec<_>>()
                        })
                    })
                    .await
                };
                match tokio::time::timeout(RESOLVE_TIMEOUT, lookup).await {
                    Err(_) => Err("resolving it timed out".to_owned()),
                    Ok(Err(_)) => Err("resolving it failed".to_owned()),
                    Ok(Ok(Err(e))) => Err(format!("cannot resolve it ({e})")),
                    Ok(Ok(Ok(addrs))) if addrs.is_empty() => Err("it has no address".to_owned()),
                    Ok(Ok(Ok(addrs))) => Ok(addrs),
                }
            }
            #[cfg(test)]
            Resolver::Fixed(table) => {
                let addrs: Vec<IpAddr> = table
                    .iter()
                    .filter(|(n, _)| *n == name)
                    .map(|(_, ip)| *ip)
                    .collect();
                if addrs.is_empty() {
                    Err("it has no address".to_owned())
                } else {
                    Ok(addrs)
                }
            }
        }
    }
}

/// What every connection of one `serve` shares.
#[derive(Debug)]
pub struct Proxy {
    allow: Arc<Allow>,
    server: String,
    resolver: Resolver,
    /// Permits for name lookups in flight (`MAX_LOOKUPS`).
    lookups: Arc<Semaphore>,
    /// Refusals logged so far.
    logged: AtomicUsize,
}

/// Why a request was not served, and so what it is answered.
#[derive(Debug)]
enum Refusal {
    BadRequest(&'static str),
    TooLong,
    TimedOut,
    NotListed(Target),
    OnlyPrivate(Target),
    Unresolved(Target, String),
    Unreachable(Target, String),
}

impl Proxy {
    pub fn new(allow: Arc<Allow>, server: String, resolver: Resolver) -> Proxy {
        Proxy {
            allow,
            server,
            resolver,
            lookups: Arc::new(Semaphore::new(MAX_LOOKUPS)),
            logged: AtomicUsize::new(0),
        }
    }

    /// Serves one client connection until it ends or `cancel` fires; dropping the
    /// work closes both sockets.
    pub async fn connection(&self, mut client: TcpStream, cancel: CancellationToken) {
        tokio::select! {
            () = cancel.cancelled() => {}
            () = self.serve(&mut client) => {}
        }
    }

    async fn serve(&self, client: &mut TcpStream) {
        let (request, rest) = match request::read_head(client).await {
            Ok(head) => match request::parse(&head.head) {
                Ok(request) => (request, head.rest),
                Err(why) => return self.refuse(client, Refusal::BadRequest(why)).await,
            },
            Err(HeadError::Closed) => return,
            Err(HeadError::TooLong) => return self.refuse(client, Refusal::TooLong).await,
            Err(HeadError::TimedOut) => return self.refuse(client, Refusal::TimedOut).await,
        };
        let mut upstream = match self.open(request.target()).await {
            Ok(upstream) => upstream,
            Err(refusal) => return self.refuse(client, refusal).await,
        };
        tracing::debug!(upstream = %self.server, host = %request.target(), "proxy connection opened");
        let started = match &request {
            Request::Connect(_) => {
                let established = b"HTTP/1.1 200 Connection established\r\n\r\n";
                match client.write_all(established).await {
                    Ok(()) => upstream.write_all(&rest).await,
                    Err(e) => Err(e),
                }
            }
            Request::Forward { head, .. } => match upstream.write_all(head).await {
                Ok(()) => upstream.write_all(&rest).await,
                Err(e) => Err(e),
            },
        };
        let copied = match started {
            Ok(()) => tokio::io::copy_bidirectional(client, &mut upstream).await,
            Err(e) => Err(e),
        };
        match copied {
            Ok((up, down)) => tracing::debug!(
                upstream = %self.server, host = %request.target(), up, down, "proxy connection closed"
            ),
            Err(e) => tracing::debug!(
                upstream = %self.server, host = %request.target(), "proxy connection ended: {e}"
            ),
        }
    }

    /// A connection to `target` as the rules allow, or why there is none.
    async fn open(&self, target: &Target) -> Result<TcpStream, Refusal> {
        let rules: Vec<&HostRule> = self.allow.matching(target).collect();
        if rules.is_empty() {
            return Err(Refusal::NotListed(target.clone()));
        }
        let candidates = match &target.host {
            Host::Ip(ip) => vec![*ip],
            Host::Name(name) => self
                .resolver
                .resolve(name, target.port, &self.lookups)
                .await
                .map_err(|why| Refusal::Unresolved(target.clone(), why))?,
        };
        let mut addresses: Vec<IpAddr> = Vec::new();
        for ip in candidates {
            if addresses.len() == MAX_ADDRESSES {
                break;
            }
            if rules.iter().any(|r| permitted(r, ip)) && !addresses.contains(&ip) {
                addresses.push(ip);
            }
        }
        if addresses.is_empty() {
            return Err(Refusal::OnlyPrivate(target.clone()));
        }
        connect(&addresses, target.port)
            .await
            .map_err(|why| Refusal::Unreachable(target.clone(), why))
    }

    /// Logs `refusal` and answers it, then closes.
    async fn refuse(&self, client: &mut TcpStream, refusal: Refusal) {
        let (status, body) = self.answer(&refusal);
        self.log(&refusal, &body);
        let text = format!(
            "HTTP/1.1 {status}\r\nContent-Type: text/plain; charset=utf-8\r\n\
             Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        let written = tokio::time::timeout(ANSWER_TIMEOUT, async {
            client.write_all(text.as_bytes()).await?;
            client.shutdown().await
        })
        .await;
        if matches!(written, Ok(Ok(()))) {
            linger(client).await;
        }
    }

    /// The status line and body answering `refusal`. Of the request, only the host and
    /// port (checked, so plain characters) are ever repeated.
    fn answer(&self, refusal: &Refusal) -> (&'static str, String) {
        let server = &self.server;
        match refusal {
            Refusal::BadRequest(why) => ("400 Bad Request", format!("mcpd: {why}\n")),
            Refusal::TooLong => (
                "400 Bad Request",
                format!(
                    "mcpd: the request head is over {} bytes\n",
                    request::MAX_HEAD
                ),
            ),
            Refusal::TimedOut => (
                "408 Request Timeout",
                format!(
                    "mcpd: the request head did not arrive within {} s\n",
                    request::HEAD_TIMEOUT.as_secs()
                ),
            ),
            Refusal::NotListed(t) => (
                "403 Forbidden",
                format!("mcpd: \"{t}\" is not on the network list of server \"{server}\"\n"),
            ),
            Refusal::OnlyPrivate(t) => (
                "403 Forbidden",
                format!(
                    "mcpd: \"{t}\" resolves only to private, loopback or other local addresses, \
                     which the network list of server \"{server}\" does not name explicitly\n"
                ),
            ),
            Refusal::Unresolved(t, why) => ("502 Bad Gateway", format!("mcpd: \"{t}\": {why}\n")),
            Refusal::Unreachable(t, why) => ("502 Bad Gateway", format!("mcpd: \"{t}\": {why}\n")),
        }
    }

    /// Logs a refusal: the first `MAX_WARNINGS` as warnings, the rest at debug level. A
    /// head that never came is not the server's doing alone (a client may open a
    /// connection it does not use), so it is logged at debug level only.
    fn log(&self, refusal: &Refusal, body: &str) {
        let why = body.trim_end();
        let host = match refusal {
            Refusal::NotListed(t)
            | Refusal::OnlyPrivate(t)
            | Refusal::Unresolved(t, _)
            | Refusal::Unreachable(t, _) => t.to_string(),
            Refusal::BadRequest(_) | Refusal::TooLong | Refusal::TimedOut => String::new(),
        };
        if matches!(refusal, Refusal::TimedOut) {
            tracing::debug!(upstream = %self.server, "proxy refused: {why}");
            return;
        }
        let n = self.logged.fetch_add(1, Ordering::Relaxed);
        if n < MAX_WARNINGS {
            tracing::warn!(upstream = %self.server, host = %host, "proxy refused: {why}");
            if n + 1 == MAX_WARNINGS {
                tracing::warn!(
                    upstream = %self.server,
                    "{MAX_WARNINGS} proxy refusals logged for this server; further ones are logged at debug level"
                );
            }
        } else {
            tracing::debug!(upstream = %self.server, host = %host, "proxy refused: {why}");
        }
    }

    /// Logs a failed accept through the same limit as refusals: a client that resets
    /// its connections before they are accepted could otherwise fill the log.
    pub fn accept_failed(&self, error: &std::io::Error) {
        let n = self.logged.fetch_add(1, Ordering::Relaxed);
        if n < MAX_WARNINGS {
            tracing::warn!(upstream = %self.server, "proxy accept failed: {error}");
        } else {
            tracing::debug!(upstream = %self.server, "proxy accept failed: {error}");
        }
    }
}

/// Connects to the first of `addresses` that answers, in order, within one
/// `CONNECT_TIMEOUT` for them all: a name with an IPv6 address that this host cannot
/// reach still works over its IPv4 one.
async fn connect(addresses: &[IpAddr], port: u16) -> Result<TcpStream, String> {
    let deadline = Instant::now() + CONNECT_TIMEOUT;
    let mut last = String::from("no address to connect to");
    for ip in addresses {
        let addr = SocketAddr::new(*ip, port);
        match tokio::time::timeout_at(deadline, TcpStream::connect(addr)).await {
            Err(_) => return Err("connecting timed out".to_owned()),
            Ok(Ok(stream)) => {
                // The tunnel carries whole TLS records and requests: nothing gains from
                // Nagle holding back their last segment.
                if let Err(e) = stream.set_nodelay(true) {
                    tracing::debug!(%addr, "cannot set TCP_NODELAY: {e}");
                }
                return Ok(stream);
            }
            Ok(Err(e)) => last = format!("cannot connect ({e})"),
        }
    }
    Err(last)
}

/// Reads and drops what the client still sends, for `LINGER` and `LINGER_BYTES` at most.
async fn linger(client: &mut TcpStream) {
    let mut sink = [0u8; 4096];
    let mut left = LINGER_BYTES;
    let _ = tokio::time::timeout(LINGER, async {
        while left > 0 {
            match client.read(&mut sink).await {
                Ok(0) | Err(_) => break,
                Ok(n) => left = left.saturating_sub(n),
            }
        }
    })
    .await; // the deadline is the end either way
}
