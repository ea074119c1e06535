//! mcpd's login control methods: the daemon's side of `mcpd ctl login` and `logout`.
//!
//! The methods are `mcpd/login`, `mcpd/login/wait`, `mcpd/login/redirect` and
//! `mcpd/logout`, handed to the server's credential.

use crate::agent::AgentContext;
use crate::agent::reply::{Handled, Step};
use crate::errors::AgentError;
use futures::FutureExt;
use mcpd_wire::jsonrpc::{self, Request};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

pub const LOGIN: &str = "mcpd/login";
pub const WAIT: &str = "mcpd/login/wait";
pub const REDIRECT: &str = "mcpd/login/redirect";
pub const LOGOUT: &str = "mcpd/logout";

/// Answers one of the login methods. Each names its server in `name`.
pub fn handle(req: Request, ctx: &AgentContext) -> Handled {
    let param = |k: &str| {
        req.params
            .as_ref()
            .and_then(|p| p.get(k))
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    let fail =
        |id: &jsonrpc::Id, e: AgentError| jsonrpc::error_line(Some(id), &e.to_error_object());
    let Some(name) = param("name") else {
        let e = AgentError::InvalidParams {
            method: req.method.clone(),
            reason: "\"name\" (a server name) is required".to_owned(),
        };
        return Handled::Now(fail(&req.id, e));
    };
    let redirect = param("url");
    let supervisor = ctx.supervisor.clone();
    let method = req.method.clone();
    let id = req.id;
    let reply_id = id.clone();
    let fut = async move {
        let refused = |why: String| AgentError::LoginFailed(why);
        let line = match supervisor.login(&name).await {
            Err(why) => fail(&reply_id, AgentError::ControlRefused(why.to_string())),
            Ok(login) => match method.as_str() {
                LOGIN if login.machine().is_some() => match login.renew().await {
                    Ok(()) => jsonrpc::result_line(
                        &reply_id,
                        &json!({ "granted": login.machine().map(|g| g.as_str()) }),
                    ),
                    Err(e) => fail(&reply_id, refused(e.to_string())),
                },
                LOGIN => match login.login().await {
                    Ok(url) => jsonrpc::result_line(&reply_id, &json!({ "url": url.as_str() })),
                    Err(e) => fail(&reply_id, refused(e.to_string())),
                },
                WAIT => match login.wait().await {
                    Ok(()) => jsonrpc::result_line(&reply_id, &json!({})),
                    Err(why) => fail(&reply_id, refused(why.to_string())),
                },
                REDIRECT => match redirect.as_deref().map(reqwest::Url::parse) {
                    Some(Ok(url)) => match login.redirected(url).await {
                        Ok(()) => jsonrpc::result_line(&reply_id, &json!({})),
                        Err(why) => fail(&reply_id, refused(why.to_string())),
                    },
                    _ => fail(
                        &reply_id,
                        AgentError::ControlRefused(
                            "\"url\" must be the URL the browser was redirected to".into(),
                        ),
                    ),
                },
                _ => match login.logout().await {
                    Ok(what) => jsonrpc::result_line(&reply_id, &json!({ "revocation": what })),
                    Err(why) => fail(&reply_id, AgentError::LogoutFailed(why.to_string())),
                },
            },
        };
        (reply_id, Step::Reply(line))
    };
    Handled::Later {
        id,
        cancel: CancellationToken::new(),
        fut: fut.boxed(),
    }
}
