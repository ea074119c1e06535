//! mcpd's OAuth extensions through the real daemon, against the in-process OAuth fixture.
//!
//! The machine grants (client credentials with a secret or `private_key_jwt`, jwt-bearer
//! from a file or an identity provider's ID-JAG), their renewal and refusal, DPoP on the
//! code flow and the machine grants (nonces, restarts, a stolen token), and no credential
//! in any output. This file holds the shared setup.

mod dpop;
mod grants;
mod leaks;
mod renewal;
mod signin;

use crate::oauth::fixture::jwt::{Es256Key, jti, now};
use crate::oauth::fixture::{AuthMethod, Client, OAuthBuilder, OAuthFixture};
use crate::support::*;
use base64::Engine;
use serde_json::{Value, json};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// A daemon under construction whose remote servers get machine credentials: secrets in a
/// systemd credentials directory of its own, files (keys, assertions, ID tokens) beside
/// its config.
pub(super) struct Machine {
    b: DaemonBuilder,
}

impl Machine {
    pub fn new() -> Machine {
        let b = DaemonBuilder::new();
        let creds = b.dir().join("creds");
        std::fs::create_dir(&creds).expect("credentials directory");
        let b = b
            .env("CREDENTIALS_DIRECTORY", &creds.to_string_lossy())
            // Every secret is a credential: no keyring is ever asked.
            .env("DBUS_SESSION_BUS_ADDRESS", "unix:path=/nonexistent/bus");
        Machine { b }
    }

    /// Secret `name` (for `${secret:name}`) holds `value`.
    pub fn secret(self, name: &str, value: &str) -> Machine {
        private_file(&self.b.dir().join("creds").join(name), value);
        self
    }

    /// A 0600 file `name` beside the config holding `text`; its absolute path.
    pub fn file(&self, name: &str, text: &str) -> PathBuf {
        let path = self.b.dir().join(name);
        private_file(&path, text);
        path
    }

    /// Sets a variable in the daemon's environment.
    pub fn env(mut self, key: &str, value: &str) -> Machine {
        self.b = self.b.env(key, value);
        self
    }

    /// A remote server `name` at `url` whose `[servers.NAME.oauth]` table has these lines
    /// (sub-tables may follow them).
    pub fn remote(mut self, name: &str, url: &str, oauth: &str) -> Machine {
        self.b = self
            .b
            .remote(name, url, &format!("[servers.{name}.oauth]\n{oauth}"));
        self
    }

    pub async fn start(self) -> Daemon {
        self.b.start().await
    }
}

/// Writes `text` to `path` with mode 0600, replacing what was there in one step (a
/// reader sees the old file or the new one, never half of it).
pub(super) fn private_file(path: &Path, text: &str) {
    let tmp = path.with_extension("new");
    std::fs::write(&tmp, text).expect("write file");
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o600)).expect("chmod 600");
    std::fs::rename(&tmp, path).expect("rename file");
}

/// A fixture with the client_credentials grant.
pub(super) fn with_client_credentials() -> OAuthBuilder {
    OAuthFixture::builder().client_credentials(true)
}

/// A confidential client `app` with the secret `secret`, authenticating with `method`.
pub(super) fn app(secret: &str, method: AuthMethod) -> Client {
    Client::confidential("app", secret, method)
}

/// The `[servers.r.oauth]` lines of client `app` with the client_credentials grant and
/// its secret in `${secret:app-secret}`.
pub(super) const CLIENT_CREDENTIALS: &str =
    "grant = \"client_credentials\"\nclient_id = \"app\"\nclient_secret = \"${secret:app-secret}\"";

/// A JWT as a workload identity provider issues one, for `aud`, expiring in `exp_in`
/// seconds (in the past when negative).
pub(super) fn workload_jwt(aud: &str, exp_in: i64) -> String {
    let now = now();
    Es256Key::generate().jwt(&json!({
        "iss": "https://ci.example.com", "sub": "repo:example/app:ref:main", "aud": aud,
        "jti": jti(), "iat": now.min(now + exp_in - 60), "exp": now + exp_in,
    }))
}

/// Waits until `name` is in `state`; its status row.
pub(super) async fn wait_state(d: &Daemon, name: &str, state: &str) -> Value {
    d.wait_server(name, &format!("{name} is {state}"), |s| s["state"] == state)
        .await
}

/// Calls `SERVER__echo` (the fixture's echo) through a new agent and checks the answer.
pub(super) async fn echo_through(d: &Daemon, server: &str, said: &str) {
    let mut a = d.initialized_agent().await;
    let r = a
        .call(&format!("{server}__echo"), json!({ "text": said }))
        .await;
    assert_eq!(text(&r), said, "{r}");
}

/// `mcpd ctl status` as text, and as JSON text.
pub(super) async fn status_outputs(d: &Daemon) -> (String, String) {
    let (code, text, err) = d.run_cli(&["ctl", "status"]).await;
    assert_eq!(code, 0, "{err}");
    let (code, json, err) = d.run_cli(&["ctl", "status", "--json"]).await;
    assert_eq!(code, 0, "{err}");
    (text, json)
}

/// The auth line of server `name` in `mcpd ctl status`'s text.
pub(super) fn auth_line<'a>(status: &'a str, name: &str) -> &'a str {
    let section = status
        .split(&format!("\n{name}:\n"))
        .nth(1)
        .unwrap_or_else(|| panic!("no notes of {name} in the status:\n{status}"));
    section
        .lines()
        .find(|l| l.trim_start().starts_with("auth: "))
        .unwrap_or_else(|| panic!("no auth line for {name} in the status:\n{status}"))
        .trim()
}

/// The login mcpd keeps for `name`: `state_dir/credentials/NAME.json`.
pub(super) fn stored(d: &Daemon, name: &str) -> Value {
    let path = d.dir().join(format!("state/credentials/{name}.json"));
    let text =
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    serde_json::from_str(&text).expect("the credential store is JSON")
}

/// The RFC 7638 thumbprint of the DPoP key a stored login keeps (PKCS#8, base64url).
pub(super) fn stored_key_thumbprint(stored: &Value) -> String {
    let key = stored["dpop_key"]
        .as_str()
        .unwrap_or_else(|| panic!("the stored login keeps no DPoP key: {stored}"));
    let der = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(key)
        .expect("the stored key is base64url");
    Es256Key::from_pkcs8(&der).thumbprint()
}

/// The one access token the fixture's AS holds valid now.
pub(super) fn the_access_token(fx: &OAuthFixture) -> String {
    let valid = fx.handle().valid_access_tokens();
    assert_eq!(valid.len(), 1, "one valid access token: {valid:?}");
    valid[0].clone()
}
