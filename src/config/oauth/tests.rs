//! Unit tests of `[servers.NAME.oauth]`.
//!
//! Each grant's needs, the keys only one grant can use, and every error naming its key.

use crate::config::{ClientAuth, Config, Grant, KeySource, Launch};
use std::path::Path;

const HEAD: &str = "[servers.r]\nurl = \"https://example.com/mcp\"\n[servers.r.oauth]\n";

fn parse(table: &str) -> Result<crate::config::OAuthConfig, String> {
    let text = format!("{HEAD}{table}");
    let cfg = Config::parse(&text, Path::new("/etc/mcpd.toml")).map_err(|e| e.to_string())?;
    let Launch::Http(launch) = &cfg.servers["r"].launch else {
        panic!("a remote server")
    };
    Ok(*launch.oauth.clone().unwrap())
}

fn refused(table: &str, key: &str, words: &str) {
    let e = parse(table).expect_err(table);
    assert!(
        e.contains(&format!("`servers.r.oauth.{key}`")),
        "{table}: {e}"
    );
    assert!(e.contains(words), "{table}: {e} should say {words:?}");
}

#[test]
fn each_machine_grant_reads_with_its_credential() {
    let c = parse(
        "grant = \"client_credentials\"\nclient_id = \"c\"\nclient_secret = \"${secret:s}\"\n",
    )
    .unwrap();
    assert_eq!(c.grant, Grant::ClientCredentials);
    assert!(c.grant.is_machine());
    let c = parse("grant = \"client_credentials\"\nclient_id = \"c\"\nclient_auth = \"private_key_jwt\"\nprivate_key_file = \"/etc/k.pem\"\ndpop = true\n").unwrap();
    assert_eq!(c.client_auth, Some(ClientAuth::PrivateKeyJwt));
    assert_eq!(c.private_key, Some(KeySource::File("/etc/k.pem".into())));
    assert_eq!(c.dpop, Some(true));
    let c = parse("grant = \"jwt_bearer\"\nclient_id = \"w\"\nassertion_file = \"/run/token\"\n")
        .unwrap();
    assert_eq!(c.grant, Grant::JwtBearer);
    assert_eq!(c.assertion_file.as_deref(), Some(Path::new("/run/token")));
    let c = parse("grant = \"jwt_bearer\"\nclient_id = \"c\"\nclient_secret = \"${secret:s}\"\n[servers.r.oauth.identity_provider]\nissuer = \"https://idp.example.com\"\nclient_id = \"i\"\nid_token_file = \"/run/id\"\n").unwrap();
    let idp = c.identity_provider.unwrap();
    assert_eq!(idp.issuer, "https://idp.example.com");
    assert_eq!(idp.id_token, Some(KeySource::File("/run/id".into())));
    let c = parse("grant = \"jwt_bearer\"\nclient_id = \"c\"\nredirect_port = 8400\n[servers.r.oauth.identity_provider]\nissuer = \"https://idp.example.com\"\nclient_id = \"i\"\n").unwrap();
    assert_eq!(
        c.identity_provider.unwrap().id_token,
        None,
        "the user signs in"
    );
    assert_eq!(c.redirect_port, Some(8400), "the sign-in's redirect port");
    assert_eq!(parse("").unwrap().grant, Grant::AuthorizationCode);
}

#[test]
fn a_grant_missing_what_it_needs_or_with_keys_of_another_is_refused_naming_the_key() {
    refused("grant = \"password\"\n", "grant", "is not a grant");
    refused(
        "grant = \"client_credentials\"\nclient_secret_env = \"S\"\n",
        "client_secret_env",
        "needs its client_id",
    );
    refused(
        "grant = \"client_credentials\"\n",
        "client_id",
        "client_credentials",
    );
    refused(
        "grant = \"client_credentials\"\nclient_id = \"c\"\n",
        "grant",
        "needs the client's credential",
    );
    refused(
        "grant = \"client_credentials\"\nclient_id = \"c\"\nclient_secret = \"${secret:s}\"\nredirect_port = 5\n",
        "redirect_port",
        "authorization_code only",
    );
    refused(
        "grant = \"jwt_bearer\"\nclient_id = \"c\"\n",
        "grant",
        "needs its assertion",
    );
    refused(
        "assertion_file = \"/run/t\"\n",
        "assertion_file",
        "has no use with grant = \"authorization_code\"",
    );
    refused(
        "grant = \"jwt_bearer\"\nassertion_file = \"run/t\"\n",
        "assertion_file",
        "not an absolute path",
    );
    refused(
        "client_id = \"c\"\nprivate_key = \"-----BEGIN PRIVATE KEY-----\"\n",
        "private_key",
        "plain text",
    );
    refused(
        "client_id = \"c\"\nprivate_key = \"${secret:k}\"\nprivate_key_file = \"/k\"\n",
        "private_key",
        "conflicts with private_key_file",
    );
    refused(
        "client_id = \"c\"\nclient_auth = \"private_key_jwt\"\n",
        "client_auth",
        "needs private_key",
    );
    refused(
        "client_id = \"c\"\nclient_auth = \"client_secret_post\"\n",
        "client_auth",
        "needs client_secret",
    );
    refused(
        "client_id = \"c\"\nclient_auth = \"tls\"\n",
        "client_auth",
        "is not a client authentication",
    );
    refused(
        "grant = \"jwt_bearer\"\n[servers.r.oauth.identity_provider]\nclient_id = \"i\"\nid_token_file = \"/i\"\n",
        "identity_provider.issuer",
        "is required",
    );
    refused(
        "grant = \"jwt_bearer\"\nredirect_port = 5\n[servers.r.oauth.identity_provider]\nissuer = \"https://i\"\nclient_id = \"i\"\nid_token_file = \"/i\"\n",
        "redirect_port",
        "has no use",
    );
    refused(
        "grant = \"jwt_bearer\"\n[servers.r.oauth.identity_provider]\nissuer = \"https://i\"\nclient_id = \"i\"\nid_token = \"eyJ\"\n",
        "identity_provider.id_token",
        "plain text",
    );
    refused(
        "grant = \"jwt_bearer\"\n[servers.r.oauth.identity_provider]\nissuer = \"ftp://i\"\nclient_id = \"i\"\nid_token_file = \"/i\"\n",
        "identity_provider.issuer",
        "not an http(s) URL",
    );
    let e = parse(
        "grant = \"jwt_bearer\"\n[servers.r.oauth.identity_provider]\nisuer = \"https://i\"\n",
    )
    .unwrap_err();
    assert!(e.contains("unknown field `isuer`"), "{e}");
}
