//! The JOSE layer against the RFC examples, ring's own verifiers, and keys written by OpenSSL.
//!
//! The OpenSSL keys' thumbprints were computed with Node's crypto.

use super::*;
use ring::signature::{
    ECDSA_P256_SHA256_FIXED, RSA_PKCS1_2048_8192_SHA256, RsaPublicKeyComponents, UnparsedPublicKey,
};

/// A compact JWS's header, claims, signing input and signature.
fn parts(jws: &str) -> (Value, Value, String, Vec<u8>) {
    let p: Vec<&str> = jws.split('.').collect();
    assert_eq!(p.len(), 3, "{jws}");
    let json = |s: &str| serde_json::from_slice(&URL_SAFE_NO_PAD.decode(s).unwrap()).unwrap();
    (
        json(p[0]),
        json(p[1]),
        format!("{}.{}", p[0], p[1]),
        URL_SAFE_NO_PAD.decode(p[2]).unwrap(),
    )
}

fn member(jwk: &Value, name: &str) -> Vec<u8> {
    URL_SAFE_NO_PAD.decode(jwk[name].as_str().unwrap()).unwrap()
}

/// Checks `jws` against the public JWK, with ring's verifier for its `alg`.
fn verify(jws: &str, jwk: &Value) {
    let (header, _, input, sig) = parts(jws);
    match header["alg"].as_str().unwrap() {
        "ES256" => {
            assert_eq!(sig.len(), 64);
            let point = [vec![4], member(jwk, "x"), member(jwk, "y")].concat();
            UnparsedPublicKey::new(&ECDSA_P256_SHA256_FIXED, point)
                .verify(input.as_bytes(), &sig)
                .expect("ES256 signature verifies with the JWK");
        }
        "RS256" => {
            let public = RsaPublicKeyComponents {
                n: member(jwk, "n"),
                e: member(jwk, "e"),
            };
            public
                .verify(&RSA_PKCS1_2048_8192_SHA256, input.as_bytes(), &sig)
                .expect("RS256 signature verifies with the JWK");
        }
        other => panic!("alg {other}"),
    }
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

fn pem(label: &str, der: &[u8]) -> String {
    let body = base64::engine::general_purpose::STANDARD.encode(der);
    let lines: Vec<&str> = body
        .as_bytes()
        .chunks(64)
        .map(|c| std::str::from_utf8(c).unwrap())
        .collect();
    format!(
        "-----BEGIN {label}-----\n{}\n-----END {label}-----\n",
        lines.join("\n")
    )
}

#[test]
fn thumbprint_of_the_rfc_7638_rsa_example() {
    let jwk = json!({
        "kty": "RSA",
        "n": "0vx7agoebGcQSuuPiLJXZptN9nndrQmbXEps2aiAFbWhM78LhWx4cbbfAAtVT86zwu1RK7aPFFxuhDR1L6tSoc_BJECPebWKRXjBZCiFV4n3oknjhMstn64tZ_2W-5JsGY4Hc5n9yBXArwl93lqt7_RN5w6Cf0h4QyQ5v-65YGjQR0_FDW2QvzqY368QQMicAtaSqzs8KJZgnYb9c7d0zgdAZHzu6qMQvRL5hajrn1n91CbOpbISD08qNLyrdkt-bFTWhAI4vMQFh6WeZu0fM4lFd2NcRwr3XPksINHaQ-G_xBniIqbw0Ls1jF44-csFCur-kEgU8awapJzKnqDKgw",
        "e": "AQAB",
        "alg": "RS256",
        "kid": "2011-04-29",
    });
    assert_eq!(
        thumbprint_of(&jwk).as_deref(),
        Some("NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs")
    );
}

#[test]
fn thumbprint_of_the_rfc_9449_ec_example() {
    let jwk = json!({
        "kty": "EC",
        "x": "l8tFrhx-34tV3hRICRDY9zCkDlpBhF42UQUfWVAWBFs",
        "y": "9VE4jf_Ok_o64zbTTlcuNJajHmt6v9TDVrU0CdvGRDA",
        "crv": "P-256",
    });
    assert_eq!(
        thumbprint_of(&jwk).as_deref(),
        Some("0ZcOCORZNYy-DWpqq30jZyJGHTN0d2HglBV3uiguA4I")
    );
}

#[test]
fn thumbprint_of_needs_the_required_members() {
    assert_eq!(thumbprint_of(&json!({})), None);
    assert_eq!(
        thumbprint_of(&json!({"kty": "EC", "crv": "P-256", "x": "a"})),
        None
    );
    assert_eq!(
        thumbprint_of(&json!({"kty": "RSA", "n": "a", "e": 3})),
        None
    );
    assert_eq!(thumbprint_of(&json!({"kty": "XYZ"})), None);
    assert_eq!(thumbprint_of(&json!("EC")), None);
}

#[test]
fn ath_of_the_rfc_9449_example() {
    assert_eq!(
        ath("Kz~8mXK1EalYznwH-LC-1fBAo.4Ljp~zsPE_NeO.gxU"),
        "fUHyO2r2Z3DZ53EsNrWBb0xWXoaNy59IiKCAqksmQEo"
    );
}

#[test]
fn a_dpop_proof_verifies_with_its_own_jwk() {
    let key = SigningKey::generate().unwrap();
    assert_eq!(key.alg(), Alg::Es256);
    let url = reqwest::Url::parse("https://rs.example.com/mcp/v1?x=1&y=2#frag").unwrap();
    let token = "Kz~8mXK1EalYznwH-LC-1fBAo.4Ljp~zsPE_NeO.gxU";
    let proof = dpop_proof(&key, "POST", &url, Some(token), Some("n-0S6_WzA2Mj")).unwrap();
    let (header, claims, _, _) = parts(&proof);

    assert_eq!(header["typ"], "dpop+jwt");
    assert_eq!(header["alg"], "ES256");
    let jwk = &header["jwk"];
    assert_eq!(*jwk, key.public_jwk());
    assert_eq!(jwk["kty"], "EC");
    assert_eq!(jwk["crv"], "P-256");
    assert!(jwk.get("d").is_none(), "no private member: {jwk}");
    assert_eq!(thumbprint_of(jwk).unwrap(), key.thumbprint());
    verify(&proof, jwk);

    assert_eq!(claims["htm"], "POST");
    assert_eq!(claims["htu"], "https://rs.example.com/mcp/v1");
    let iat = claims["iat"].as_u64().unwrap();
    assert!(iat.abs_diff(unix_now()) <= 5, "iat {iat}");
    assert_eq!(claims["ath"], ath(token));
    assert_eq!(claims["ath"], URL_SAFE_NO_PAD.encode(Sha256::digest(token)));
    assert_eq!(claims["nonce"], "n-0S6_WzA2Mj");
    let jti = URL_SAFE_NO_PAD
        .decode(claims["jti"].as_str().unwrap())
        .unwrap();
    assert!(jti.len() * 8 >= 96);

    // A token request: no access token and no nonce yet, and never the same jti.
    let bare = dpop_proof(&key, "GET", &url, None, None).unwrap();
    let (_, bare_claims, _, _) = parts(&bare);
    verify(&bare, &key.public_jwk());
    assert!(bare_claims.get("ath").is_none());
    assert!(bare_claims.get("nonce").is_none());
    assert_eq!(bare_claims["htm"], "GET");
    assert_ne!(bare_claims["jti"], claims["jti"]);
}

#[test]
fn two_generated_keys_differ() {
    let a = SigningKey::generate().unwrap();
    let b = SigningKey::generate().unwrap();
    assert_ne!(a.thumbprint(), b.thumbprint());
}

#[test]
fn sign_puts_alg_first_and_keeps_the_key_s_alg() {
    let key = SigningKey::generate().unwrap();
    let mut header = Map::new();
    header.insert("alg".into(), "none".into());
    header.insert("kid".into(), "k1".into());
    let jws = key.sign(header, &json!({"a": 1})).unwrap();
    let (header, claims, _, _) = parts(&jws);
    assert_eq!(header, json!({"alg": "ES256", "kid": "k1"}));
    assert_eq!(claims, json!({"a": 1}));
    verify(&jws, &key.public_jwk());
}

#[test]
fn debug_shows_no_key_material() {
    let key = SigningKey::from_pem(RSA_2048).unwrap();
    let shown = format!("{key:?}");
    assert_eq!(
        shown,
        format!(
            "SigningKey {{ alg: \"RS256\", thumbprint: {:?}, .. }}",
            key.thumbprint()
        )
    );
}

#[test]
fn a_generated_key_round_trips_through_pkcs8_pem() {
    let key = SigningKey::generate().unwrap();
    let der = key.pkcs8_der().unwrap();
    let again = SigningKey::from_pkcs8_der(der).unwrap();
    assert_eq!(again.thumbprint(), key.thumbprint());
    let text =
        format!("a key:\r\n{}\r\ntrailing text", pem("PRIVATE KEY", der)).replace('\n', "\r\n  ");
    let loaded = SigningKey::from_pem(&text).unwrap();
    assert_eq!(loaded.thumbprint(), key.thumbprint());
    assert_eq!(loaded.public_jwk(), key.public_jwk());
    verify(
        &loaded.sign(Map::new(), &json!({})).unwrap(),
        &key.public_jwk(),
    );
}

#[test]
fn an_openssl_rsa_key_signs_rs256_in_pkcs8_and_pkcs1() {
    const THUMBPRINT: &str = "UVsOwGMnSUQdGYIxtQdS_mbrCbbAXYxKx04LpJwIkC4";
    for text in [RSA_2048, RSA_2048_PKCS1] {
        let key = SigningKey::from_pem(text).unwrap();
        assert_eq!(key.alg(), Alg::Rs256);
        assert_eq!(key.thumbprint(), THUMBPRINT);
        let jwk = key.public_jwk();
        assert_eq!(jwk["e"], "AQAB");
        assert_eq!(member(&jwk, "n").len(), 256, "no leading zero byte");
        let keys: Vec<&String> = jwk.as_object().unwrap().keys().collect();
        assert_eq!(keys.len(), 3, "{jwk}");
        let jws = key.sign(Map::new(), &json!({"sub": "x"})).unwrap();
        assert_eq!(parts(&jws).0["alg"], "RS256");
        verify(&jws, &jwk);
        // Stored as PKCS#8, it loads as the same key.
        let again = SigningKey::from_pkcs8_der(key.pkcs8_der().unwrap()).unwrap();
        assert_eq!(again.thumbprint(), THUMBPRINT);
    }
}

#[test]
fn an_openssl_sec1_p256_key_signs_es256() {
    let text = format!(
        "-----BEGIN EC PARAMETERS-----\nBggqhkjOPQMBBw==\n-----END EC PARAMETERS-----\n{EC_SEC1}"
    );
    let key = SigningKey::from_pem(&text).unwrap();
    assert_eq!(key.alg(), Alg::Es256);
    assert_eq!(
        key.thumbprint(),
        "yp2IDnmCZ9YOe5seCWfvhi2kwXDSVA90sglY8HbJRsE"
    );
    verify(
        &dpop_proof(
            &key,
            "GET",
            &"https://a.example/".parse().unwrap(),
            None,
            None,
        )
        .unwrap(),
        &key.public_jwk(),
    );
    let again = SigningKey::from_pkcs8_der(key.pkcs8_der().unwrap()).unwrap();
    assert_eq!(again.thumbprint(), key.thumbprint());
}

#[test]
fn keys_that_cannot_be_used_are_refused_with_the_reason() {
    let cases: &[(&str, &str)] = &[
        ("", "no private key"),
        ("garbage", "no private key"),
        (
            "-----BEGIN PUBLIC KEY-----\nMAA=\n-----END PUBLIC KEY-----\n",
            "no private key",
        ),
        (
            "-----BEGIN ENCRYPTED PRIVATE KEY-----\nMIIB\n-----END ENCRYPTED PRIVATE KEY-----",
            "encrypted",
        ),
        ("-----BEGIN ENCRYPTED PRIVATE KEY-----\nMIIB", "encrypted"),
        (
            "-----BEGIN RSA PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES-128-CBC,00\n\nMIIB\n-----END RSA PRIVATE KEY-----",
            "encrypted",
        ),
        ("-----BEGIN PRIVATE KEY-----\nMIIB", "no matching"),
        (
            "-----BEGIN PRIVATE KEY-----\n!!!!\n-----END PRIVATE KEY-----",
            "not valid base64",
        ),
        (
            "-----BEGIN PRIVATE KEY-----\n-----END PRIVATE KEY-----",
            "not valid DER",
        ),
        (
            "-----BEGIN PRIVATE KEY-----\nMAA=\n-----END PRIVATE KEY-----",
            "not valid DER",
        ),
        (
            "-----BEGIN PRIVATE KEY-----\nMIQAAAA=\n-----END PRIVATE KEY-----",
            "not valid DER",
        ),
        (
            "-----BEGIN EC PRIVATE KEY-----\nMAMCAQE=\n-----END EC PRIVATE KEY-----",
            "not valid DER",
        ),
        (P384_PKCS8, "P-256"),
        (P384_SEC1, "P-256"),
        (ED25519, "neither"),
        (RSA_1024, "1024 bits"),
        (EC_SEC1_NO_PUBLIC, "openssl pkcs8 -topk8 -nocrypt"),
    ];
    for (text, reason) in cases {
        let err = SigningKey::from_pem(text).unwrap_err().to_string();
        assert!(err.contains(reason), "{text:?}: {err}");
    }
    // PKCS#8 without the EC public key.
    let der = URL_SAFE_NO_PAD.decode("MEECAQAwEwYHKoZIzj0CAQYIKoZIzj0DAQcEJzAlAgEBBCDtkRrx0qMCji9b0G2r1BVCWiEHR_hd7SVSdShF2I4AGA").unwrap();
    let err = SigningKey::from_pkcs8_der(&der).unwrap_err().to_string();
    assert!(err.contains("openssl pkcs8"), "{err}");
    // Truncations of a good key never panic.
    let good = SigningKey::generate().unwrap();
    let good = good.pkcs8_der().unwrap();
    for n in 0..good.len() {
        assert!(SigningKey::from_pkcs8_der(&good[..n]).is_err());
    }
}

#[test]
fn a_client_assertion_names_the_client_and_lasts_a_minute() {
    for key in [
        SigningKey::generate().unwrap(),
        SigningKey::from_pem(RSA_2048).unwrap(),
    ] {
        let jwt =
            client_assertion(&key, "https://client.example/id", "https://as.example").unwrap();
        let (header, claims, _, _) = parts(&jwt);
        assert_eq!(header, json!({"alg": key.alg().as_str(), "typ": "JWT"}));
        assert_eq!(claims["iss"], "https://client.example/id");
        assert_eq!(claims["sub"], "https://client.example/id");
        assert_eq!(claims["aud"], "https://as.example");
        let (iat, exp) = (
            claims["iat"].as_u64().unwrap(),
            claims["exp"].as_u64().unwrap(),
        );
        assert_eq!(exp - iat, 60);
        assert!(iat.abs_diff(unix_now()) <= 5);
        assert!(claims["jti"].as_str().unwrap().len() >= 16);
        verify(&jwt, &key.public_jwk());
        assert_eq!(unverified_exp(&jwt), Some(exp));
    }
}

#[test]
fn unverified_exp_reads_only_well_formed_tokens() {
    let b = |v: &Value| URL_SAFE_NO_PAD.encode(v.to_string());
    let h = b(&json!({"alg": "none"}));
    assert_eq!(
        unverified_exp(&format!("{h}.{}.", b(&json!({"exp": 1700000000})))),
        Some(1700000000)
    );
    assert_eq!(
        unverified_exp(&format!("{h}.{}.sig", b(&json!({"exp": 17.9})))),
        Some(17)
    );
    for bad in [
        String::new(),
        "a.b".into(),
        "a.b.c".into(),
        "a.!!!.c".into(),
        "....".into(),
        format!("{h}.{}.s", URL_SAFE_NO_PAD.encode("not json")),
        format!("{h}.{}.s", b(&json!({"exp": "1700000000"}))),
        format!("{h}.{}.s", b(&json!({"exp": -5}))),
        format!("{h}.{}.s", b(&json!({"exp": 1e300}))),
        format!("{h}.{}.s", b(&json!({"iat": 5}))),
        format!("{h}.{}.s", b(&json!([1, 2]))),
        format!("{h}.{}.s.e.f", b(&json!({"exp": 5}))),
    ] {
        assert_eq!(unverified_exp(&bad), None, "{bad}");
    }
}

/// `openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048`.
const RSA_2048: &str = "\
-----BEGIN PRIVATE KEY-----
MIIEvAIBADANBgkqhkiG9w0BAQEFAASCBKYwggSiAgEAAoIBAQCwAyKPSlUhQVzy
9R4jr/wUNYLFIXVLYvh74rZCVHkn0fkk9y+xH8pg0IMPlyKgGKdFuG9XyuN+cTVX
RB+4WraSAMTvfvTZSt3lA5JZPeHDdhbXg/1VnI/yEin00g0VrcbkRiDE/YncNNUS
xKupsL6FtZKwp3L5k831iBKQyKAVli7M/wp/13ri/PfegXRV0tb/JXg8OxCRvj1S
yZHL7N/xUxkN/c+LbOEehb2Y3ikmmbKv6h6ICS7yU+U7z6KtHCBbjqBvYcROHlsu
sln4CZCdn61dwF6fD6XTzTgg1S1HC150446ZN5LJdcwA9pbCvTN6eCKr0LU4EtQR
jDCE0IbTAgMBAAECggEASTq8rbYk7gWWSOUPiZSGAdhzlFXDyb4fGNftsXIYyCb1
i9ol5wENf7Mw3BMqzkYDjh/af0HD3Y73PNv0gIyJSfx08xm0gBVEdaxDPsreu6ZN
gZQCGhTd1L6W4ytjU0IuLjo5FwxPR6VZgwn9S8fjtJijM8kvLkQ+2+klpEQ8Sk40
KnTtsIzHeHuvjBVZTK+3mIihdOAVP0RUD1bJmayvN7SqbHIPrOkYm6DDtE6y4rl0
pIdcAubX+70majmC/1ubzuuh8F3TKJaA0K2ZaFM7XrdflxFUZhxZM5JxhKZ2/hoj
H/cWsMg7fd0kCJvGW95nx1AF6J9Cl1mIVUmlxm6J/QKBgQDv/wEMu8gD1Z/JnbXP
YvnFWOSFaMnwl7p23FYz8vGeJMTl7gKNt7wFGLPYLnwEjV/z/7ldK9onDVljGh9X
LGPT5E6cNDJU6Qzjlwv8hrDxuNvB9EIXe+4hPX5FWc9dOPGnNwjcb4EiljV2QbKn
PvJijCRYNJJsjOi6spy38j3hZQKBgQC7v9s97d+vaSgr0aIIwr+3bOBmF6Hoc93h
Agt/rjZ39Gl8/YeFJ4L4suFe2FYuB8LzEsEQzkXwzBU2nlqdgYMkc0/gI/9FMpZ4
TxWlJCBodTDruPOXZLIDcxIhqNoXphlw/lsSh+lLfmXqJPKvZbQNNIBKsS4YdfKQ
BNhkiAkf1wKBgFGy94KEMlTL1jdmTswon2qFFlYsFAKpRDrOSzIoFASH89dqLMhd
sc3yWNbRDDrofa+scEe9c+gzbSiFbgHZBKrPX8thIXkyVMbtVpFCsN241mayZgVk
lO4P5vpo1mSfy/PmkkeoVceWZuC5AL5aeVz+5Ch6zRXS6i8UOrGL73DZAoGAZt8f
vNYKmy0uIpxRgSVcMJ/KcIYAY8Kgzzn0nPgSxjU4W5D64V2d6LDyxaoZxkzgZ5le
CdxL/D2GXg/0LJsbBSzdlj2DECJAyhjjDkI2M6YKsQ39AnXdCADT7Xd8UDrlc8Ea
m5O2o3PVWa72/l3mgtnCdaqRTDvMNVdCTgsvnK8CgYBi9CP5DEgMnBw/fimkjT+F
W75HcUjiD8DpmMS7OqN2LTfI4wwonuEUNSRA6AZLa2YqPlPiAv+DHpNMqAdGKY6K
ETS4V37og7ou8avIzmbcbMYZCElOza+RQBl9AKksOR6a095RZuPTDNlmd/GpBsOd
0BAjBOvdU5rEU1cVbdMw8w==
-----END PRIVATE KEY-----
";
/// The same key, `openssl rsa -traditional`.
const RSA_2048_PKCS1: &str = "\
-----BEGIN RSA PRIVATE KEY-----
MIIEogIBAAKCAQEAsAMij0pVIUFc8vUeI6/8FDWCxSF1S2L4e+K2QlR5J9H5JPcv
sR/KYNCDD5cioBinRbhvV8rjfnE1V0QfuFq2kgDE73702Urd5QOSWT3hw3YW14P9
VZyP8hIp9NINFa3G5EYgxP2J3DTVEsSrqbC+hbWSsKdy+ZPN9YgSkMigFZYuzP8K
f9d64vz33oF0VdLW/yV4PDsQkb49UsmRy+zf8VMZDf3Pi2zhHoW9mN4pJpmyr+oe
iAku8lPlO8+irRwgW46gb2HETh5bLrJZ+AmQnZ+tXcBenw+l0804INUtRwtedOOO
mTeSyXXMAPaWwr0zengiq9C1OBLUEYwwhNCG0wIDAQABAoIBAEk6vK22JO4Flkjl
D4mUhgHYc5RVw8m+HxjX7bFyGMgm9YvaJecBDX+zMNwTKs5GA44f2n9Bw92O9zzb
9ICMiUn8dPMZtIAVRHWsQz7K3rumTYGUAhoU3dS+luMrY1NCLi46ORcMT0elWYMJ
/UvH47SYozPJLy5EPtvpJaREPEpONCp07bCMx3h7r4wVWUyvt5iIoXTgFT9EVA9W
yZmsrze0qmxyD6zpGJugw7ROsuK5dKSHXALm1/u9Jmo5gv9bm87rofBd0yiWgNCt
mWhTO163X5cRVGYcWTOScYSmdv4aIx/3FrDIO33dJAibxlveZ8dQBeifQpdZiFVJ
pcZuif0CgYEA7/8BDLvIA9WfyZ21z2L5xVjkhWjJ8Je6dtxWM/LxniTE5e4Cjbe8
BRiz2C58BI1f8/+5XSvaJw1ZYxofVyxj0+ROnDQyVOkM45cL/Iaw8bjbwfRCF3vu
IT1+RVnPXTjxpzcI3G+BIpY1dkGypz7yYowkWDSSbIzourKct/I94WUCgYEAu7/b
Pe3fr2koK9GiCMK/t2zgZheh6HPd4QILf642d/RpfP2HhSeC+LLhXthWLgfC8xLB
EM5F8MwVNp5anYGDJHNP4CP/RTKWeE8VpSQgaHUw67jzl2SyA3MSIajaF6YZcP5b
EofpS35l6iTyr2W0DTSASrEuGHXykATYZIgJH9cCgYBRsveChDJUy9Y3Zk7MKJ9q
hRZWLBQCqUQ6zksyKBQEh/PXaizIXbHN8ljW0Qw66H2vrHBHvXPoM20ohW4B2QSq
z1/LYSF5MlTG7VaRQrDduNZmsmYFZJTuD+b6aNZkn8vz5pJHqFXHlmbguQC+Wnlc
/uQoes0V0uovFDqxi+9w2QKBgGbfH7zWCpstLiKcUYElXDCfynCGAGPCoM859Jz4
EsY1OFuQ+uFdneiw8sWqGcZM4GeZXgncS/w9hl4P9CybGwUs3ZY9gxAiQMoY4w5C
NjOmCrEN/QJ13QgA0+13fFA65XPBGpuTtqNz1Vmu9v5d5oLZwnWqkUw7zDVXQk4L
L5yvAoGAYvQj+QxIDJwcP34ppI0/hVu+R3FI4g/A6ZjEuzqjdi03yOMMKJ7hFDUk
QOgGS2tmKj5T4gL/gx6TTKgHRimOihE0uFd+6IO6LvGryM5m3GzGGQhJTs2vkUAZ
fQCpLDkemtPeUWbj0wzZZnfxqQbDndAQIwTr3VOaxFNXFW3TMPM=
-----END RSA PRIVATE KEY-----
";
/// `openssl ecparam -name prime256v1 -genkey -noout`.
const EC_SEC1: &str = "\
-----BEGIN EC PRIVATE KEY-----
MHcCAQEEIO2RGvHSowKOL1vQbavUFUJaIQdH+F3tJVJ1KEXYjgAYoAoGCCqGSM49
AwEHoUQDQgAE/VMVkTTD9/7VxMBx0uz/hbW7Mukr1wnQTrH4k/ylhRY4QGYO/jq1
rRHuZZmRwiKud6xaOKEseucZX3MhU3axSQ==
-----END EC PRIVATE KEY-----
";
/// The same key, `openssl ec -no_public`.
const EC_SEC1_NO_PUBLIC: &str = "\
-----BEGIN EC PRIVATE KEY-----
MDECAQEEIO2RGvHSowKOL1vQbavUFUJaIQdH+F3tJVJ1KEXYjgAYoAoGCCqGSM49
AwEH
-----END EC PRIVATE KEY-----
";
/// `openssl ecparam -name secp384r1 -genkey -noout`, then `openssl pkcs8 -topk8 -nocrypt`.
const P384_PKCS8: &str = "\
-----BEGIN PRIVATE KEY-----
MIG2AgEAMBAGByqGSM49AgEGBSuBBAAiBIGeMIGbAgEBBDB96oO/JRK9bei9HliC
/rDeFcyBB7DhQX3ljNi97k/Mj746nlDA4o0MTCBYs1zfA4uhZANiAAS4TTh6BolH
lSqO/vR5KaUyEovzj8QDbctZl+MROvmtkLH1qWJzzj3VVm5nPT9s+A2CrM4WovC+
VIrxqJZoLPw0YghSrxrRu5uS7O/BzMSLjwspVpuZYCHDjGy9uDQ0Yyg=
-----END PRIVATE KEY-----
";
/// The same key before `openssl pkcs8`.
const P384_SEC1: &str = "\
-----BEGIN EC PRIVATE KEY-----
MIGkAgEBBDB96oO/JRK9bei9HliC/rDeFcyBB7DhQX3ljNi97k/Mj746nlDA4o0M
TCBYs1zfA4ugBwYFK4EEACKhZANiAAS4TTh6BolHlSqO/vR5KaUyEovzj8QDbctZ
l+MROvmtkLH1qWJzzj3VVm5nPT9s+A2CrM4WovC+VIrxqJZoLPw0YghSrxrRu5uS
7O/BzMSLjwspVpuZYCHDjGy9uDQ0Yyg=
-----END EC PRIVATE KEY-----
";
/// `openssl genpkey -algorithm ed25519`.
const ED25519: &str = "\
-----BEGIN PRIVATE KEY-----
MC4CAQAwBQYDK2VwBCIEIPyedudXGzWNemcq2wbwhp5L14pnoAxj07B8eO9S5ILg
-----END PRIVATE KEY-----
";
/// `openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:1024`.
const RSA_1024: &str = "\
-----BEGIN PRIVATE KEY-----
MIICdQIBADANBgkqhkiG9w0BAQEFAASCAl8wggJbAgEAAoGBAKydfK1ahsv9o5Ip
9EwMVxnDRbUcarRCA0m9UH1bkrjKNZoi7099+kBE+YGPbjqEHUHR9jIyFdc7FuCO
53DqAjFhlsEV0kAl51RtJzh8KTyoe+3eMVTY6QyFFt59TIzsheBHAu7JsfK/0Han
muiViuKp7RbMCh35bht8ToJ/jyRZAgMBAAECgYANEbd44JvIIiIaVPbcMyr9Fl3W
wpoJn93j3WOUujQ3rYe1beO0nxMtfottldCAubQFYcJENqqUqzKmOeuoDu+vcYLc
ML1ne1xnNhvGIn0S7mefQXRSQDH3xZi6N2MmWmkPkB4WWqWRRc7Gv7mg9sMZ0pLb
nWKupsx/fexM07oC6QJBAOUb17NtPIaRhuD1xkFjbVQ05TVhtVRP41y2QNY3Bt+9
x7JEpzrUZX4CLMgBkpuT0nhu1o0wzOO+8Kn660cEXscCQQDA4CaX3WsuC3sTufJE
g0k3deWf2xd+mjG+lnzVjLb7X6zLwi0a4/QPjXXN1PDV81GGlcRpctpYsdXGrWzp
+cPfAkBR1bUhSOZypq6H0iIjnxEhH9ezTphHalWq+wqDuZoB9zbKTU1ybQVnkf1O
34jve0iVbfnC6uh0fPJXtOGvNzdnAkBPsM2BVcThA3FY1y1YTX5E4ft8LwPoFUGU
Y400lq1L813r2lDUmXbPrj0MTH0tiRkYKG08vG2m0+Nl8WXczou1AkAUky5bC56H
K+A1wbLKKUdgUrgcTu6i1End9yM/sch1qLvclJIymdiiYQH6JJvdqAsqQU9dEBHI
WhFU+6Hc3x80
-----END PRIVATE KEY-----
";
