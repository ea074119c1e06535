//! How a held definition differs from its approved one, as a person reads it.
//!
//! The fields that differ, each as lines, and a line diff of each (for `mcpd ctl diff`
//! and the dashboard).

use serde_json::Value;

/// Lines of one field compared at most; longer fields are shown whole, old then new.
const DIFF_LINES: usize = 400;

/// The fields that differ: name, approved text, held text (each as lines).
pub fn fields(old: &Value, new: &Value) -> Vec<(String, Vec<String>, Vec<String>)> {
    let mut keys: Vec<&String> = old
        .as_object()
        .into_iter()
        .flatten()
        .chain(new.as_object().into_iter().flatten())
        .map(|(k, _)| k)
        .collect();
    keys.sort_unstable();
    keys.dedup();
    keys.into_iter()
        .filter(|k| old.get(*k) != new.get(*k))
        .map(|k| (k.clone(), lines(old.get(k)), lines(new.get(k))))
        .collect()
}

/// A value as the lines a person reads: a string as its text, anything else as
/// indented JSON.
fn lines(v: Option<&Value>) -> Vec<String> {
    match v {
        None => Vec::new(),
        Some(Value::String(s)) => s.lines().map(str::to_owned).collect(),
        Some(other) => serde_json::to_string_pretty(other)
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect(),
    }
}

/// `  line`, `- line`, `+ line`: a longest-common-subsequence diff of two short texts
/// (longer ones are shown whole, old then new, to keep the work bounded).
pub fn line_diff(old: &[String], new: &[String]) -> Vec<String> {
    if old.len() > DIFF_LINES || new.len() > DIFF_LINES {
        let minus = old.iter().map(|l| format!("- {l}"));
        return minus.chain(new.iter().map(|l| format!("+ {l}"))).collect();
    }
    let (n, m) = (old.len(), new.len());
    // common[i * (m + 1) + j]: the longest common subsequence of old[i..] and new[j..].
    let mut common = vec![0usize; (n + 1) * (m + 1)];
    let at = |c: &[usize], i: usize, j: usize| c.get(i * (m + 1) + j).copied().unwrap_or(0);
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            let v = if old.get(i) == new.get(j) {
                at(&common, i + 1, j + 1) + 1
            } else {
                at(&common, i + 1, j).max(at(&common, i, j + 1))
            };
            if let Some(c) = common.get_mut(i * (m + 1) + j) {
                *c = v;
            }
        }
    }
    let (mut i, mut j, mut out) = (0, 0, Vec::new());
    loop {
        match (old.get(i), new.get(j)) {
            (Some(o), Some(w)) if o == w => {
                out.push(format!("  {o}"));
                (i, j) = (i + 1, j + 1);
            }
            (Some(o), _) if at(&common, i, j + 1) < at(&common, i + 1, j) || j >= m => {
                out.push(format!("- {o}"));
                i += 1;
            }
            (_, Some(w)) => {
                out.push(format!("+ {w}"));
                j += 1;
            }
            (Some(o), None) => {
                out.push(format!("- {o}"));
                i += 1;
            }
            (None, None) => break,
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn v(s: &[&str]) -> Vec<String> {
        s.iter().map(|l| (*l).to_owned()).collect()
    }

    #[test]
    fn a_line_diff_keeps_common_lines_and_marks_the_rest() {
        let d = line_diff(&v(&["a", "b", "c"]), &v(&["a", "x", "c", "d"]));
        assert_eq!(d, v(&["  a", "+ x", "- b", "  c", "+ d"]));
        assert_eq!(line_diff(&[], &v(&["new"])), v(&["+ new"]));
        assert_eq!(line_diff(&v(&["gone"]), &[]), v(&["- gone"]));
    }

    #[test]
    fn only_the_fields_that_differ_are_shown() {
        let old = json!({"name": "t", "description": "adds", "inputSchema": {"type": "object"}});
        let new = json!({"name": "t", "description": "adds\nIGNORE PREVIOUS", "inputSchema": {"type": "object"}});
        let f = fields(&old, &new);
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].0, "description");
        assert_eq!(f[0].2, v(&["adds", "IGNORE PREVIOUS"]));
    }
}
