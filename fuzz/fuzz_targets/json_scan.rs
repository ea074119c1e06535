//! Fuzz target: `json::check` accepts exactly the text serde_json accepts (finding an object's members as `scan` does), and `json::scan` on that text finds the same members and elements, each as the very text serde_json reads as that member's value, also when it jumps over the strings the check listed.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mcpd_wire::json::check::{is_value, object_members_listing};
use mcpd_wire::json::scan::{Known, each_object, each_object_in, members, members_in};
use serde::de::{Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    // Any text: no panic, whatever it is.
    let found = members(text);
    let _ = each_object(text, |_| true);
    let accepted = serde_json::from_str::<serde::de::IgnoredAny>(text).is_ok();
    assert_eq!(is_value(text), accepted, "{text:?}");
    // The members found while checking are the ones a walk of the valid text finds; and
    // the walk finds the same when it jumps over the strings the check listed (all of
    // them here, from the empty string on, so it jumps as often as it can).
    let checked = object_members_listing(text, 2);
    if accepted {
        assert_eq!(
            checked.as_ref().map(|c| c.members.to_vec()),
            found.as_ref().map(|m| m.to_vec()),
            "{text:?}"
        );
        let listed = checked.as_ref().map(|c| c.long_strings.as_slice());
        let known = Known::new(text, listed.unwrap_or_default());
        assert_eq!(members_in(text, known), found, "{text:?}");
        let (mut plain, mut jumped) = (Vec::new(), Vec::new());
        let a = each_object(text, |m| {
            plain.push(m.map(read_back));
            true
        });
        let b = each_object_in(text, known, |m| {
            jumped.push(m.map(read_back));
            true
        });
        assert_eq!((a, plain), (b, jumped), "{text:?}");
    } else {
        assert!(checked.is_none(), "{text:?}");
    }
    if let Ok(want) = ordered_members(text) {
        let got = found.expect("a valid object has members");
        assert_eq!(read_back(got), want, "{text}");
    }
    if let Ok(elements) = serde_json::from_str::<Vec<&RawValue>>(text) {
        let mut seen = Vec::new();
        let all = each_object(text, |m| {
            seen.push(m.map(read_back));
            true
        });
        if all.is_none() {
            // Only an object whose key serde_json cannot read as a string stops the walk.
            let unreadable =
                |r: &&RawValue| r.get().starts_with('{') && ordered_members(r.get()).is_err();
            assert!(elements.iter().any(unreadable), "{text}");
            return;
        }
        assert_eq!(all, Some(true), "{text}");
        assert_eq!(seen.len(), elements.len(), "{text}");
        for (i, (got, raw)) in seen.iter().zip(&elements).enumerate() {
            match ordered_members(raw.get()) {
                Ok(want) => assert_eq!(got.as_ref(), Some(&want), "element {i} of {text}"),
                Err(_) => assert!(got.is_none(), "element {i} of {text}"),
            }
        }
    }
});

/// Members as owned key and value text. Compared as text rather than as `Value`s: a
/// number serde_json accepts in JSON text may be out of range for a `Value`.
fn read_back<'a>(
    members: impl IntoIterator<Item = (std::borrow::Cow<'a, str>, &'a str)>,
) -> Vec<(String, String)> {
    members
        .into_iter()
        .map(|(k, v)| (k.into_owned(), v.to_owned()))
        .collect()
}

/// The members of an object in the order written, duplicates kept, as serde_json reads
/// them: each key unescaped, each value as the raw text serde_json found for it.
fn ordered_members(text: &str) -> Result<Vec<(String, String)>, serde_json::Error> {
    struct Ordered;
    impl<'de> Visitor<'de> for Ordered {
        type Value = Vec<(String, String)>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("an object")
        }
        fn visit_map<M: MapAccess<'de>>(self, mut map: M) -> Result<Self::Value, M::Error> {
            let mut out = Vec::new();
            while let Some((k, v)) = map.next_entry::<String, &'de RawValue>()? {
                out.push((k, v.get().to_owned()));
            }
            Ok(out)
        }
    }
    let mut de = serde_json::Deserializer::from_str(text);
    let out = (&mut de).deserialize_map(Ordered)?;
    de.end()?;
    Ok(out)
}
