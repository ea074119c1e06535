//! The lists besides tools that a server offers and mcpd presents.
//!
//! Prompts, resources and resource templates, with their list methods and the field that
//! names an item.

/// What kind of list an entry comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ListKind {
    Prompts,
    Resources,
    Templates,
}

impl ListKind {
    /// The list method, and the field of its result that holds the items.
    pub fn list(self) -> (&'static str, &'static str) {
        match self {
            ListKind::Prompts => ("prompts/list", "prompts"),
            ListKind::Resources => ("resources/list", "resources"),
            ListKind::Templates => ("resources/templates/list", "resourceTemplates"),
        }
    }

    /// The field of an item that names it.
    pub fn key(self) -> &'static str {
        match self {
            ListKind::Prompts => "name",
            ListKind::Resources => "uri",
            ListKind::Templates => "uriTemplate",
        }
    }
}
