//! Checks a raw `[servers.NAME.oauth]` table into an `OAuthConfig`.
//!
//! Each key alone (stores, URLs, scopes, secrets written as `${secret:NAME}`), then the
//! keys against the grant (what a machine grant needs, what only a browser login can
//! use), each error naming the key.

use super::super::value::{Missing, Secret};
use super::super::{ConfigError, Validator};
use super::{
    ClientAuth, CredentialStore, Grant, IdentityProvider, KeySource, OAuthConfig,
    RawIdentityProvider, RawOAuth, RawOAuthTable,
};
use std::path::PathBuf;

impl Validator<'_> {
    /// The OAuth settings of a remote server: on unless a static credential is configured
    /// or `oauth = false`.
    pub(in crate::config) fn oauth(
        &self,
        key: &str,
        raw: Option<&RawOAuth>,
        static_auth: bool,
        missing: &mut Vec<Missing>,
    ) -> Result<Option<OAuthConfig>, ConfigError> {
        let okey = format!("{key}.oauth");
        let table = match raw {
            None => {
                return Ok((!static_auth).then(OAuthConfig::default));
            }
            Some(RawOAuth::Enabled(false)) => return Ok(None),
            Some(RawOAuth::Enabled(true)) => RawOAuthTable::default(),
            Some(RawOAuth::Table(t)) => (**t).clone(),
        };
        if static_auth {
            return Err(self.err(
                okey,
                "conflicts with bearer_token_env or an Authorization header; log in one way only",
            ));
        }
        let grant = match table.grant.as_deref() {
            None | Some("authorization_code") => Grant::AuthorizationCode,
            Some("client_credentials") => Grant::ClientCredentials,
            Some("jwt_bearer") => Grant::JwtBearer,
            Some(other) => {
                return Err(self.err(
                    format!("{okey}.grant"),
                    format!("{other:?} is not a grant; use \"authorization_code\" (a person logs in), \"client_credentials\" or \"jwt_bearer\""),
                ));
            }
        };
        let store = match table.store.as_deref() {
            None | Some("file") => CredentialStore::File,
            Some("keyring") => CredentialStore::Keyring,
            Some(other) => {
                return Err(self.err(
                    format!("{okey}.store"),
                    format!("{other:?} is not a credential store; use \"file\" or \"keyring\""),
                ));
            }
        };
        if table
            .client_id
            .as_deref()
            .is_some_and(|c| c.trim().is_empty())
        {
            return Err(self.err(format!("{okey}.client_id"), "is empty"));
        }
        let client_secret = self.client_secret(&okey, &table, missing)?;
        let client_auth = match table.client_auth.as_deref() {
            None => None,
            Some(text) => Some(ClientAuth::parse(text).ok_or_else(|| {
                self.err(
                    format!("{okey}.client_auth"),
                    format!("{text:?} is not a client authentication; use \"client_secret_basic\", \"client_secret_post\", \"private_key_jwt\" or \"none\""),
                )
            })?),
        };
        let private_key = self.key_source(
            &okey,
            ("private_key", table.private_key.as_deref()),
            ("private_key_file", table.private_key_file.as_deref()),
        )?;
        let assertion_file = match &table.assertion_file {
            Some(p) => Some(self.absolute(&format!("{okey}.assertion_file"), p)?),
            None => None,
        };
        let identity_provider = match &table.identity_provider {
            Some(raw) => Some(Box::new(
                self.identity_provider(&format!("{okey}.identity_provider"), raw)?,
            )),
            None => None,
        };
        if let Some(url) = &table.client_metadata_url {
            let ok =
                reqwest::Url::parse(url).is_ok_and(|u| u.scheme() == "https" && u.path() != "/");
            if !ok {
                return Err(self.err(
                    format!("{okey}.client_metadata_url"),
                    "a client ID metadata document URL is https with a path, e.g. \"https://example.com/mcpd/client.json\"",
                ));
            }
        }
        for s in &table.scopes {
            if s.is_empty()
                || s.chars()
                    .any(|c| c.is_whitespace() || c == '"' || c == '\\')
            {
                return Err(self.err(
                    format!("{okey}.scopes"),
                    format!("{s:?} is not a scope (one word each, no spaces or quotes)"),
                ));
            }
        }
        if table.redirect_port == Some(0) {
            return Err(self.err(
                format!("{okey}.redirect_port"),
                "must be 1-65535 (leave it unset for a random port)",
            ));
        }
        let cfg = OAuthConfig {
            grant,
            client_id: table.client_id.clone(),
            client_secret,
            client_auth,
            private_key,
            assertion_file,
            dpop: table.dpop,
            identity_provider,
            scopes: table.scopes.clone(),
            redirect_port: table.redirect_port,
            client_metadata_url: table.client_metadata_url.clone(),
            store,
        };
        self.grant_fits(&okey, &table, &cfg)?;
        Ok(Some(cfg))
    }

    /// `client_secret` or `client_secret_env`, one of them, with its client.
    fn client_secret(
        &self,
        okey: &str,
        table: &RawOAuthTable,
        missing: &mut Vec<Missing>,
    ) -> Result<Option<Secret>, ConfigError> {
        match (&table.client_secret, &table.client_secret_env) {
            (Some(_), Some(_)) => Err(self.err(
                format!("{okey}.client_secret"),
                "conflicts with client_secret_env; set the client secret one way only",
            )),
            (Some(text), None) => {
                let skey = format!("{okey}.client_secret");
                if table.client_id.is_none() {
                    return Err(self.err(skey, "a client secret needs its client_id"));
                }
                // Put in when a login or a refresh needs it (`oauth::flow`).
                Ok(Some(self.secret_text(&skey, text, "a client secret")?))
            }
            (None, None) => Ok(None),
            (None, Some(var)) => {
                let skey = format!("{okey}.client_secret_env");
                if table.client_id.is_none() {
                    return Err(self.err(skey, "a client secret needs its client_id"));
                }
                match (self.env)(var) {
                    Some(secret) if !secret.is_empty() => Ok(Some(Secret::new(secret))),
                    found => {
                        missing.push(Missing::new(skey, var, found.is_some()));
                        Ok(None)
                    }
                }
            }
        }
    }

    /// Text that must name its secret (`${secret:NAME}`) rather than hold it.
    fn secret_text(&self, key: &str, text: &str, what: &str) -> Result<Secret, ConfigError> {
        let refs = crate::secrets::references(text).map_err(|e| self.err(key, e))?;
        if refs.is_empty() {
            return Err(self.err(
                key,
                format!("holds no ${{secret:NAME}}: {what} written here would sit in the config in plain text; store it with `mcpd ctl secret set NAME` and write \"${{secret:NAME}}\""),
            ));
        }
        Ok(Secret::new(text.to_owned()))
    }

    /// A path that must be absolute (a file read when it is needed).
    fn absolute(&self, key: &str, path: &str) -> Result<PathBuf, ConfigError> {
        let p = PathBuf::from(path);
        if !p.is_absolute() {
            return Err(self.err(key, format!("{path:?} is not an absolute path")));
        }
        Ok(p)
    }

    /// `NAME = "${secret:…}"` or `NAME_file = "/path"`, at most one.
    fn key_source(
        &self,
        okey: &str,
        (skey, secret): (&str, Option<&str>),
        (fkey, file): (&str, Option<&str>),
    ) -> Result<Option<KeySource>, ConfigError> {
        match (secret, file) {
            (Some(_), Some(_)) => Err(self.err(
                format!("{okey}.{skey}"),
                format!("conflicts with {fkey}; set it one way only"),
            )),
            (Some(text), None) => Ok(Some(KeySource::Secret(self.secret_text(
                &format!("{okey}.{skey}"),
                text,
                "a key or token",
            )?))),
            (None, Some(path)) => Ok(Some(KeySource::File(
                self.absolute(&format!("{okey}.{fkey}"), path)?,
            ))),
            (None, None) => Ok(None),
        }
    }

    fn identity_provider(
        &self,
        ikey: &str,
        raw: &RawIdentityProvider,
    ) -> Result<IdentityProvider, ConfigError> {
        let url = |name: &str, v: &str| -> Result<String, ConfigError> {
            match reqwest::Url::parse(v) {
                Ok(u) if u.scheme() == "https" || u.scheme() == "http" => Ok(v.to_owned()),
                _ => Err(self.err(
                    format!("{ikey}.{name}"),
                    format!("{v:?} is not an http(s) URL"),
                )),
            }
        };
        let issuer = match &raw.issuer {
            Some(v) => url("issuer", v)?,
            None => {
                return Err(self.err(
                    format!("{ikey}.issuer"),
                    "is required: the identity provider's issuer URL",
                ));
            }
        };
        let client_id = match &raw.client_id {
            Some(v) if !v.trim().is_empty() => v.clone(),
            _ => {
                return Err(self.err(
                    format!("{ikey}.client_id"),
                    "is required: mcpd's client at the identity provider",
                ));
            }
        };
        let token_endpoint = match &raw.token_endpoint {
            Some(v) => Some(url("token_endpoint", v)?),
            None => None,
        };
        let client_secret = match &raw.client_secret {
            Some(t) => {
                Some(self.secret_text(&format!("{ikey}.client_secret"), t, "a client secret")?)
            }
            None => None,
        };
        // Without either, the user signs in at the identity provider (`mcpd ctl login`).
        let id_token = self.key_source(
            ikey,
            ("id_token", raw.id_token.as_deref()),
            ("id_token_file", raw.id_token_file.as_deref()),
        )?;
        Ok(IdentityProvider {
            issuer,
            client_id,
            client_secret,
            token_endpoint,
            id_token,
        })
    }

    /// The keys against the grant: what a machine grant needs, and what only one grant
    /// can use.
    fn grant_fits(
        &self,
        okey: &str,
        table: &RawOAuthTable,
        cfg: &OAuthConfig,
    ) -> Result<(), ConfigError> {
        let g = cfg.grant.as_str();
        let only = |name: &str, present: bool, grants: &str| -> Result<(), ConfigError> {
            if present {
                return Err(self.err(
                    format!("{okey}.{name}"),
                    format!("has no use with grant = \"{g}\" ({grants} only)"),
                ));
            }
            Ok(())
        };
        let has_key = cfg.private_key.is_some();
        let has_secret = table.client_secret.is_some() || table.client_secret_env.is_some();
        match cfg.grant {
            Grant::AuthorizationCode => {
                only(
                    "assertion_file",
                    cfg.assertion_file.is_some(),
                    "client_credentials and jwt_bearer",
                )?;
                only(
                    "identity_provider",
                    cfg.identity_provider.is_some(),
                    "jwt_bearer",
                )?;
            }
            Grant::ClientCredentials => {
                only(
                    "redirect_port",
                    table.redirect_port.is_some(),
                    "authorization_code",
                )?;
                only(
                    "client_metadata_url",
                    table.client_metadata_url.is_some(),
                    "authorization_code",
                )?;
                only(
                    "identity_provider",
                    cfg.identity_provider.is_some(),
                    "jwt_bearer",
                )?;
                if cfg.client_id.is_none() {
                    return Err(self.err(format!("{okey}.client_id"), "grant = \"client_credentials\" needs the client registered for mcpd at the authorization server"));
                }
                if !has_secret && !has_key && cfg.assertion_file.is_none() {
                    return Err(self.err(format!("{okey}.grant"), "client_credentials needs the client's credential: client_secret (or client_secret_env), private_key (or private_key_file), or assertion_file"));
                }
            }
            Grant::JwtBearer => {
                // A sign-in at the identity provider has a redirect of its own.
                let signs_in = cfg
                    .identity_provider
                    .as_ref()
                    .is_some_and(|i| i.id_token.is_none());
                only(
                    "redirect_port",
                    table.redirect_port.is_some() && !signs_in,
                    "authorization_code, or an identity_provider the user signs in at",
                )?;
                only(
                    "client_metadata_url",
                    table.client_metadata_url.is_some(),
                    "authorization_code",
                )?;
                match (&cfg.assertion_file, &cfg.identity_provider) {
                    (Some(_), Some(_)) => {
                        return Err(self.err(format!("{okey}.assertion_file"), "conflicts with identity_provider: the grant's assertion comes from one of them"));
                    }
                    (None, None) => {
                        return Err(self.err(format!("{okey}.grant"), "jwt_bearer needs its assertion: assertion_file = \"/path\" (workload identity) or an [identity_provider] (enterprise-managed)"));
                    }
                    _ => {}
                }
            }
        }
        let client_assertion_file =
            cfg.grant == Grant::ClientCredentials && cfg.assertion_file.is_some();
        match cfg.client_auth {
            Some(ClientAuth::PrivateKeyJwt) if !has_key && !client_assertion_file => Err(self.err(
                format!("{okey}.client_auth"),
                "private_key_jwt needs private_key or private_key_file",
            )),
            Some(ClientAuth::ClientSecretBasic | ClientAuth::ClientSecretPost) if !has_secret => {
                Err(self.err(
                    format!("{okey}.client_auth"),
                    "needs client_secret or client_secret_env",
                ))
            }
            Some(_) if cfg.client_id.is_none() => {
                Err(self.err(format!("{okey}.client_auth"), "needs client_id"))
            }
            _ if has_key && cfg.client_id.is_none() => Err(self.err(
                format!("{okey}.private_key"),
                "a private key needs its client_id",
            )),
            _ => Ok(()),
        }
    }
}
