//! Where OAuth metadata lives.
//!
//! The well-known URLs of protected resource metadata (RFC 9728 §3.1) and authorization
//! server metadata (RFC 8414 §3.1, OpenID Connect Discovery), and the checks on what they
//! say about themselves.

use reqwest::Url;

/// The URLs to try, in order, for a server's protected resource metadata when its
/// challenge names none: the path-aware one, then the root one. A server at the root has
/// only the root one.
pub fn resource_metadata_candidates(server: &Url) -> Vec<Url> {
    let path = server.path().trim_end_matches('/');
    let mut out = Vec::new();
    if !path.is_empty() {
        out.extend(with_path(
            server,
            &format!("/.well-known/oauth-protected-resource{path}"),
        ));
    }
    out.extend(with_path(server, "/.well-known/oauth-protected-resource"));
    out
}

/// The URLs to try, in order, for an authorization server's metadata, built from its
/// issuer identifier: RFC 8414 then OpenID Connect with the issuer's path inserted, then
/// OpenID Connect with the path appended. None when the issuer is not a URL.
pub fn authorization_server_candidates(issuer: &str) -> Option<Vec<Url>> {
    let url = Url::parse(issuer).ok()?;
    let path = url.path().trim_end_matches('/');
    let mut out = Vec::new();
    if path.is_empty() {
        out.extend(with_path(&url, "/.well-known/oauth-authorization-server"));
        out.extend(with_path(&url, "/.well-known/openid-configuration"));
    } else {
        out.extend(with_path(
            &url,
            &format!("/.well-known/oauth-authorization-server{path}"),
        ));
        out.extend(with_path(
            &url,
            &format!("/.well-known/openid-configuration{path}"),
        ));
        out.extend(with_path(
            &url,
            &format!("{path}/.well-known/openid-configuration"),
        ));
    }
    Some(out)
}

/// The 2025-03-26 fallback for a server without protected resource metadata: its origin
/// is its authorization server, with metadata at the origin's RFC 8414 URL, or else
/// these default endpoints (`/authorize`, `/token`, `/register`).
pub fn origin_defaults(server: &Url) -> (Url, [Option<Url>; 3]) {
    let mut origin = server.clone();
    origin.set_path("/");
    origin.set_query(None);
    origin.set_fragment(None);
    let metadata = with_path(&origin, "/.well-known/oauth-authorization-server")
        .unwrap_or_else(|| origin.clone());
    let defaults = ["/authorize", "/token", "/register"].map(|p| with_path(&origin, p));
    (metadata, defaults)
}

/// The server's origin as an issuer identifier would name it: `scheme://host[:port]`.
pub fn origin_of(server: &Url) -> String {
    server.origin().ascii_serialization()
}

fn with_path(base: &Url, path: &str) -> Option<Url> {
    let mut u = base.clone();
    u.set_path(path);
    u.set_query(None);
    u.set_fragment(None);
    (u.scheme() == "http" || u.scheme() == "https").then_some(u)
}

/// Whether the `resource` a protected resource metadata document names is the server it
/// was fetched for (RFC 9728 §3.3): the same URL, compared with scheme and host
/// lowercased, the default port dropped, no fragment and no trailing `/`. A document
/// found at the root well-known URL may name the origin.
pub fn resource_matches(named: &str, server: &Url, from_root: bool) -> bool {
    let (Some(named), Some(ours)) = (canonical(named), canonical(server.as_str())) else {
        return false;
    };
    named == ours || (from_root && named == canonical(&origin_of(server)).unwrap_or_default())
}

/// A resource identifier in the one form mcpd compares.
fn canonical(resource: &str) -> Option<String> {
    let mut url = Url::parse(resource).ok()?;
    url.set_fragment(None);
    let text = url.as_str().to_owned();
    Some(text.trim_end_matches('/').to_owned())
}

/// Whether a URL taken from metadata may be used: https, or http to a loopback address
/// (which the tests and local development use). Anything else is refused.
pub fn endpoint_allowed(url: &Url) -> bool {
    match url.scheme() {
        "https" => true,
        "http" => match url.host() {
            Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
            Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
            Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
            None => false,
        },
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(s: &str) -> Url {
        Url::parse(s).unwrap()
    }

    fn strs(v: Vec<Url>) -> Vec<String> {
        v.into_iter().map(|u| u.to_string()).collect()
    }

    #[test]
    fn well_known_urls_are_built_as_the_rfcs_say() {
        assert_eq!(
            strs(resource_metadata_candidates(&url(
                "https://mcp.example.com/v1/mcp"
            ))),
            [
                "https://mcp.example.com/.well-known/oauth-protected-resource/v1/mcp",
                "https://mcp.example.com/.well-known/oauth-protected-resource",
            ]
        );
        assert_eq!(
            strs(resource_metadata_candidates(&url(
                "https://mcp.example.com/"
            ))),
            ["https://mcp.example.com/.well-known/oauth-protected-resource"]
        );
        assert_eq!(
            strs(authorization_server_candidates("https://auth.example.com/tenant1").unwrap()),
            [
                "https://auth.example.com/.well-known/oauth-authorization-server/tenant1",
                "https://auth.example.com/.well-known/openid-configuration/tenant1",
                "https://auth.example.com/tenant1/.well-known/openid-configuration",
            ]
        );
        assert_eq!(
            strs(authorization_server_candidates("https://auth.example.com").unwrap()),
            [
                "https://auth.example.com/.well-known/oauth-authorization-server",
                "https://auth.example.com/.well-known/openid-configuration",
            ]
        );
        assert_eq!(authorization_server_candidates("not a url"), None);
        let (meta, [authorize, token, register]) =
            origin_defaults(&url("http://127.0.0.1:8080/v1/mcp?x=1"));
        assert_eq!(
            meta.as_str(),
            "http://127.0.0.1:8080/.well-known/oauth-authorization-server"
        );
        assert_eq!(
            authorize.unwrap().as_str(),
            "http://127.0.0.1:8080/authorize"
        );
        assert_eq!(token.unwrap().as_str(), "http://127.0.0.1:8080/token");
        assert_eq!(register.unwrap().as_str(), "http://127.0.0.1:8080/register");
    }

    #[test]
    fn a_resource_must_name_the_server_it_was_fetched_for() {
        let server = url("https://MCP.example.com:443/v1/mcp");
        assert!(resource_matches(
            "https://mcp.example.com/v1/mcp",
            &server,
            false
        ));
        assert!(resource_matches(
            "https://mcp.example.com/v1/mcp/",
            &server,
            false
        ));
        assert!(!resource_matches(
            "https://evil.example.com/mcp",
            &server,
            false
        ));
        assert!(!resource_matches("https://mcp.example.com", &server, false));
        assert!(resource_matches("https://mcp.example.com", &server, true));
        assert!(!resource_matches("nonsense", &server, true));
    }

    #[test]
    fn only_https_or_loopback_http_endpoints_are_used() {
        for (u, ok) in [
            ("https://auth.example.com/token", true),
            ("http://127.0.0.1:9/token", true),
            ("http://[::1]:9/token", true),
            ("http://localhost:9/token", true),
            ("http://auth.example.com/token", false),
            ("http://10.0.0.1/token", false),
            ("file:///etc/passwd", false),
            ("javascript:alert(1)", false),
        ] {
            assert_eq!(endpoint_allowed(&url(u)), ok, "{u}");
        }
    }
}
