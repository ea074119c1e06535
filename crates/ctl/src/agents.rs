//! `mcpd ctl agents`: who is connected, from which program, and doing what.

use super::{CtlError, Out, at, print_json, request, table};
use std::path::Path;

/// `mcpd ctl agents [--json]`: who is connected, and doing what.
pub async fn agents(socket: &Path, as_json: bool) -> Result<(), CtlError> {
    let result = request(socket, "mcpd/agents", None).await?;
    let mut out = Out::lock();
    if as_json {
        return print_json(&mut out, &result);
    }
    let agents: Vec<crate::control_api::AgentInfo> =
        serde_json::from_value(at(&result, "agents").clone())
            .map_err(|e| CtlError::Unexpected(format!("agents: {e}")))?;
    use table::Align::{Left, Right};
    let mut rows = vec![
        [
            "AGENT",
            "PID",
            "EXECUTABLE",
            "CLIENT",
            "ERA",
            "IN-FLIGHT",
            "PROFILE",
        ]
        .map(str::to_owned)
        .to_vec(),
    ];
    for a in &agents {
        let client = match (&a.client, &a.client_version) {
            (Some(c), Some(v)) => format!("{c} {v}"),
            (Some(c), None) => c.clone(),
            _ => "-".into(),
        };
        // HTTP agents have no process to show; their transport and address stand in.
        // A path shows its file name: `--json` has the whole of it.
        let mut exe = match (&a.exe, &a.remote) {
            (Some(exe), _) => Path::new(exe)
                .file_name()
                .map_or_else(|| exe.clone(), |n| n.to_string_lossy().into_owned()),
            (None, Some(remote)) => {
                format!("{} {remote}", a.transport.as_deref().unwrap_or("http"))
            }
            (None, None) => "-".into(),
        };
        if let Some(via) = &a.via {
            exe = format!("{exe} (via {via})");
        }
        if let Some(server) = a.server_pid {
            exe = format!("{exe} (of server pid {server})");
        }
        rows.push(vec![
            a.agent.to_string(),
            a.pid.map_or("-".into(), |p| p.to_string()),
            exe,
            client,
            a.era.clone().unwrap_or_else(|| "-".into()),
            a.in_flight.to_string(),
            a.profile.clone().unwrap_or_else(|| "-".into()),
        ]);
    }
    table::print(
        &mut out,
        &[Right, Right, Left, Left, Left, Right, Left],
        &rows,
    )?;
    let calls: Vec<_> = agents
        .iter()
        .flat_map(|a| a.calls.iter().map(move |c| (a.agent, c)))
        .collect();
    if !calls.is_empty() {
        let mut rows = vec![
            ["AGENT", "ID", "REQUEST", "RUNNING"]
                .map(str::to_owned)
                .to_vec(),
        ];
        for (agent, c) in calls {
            let what = match &c.tool {
                Some(tool) => format!("{} {tool}", c.method),
                None => c.method.clone(),
            };
            rows.push(vec![
                agent.to_string(),
                c.id.clone(),
                what,
                format!("{:.1}s", c.secs),
            ]);
        }
        writeln!(out)?;
        table::print(&mut out, &[Right, Left, Left, Right], &rows)?;
    }
    Ok(())
}

/// `mcpd ctl cancel AGENT ID`: cancels an agent's request in flight.
pub async fn cancel(socket: &Path, agent: u64, id: &str) -> Result<(), CtlError> {
    // An id typed bare (`7`, `abc`) is taken as the agent sent it: a number as a
    // number, anything else as a string.
    let id = if serde_json::from_str::<serde_json::Value>(id)
        .is_ok_and(|v| v.is_number() || v.is_string())
    {
        id.to_owned()
    } else {
        serde_json::Value::from(id).to_string()
    };
    let params = serde_json::json!({ "agent": agent, "id": id });
    request(socket, crate::control_api::CANCEL, Some(params)).await?;
    writeln!(Out::lock(), "cancelled agent {agent}'s request {id}")?;
    Ok(())
}
