//! A call's plan: which side of the agent carries it, and what it asks of its server.
//!
//! It is decided once per call from the agent's era, the method and what the call may do
//! with tasks.
//!
//! The server's era is not part of it. The upstream actor dresses each request for its
//! server's era at its own edge (`upstream/dress.rs`), and what only one server era
//! does (an `input_required` round, a task-only tool's -32021) shows in the server's
//! answer, which the branch reads then. A new agent era is a new [`AgentSide`] (or an
//! existing one chosen for it), not a new row of branches.

use crate::agent::render::{Rewrite, TaskMode};
use mcpd_wire::protocol::era::Era;
use mcpd_wire::protocol::{method, tasks};

/// How one call goes: decided by [`CallPlan::decide`] before anything is sent, then only
/// read. Small and `Copy`: it costs a call nothing to carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallPlan {
    pub agent: AgentSide,
    pub work: Work,
}

/// How the server's requests during a call reach the agent, and what shape its answer
/// takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AgentSide {
    /// The agent is answered `input_required` and retries with its input; the call waits
    /// parked meanwhile (`parked.rs`): a 2026-07-28 agent.
    Parks,
    /// mcpd asks the agent real requests and retries the call itself (`fulfil.rs`): an
    /// agent of the `initialize` era.
    Fulfils,
}

/// What the call asks of its server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Work {
    /// The request as routed.
    Plain,
    /// A `tools/call` from an agent that asked for no task: a server that runs the tool
    /// only as an extension task answers -32021, and mcpd then makes and follows the task
    /// itself (`bridge.rs`, or `fulfil.rs`'s rounds).
    BridgeTask,
    /// A tool that runs only as a 2025-11-25 task, and the agent asked for none: mcpd
    /// makes the task and follows it to its result (`tasks/follow.rs`).
    FollowTask,
    /// A 2025-11-25 agent's `tasks/result` of what is an extension task at its server.
    TaskResult,
    /// A 2025-11-25 agent's `tasks/cancel` of what is an extension task at its server.
    TaskCancel,
}

impl CallPlan {
    /// The plan of a call by an agent of era `agent` to `method`, whose result is to be
    /// changed by `rewrite` (which also says what the call may do with tasks).
    pub fn decide(agent: Era, method: &str, rewrite: &Rewrite) -> CallPlan {
        let side = match agent {
            Era::Modern => AgentSide::Parks,
            Era::Legacy => AgentSide::Fulfils,
        };
        let work = match (side, rewrite) {
            (
                _,
                Rewrite::ToolResult {
                    tasks: TaskMode::Follow,
                    ..
                },
            ) => Work::FollowTask,
            (
                AgentSide::Fulfils,
                Rewrite::Task {
                    legacy_view: true, ..
                },
            ) if method == method::TASKS_RESULT => Work::TaskResult,
            (
                AgentSide::Fulfils,
                Rewrite::Task {
                    legacy_view: true, ..
                },
            ) if method == tasks::CANCEL => Work::TaskCancel,
            // A legacy agent never sees a task it did not ask for: whatever its call's
            // task mode, a task-only answer is followed for it.
            (AgentSide::Fulfils, _) if method == method::TOOLS_CALL => Work::BridgeTask,
            (
                AgentSide::Parks,
                Rewrite::ToolResult {
                    tasks: TaskMode::None,
                    ..
                },
            ) => Work::BridgeTask,
            _ => Work::Plain,
        };
        CallPlan { agent: side, work }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn tool(tasks: TaskMode) -> Rewrite {
        Rewrite::ToolResult {
            output_schema: None,
            limits: mcpd_wire::protocol::results::Limits::default(),
            tasks,
        }
    }

    fn task(legacy_view: bool) -> Rewrite {
        Rewrite::Task {
            sealed: Arc::from("sealed"),
            legacy_view,
        }
    }

    fn check(agent: Era, method: &str, rewrite: Rewrite, expected: (AgentSide, Work)) {
        let plan = CallPlan::decide(agent, method, &rewrite);
        assert_eq!(
            (plan.agent, plan.work),
            expected,
            "{agent:?} agent, {method}"
        );
    }

    #[test]
    fn each_call_gets_the_plan_of_its_agent_era_and_task_mode() {
        use AgentSide::{Fulfils, Parks};
        use Era::{Legacy, Modern};
        let call = method::TOOLS_CALL;
        check(
            Modern,
            call,
            tool(TaskMode::None),
            (Parks, Work::BridgeTask),
        );
        check(
            Modern,
            call,
            tool(TaskMode::Follow),
            (Parks, Work::FollowTask),
        );
        check(Modern, "prompts/get", Rewrite::None, (Parks, Work::Plain));
        check(
            Modern,
            method::TASKS_RESULT,
            task(true),
            (Parks, Work::Plain),
        );
        check(
            Legacy,
            call,
            tool(TaskMode::None),
            (Fulfils, Work::BridgeTask),
        );
        check(
            Legacy,
            call,
            tool(TaskMode::Follow),
            (Fulfils, Work::FollowTask),
        );
        check(Legacy, call, Rewrite::None, (Fulfils, Work::BridgeTask));
        check(
            Legacy,
            "resources/read",
            Rewrite::None,
            (Fulfils, Work::Plain),
        );
        check(
            Legacy,
            method::TASKS_RESULT,
            task(true),
            (Fulfils, Work::TaskResult),
        );
        check(
            Legacy,
            tasks::CANCEL,
            task(true),
            (Fulfils, Work::TaskCancel),
        );
        check(
            Legacy,
            method::TASKS_RESULT,
            task(false),
            (Fulfils, Work::Plain),
        );
        check(Legacy, "tasks/get", task(true), (Fulfils, Work::Plain));
    }
}
