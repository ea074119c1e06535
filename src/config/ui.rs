//! The dashboard's settings (`[daemon] ui`, `ui_listen`).
//!
//! Whether the daemon serves its page, and on which loopback address.

use super::{ConfigError, Validator};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

/// Where the dashboard listens. Always a loopback address: the page shows every
/// server's command line and errors, and is guarded by a cookie, not by encryption.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UiListen {
    /// Port 0 lets the kernel choose a free port at each start; when `ui_listen` is not
    /// given, the port of the last run is asked for first (`dashboard/port.rs`).
    pub addr: SocketAddr,
    /// `ui_listen` was given. Without it the dashboard shares the HTTP listener's port
    /// when that listens on loopback, and has `addr` of its own otherwise.
    pub explicit: bool,
}

impl Default for UiListen {
    /// `127.0.0.1` literally (`localhost` may resolve to `::1` alone), any free port.
    fn default() -> Self {
        UiListen {
            addr: SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 0),
            explicit: false,
        }
    }
}

impl Validator<'_> {
    /// `ui` (default true) and `ui_listen` (default `127.0.0.1:0`), loopback only.
    pub(super) fn ui(
        &self,
        enabled: Option<bool>,
        listen: Option<&str>,
    ) -> Result<Option<UiListen>, ConfigError> {
        let key = "daemon.ui_listen";
        if enabled == Some(false) {
            if listen.is_some() {
                return Err(self.err(key, "has no effect with daemon.ui = false"));
            }
            return Ok(None);
        }
        let Some(listen) = listen else {
            return Ok(Some(UiListen::default()));
        };
        let addr = super::http::parse_addr(listen).ok_or_else(|| {
            self.err(
                key,
                format!("{listen:?} is not an address; write e.g. \"127.0.0.1:8766\" (port 0 picks a free one)"),
            )
        })?;
        if !addr.ip().is_loopback() {
            return Err(self.err(
                key,
                format!(
                    "{addr} is not a loopback address; the dashboard is served on this machine only \
                     (127.0.0.1, [::1] or localhost)"
                ),
            ));
        }
        Ok(Some(UiListen {
            addr,
            explicit: true,
        }))
    }
}

#[cfg(test)]
mod tests {
    use crate::config::{Config, ConfigError, UiListen};
    use std::path::Path;

    fn parse(daemon: &str) -> Result<Option<UiListen>, ConfigError> {
        let text = format!("[daemon]\n{daemon}\n");
        Config::parse_with_env(&text, Path::new("/etc/mcpd.toml"), &|_| None).map(|c| c.daemon.ui)
    }

    fn check(daemon: &str, expected: Result<Option<&str>, &str>) {
        match (parse(daemon), expected) {
            (Ok(got), Ok(want)) => {
                assert_eq!(got.map(|u| u.addr.to_string()).as_deref(), want, "{daemon}")
            }
            (Err(e), Err(want)) => {
                let text = e.to_string();
                assert!(text.contains(want), "{daemon}: {text}");
            }
            (got, want) => panic!("{daemon}: got {got:?}, want {want:?}"),
        }
    }

    #[test]
    fn config_ui_is_on_by_default_on_a_free_loopback_port() {
        check("", Ok(Some("127.0.0.1:0")));
        check("ui = true", Ok(Some("127.0.0.1:0")));
        assert_eq!(Config::empty().daemon.ui, Some(UiListen::default()));
    }

    #[test]
    fn config_ui_listen_takes_loopback_addresses_only() {
        check("ui_listen = \"127.0.0.1:8766\"", Ok(Some("127.0.0.1:8766")));
        check("ui_listen = \"localhost:8766\"", Ok(Some("127.0.0.1:8766")));
        check("ui_listen = \"[::1]:0\"", Ok(Some("[::1]:0")));
        check(
            "ui_listen = \"0.0.0.0:8766\"",
            Err("`daemon.ui_listen`: 0.0.0.0:8766 is not a loopback address"),
        );
        check(
            "ui_listen = \"192.168.1.2:80\"",
            Err("`daemon.ui_listen`: 192.168.1.2:80 is not a loopback address"),
        );
        check(
            "ui_listen = \"example.com:80\"",
            Err("`daemon.ui_listen`: \"example.com:80\" is not an address"),
        );
    }

    #[test]
    fn config_ui_false_turns_it_off_and_a_listen_address_then_is_an_error() {
        check("ui = false", Ok(None));
        check(
            "ui = false\nui_listen = \"127.0.0.1:1\"",
            Err("`daemon.ui_listen`: has no effect with daemon.ui = false"),
        );
    }
}
