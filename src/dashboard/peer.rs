//! Who is on the other end of a dashboard connection.
//!
//! The user owning the client's socket, read from the kernel's socket tables
//! (`/proc/net/tcp`, `/proc/net/tcp6`), so that only the daemon's own user (or root) is
//! served, and never a process of a server mcpd started. A launch token or session cookie
//! that reached another local user (cookies are scoped by host, not port: any web server
//! on 127.0.0.1 receives them), or a server, is useless to it.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// The largest socket table read; a workstation's is a few hundred lines.
const MAX_TABLE: u64 = 8 << 20;

/// The client end of a TCP connection as the socket table shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Client {
    /// The user owning the socket.
    pub uid: u32,
    /// The socket's inode: `socket:[INODE]` in the `/proc/PID/fd` of whoever holds it.
    pub inode: u64,
}

/// The client end of the TCP connection `client` → `server`, or None when the tables do
/// not show it (then nobody is served: fail closed).
pub(super) fn client_of(client: SocketAddr, server: SocketAddr) -> Option<Client> {
    let table = match client {
        SocketAddr::V4(_) => "/proc/net/tcp",
        SocketAddr::V6(_) => "/proc/net/tcp6",
    };
    let text = read(table)?;
    find(&text, client, server)
}

fn read(path: &str) -> Option<String> {
    use std::io::Read as _;
    #[allow(
        clippy::disallowed_methods,
        reason = "a procfs file, which never waits"
    )]
    let file = std::fs::File::open(path).ok()?;
    let mut text = String::new();
    file.take(MAX_TABLE).read_to_string(&mut text).ok()?;
    Some(text)
}

/// The row whose local address is `client` and remote address `server`.
fn find(table: &str, client: SocketAddr, server: SocketAddr) -> Option<Client> {
    table.lines().skip(1).find_map(|row| {
        let mut cols = row.split_whitespace();
        let local = parse_addr(cols.nth(1)?)?;
        let remote = parse_addr(cols.next()?)?;
        // st, tx:rx, tr:tm, retrnsmt, then uid, timeout and inode.
        let uid = cols.nth(4)?.parse().ok()?;
        let inode = cols.nth(1)?.parse().ok()?;
        (same(local, client) && same(remote, server)).then_some(Client { uid, inode })
    })
}

/// Equal addresses, an IPv4-mapped IPv6 address counting as its IPv4 one.
fn same(a: SocketAddr, b: SocketAddr) -> bool {
    let plain = |ip: IpAddr| match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
        v4 => v4,
    };
    a.port() == b.port() && plain(a.ip()) == plain(b.ip())
}

/// `0100007F:1F90` (IPv4) or 32 hex digits and a port (IPv6): the kernel prints each
/// 32-bit word of the address as it lies in memory, the port as a number.
fn parse_addr(text: &str) -> Option<SocketAddr> {
    let (addr, port) = text.split_once(':')?;
    let port = u16::from_str_radix(port, 16).ok()?;
    let word = |i: usize| -> Option<[u8; 4]> {
        let hex = addr.get(i * 8..i * 8 + 8)?;
        Some(u32::from_str_radix(hex, 16).ok()?.to_le_bytes())
    };
    let ip = match addr.len() {
        8 => IpAddr::V4(Ipv4Addr::from(word(0)?)),
        32 => {
            let mut bytes = [0u8; 16];
            for (i, chunk) in bytes.chunks_exact_mut(4).enumerate() {
                chunk.copy_from_slice(&word(i)?);
            }
            IpAddr::V6(Ipv6Addr::from(bytes))
        }
        _ => return None,
    };
    Some(SocketAddr::new(ip, port))
}

/// Whether a connection of user `uid` may use the dashboard of a daemon run by `own`.
pub(super) fn allowed(uid: Option<u32>, own: u32) -> bool {
    uid.is_some_and(|u| u == own || u == 0)
}

/// Whether the socket `inode` is held by a process of a server mcpd started (one of the
/// daemon's descendants), as `/proc` tells; `Err` when that cannot be told, which the
/// guard takes as a yes (fail closed).
pub(super) fn held_by_descendant(inode: u64) -> Result<bool, String> {
    let wanted = format!("socket:[{inode}]");
    let mut found = false;
    super::lineage::each_descendant(|pid| {
        found = holds(pid, &wanted)?;
        Ok(!found)
    })?;
    Ok(found)
}

/// Whether process `pid` has a descriptor whose link is `wanted`. A process that ended
/// meanwhile holds nothing; one whose descriptors cannot be read cannot be cleared.
fn holds(pid: u32, wanted: &str) -> Result<bool, String> {
    #[allow(
        clippy::disallowed_methods,
        reason = "procfs directories and links, which never wait"
    )]
    let entries = match std::fs::read_dir(format!("/proc/{pid}/fd")) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(format!("the descriptors of process {pid}: {e}")),
    };
    for entry in entries.take(super::lineage::MAX_FDS) {
        let Ok(entry) = entry else { continue };
        #[allow(
            clippy::disallowed_methods,
            reason = "a procfs link, which never waits"
        )]
        let link = std::fs::read_link(entry.path());
        if link.is_ok_and(|l| l.as_os_str() == wanted) {
            return Ok(true);
        }
    }
    Ok(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    const TCP: &str = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 1085 1 0 100 0 0 10 0
   1: 0100007F:D431 0100007F:1F90 01 00000000:00000000 00:00000000 00000000  1001        0 2000 1 0 20 4 30 10 -1
   2: 0100007F:1F90 0100007F:D431 01 00000000:00000000 00:00000000 00000000  1000        0 2001 1 0 20 4 30 10 -1
";
    const TCP6: &str = "  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000000000000000000001000000:D432 00000000000000000000000001000000:1F90 01 00000000:00000000 00:00000000 00000000  1002        0 3000 1 0 20 4 30 10 -1
";

    fn at(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    #[test]
    fn dashboard_peer_is_the_owner_of_the_clients_end_of_the_connection() {
        let server = at("127.0.0.1:8080");
        // The client's row, not the server's accepted socket (which the daemon owns).
        let client = |uid, inode| Some(Client { uid, inode });
        assert_eq!(find(TCP, at("127.0.0.1:54321"), server), client(1001, 2000));
        assert_eq!(find(TCP, at("127.0.0.1:54322"), server), None);
        assert_eq!(
            find(TCP6, at("[::1]:54322"), at("[::1]:8080")),
            client(1002, 3000)
        );
        assert_eq!(find("garbage\n1: x y", at("127.0.0.1:1"), server), None);
    }

    #[test]
    fn dashboard_peer_of_another_user_is_refused_and_an_unknown_one_too() {
        assert!(allowed(Some(1000), 1000));
        assert!(allowed(Some(0), 1000), "root");
        assert!(!allowed(Some(1001), 1000));
        assert!(!allowed(None, 1000), "fail closed");
    }

    #[test]
    #[allow(clippy::disallowed_methods, reason = "a test reading a procfs link")]
    fn dashboard_peer_of_a_real_loopback_connection_is_this_process_user() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let server = listener.local_addr().unwrap();
        let client = std::net::TcpStream::connect(server).unwrap();
        let (_accepted, seen) = listener.accept().unwrap();
        assert_eq!(seen, client.local_addr().unwrap());
        let found = client_of(seen, server).unwrap();
        assert_eq!(found.uid, nix::unistd::getuid().as_raw());
        // This process holds the client's socket, and no descendant of it does.
        let link = std::fs::read_link(format!(
            "/proc/self/fd/{}",
            std::os::fd::AsRawFd::as_raw_fd(&client)
        ))
        .unwrap();
        assert_eq!(
            link.to_str(),
            Some(format!("socket:[{}]", found.inode).as_str())
        );
        assert_eq!(held_by_descendant(found.inode), Ok(false));
    }
}
