//! MCP knowledge without IO: protocol versions, method names, and qualified names.

pub mod era;
pub mod headers;
pub mod lists;
pub mod logging;
pub mod naming;
pub mod results;
pub mod tasks;

pub use lists::ListKind;
mod schema;

/// Legacy-era protocol versions mcpd speaks, newest first.
pub const LEGACY_VERSIONS: [&str; 4] = ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];

/// The version mcpd offers upstream and answers agents that ask for one it does not know.
pub const LATEST_LEGACY: &str = LEGACY_VERSIONS[0];

/// The legacy version whose core has (experimental) tool tasks.
pub const TASKS_VERSION: &str = "2025-11-25";

pub fn is_legacy_version(v: &str) -> bool {
    LEGACY_VERSIONS.contains(&v)
}

/// Method names mcpd handles or sends.
pub mod method {
    pub const INITIALIZE: &str = "initialize";
    pub const INITIALIZED: &str = "notifications/initialized";
    pub const PING: &str = "ping";
    pub const ROOTS_LIST: &str = "roots/list";
    pub const ROOTS_LIST_CHANGED: &str = "notifications/roots/list_changed";
    pub const TOOLS_LIST: &str = "tools/list";
    pub const TOOLS_CALL: &str = "tools/call";
    pub const CANCELLED: &str = "notifications/cancelled";
    pub const PROGRESS: &str = "notifications/progress";
    pub const TOOLS_LIST_CHANGED: &str = "notifications/tools/list_changed";
    pub const PROMPTS_LIST_CHANGED: &str = "notifications/prompts/list_changed";
    pub const RESOURCES_LIST_CHANGED: &str = "notifications/resources/list_changed";
    pub const RESOURCES_UPDATED: &str = "notifications/resources/updated";
    pub const PROMPTS_LIST: &str = "prompts/list";
    pub const PROMPTS_GET: &str = "prompts/get";
    pub const RESOURCES_LIST: &str = "resources/list";
    pub const RESOURCE_TEMPLATES_LIST: &str = "resources/templates/list";
    pub const RESOURCES_READ: &str = "resources/read";
    pub const RESOURCES_SUBSCRIBE: &str = "resources/subscribe";
    pub const RESOURCES_UNSUBSCRIBE: &str = "resources/unsubscribe";
    pub const COMPLETE: &str = "completion/complete";
    pub const SET_LEVEL: &str = "logging/setLevel";
    pub const MESSAGE: &str = "notifications/message";
    pub const DISCOVER: &str = "server/discover";
    pub const LISTEN: &str = "subscriptions/listen";
    /// 2025-11-25 task methods the 2026-07-28 Tasks extension does not have.
    pub const TASKS_RESULT: &str = "tasks/result";
    pub const TASKS_LIST: &str = "tasks/list";
    /// A 2025-11-25 receiver's optional push of a task's status.
    pub const TASKS_STATUS: &str = "notifications/tasks/status";
    pub const SUBSCRIPTIONS_ACKNOWLEDGED: &str = "notifications/subscriptions/acknowledged";
    /// The daemon's own status method, served on the agent socket.
    pub const MCPD_STATUS: &str = "mcpd/status";
}
