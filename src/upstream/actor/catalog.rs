//! Keeping the supervisor's copy of the server's catalog fresh.
//!
//! The tool list (with its TTL) and the prompt, resource and template lists.

use super::{Actor, MIN_TTL_REFRESH};
use crate::upstream::dress;
use crate::upstream::list::ListError;
use crate::upstream::list::ToolList;
use crate::upstream::{ConnectionEvent, fetch_list, fetch_tools};
use futures::FutureExt;
use mcpd_wire::protocol::ListKind;
use mcpd_wire::protocol::era::Era;
use std::time::Duration;
use tokio::time::Instant;

impl Actor {
    /// Asks for a fresh copy of one of the server's other lists, batched with any
    /// others asked for meanwhile.
    pub(super) fn want_surface(&mut self, kind: ListKind) {
        if !self.surface_kinds.contains(&kind) {
            return;
        }
        self.surface_wanted.insert(kind);
        if self.surface_refresh.is_none() {
            let kinds = std::mem::take(&mut self.surface_wanted);
            let handle = self.handle.clone();
            self.surface_refresh = Some(
                async move {
                    let mut out = Vec::new();
                    for kind in kinds {
                        let (method, field) = kind.list();
                        out.push((kind, fetch_list(&handle, method, field).await));
                    }
                    out
                }
                .boxed(),
            );
        }
    }

    pub(super) async fn on_surface(&mut self, lists: Vec<(ListKind, Result<ToolList, ListError>)>) {
        self.surface_refresh = None;
        for (kind, list) in lists {
            let items = list.map(|l| l.tools);
            if let Err(e) = &items {
                tracing::warn!(upstream = %self.server, "could not fetch {}: {e}", kind.list().0);
            }
            let event = ConnectionEvent::List {
                server: self.server.clone(),
                instance: self.instance,
                kind,
                items,
            };
            // As for tools: the supervisor never waits on us.
            let _ = self.events.send(event).await;
        }
        if let Some(kind) = self.surface_wanted.iter().next().copied() {
            self.want_surface(kind);
        }
    }

    pub(super) fn start_refresh(&mut self) {
        if self.refresh.is_some() {
            self.refresh_again = true;
            return;
        }
        let handle = self.handle.clone();
        self.refresh = Some(async move { fetch_tools(&handle).await }.boxed());
    }

    pub(super) async fn on_tools(&mut self, list: Result<ToolList, ListError>) {
        self.refresh = None;
        let mut cache = None;
        let tools = match list {
            Ok(list) => {
                cache = list.ttl_ms.map(|ttl| (ttl, list.private));
                // A lapsed TTL means the list may be stale: fetch it again then.
                self.refresh_at = list
                    .ttl_ms
                    .filter(|ttl| *ttl > 0)
                    .map(|ttl| Instant::now() + Duration::from_millis(ttl).max(MIN_TTL_REFRESH));
                let mut tools = list.tools;
                if self.tasks {
                    dress::may_run_as_tasks(&mut tools);
                }
                if self.http && self.era == Era::Modern {
                    let (kept, headers) = dress::check_tools(&self.server, tools);
                    self.param_headers = headers;
                    Ok(kept)
                } else {
                    Ok(tools)
                }
            }
            Err(e) => {
                tracing::warn!(upstream = %self.server, "could not fetch the tool list: {e}");
                Err(e)
            }
        };
        let event = ConnectionEvent::Tools {
            server: self.server.clone(),
            instance: self.instance,
            tools,
            cache,
        };
        // The supervisor never waits on us, so this wait is short; if it is gone the
        // daemon is shutting down and the cancel branch ends the loop.
        let _ = self.events.send(event).await;
        if std::mem::take(&mut self.refresh_again) {
            self.start_refresh();
        }
    }
}
