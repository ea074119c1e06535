//! `mcpd ctl diff`, `approve` and `forget`: a person's look at a server's held definitions (each beside its approved version, as a line diff) and answer to them.

use super::{CtlError, Out, at, request_within};
use crate::control_api::PINS;
use serde_json::{Value, json};
use std::path::Path;
use std::time::Duration;

/// An approval waits for the pin file to be on disk.
const PIN_WAIT: Duration = Duration::from_secs(30);
/// Lines of one field compared at most; longer fields are shown whole, old then new.
const DIFF_LINES: usize = 400;

/// `mcpd ctl diff SERVER`.
pub async fn diff(socket: &Path, server: &str) -> Result<(), CtlError> {
    let r = ask(socket, json!({ "name": server, "op": "diff" })).await?;
    let mut out = Out::lock();
    let held = at(&r, "held").as_array().cloned().unwrap_or_default();
    let mode = at(&r, "mode").as_str().unwrap_or("?");
    writeln!(out, "{server}: {} held (pin = \"{mode}\")", held.len())?;
    if let Some(why) = at(&r, "broken").as_str() {
        writeln!(out, "  {why}")?;
    }
    for h in &held {
        let kind = at(h, "kind").as_str().unwrap_or("?");
        let id = at(h, "id").as_str().unwrap_or("?");
        let new = at(h, "held");
        let old = at(h, "approved");
        if old.is_null() {
            writeln!(out, "\nnew {kind} {id:?}:")?;
        } else {
            writeln!(out, "\nchanged {kind} {id:?}:")?;
        }
        for (field, before, after) in fields(old, new) {
            writeln!(out, "  {field}:")?;
            for line in line_diff(&before, &after) {
                writeln!(out, "    {line}")?;
            }
        }
    }
    if !held.is_empty() {
        writeln!(
            out,
            "\napprove all with `mcpd ctl approve {server}`, or some with `mcpd ctl approve {server} NAME…`"
        )?;
    }
    Ok(())
}

/// `mcpd ctl approve SERVER [NAME…]`.
pub async fn approve(socket: &Path, server: &str, names: &[String]) -> Result<(), CtlError> {
    let params = json!({ "name": server, "op": "approve", "names": names });
    ask(socket, params).await?;
    let what = if names.is_empty() {
        "everything held".to_owned()
    } else {
        names.join(", ")
    };
    crate::errln!("approved {what} of {server}; agents were told its lists changed");
    Ok(())
}

/// `mcpd ctl forget SERVER`.
pub async fn forget(socket: &Path, server: &str) -> Result<(), CtlError> {
    ask(socket, json!({ "name": server, "op": "forget" })).await?;
    crate::errln!(
        "forgot the pins of {server}: what it shows now is its first listing (approved under trust-first, held under approve)"
    );
    Ok(())
}

async fn ask(socket: &Path, params: Value) -> Result<Value, CtlError> {
    request_within(socket, PINS, Some(params), PIN_WAIT).await
}

/// The fields that differ: name, approved text, held text (each as lines).
fn fields(old: &Value, new: &Value) -> Vec<(String, Vec<String>, Vec<String>)> {
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
fn line_diff(old: &[String], new: &[String]) -> Vec<String> {
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
