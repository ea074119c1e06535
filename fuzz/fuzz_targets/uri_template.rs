//! Fuzz target: `template_matches(template, uri)` on arbitrary pairs, checked against a small backtracking reference matcher on short inputs.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mcpd::fuzzing::template_matches;

/// Inputs shorter than this are checked against the reference, which is exponential.
const REFERENCE_BELOW: usize = 64;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    // The template is everything before the first newline, the URI everything after.
    let (template, uri) = text.split_once('\n').unwrap_or((text, ""));
    let got = template_matches(template, uri);
    if data.len() < REFERENCE_BELOW {
        let want = reference::matches(template, uri);
        assert_eq!(got, want, "template {template:?}, uri {uri:?}");
    }
});

/// The meaning of a template, written as plainly as possible: literal text matches
/// itself; `{var}` matches one or more characters other than `/`, `?` and `#`; an
/// expression starting with an operator (`+ # / . ; ? &`) matches anything, even
/// nothing; a `{` without a closing `}` means the template matches nothing.
mod reference {
    use std::collections::HashMap;

    enum Part<'a> {
        Literal(&'a str),
        Simple,
        Any,
    }

    pub fn matches(template: &str, uri: &str) -> bool {
        match parts(template) {
            Some(parts) => Matcher {
                parts: &parts,
                uri,
                memo: HashMap::new(),
            }
            .at(0, 0),
            None => false,
        }
    }

    fn parts(template: &str) -> Option<Vec<Part<'_>>> {
        let mut parts = Vec::new();
        let mut rest = template;
        loop {
            match rest.split_once('{') {
                None => {
                    parts.push(Part::Literal(rest));
                    return Some(parts);
                }
                Some((literal, after)) => {
                    parts.push(Part::Literal(literal));
                    let (expr, tail) = after.split_once('}')?;
                    let operator = expr.starts_with(['+', '#', '/', '.', ';', '?', '&']);
                    parts.push(if operator { Part::Any } else { Part::Simple });
                    rest = tail;
                }
            }
        }
    }

    /// Backtracking over where each expression ends, remembering which (part, offset)
    /// pairs failed, so the reference stays quick where the matcher under test must be.
    struct Matcher<'a> {
        parts: &'a [Part<'a>],
        uri: &'a str,
        memo: HashMap<(usize, usize), bool>,
    }

    impl Matcher<'_> {
        /// Whether parts `i..` match the URI from byte `at` to its end.
        fn at(&mut self, i: usize, at: usize) -> bool {
            if let Some(known) = self.memo.get(&(i, at)) {
                return *known;
            }
            let found = self.search(i, at);
            self.memo.insert((i, at), found);
            found
        }

        fn search(&mut self, i: usize, at: usize) -> bool {
            let s = &self.uri[at..];
            let Some(part) = self.parts.get(i) else {
                return s.is_empty();
            };
            match part {
                Part::Literal(l) => s.starts_with(l) && self.at(i + 1, at + l.len()),
                Part::Any => suffixes(s).any(|t| self.at(i + 1, self.uri.len() - t.len())),
                Part::Simple => {
                    // One or more allowed characters, then the rest.
                    let allowed = s
                        .char_indices()
                        .find(|(_, c)| matches!(c, '/' | '?' | '#'))
                        .map_or(s.len(), |(i, _)| i);
                    suffixes(s)
                        .filter(|t| {
                            let taken = s.len() - t.len();
                            taken >= 1 && taken <= allowed
                        })
                        .any(|t| self.at(i + 1, self.uri.len() - t.len()))
                }
            }
        }
    }

    /// Every suffix of `s` starting at a character boundary, `s` itself first.
    fn suffixes(s: &str) -> impl Iterator<Item = &str> {
        s.char_indices()
            .map(|(i, _)| &s[i..])
            .chain(std::iter::once(""))
    }
}
