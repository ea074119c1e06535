//! The check that only the daemon's `src/errors/` turns failures into JSON-RPC error codes: a text scan of each file's code outside its tests, and the cases it must fail.

/// Files outside `src/errors/` that may still name an error code, each with why. An
/// error a server sent is passed through as it came and builds nothing, so it needs no
/// entry.
pub const ALLOWED: &[(&str, &str)] = &[(
    "src/upstream/actor/listen.rs",
    "a subscription over the server's caps (BUSY): `errors` names the upstream side, so naming `errors` here would be an import loop",
)];

/// The places in one file's code (its tests and comments left out) where an error is
/// built with a literal code: `ErrorObject::new(` whose code is a number or a `…code::`
/// constant, an `ErrorObject { … }` literal, a `"code":` followed by a number in JSON
/// text, or a `…code::` constant handed on as a value (after `=` or `,`) to build one
/// later, or a number in the reserved range kept for one. The text is scanned whole, so a call split over lines is seen too.
pub fn literal_codes(rel: &str, text: &str) -> Vec<String> {
    let code: String = text
        .split("#[cfg(test)]")
        .next()
        .unwrap_or_default()
        .lines()
        .map(|l| {
            if l.trim_start().starts_with("//") {
                ""
            } else {
                l
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    let mut at = Vec::new();
    for (i, _) in code.match_indices("ErrorObject::new(") {
        if is_code_literal(&code[i + "ErrorObject::new(".len()..]) {
            at.push(i);
        }
    }
    for (i, _) in code.match_indices("ErrorObject {") {
        let before =
            code[..i].trim_end_matches(|c: char| c.is_alphanumeric() || c == '_' || c == ':');
        let before = before.trim_end();
        let declared = ["->", "struct", "impl", "for"]
            .iter()
            .any(|w| before.ends_with(w));
        if !declared {
            at.push(i);
        }
    }
    for (i, _) in code.match_indices("\"code\":") {
        if is_number(code[i + "\"code\":".len()..].trim_start()) {
            at.push(i);
        }
    }
    at.extend(codes_handed_on(&code));
    at.extend(reserved_numbers(&code));
    let mut lines: Vec<usize> = at
        .iter()
        .map(|&i| code[..i].matches('\n').count())
        .collect();
    lines.sort_unstable();
    lines.dedup();
    lines
        .into_iter()
        .map(|line| {
            let text = code.lines().nth(line).unwrap_or_default().trim();
            format!("{rel}:{}: {text}", line + 1)
        })
        .collect()
}

/// Where a `…code::NAME` follows a single `=` (an assignment) or a `,` (an argument).
fn codes_handed_on(code: &str) -> Vec<usize> {
    let mut at = Vec::new();
    for (i, _) in code.match_indices("code::") {
        let before =
            code[..i].trim_end_matches(|c: char| c.is_alphanumeric() || c == '_' || c == ':');
        let before = before.trim_end();
        let assigned = before.ends_with('=')
            && !["==", "!=", "<=", ">=", "=>"]
                .iter()
                .any(|w| before.ends_with(w));
        if assigned || before.ends_with(',') {
            at.push(i);
        }
    }
    at
}

/// Where a number in JSON-RPC's reserved range (-32768 to -32000) stands in code, outside
/// a string: a code kept in a variable before it builds an error.
fn reserved_numbers(code: &str) -> Vec<usize> {
    let mut at = Vec::new();
    for (i, _) in code.match_indices("-32") {
        let digits: String = code[i + 1..]
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        let line = &code[code[..i].rfind('\n').map_or(0, |n| n + 1)..i];
        let in_string = line.matches('"').count() % 2 == 1;
        if digits.len() == 5 && !in_string {
            at.push(i);
        }
    }
    at
}

/// Whether a call's first argument is a number or a `…code::` constant.
fn is_code_literal(arg: &str) -> bool {
    let arg = arg.trim_start();
    if is_number(arg) {
        return true;
    }
    let path: String = arg
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
        .collect();
    path.contains("code::")
}

fn is_number(s: &str) -> bool {
    let s = s.strip_prefix('-').unwrap_or(s);
    s.starts_with(|c: char| c.is_ascii_digit())
}

#[track_caller]
fn flags(text: &str) {
    assert!(!literal_codes("x.rs", text).is_empty(), "missed in: {text}");
}

#[track_caller]
fn passes(text: &str) {
    let found = literal_codes("x.rs", text);
    assert!(found.is_empty(), "flagged: {}", found.join("\n"));
}

#[test]
fn an_error_object_with_a_numeric_code_is_caught() {
    flags("let e = ErrorObject::new(-32002, why);");
    flags("let e = jsonrpc::ErrorObject::new(\n    -32002,\n    why,\n);");
}

#[test]
fn an_error_object_with_a_code_constant_is_caught() {
    flags("let e = ErrorObject::new(code::INVALID_PARAMS, why);");
    flags("Err(ErrorObject::new(mcpd_wire::jsonrpc::mcpd_code::BUSY, m))");
    flags("ErrorObject::new(era::code::HEADER_MISMATCH, why)");
    flags("Err(ErrorObject::new(\n    jsonrpc::code::INVALID_PARAMS,\n    format!(\"{m}\"),\n))");
}

#[test]
fn a_code_kept_for_later_is_caught() {
    flags("let refused = mcpd_wire::jsonrpc::mcpd_code::NEEDS_LOGIN;");
    flags("fail(&id, jsonrpc::code::INVALID_PARAMS, why)");
}

#[test]
fn a_reserved_code_kept_in_a_variable_is_caught() {
    flags("let code = if modern {\n    INVALID\n} else {\n    -32002\n};");
}

#[test]
fn an_error_object_literal_and_json_codes_are_caught() {
    flags("Some(ErrorObject { code: -1, message, data: None })");
    flags("Err(ErrorObject {\n    code,\n    message,\n    data: None,\n})");
    flags(r#"json!({"error": {"code": -32026, "message": "cancelled"}})"#);
}

#[test]
fn comparisons_mapped_errors_and_tests_pass() {
    passes("if e.code == era::code::UNSUPPORTED_VERSION {");
    passes("Ok(Err(e)) if e.code != code::INVALID_PARAMS => {");
    passes("Some(jsonrpc::code::METHOD_NOT_FOUND) => StatusCode::NOT_FOUND,");
    passes("| era::code::MISSING_CLIENT_CAPABILITY");
    passes("let e = AgentError::IdInUse(id).to_error_object();");
    passes("fn internal(server: &str) -> ErrorObject {\n    todo!()\n}");
    passes("pub struct ErrorObject {\n    pub code: i64,\n}\nimpl ErrorObject {}");
    passes("// ErrorObject::new(code::INTERNAL_ERROR, why) in a comment");
    passes("tracing::info!(\"server/discover refused with -32022; asking again\");");
    passes("#[cfg(test)]\nmod tests { fn f() { ErrorObject::new(-32000, \"h\"); } }");
}
