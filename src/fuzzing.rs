//! The pure cores that the fuzz targets in `fuzz/` drive, re-exported in one place so the targets do not depend on where they live.
//!
//! Not part of mcpd's interface: only the fuzz crate uses it, and it names exactly what
//! the targets need. Modules may become `pub(crate)` while this stays.

pub use crate::agent::http::wire::{Peek, restore_id, restore_subscription};
pub use crate::config::{Config, valid_server_name};
pub use crate::egress::host::{Host, Target};
pub use crate::egress::request::{
    Head, HeadError, Incoming, MAX_HEAD, MAX_HEADERS, Request, parse as parse_head,
};
pub use crate::framing::{BoundedLines, Frame};
pub use crate::json::check::{is_value, object_members_listing};
pub use crate::json::scan::{Known, each_object, each_object_in, members, members_in};
pub use crate::jsonrpc::{
    ErrorObject, Id, Message, ParseError, error_line, notification_line, parse, peek_result,
    raw_result_line, request_line, response_line, result_line,
};
pub use crate::protocol::era::key::SUBSCRIPTION_ID;
pub use crate::protocol::naming::{allowed, join, valid_prefix};
pub use crate::registry::surface::template_matches;
pub use crate::upstream::http::sse::{Event, SseDecoder};
