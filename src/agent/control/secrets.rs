//! `mcpd/secrets`: `mcpd ctl secret set`, `list` and `rm` on the daemon's own stores.
//!
//! So what is set is what its servers' starts find; values come in and never go out.

use super::super::AgentContext;
use super::super::reply::Handled;
use super::later;
use crate::errors::AgentError;
use crate::secrets::{SecretError, SecretValue};
use mcpd_wire::jsonrpc::{self, Request};
use serde_json::{Value, json};

pub(in crate::agent) fn handle(mut req: Request, ctx: &AgentContext) -> Handled {
    let params = req.params.take().unwrap_or(Value::Null);
    let text = |key: &str| params.get(key).and_then(Value::as_str).map(str::to_owned);
    let (op, name) = (text("op"), text("name"));
    // Taken out of the params as it is: nothing else holds the value.
    let value = match params {
        Value::Object(mut m) => match m.remove("value") {
            Some(Value::String(v)) => Some(SecretValue::new(v)),
            _ => None,
        },
        _ => None,
    };
    let (secrets, supervisor) = (ctx.daemon.secrets.clone(), ctx.supervisor.clone());
    let method = req.method.clone();
    let invalid = move |reason: &str| AgentError::InvalidParams {
        method: method.clone(),
        reason: reason.to_owned(),
    };
    let asked = match (op.as_deref(), name, value) {
        (Some("set"), Some(name), Some(value)) => Ok(Op::Set(name, value)),
        (Some("set"), _, _) => Err(invalid("set needs \"name\" and \"value\" (a string)")),
        (Some("list"), _, _) => Ok(Op::List),
        (Some("remove"), Some(name), _) => Ok(Op::Remove(name)),
        (Some("remove"), None, _) => Err(invalid("remove needs \"name\"")),
        _ => Err(invalid("\"op\" is \"set\", \"list\" or \"remove\"")),
    };
    later(req.id, |id| async move {
        let done = match asked {
            Err(e) => Err(e),
            Ok(Op::Set(name, value)) => match secrets.set(&name, &value).await {
                Ok(store) => {
                    tracing::info!(secret = %name, %store, "secret set");
                    let (started, running) = supervisor.secret_set(&name).await.unwrap_or_default();
                    Ok(json!({ "store": store.as_str(), "started": started, "running": running }))
                }
                Err(e) => Err(AgentError::SecretStore(e)),
            },
            Ok(Op::List) => {
                let default = secrets.default_store().await;
                secrets
                    .list()
                    .await
                    .map(|all| {
                        let list: Vec<Value> = all
                            .into_iter()
                            .map(|(name, store)| json!({ "name": name, "store": store.as_str() }))
                            .collect();
                        json!({ "secrets": list, "default": default.as_str(), "setting": secrets.preferred().as_str() })
                    })
                    .map_err(AgentError::SecretStore)
            }
            Ok(Op::Remove(name)) => match secrets.remove(&name).await {
                Ok(removed) => {
                    if !removed.is_empty() {
                        tracing::info!(secret = %name, ?removed, "secret removed");
                    }
                    let removed: Vec<&str> = removed.iter().map(|s| s.as_str()).collect();
                    Ok(json!({ "removed": removed }))
                }
                Err(e) => Err(AgentError::SecretStore(e)),
            },
        };
        match done {
            Ok(result) => jsonrpc::result_line(&id, &result),
            Err(e) => jsonrpc::error_line(Some(&id), &e.to_error_object()),
        }
    })
}

enum Op {
    Set(String, SecretValue),
    List,
    Remove(String),
}

impl From<SecretError> for AgentError {
    fn from(e: SecretError) -> AgentError {
        AgentError::SecretStore(e)
    }
}
