//! Which addresses a matching rule lets the proxy connect to.
//!
//! Public ones always, the rest only when the rule names them explicitly.
//!
//! A name on the network list says "this service on the internet", not "whatever this
//! name resolves to": a name whose DNS answer points at 127.0.0.1, the LAN or the cloud
//! metadata service (169.254.169.254) must not become a way into them. So the addresses
//! a name resolves to are judged here, after resolution, and connected to as judged;
//! the proxy never resolves twice.

use super::allow::HostRule;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Whether `rule`, which matched a request, lets the proxy connect to `ip`: an address
/// rule only to its own address, the exact name `localhost` also to loopback, any other
/// name only to public addresses.
pub fn permitted(rule: &HostRule, ip: IpAddr) -> bool {
    if let Some(own) = rule.ip() {
        return ip == own;
    }
    is_public(ip) || (rule.is_localhost() && is_loopback(ip))
}

/// Whether `ip` is a loopback address, in any of its IPv6 spellings.
pub fn is_loopback(ip: IpAddr) -> bool {
    match canonical(ip) {
        IpAddr::V4(v4) => v4.is_loopback(),
        IpAddr::V6(v6) => v6.is_loopback(),
    }
}

/// Whether `ip` is a globally routed unicast address, reading an IPv4 address inside an
/// IPv6 one as itself.
pub fn is_public(ip: IpAddr) -> bool {
    match canonical(ip) {
        IpAddr::V4(v4) => public_v4(v4),
        IpAddr::V6(v6) => public_v6(v6),
    }
}

/// The IPv4 address an IPv6 address stands for, where it stands for one: IPv4-mapped
/// (`::ffff:a.b.c.d`, which the kernel connects to over IPv4), IPv4-compatible
/// (`::a.b.c.d`, deprecated) and the NAT64 well-known prefix (`64:ff9b::a.b.c.d`, which
/// a NAT64 gateway forwards to the IPv4 address). `::` and `::1` stay themselves.
fn canonical(ip: IpAddr) -> IpAddr {
    let IpAddr::V6(v6) = ip else {
        return ip;
    };
    if v6.is_unspecified() || v6.is_loopback() {
        return ip;
    }
    let [a, b, c, d, e, f, _, _] = v6.segments();
    let [.., o12, o13, o14, o15] = v6.octets();
    let embedded = IpAddr::V4(Ipv4Addr::new(o12, o13, o14, o15));
    match (a, b, c, d, e, f) {
        (0, 0, 0, 0, 0, 0xffff) | (0, 0, 0, 0, 0, 0) | (0x64, 0xff9b, 0, 0, 0, 0) => embedded,
        _ => ip,
    }
}

/// Public IPv4: not "this network", private, shared (CGNAT), loopback, link-local,
/// IETF protocol assignments, documentation, the 6to4 relay, benchmarking, multicast,
/// reserved or broadcast (RFC 6890's special-purpose registry).
fn public_v4(ip: Ipv4Addr) -> bool {
    let [a, b, c, _] = ip.octets();
    let special = a == 0
        || a == 10
        || (a == 100 && (64..128).contains(&b))
        || a == 127
        || (a == 169 && b == 254)
        || (a == 172 && (16..32).contains(&b))
        || (a == 192 && b == 0 && c == 0)
        || (a == 192 && b == 0 && c == 2)
        || (a == 192 && b == 88 && c == 99)
        || (a == 192 && b == 168)
        || (a == 198 && (b == 18 || b == 19))
        || (a == 198 && b == 51 && c == 100)
        || (a == 203 && b == 0 && c == 113)
        || a >= 224;
    !special
}

/// Public IPv6: global unicast (2000::/3) and none of the special blocks inside it: IETF
/// protocol assignments (2001::/23, with Teredo and benchmarking), documentation
/// (2001:db8::/32, 3fff::/20) and 6to4 (2002::/16, which embeds any IPv4 address).
/// Everything outside 2000::/3 (unique local fc00::/7, link-local fe80::/10, multicast
/// ff00::/8, the rest of ::/8, discard 100::/64, local NAT64 64:ff9b:1::/48) is not.
fn public_v6(ip: Ipv6Addr) -> bool {
    let [a, b, ..] = ip.segments();
    let global = a & 0xe000 == 0x2000;
    let special = matches!(
        (a, b),
        (0x2001, 0..0x0200 | 0x0db8) | (0x2002, _) | (0x3fff, 0..0x1000)
    );
    global && !special
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Addresses no name rule but `localhost` (for loopback) may reach.
    const NOT_PUBLIC: &[&str] = &[
        "0.0.0.0",
        "0.1.2.3",
        "10.0.0.1",
        "10.255.255.255",
        "100.64.0.1",
        "100.127.255.255",
        "127.0.0.1",
        "127.1.2.3",
        "169.254.169.254",
        "169.254.0.1",
        "172.16.0.1",
        "172.31.255.255",
        "192.0.0.8",
        "192.0.2.1",
        "192.88.99.1",
        "192.168.1.1",
        "198.18.0.1",
        "198.19.255.255",
        "198.51.100.7",
        "203.0.113.9",
        "224.0.0.1",
        "239.255.255.250",
        "240.0.0.1",
        "255.255.255.255",
        "::",
        "::1",
        "::ffff:127.0.0.1",
        "::ffff:10.0.0.1",
        "::ffff:169.254.169.254",
        "::ffff:0.0.0.0",
        "::127.0.0.1",
        "::10.0.0.1",
        "64:ff9b::127.0.0.1",
        "64:ff9b::a9fe:a9fe",
        "64:ff9b:1::1",
        "100::1",
        "::1:2:3:4",
        "fc00::1",
        "fd12:3456::1",
        "fe80::1",
        "febf::1",
        "fec0::1",
        "ff02::1",
        "2001::1",
        "2001:2::1",
        "2001:10::1",
        "2001:db8::1",
        "2002:7f00:1::1",
        "2002:808:808::1",
        "3fff::1",
        "3fff:fff::1",
    ];

    /// Addresses any matching rule may reach.
    const PUBLIC: &[&str] = &[
        "1.1.1.1",
        "8.8.8.8",
        "9.255.255.255",
        "11.0.0.1",
        "100.63.255.255",
        "100.128.0.1",
        "126.255.255.255",
        "128.0.0.1",
        "169.253.1.1",
        "169.255.1.1",
        "172.15.255.255",
        "172.32.0.1",
        "192.0.1.1",
        "192.167.1.1",
        "192.169.1.1",
        "198.17.1.1",
        "198.20.1.1",
        "223.255.255.254",
        "::ffff:8.8.8.8",
        "64:ff9b::808:808",
        "2001:200::1",
        "2001:4860:4860::8888",
        "2606:4700::1111",
        "2a00:1450::1",
        "3ffe::1",
        "3fff:1000::1",
    ];

    fn rule(entry: &str) -> HostRule {
        HostRule::parse(entry).unwrap()
    }

    #[test]
    fn only_public_addresses_are_public() {
        for ip in NOT_PUBLIC {
            assert!(!is_public(ip.parse().unwrap()), "{ip} is not public");
        }
        for ip in PUBLIC {
            assert!(is_public(ip.parse().unwrap()), "{ip} is public");
        }
    }

    #[test]
    fn a_name_rule_reaches_public_addresses_only() {
        for entry in [
            "example.com",
            "*.example.com:8080",
            "localhost.example.com",
            "*.localhost",
        ] {
            let r = rule(entry);
            for ip in NOT_PUBLIC {
                assert!(
                    !permitted(&r, ip.parse().unwrap()),
                    "{entry} must not reach {ip}"
                );
            }
            for ip in PUBLIC {
                assert!(permitted(&r, ip.parse().unwrap()), "{entry} may reach {ip}");
            }
        }
    }

    #[test]
    fn localhost_also_reaches_loopback_and_nothing_else_private() {
        let cases = [
            ("127.0.0.1", true),
            ("127.0.1.1", true),
            ("::1", true),
            ("::ffff:127.0.0.1", true),
            ("64:ff9b::127.0.0.1", true),
            ("8.8.8.8", true),
            ("0.0.0.0", false),
            ("::", false),
            ("10.0.0.1", false),
            ("169.254.169.254", false),
            ("192.168.1.1", false),
            ("fe80::1", false),
            ("fd00::1", false),
        ];
        for entry in ["localhost", "localhost:3000", "LOCALHOST."] {
            let r = rule(entry);
            for (ip, want) in cases {
                assert_eq!(permitted(&r, ip.parse().unwrap()), want, "{entry} to {ip}");
            }
        }
    }

    #[test]
    fn an_address_rule_reaches_its_own_address_only() {
        let cases = [
            ("127.0.0.1:8080", "127.0.0.1", true),
            ("127.0.0.1:8080", "127.0.0.2", false),
            ("127.0.0.1:8080", "::ffff:127.0.0.1", false),
            ("169.254.169.254", "169.254.169.254", true),
            ("10.0.0.5", "10.0.0.5", true),
            ("10.0.0.5", "8.8.8.8", false),
            ("[::1]:8080", "::1", true),
            ("[::1]:8080", "127.0.0.1", false),
            ("fd00::1", "fd00::1", true),
        ];
        for (entry, ip, want) in cases {
            assert_eq!(
                permitted(&rule(entry), ip.parse().unwrap()),
                want,
                "{entry} to {ip}"
            );
        }
    }
}
