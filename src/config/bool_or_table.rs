//! A setting that is `true`, `false` or a table (`oauth`, `sandbox`).
//!
//! It is read so that a misspelt key inside the table is named in the error: serde's
//! untagged enums only say that nothing matched.

use serde::Deserializer;
use serde::de::{self, MapAccess, Visitor};
use std::marker::PhantomData;

/// Reads a boolean as `on_bool` and a table as `T` (whose own errors, such as an
/// unknown field, come through unchanged) then `on_table`.
pub(super) fn read<'de, D, T, R>(
    d: D,
    on_bool: fn(bool) -> R,
    on_table: fn(T) -> R,
) -> Result<R, D::Error>
where
    D: Deserializer<'de>,
    T: serde::Deserialize<'de>,
{
    struct V<T, R> {
        on_bool: fn(bool) -> R,
        on_table: fn(T) -> R,
        _t: PhantomData<T>,
    }
    impl<'de, T: serde::Deserialize<'de>, R> Visitor<'de> for V<T, R> {
        type Value = R;

        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("true, false or a table")
        }

        fn visit_bool<E: de::Error>(self, b: bool) -> Result<R, E> {
            Ok((self.on_bool)(b))
        }

        fn visit_map<M: MapAccess<'de>>(self, map: M) -> Result<R, M::Error> {
            T::deserialize(de::value::MapAccessDeserializer::new(map)).map(self.on_table)
        }
    }
    d.deserialize_any(V {
        on_bool,
        on_table,
        _t: PhantomData,
    })
}

#[cfg(test)]
mod tests {
    use crate::config::Config;
    use std::path::Path;

    fn error(text: &str) -> String {
        match Config::parse_with_env(text, Path::new("/etc/mcpd.toml"), &|_| None) {
            Ok(_) => panic!("accepted: {text}"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn a_misspelt_key_in_an_oauth_or_sandbox_table_is_named() {
        let e = error(
            "[servers.r]\nurl = \"https://example.com/mcp\"\n[servers.r.oauth]\ngrnt = \"x\"\n",
        );
        assert!(e.contains("unknown field `grnt`"), "{e}");
        assert!(e.contains("client_id"), "the keys it takes are listed: {e}");
        let e = error("[servers.s]\ncommand = \"x\"\n[servers.s.sandbox]\nreed = []\n");
        assert!(e.contains("unknown field `reed`"), "{e}");
        let e = error("[servers.r]\nurl = \"https://example.com/mcp\"\noauth = \"yes\"\n");
        assert!(e.contains("expected true, false or a table"), "{e}");
    }

    #[test]
    fn booleans_and_tables_still_read() {
        let ok = |t: &str| Config::parse_with_env(t, Path::new("/etc/mcpd.toml"), &|_| None);
        assert!(ok("[servers.r]\nurl = \"https://example.com/mcp\"\noauth = false\n").is_ok());
        assert!(ok("[servers.s]\ncommand = \"x\"\nsandbox = false\n").is_ok());
        assert!(
            ok("[servers.s]\ncommand = \"x\"\n[servers.s.sandbox]\nread = [\"/tmp\"]\n").is_ok()
        );
        assert!(ok("[servers.r]\nurl = \"https://example.com/mcp\"\n[servers.r.oauth]\nscopes = [\"a\"]\n").is_ok());
    }
}
