//! Secret values masked in the text a server writes to its stderr.
//!
//! mcpd knows the values it resolved into a server's launch, so a server that prints one
//! (a debug dump of its environment, an error quoting a header) does not put it in the
//! daemon's log, `ctl logs` or the dashboard.
//!
//! Each line costs time linear in its length for each value (Knuth-Morris-Pratt, which
//! finds overlapping occurrences too, so `abab` printed as `ababab` leaves no half of it),
//! and lines are already cut at a few KiB. A value is masked only where it appears whole
//! on one line: a multi-line value (a PEM key) is masked line by line, each of its lines
//! as a value of its own; a value cut by the line limit, or printed encoded (base64,
//! escaped JSON), is not recognised.

use super::SecretValue;
use std::borrow::Cow;
use std::sync::Arc;

/// Values shorter than this many bytes are not masked. A short value is found by chance
/// in ordinary text: a secret `42` would turn every `42` in every line into a mask,
/// making the log unreadable, and the masks themselves would then show the value (they
/// stand exactly where it was). A secret that short is no secret anyway.
pub const MIN_MASKED: usize = 4;

/// Values looked for at most: a server's launch names a handful; a config that names
/// more keeps the cost per line bounded, and the rest are not masked.
const MAX_VALUES: usize = 64;

/// The values to mask in one server's lines, each with the name of its secret.
#[derive(Default)]
pub struct Mask {
    values: Vec<Pattern>,
}

/// One value and its failure table.
struct Pattern {
    name: Arc<str>,
    value: SecretValue,
    /// For each prefix of the value, the length of its longest proper prefix that is also
    /// a suffix (the table Knuth-Morris-Pratt restarts from).
    fail: Vec<usize>,
}

impl Mask {
    /// A mask of `secrets` (name, value): each value of `MIN_MASKED` bytes or more, and
    /// each line of a multi-line value that long.
    pub fn new<'a>(secrets: impl IntoIterator<Item = (&'a str, &'a SecretValue)>) -> Mask {
        let mut values: Vec<Pattern> = Vec::new();
        for (name, value) in secrets {
            let name: Arc<str> = Arc::from(name);
            let whole = value.expose();
            let pieces = std::iter::once(whole).chain(
                whole
                    .contains('\n')
                    .then(|| whole.lines().map(str::trim))
                    .into_iter()
                    .flatten(),
            );
            for piece in pieces {
                if piece.len() < MIN_MASKED
                    || values.len() >= MAX_VALUES
                    || values.iter().any(|p| p.value.expose() == piece)
                {
                    continue;
                }
                values.push(Pattern {
                    name: name.clone(),
                    fail: failure(piece.as_bytes()),
                    value: SecretValue::new(piece.to_owned()),
                });
            }
        }
        Mask { values }
    }

    /// `line` with every stretch covered by one or more values replaced by
    /// `[secret NAME]` (the name of the value that starts the stretch); borrowed when no
    /// value is in it.
    pub fn apply<'a>(&self, line: &'a str) -> Cow<'a, str> {
        let hay = line.as_bytes();
        // reach[i]: the furthest end of a value found starting at i, and which value.
        let mut reach: Vec<Option<(usize, usize)>> = Vec::new();
        for (which, p) in self.values.iter().enumerate() {
            for start in occurrences(hay, p.value.expose().as_bytes(), &p.fail) {
                if reach.is_empty() {
                    reach = vec![None; hay.len()];
                }
                let end = start + p.value.expose().len();
                if let Some(slot) = reach.get_mut(start)
                    && slot.is_none_or(|(e, _)| e < end)
                {
                    *slot = Some((end, which));
                }
            }
        }
        if reach.is_empty() {
            return Cow::Borrowed(line);
        }
        let mut out = String::with_capacity(line.len());
        // The end of the stretch being masked. Values are whole UTF-8 text, so they start
        // and end on character boundaries.
        let mut covered = 0;
        for (i, c) in line.char_indices() {
            let found = reach.get(i).copied().flatten();
            if i >= covered {
                match found {
                    Some((end, which)) => {
                        let name = self.values.get(which).map_or("", |p| &*p.name);
                        out.push_str("[secret ");
                        out.push_str(name);
                        out.push(']');
                        covered = end;
                    }
                    None => out.push(c),
                }
            } else if let Some((end, _)) = found {
                covered = covered.max(end);
            }
        }
        Cow::Owned(out)
    }
}

/// The Knuth-Morris-Pratt failure table of `p`.
fn failure(p: &[u8]) -> Vec<usize> {
    let mut fail = vec![0; p.len()];
    let mut k = 0;
    for i in 1..p.len() {
        let c = p.get(i).copied();
        while k > 0 && p.get(k).copied() != c {
            k = fail.get(k - 1).copied().unwrap_or(0);
        }
        if p.get(k).copied() == c {
            k += 1;
        }
        if let Some(f) = fail.get_mut(i) {
            *f = k;
        }
    }
    fail
}

/// Where `p` starts in `hay`, overlapping occurrences included, in one pass over `hay`.
fn occurrences<'a>(
    hay: &'a [u8],
    p: &'a [u8],
    fail: &'a [usize],
) -> impl Iterator<Item = usize> + 'a {
    let mut k = 0;
    hay.iter().enumerate().filter_map(move |(i, &c)| {
        if p.is_empty() {
            return None;
        }
        while k > 0 && p.get(k).copied() != Some(c) {
            k = fail.get(k - 1).copied().unwrap_or(0);
        }
        if p.get(k).copied() == Some(c) {
            k += 1;
        }
        if k == p.len() {
            k = fail.get(k - 1).copied().unwrap_or(0);
            return Some(i + 1 - p.len());
        }
        None
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(secrets: &[(&str, &str)], line: &str, expected: &str) {
        let values: Vec<(String, SecretValue)> = secrets
            .iter()
            .map(|(n, v)| ((*n).to_owned(), SecretValue::new((*v).to_owned())))
            .collect();
        let mask = Mask::new(values.iter().map(|(n, v)| (n.as_str(), v)));
        assert_eq!(mask.apply(line), expected, "{secrets:?} in {line:?}");
    }

    #[test]
    fn a_secret_value_in_a_line_is_replaced_by_its_name() {
        check(
            &[("k", "hunter22")],
            "token=hunter22 ok",
            "token=[secret k] ok",
        );
        check(
            &[("k", "hunter22")],
            "hunter22hunter22",
            "[secret k][secret k]",
        );
        check(&[("k", "hunter22")], "nothing here", "nothing here");
        // Overlapping occurrences leave no piece of the value.
        check(&[("k", "abab")], "xababab!", "x[secret k]!");
        check(&[("k", "aaaa")], "aaaaaaa", "[secret k]");
        // Two values that overlap: one stretch, named after the first.
        check(
            &[("a", "abcdef"), ("b", "defghi")],
            "<abcdefghi>",
            "<[secret a]>",
        );
        // One inside another.
        check(
            &[("a", "tok"), ("b", "my-token-1")],
            "my-token-1",
            "[secret b]",
        );
        // Text around multi-byte characters stays whole.
        check(&[("k", "clé-secrète")], "é clé-secrète é", "é [secret k] é");
    }

    #[test]
    fn short_values_are_not_masked_and_multi_line_values_are_masked_line_by_line() {
        check(&[("pin", "123")], "code 123", "code 123");
        check(&[("pin", "1234")], "code 1234", "code [secret pin]");
        check(
            &[(
                "key",
                "-----BEGIN KEY-----\nQUJDREVGR0g=\n-----END KEY-----",
            )],
            "read QUJDREVGR0g= from the file",
            "read [secret key] from the file",
        );
        check(&[], "anything", "anything");
    }

    #[test]
    fn a_line_without_any_value_is_not_copied() {
        let v = SecretValue::new("hunter22".into());
        let mask = Mask::new([("k", &v)]);
        assert!(matches!(mask.apply("plain"), Cow::Borrowed(_)));
    }
}
