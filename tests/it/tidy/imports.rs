//! The import graph of the source tree, read with a Rust parser (`syn`): every `use`
//! tree (groups, nesting, `self`, renames, globs) and every path in code, types,
//! patterns and macro bodies that starts at `crate`, `self`, `super`, a child module or a
//! name a `use` brought in, resolved to the module it names. Items under `#[cfg(test)]`
//! are left out: unit tests may import what they like.

use std::collections::{BTreeMap, BTreeSet};

use syn::buffer::{Cursor, TokenBuffer};
use syn::visit::{self, Visit};
use syn::{Attribute, ImplItem, Item, Meta, Stmt, TraitItem, UseTree};

/// A module's path from the crate root: `["agent", "conn"]`.
pub type Module = Vec<String>;

/// For each module, the modules it names (never itself or an ancestor, whose items a
/// module may use) and the items of each it names (`*` for a glob, `self` for the
/// module itself).
pub type Edges = BTreeMap<Module, BTreeMap<Module, BTreeSet<String>>>;

/// A module's path (`agent::conn`) from its file (`agent/conn.rs`); None for the roots.
pub fn module_of(rel: &str) -> Option<Module> {
    let trimmed = rel.strip_suffix(".rs")?;
    let mut parts: Module = trimmed.split('/').map(str::to_owned).collect();
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    if parts == ["lib"] || parts == ["main"] {
        return None;
    }
    Some(parts)
}

/// The import graph of source files given as (path under `src/`, text), and each
/// module's file. A module declared only under `#[cfg(test)]` (`mod tests;`) and its
/// descendants are not in it.
pub fn graph(sources: &[(String, String)]) -> (Edges, BTreeMap<Module, String>) {
    let mut files: BTreeMap<Module, String> = sources
        .iter()
        .filter_map(|(rel, _)| module_of(rel).map(|m| (m, rel.clone())))
        .collect();
    let parsed: Vec<(Module, syn::File)> = sources
        .iter()
        .map(|(rel, text)| {
            let file = syn::parse_file(text).unwrap_or_else(|e| panic!("{rel}: {e}"));
            (module_of(rel).unwrap_or_default(), file)
        })
        .collect();
    // What each module's own `use` and `mod` items name, for a `use m::*` elsewhere.
    let no_scopes = BTreeMap::new();
    let scopes: BTreeMap<Module, BTreeMap<String, Module>> = parsed
        .iter()
        .map(|(module, file)| {
            let mut names = Names::new(&files, &no_scopes, module.clone());
            names.learn(&file.items);
            (module.clone(), names.aliases)
        })
        .collect();
    let mut named = Vec::new();
    let mut test_only = Vec::new();
    for (module, file) in parsed {
        let mut names = Names::new(&files, &scopes, module.clone());
        names.read(&file.items);
        test_only.extend(names.test_only);
        if !module.is_empty() {
            named.push((module, names.paths));
        }
    }
    files.retain(|m, _| !test_only.iter().any(|t| m.starts_with(t)));
    let mut edges = Edges::new();
    for (module, paths) in named {
        if !files.contains_key(&module) {
            continue;
        }
        for path in paths {
            // The longest prefix of the path that is a module is what it names.
            let Some(n) = (1..=path.len())
                .rev()
                .find(|n| files.contains_key(&path[..*n]))
            else {
                continue;
            };
            let target = path[..n].to_vec();
            if module.starts_with(&target) {
                continue;
            }
            let item = path.get(n).cloned().unwrap_or_else(|| "self".to_owned());
            edges
                .entry(module.clone())
                .or_default()
                .entry(target)
                .or_default()
                .insert(item);
        }
    }
    (edges, files)
}

/// The paths one file's code names, as segments from the crate root.
struct Names<'a> {
    /// Every module that has a file.
    known: &'a BTreeMap<Module, String>,
    /// The names each module's own `use` and `mod` items bring in.
    scopes: &'a BTreeMap<Module, BTreeMap<String, Module>>,
    /// The module whose code is being read (an inline module's path while inside one).
    scope: Module,
    /// The names `use` and `mod` bring into the scope, each with the path it stands for.
    aliases: BTreeMap<String, Module>,
    /// The modules a `use m::*` in the scope brings every name of.
    globs: Vec<Module>,
    /// Every path named, from the crate root; a glob's ends with `*`.
    paths: Vec<Module>,
    /// Modules declared only under `#[cfg(test)]`.
    test_only: Vec<Module>,
}

impl<'a> Names<'a> {
    fn new(
        known: &'a BTreeMap<Module, String>,
        scopes: &'a BTreeMap<Module, BTreeMap<String, Module>>,
        scope: Module,
    ) -> Self {
        Names {
            known,
            scopes,
            scope,
            aliases: BTreeMap::new(),
            globs: Vec::new(),
            paths: Vec::new(),
            test_only: Vec::new(),
        }
    }

    /// Reads the items of one module scope (a file, or an inline `mod`).
    fn read(&mut self, items: &[Item]) {
        self.learn(items);
        for item in items {
            self.visit_item(item);
        }
    }

    /// Learns the names a scope's `use` and `mod` items bring in: they may be used above
    /// the item, or by another `use` (so twice, for one naming what a later one brought).
    fn learn(&mut self, items: &[Item]) {
        for _ in 0..2 {
            for item in items {
                match item {
                    Item::Use(u) if !is_test(&u.attrs) => self.learn_use(&u.tree),
                    Item::Mod(m) if !is_test(&m.attrs) => {
                        let mut path = self.scope.clone();
                        path.push(m.ident.to_string());
                        self.aliases.insert(m.ident.to_string(), path);
                    }
                    _ => {}
                }
            }
        }
    }

    /// Records what a `use` tree names and learns the names it brings in.
    fn learn_use(&mut self, tree: &UseTree) {
        for (raw, alias) in use_paths(tree) {
            let Some(mut path) = self.resolve(&raw) else {
                continue;
            };
            if let Some(alias) = alias {
                self.aliases.insert(alias, path);
            } else if path.last().is_some_and(|l| l == "*") {
                path.pop();
                if !self.globs.contains(&path) {
                    self.globs.push(path);
                }
            }
        }
    }

    /// A path's segments from the crate root, if it starts at `crate`, `self`, `super`,
    /// a name in scope or a child module; None for paths into other crates, locals.
    fn resolve(&self, raw: &[String]) -> Option<Module> {
        let (first, rest) = raw.split_first()?;
        let (mut base, mut rest) = match first.as_str() {
            "crate" => (Vec::new(), rest),
            "self" => (self.scope.clone(), rest),
            "super" => (self.scope.clone(), raw),
            name => {
                if let Some(path) = self.aliases.get(name) {
                    (path.clone(), rest)
                } else {
                    (self.through_glob(name)?, rest)
                }
            }
        };
        while let Some((s, more)) = rest.split_first() {
            if s != "super" {
                break;
            }
            base.pop()?;
            rest = more;
        }
        base.extend(rest.iter().cloned());
        Some(base)
    }

    /// What `name` stands for when no `use` or `mod` of the scope brings it in: a child
    /// module, or a name a glob brings (a module's child, or what its own `use` brought).
    fn through_glob(&self, name: &str) -> Option<Module> {
        std::iter::once(&self.scope)
            .chain(&self.globs)
            .find_map(|from| {
                let mut child = from.clone();
                child.push(name.to_owned());
                if self.known.contains_key(&child) {
                    return Some(child);
                }
                let brought = self.scopes.get(from)?.get(name)?;
                (from != &self.scope).then(|| brought.clone())
            })
    }

    fn name(&mut self, raw: &[String]) {
        // One segment alone is a local, or a name a `use` brought in (whose path that
        // `use` already named).
        if raw.len() < 2 {
            return;
        }
        if let Some(path) = self.resolve(raw) {
            self.paths.push(path);
        }
    }
}

impl<'ast> Visit<'ast> for Names<'_> {
    fn visit_item(&mut self, item: &'ast Item) {
        if is_test(item_attrs(item)) {
            if let Item::Mod(m) = item {
                let mut path = self.scope.clone();
                path.push(m.ident.to_string());
                self.test_only.push(path);
            }
            return;
        }
        match item {
            Item::Use(u) => {
                self.learn_use(&u.tree);
                for (raw, _) in use_paths(&u.tree) {
                    if let Some(path) = self.resolve(&raw) {
                        self.paths.push(path);
                    }
                }
            }
            Item::Mod(m) => {
                if let Some((_, items)) = &m.content {
                    let aliases = std::mem::take(&mut self.aliases);
                    let globs = std::mem::take(&mut self.globs);
                    self.scope.push(m.ident.to_string());
                    self.read(items);
                    self.scope.pop();
                    self.aliases = aliases;
                    self.globs = globs;
                }
            }
            _ => visit::visit_item(self, item),
        }
    }

    fn visit_impl_item(&mut self, item: &'ast ImplItem) {
        let attrs = match item {
            ImplItem::Const(i) => &i.attrs,
            ImplItem::Fn(i) => &i.attrs,
            ImplItem::Type(i) => &i.attrs,
            ImplItem::Macro(i) => &i.attrs,
            _ => return visit::visit_impl_item(self, item),
        };
        if !is_test(attrs) {
            visit::visit_impl_item(self, item);
        }
    }

    fn visit_trait_item(&mut self, item: &'ast TraitItem) {
        let attrs = match item {
            TraitItem::Const(i) => &i.attrs,
            TraitItem::Fn(i) => &i.attrs,
            TraitItem::Type(i) => &i.attrs,
            TraitItem::Macro(i) => &i.attrs,
            _ => return visit::visit_trait_item(self, item),
        };
        if !is_test(attrs) {
            visit::visit_trait_item(self, item);
        }
    }

    fn visit_stmt(&mut self, stmt: &'ast Stmt) {
        if let Stmt::Local(l) = stmt
            && is_test(&l.attrs)
        {
            return;
        }
        visit::visit_stmt(self, stmt);
    }

    fn visit_field(&mut self, field: &'ast syn::Field) {
        if !is_test(&field.attrs) {
            visit::visit_field(self, field);
        }
    }

    fn visit_variant(&mut self, variant: &'ast syn::Variant) {
        if !is_test(&variant.attrs) {
            visit::visit_variant(self, variant);
        }
    }

    fn visit_arm(&mut self, arm: &'ast syn::Arm) {
        if !is_test(&arm.attrs) {
            visit::visit_arm(self, arm);
        }
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        if path.leading_colon.is_none() {
            let raw: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
            self.name(&raw);
        }
        visit::visit_path(self, path);
    }

    // `pub(in crate::a)` says who may see an item, not what it uses; attributes (doc
    // comments, derives, cfgs) name no module of ours.
    fn visit_visibility(&mut self, _: &'ast syn::Visibility) {}
    fn visit_attribute(&mut self, _: &'ast Attribute) {}

    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        self.visit_path(&mac.path);
        // A macro's body is tokens, not syntax: look for `a::b` runs in it.
        let buffer = TokenBuffer::new2(mac.tokens.clone());
        let mut found = Vec::new();
        token_paths(buffer.begin(), &mut found);
        for raw in found {
            self.name(&raw);
        }
    }
}

/// Every path a `use` tree names, each with the name it brings in (None for a glob or
/// `as _`); a glob's path ends with `*`.
fn use_paths(tree: &UseTree) -> Vec<(Vec<String>, Option<String>)> {
    fn walk(
        prefix: &mut Vec<String>,
        tree: &UseTree,
        out: &mut Vec<(Vec<String>, Option<String>)>,
    ) {
        match tree {
            UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                walk(prefix, &p.tree, out);
                prefix.pop();
            }
            UseTree::Name(n) => {
                let (path, alias) = named(prefix, &n.ident.to_string());
                out.push((path, alias));
            }
            UseTree::Rename(r) => {
                let (path, _) = named(prefix, &r.ident.to_string());
                let alias = Some(r.rename.to_string()).filter(|a| a != "_");
                out.push((path, alias));
            }
            UseTree::Glob(_) => {
                let mut path = prefix.clone();
                path.push("*".to_owned());
                out.push((path, None));
            }
            UseTree::Group(g) => {
                for item in &g.items {
                    walk(prefix, item, out);
                }
            }
        }
    }
    // `a::{self}` is `a`, and brings in `a`.
    fn named(prefix: &[String], ident: &str) -> (Vec<String>, Option<String>) {
        let mut path = prefix.to_vec();
        if ident != "self" {
            path.push(ident.to_owned());
        }
        let alias = path.last().cloned();
        (path, alias)
    }
    let mut out = Vec::new();
    walk(&mut Vec::new(), tree, &mut out);
    out
}

/// The `a::b::c` runs in a macro's tokens, each started by an identifier that does not
/// follow `::` (so `std::x::y` gives nothing from its middle).
fn token_paths(mut cursor: Cursor, out: &mut Vec<Vec<String>>) {
    let mut after_colon = false;
    while !cursor.eof() {
        if let Some((inside, _, _, next)) = cursor.any_group() {
            token_paths(inside, out);
            cursor = next;
            after_colon = false;
        } else if let Some((ident, next)) = cursor.ident() {
            let mut run = vec![ident.to_string()];
            cursor = next;
            while let Some(after) = path_sep(cursor) {
                let Some((ident, next)) = after.ident() else {
                    break;
                };
                run.push(ident.to_string());
                cursor = next;
            }
            if !after_colon {
                out.push(run);
            }
            after_colon = false;
        } else if let Some((punct, next)) = cursor.punct() {
            after_colon = punct.as_char() == ':';
            cursor = next;
        } else if let Some((_, next)) = cursor.token_tree() {
            cursor = next;
            after_colon = false;
        } else {
            break;
        }
    }
}

/// The cursor after a `::` at `cursor`, if there is one.
fn path_sep(cursor: Cursor) -> Option<Cursor> {
    let (first, next) = cursor.punct()?;
    let (second, next) = next.punct()?;
    (first.as_char() == ':' && second.as_char() == ':').then_some(next)
}

fn item_attrs(item: &Item) -> &[Attribute] {
    match item {
        Item::Const(i) => &i.attrs,
        Item::Enum(i) => &i.attrs,
        Item::ExternCrate(i) => &i.attrs,
        Item::Fn(i) => &i.attrs,
        Item::ForeignMod(i) => &i.attrs,
        Item::Impl(i) => &i.attrs,
        Item::Macro(i) => &i.attrs,
        Item::Mod(i) => &i.attrs,
        Item::Static(i) => &i.attrs,
        Item::Struct(i) => &i.attrs,
        Item::Trait(i) => &i.attrs,
        Item::TraitAlias(i) => &i.attrs,
        Item::Type(i) => &i.attrs,
        Item::Union(i) => &i.attrs,
        Item::Use(i) => &i.attrs,
        _ => &[],
    }
}

/// Whether the attributes hold `#[cfg(test)]` (or `#[cfg(all(test, …))]`): code that
/// only unit tests build.
fn is_test(attrs: &[Attribute]) -> bool {
    fn test(meta: &Meta) -> bool {
        match meta {
            Meta::Path(p) => p.is_ident("test"),
            Meta::List(l) if l.path.is_ident("all") => l
                .parse_args_with(
                    syn::punctuated::Punctuated::<Meta, syn::Token![,]>::parse_terminated,
                )
                .is_ok_and(|all| all.iter().any(test)),
            _ => false,
        }
    }
    attrs
        .iter()
        .any(|a| a.path().is_ident("cfg") && a.parse_args::<Meta>().is_ok_and(|m| test(&m)))
}

/// The loops of a graph given as node names: each strongly connected component of more
/// than one node, sorted (Tarjan's algorithm).
pub fn loops(edges: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct Walk<'a> {
        edges: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        loops: Vec<Vec<String>>,
    }
    impl<'a> Walk<'a> {
        fn visit(&mut self, v: &'a str) {
            let n = self.index.len();
            self.index.insert(v, n);
            self.low.insert(v, n);
            self.stack.push(v);
            self.on_stack.insert(v);
            for w in self.edges.get(v).into_iter().flatten() {
                let w = w.as_str();
                if !self.index.contains_key(w) {
                    self.visit(w);
                    let low = self.low[v].min(self.low[w]);
                    self.low.insert(v, low);
                } else if self.on_stack.contains(w) {
                    let low = self.low[v].min(self.index[w]);
                    self.low.insert(v, low);
                }
            }
            if self.low[v] == self.index[v] {
                let mut component = Vec::new();
                while let Some(w) = self.stack.pop() {
                    self.on_stack.remove(w);
                    component.push(w.to_owned());
                    if w == v {
                        break;
                    }
                }
                if component.len() > 1 {
                    component.sort();
                    self.loops.push(component);
                }
            }
        }
    }
    let mut walk = Walk {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        loops: Vec::new(),
    };
    for v in edges.keys() {
        if !walk.index.contains_key(v.as_str()) {
            walk.visit(v);
        }
    }
    walk.loops.sort();
    walk.loops
}

/// Files that import each other, one loop a line group: each edge inside the loop with
/// the items it names (`agent/a.rs -> agent/b.rs: Handled, Step`).
pub fn file_loops(sources: &[(String, String)]) -> Vec<String> {
    let (edges, files) = graph(sources);
    let file = |m: &Module| files.get(m).cloned().unwrap_or_else(|| m.join("::"));
    let mut named: BTreeMap<String, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    for (from, targets) in &edges {
        for (to, items) in targets {
            named
                .entry(file(from))
                .or_default()
                .entry(file(to))
                .or_default()
                .extend(items.iter().cloned());
        }
    }
    describe(&named)
}

/// Top-level modules that import each other (`agent` and `ctl`, through any of their
/// files), each edge with the paths it names and the files naming them.
pub fn top_level_loops(sources: &[(String, String)]) -> Vec<String> {
    let (edges, files) = graph(sources);
    let mut named: BTreeMap<String, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    for (from, targets) in &edges {
        for (to, items) in targets {
            let (Some(a), Some(b)) = (from.first(), to.first()) else {
                continue;
            };
            if a == b {
                continue;
            }
            let rel = files.get(from).cloned().unwrap_or_default();
            named
                .entry(a.clone())
                .or_default()
                .entry(b.clone())
                .or_default()
                .extend(
                    items
                        .iter()
                        .map(|i| format!("{}::{i} ({rel})", to.join("::"))),
                );
        }
    }
    describe(&named)
}

fn describe(named: &BTreeMap<String, BTreeMap<String, BTreeSet<String>>>) -> Vec<String> {
    let plain: BTreeMap<String, BTreeSet<String>> = named
        .iter()
        .map(|(k, v)| (k.clone(), v.keys().cloned().collect()))
        .collect();
    loops(&plain)
        .into_iter()
        .map(|component| {
            let mut lines = vec![format!("loop: {}", component.join(", "))];
            for from in &component {
                for (to, items) in named.get(from).into_iter().flatten() {
                    if component.contains(to) {
                        let items: Vec<&str> = items.iter().map(String::as_str).collect();
                        lines.push(format!("  {from} -> {to}: {}", items.join(", ")));
                    }
                }
            }
            lines.join("\n")
        })
        .collect()
}
