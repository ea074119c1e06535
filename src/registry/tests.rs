//! Unit tests of the registry.
//!
//! Whole generations, paging, names shared by servers, and naming changes.

use super::*;
use serde_json::json;

fn names(c: &Catalog) -> Vec<&str> {
    c.tools.iter().map(|t| t.qualified.as_str()).collect()
}

#[test]
fn generations_are_replaced_whole_or_not_at_all() {
    let mut r = Registry::default();
    let a: Arc<str> = "a".into();
    let b: Arc<str> = "b".into();
    assert_eq!(
        r.replace(&b, &[json!({"name": "z"}), json!({"name": "y"})], 64),
        Ok(2)
    );
    assert_eq!(r.replace(&a, &[json!({"name": "x"})], 64), Ok(1));
    let err = r.replace(&a, &[json!({"name": "q"}), json!({"name": "q"})], 64);
    assert!(
        matches!(err, Err(GenerationError::Duplicate { .. })),
        "{err:?}"
    );
    assert_eq!(
        r.replace(&a, &[json!({"title": "no name"})], 64),
        Err(GenerationError::Unnamed { index: 0 })
    );
    let c = r.catalog(BTreeMap::new());
    assert_eq!(names(&c), vec!["a__x", "b__y", "b__z"]);
    let t = c.tool("b__y").unwrap();
    assert_eq!((t.original.as_str(), &*t.server), ("y", "b"));
    assert_eq!(t.parsed()["name"], "b__y");
}

#[test]
fn a_shared_name_stays_with_the_first_server_until_it_drops_it() {
    let mut r = Registry::default();
    let a: Arc<str> = "a".into();
    let b: Arc<str> = "b".into();
    for s in [&a, &b] {
        assert_eq!(r.set_naming(s, Naming::prefixed(""), 64), Ok(true));
    }
    r.replace(&b, &[json!({"name": "x"}), json!({"name": "y"})], 64)
        .unwrap();
    r.replace(&a, &[json!({"name": "x"}), json!({"name": "z"})], 64)
        .unwrap();
    let c = r.catalog(BTreeMap::new());
    assert_eq!(names(&c), vec!["x", "y", "z"]);
    assert_eq!(&*c.tool("x").unwrap().server, "b");
    let rejected = r.collisions_of("a");
    assert_eq!(rejected.len(), 1);
    assert_eq!(
        (rejected[0].name.as_str(), &*rejected[0].holder),
        ("x", "b")
    );
    assert_eq!((r.tool_count("a"), r.tool_count("b")), (1, 2));
    // A newer generation of b keeps the name; one without it hands it to a.
    r.replace(
        &b,
        &[json!({"name": "x", "title": "new"}), json!({"name": "y"})],
        64,
    )
    .unwrap();
    assert_eq!(&*r.catalog(BTreeMap::new()).tool("x").unwrap().server, "b");
    r.replace(&b, &[json!({"name": "y"})], 64).unwrap();
    let c = r.catalog(BTreeMap::new());
    assert_eq!(&*c.tool("x").unwrap().server, "a");
    assert!(r.collisions().next().is_none());
}

#[test]
fn a_naming_change_presents_listed_tools_and_prompts_again() {
    let mut r = Registry::default();
    let s: Arc<str> = "srv".into();
    r.replace(
        &s,
        &[json!({"name": "search_repositories"}), json!({"name": "b"})],
        64,
    )
    .unwrap();
    r.replace_list(
        &s,
        ListKind::Prompts,
        vec![json!({"name": "summarize"})],
        64,
    );
    let c = r.catalog(BTreeMap::new());
    assert_eq!(names(&c), vec!["srv__b", "srv__search_repositories"]);
    let mut naming = Naming::prefixed("gh");
    naming
        .tools
        .insert("search_repositories".into(), "search".into());
    naming.prompts.insert("summarize".into(), "sum".into());
    let before = c.tools_version;
    assert_eq!(r.set_naming(&s, naming.clone(), 64), Ok(true));
    assert_eq!(r.set_naming(&s, naming, 64), Ok(false));
    let c = r.catalog(BTreeMap::new());
    assert_ne!(c.tools_version, before);
    assert_eq!(names(&c), vec!["gh__b", "gh__search"]);
    assert_eq!(
        c.tool("gh__search").unwrap().original,
        "search_repositories"
    );
    assert_eq!(c.tool("gh__search").unwrap().parsed()["name"], "gh__search");
    let p = c.surface.prompt("gh__sum").unwrap();
    assert_eq!(p.original, "summarize");
    assert!(c.surface.prompt("srv__summarize").is_none());
    // A rename onto another tool's name cannot be presented: nothing is listed.
    let mut clash = Naming::prefixed("gh");
    clash.tools.insert("search_repositories".into(), "b".into());
    assert!(matches!(
        r.set_naming(&s, clash, 64),
        Err(GenerationError::Duplicate { .. })
    ));
    assert!(names(&r.catalog(BTreeMap::new())).is_empty());
}

#[test]
fn pages_follow_cursors_to_the_end() {
    let mut r = Registry::default();
    let s: Arc<str> = "s".into();
    let tools: Vec<Value> = (0..1234)
        .map(|i| json!({ "name": format!("t{i:04}") }))
        .collect();
    r.replace(&s, &tools, 64).unwrap();
    let c = r.catalog(BTreeMap::new());
    let mut all = Vec::new();
    let mut cursor = None;
    loop {
        let (page, next) = c.page(cursor.as_deref()).unwrap();
        all.extend(page.iter().map(|t| t.qualified.clone()));
        match next {
            Some(n) => cursor = Some(n),
            None => break,
        }
    }
    assert_eq!(all.len(), 1234);
    assert!(all.windows(2).all(|w| w[0] < w[1]));
    assert!(c.page(Some("zz")).is_err());
}
