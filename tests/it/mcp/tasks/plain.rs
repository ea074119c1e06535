//! Agents that make no task, calling a tool that runs as a task at its server.
//!
//! In every pair of eras mcpd follows the task itself and answers with its result as a
//! plain call result, passing the task's input request on as the agent's era asks.
//!
//! One body, `plain_result`, runs for each row of the table at the end: a 2025-11-25 agent
//! or a modern one without the extension, against an extension server or a 2025-11-25 one.

use super::*;
use crate::support::*;
use serde_json::{Value, json};
use std::path::Path;

/// The era of an agent that makes no task.
#[derive(Clone, Copy)]
enum AgentEra {
    /// A 2025-11-25 agent: a plain `tools/call`; the server's input request reaches it as
    /// a real elicitation; `notifications/cancelled` cancels the call.
    Legacy,
    /// A 2026-07-28 agent that does not declare the tasks extension: the input request is
    /// an `input_required` round of its own call.
    Modern,
}

/// The era of the server whose tool runs as a task.
#[derive(Clone, Copy)]
enum ServerEra {
    /// Speaks the tasks extension (server `jobs`), whose tasks mcpd follows with `tasks/get`.
    Extension,
    /// Requires 2025-11-25 tasks (server `old`), whose end mcpd awaits with `tasks/result`.
    Legacy,
}

impl ServerEra {
    fn name(self) -> &'static str {
        match self {
            ServerEra::Extension => "jobs",
            ServerEra::Legacy => "old",
        }
    }

    fn args(self, record: &str) -> Vec<&str> {
        match self {
            ServerEra::Extension => vec!["--era", "modern", "--tools", TOOLS, "--record", record],
            ServerEra::Legacy => vec!["--tools", LEGACY_TOOLS, "--record", record],
        }
    }

    /// The qualified name of the server's task tool `what` (`sleep`, `ask`, `fail`, `error`).
    fn tool(self, what: &str) -> String {
        match self {
            ServerEra::Extension => format!("jobs__task_{what}"),
            ServerEra::Legacy => format!("old__ltask_{what}"),
        }
    }

    /// The server's own id of the `n`th task it made.
    fn own_id(self, n: usize) -> String {
        match self {
            ServerEra::Extension => format!("fixture-task-{n}"),
            ServerEra::Legacy => format!("legacy-task-{n}"),
        }
    }

    /// The request with which mcpd follows a task to its end.
    fn follow(self) -> &'static str {
        match self {
            ServerEra::Extension => "tasks/get",
            ServerEra::Legacy => "tasks/result",
        }
    }

    /// Whether the server has the tools whose tasks fail (`task_fail`, `task_error`).
    fn fails(self) -> bool {
        matches!(self, ServerEra::Extension)
    }
}

impl AgentEra {
    async fn connect(self, d: &Daemon) -> Agent {
        match self {
            AgentEra::Legacy => legacy_agent(d).await.0,
            AgentEra::Modern => d.agent().await,
        }
    }

    /// A call that asks for no task.
    async fn call(self, a: &mut Agent, tool: &str, args: Value) -> Value {
        match self {
            AgentEra::Legacy => a.call(tool, args).await,
            AgentEra::Modern => {
                let call = json!({"name": tool, "arguments": args});
                modern(a, "tools/call", call, false).await
            }
        }
    }

    /// A call of `tool`, whose task asks for a name, answered with Ada.
    async fn answered_as_ada(self, a: &mut Agent, tool: &str) -> Value {
        match self {
            AgentEra::Legacy => {
                let id = a.start_call(tool, json!({})).await;
                let ask = within("the server's elicitation", async {
                    loop {
                        let m = a.recv().await.expect("open");
                        if m["method"] == "elicitation/create" {
                            break m;
                        }
                    }
                })
                .await;
                a.send(json!({"jsonrpc": "2.0", "id": ask["id"], "result": {"action": "accept", "content": {"name": "Ada"}}}))
                    .await;
                a.response(&id).await
            }
            AgentEra::Modern => answered_as_ada(a, tool).await,
        }
    }
}

/// One row of the table.
struct Plain {
    agent: AgentEra,
    server: ServerEra,
    /// How long the sleeping task sleeps.
    ms: u64,
}

async fn plain_result(case: Plain) {
    let Plain { agent, server, ms } = case;
    let (b, rec, arg) = daemon();
    let d = b.fixture(server.name(), &server.args(&arg)).start().await;
    d.wait_ready().await;
    let pid = status_pid(&d.server_status(server.name()).await).expect("pid");
    let mut a = agent.connect(&d).await;
    // The server's tasks so far, to know the server's own id of the next.
    let mut made = 0;

    let r = agent
        .call(&mut a, &server.tool("sleep"), json!({"ms": ms}))
        .await;
    made += 1;
    assert_eq!(text(&r), format!("slept {ms} ms"), "{r}");
    assert!(
        r["result"]["_meta"]["io.modelcontextprotocol/related-task"].is_null(),
        "a plain result: {r}"
    );
    let asked = recorded_requests(&rec, pid);
    assert!(
        asked.iter().any(|m| m["method"] == server.follow()),
        "mcpd followed the task: {asked:?}"
    );

    // A tool error stays a tool error; a failed task is the task's error.
    if server.fails() {
        let r = agent.call(&mut a, &server.tool("error"), json!({})).await;
        assert_eq!(r["result"]["isError"], true, "{r}");
        let r = agent.call(&mut a, &server.tool("fail"), json!({})).await;
        assert_eq!(error_message(&r), "the job failed", "{r}");
        made += 2;
    }

    // The task's input request reaches the agent in its own era's way.
    let r = agent.answered_as_ada(&mut a, &server.tool("ask")).await;
    made += 1;
    assert_eq!(text(&r), "hello Ada", "{r}");
    assert!(
        r["result"]["_meta"]["io.modelcontextprotocol/related-task"].is_null(),
        "a plain result: {r}"
    );

    match agent {
        // Cancelling the call cancels the task at its server, once mcpd follows it.
        AgentEra::Legacy => {
            let own = server.own_id(made + 1);
            cancelled_at_its_server(&mut a, server, &rec, pid, &own).await;
        }
        // An agent that declares the extension still gets the task itself.
        AgentEra::Modern => {
            let call = json!({"name": server.tool("sleep"), "arguments": {"ms": ms}});
            let r = modern(&mut a, "tools/call", call, true).await;
            assert_eq!(r["result"]["resultType"], "task", "{r}");
        }
    }
}

/// A 2025-11-25 agent's call of the server's sleeping tool, cancelled once mcpd follows its
/// task (the server's own id `own`): the server is asked to cancel the task.
async fn cancelled_at_its_server(
    a: &mut Agent,
    server: ServerEra,
    rec: &Path,
    pid: u32,
    own: &str,
) {
    let id = a
        .start_call(&server.tool("sleep"), json!({"ms": 600000}))
        .await;
    eventually("mcpd follows the task", WAIT, || async {
        recorded_requests(rec, pid)
            .iter()
            .any(|m| m["method"] == server.follow() && m["params"]["taskId"] == own)
            .then_some(())
    })
    .await;
    a.send(
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": id}}),
    )
    .await;
    eventually("the server is asked to cancel the task", WAIT, || async {
        recorded_requests(rec, pid)
            .iter()
            .any(|m| m["method"] == "tasks/cancel" && m["params"]["taskId"] == own)
            .then_some(())
    })
    .await;
}

/// Each row a test of its own: `name: agent era, server era, the sleeping task's ms;`.
macro_rules! plain_results {
    ($($(#[$doc:meta])* $name:ident: $agent:ident, $server:ident, $ms:expr;)*) => {$(
        $(#[$doc])*
        #[tokio::test]
        async fn $name() {
            plain_result(Plain { agent: AgentEra::$agent, server: ServerEra::$server, ms: $ms }).await;
        }
    )*};
}

plain_results! {
    an_agent_without_tasks_gets_the_result_of_a_task_only_tool_and_its_input_requests:
        Legacy, Extension, 100;
    an_agent_that_asks_for_no_task_gets_the_result_of_a_tool_that_requires_one:
        Legacy, Legacy, 50;
    /// The server answers -32021 to a request that did not declare the extension; mcpd
    /// can do tasks, so it declares it, follows the task and answers with its result, as
    /// it does for a legacy agent. (The conformance suite's tasks-required-task-error
    /// expects the -32021 of a server that cannot serve the call otherwise: through mcpd
    /// it gets the result, tests/conformance/mcpd-known-losses.txt.)
    a_modern_agent_without_the_extension_gets_the_result_of_a_task_only_tool:
        Modern, Extension, 50;
    a_modern_agent_gets_the_result_of_a_tool_that_requires_a_2025_11_25_task:
        Modern, Legacy, 50;
}
