//! The daemon's parsers that the fuzz targets in `fuzz/` drive, re-exported in one place.
//!
//! So the targets do not depend on where they live.
//!
//! Not part of mcpd's interface: only the fuzz crate uses it, and it names exactly what
//! the targets need; the floors' parsers (JSON, JSON-RPC, framing) they take from
//! `mcpd-wire` and `mcpd-runtime` directly. Modules may become `pub(crate)` while this stays.

pub use crate::agent::http::wire::{Peek, restore_id, restore_subscription};
pub use crate::config::{Config, valid_server_name};
pub use crate::egress::host::{Host, Target};
pub use crate::egress::request::{
    Head, HeadError, Incoming, MAX_HEAD, MAX_HEADERS, Request, parse as parse_head,
};
pub use crate::registry::surface::template_matches;
pub use crate::upstream::http::sse::{Event, SseDecoder};
