//! The shutdown sequence: what runs once the daemon is ready, stopped in order with deadlines.

use crate::config::Config;
use std::path::Path;
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// How long the last step of shutdown waits for stray tasks.
const TASKS_DEADLINE: Duration = Duration::from_secs(2);

/// What runs once the daemon is ready, kept for the shutdown sequence.
pub(super) struct Running {
    pub(super) listen: tokio::task::JoinHandle<()>,
    pub(super) http_task: Option<tokio::task::JoinHandle<()>>,
    pub(super) ui_tasks: Vec<tokio::task::JoinHandle<()>>,
    pub(super) agents: TaskTracker,
    pub(super) upstreams: CancellationToken,
    pub(super) supervisor_task: tokio::task::JoinHandle<()>,
    pub(super) sentinel_task: tokio::task::JoinHandle<()>,
    pub(super) temp_dirs: Option<crate::upstream::sandbox::Claim>,
    pub(super) pointer: Option<crate::socket_pointer::Pointer>,
    pub(super) owns_socket: bool,
}

impl Running {
    /// The shutdown sequence: stop accepting, drain the agents within the grace, stop
    /// every server, then remove what the daemon left. Every wait has a deadline.
    /// On an upgrade (`keep`), the socket's file and pointer stay for the next image.
    pub(super) async fn stop(self, config: &Config, socket: &Path, keep: bool) {
        if keep {
            // systemd sees a reload: the same process comes back READY.
            crate::systemd::reloading();
        } else {
            crate::systemd::stopping();
            tracing::info!("shutting down");
        }
        let _ = self.listen.await; // the listener only ends by the token; a panic there is logged by tokio
        if let Some(t) = self.http_task {
            // Ends by the token too, once open responses finish; the agents' drain bounds that.
            let _ = tokio::time::timeout(config.daemon.shutdown_grace + Duration::from_secs(5), t)
                .await;
        }
        // The dashboard stops accepting at once; open page loads get a moment to finish.
        let _ = tokio::time::timeout(
            Duration::from_secs(3),
            futures::future::join_all(self.ui_tasks),
        )
        .await;
        self.agents.close();
        let agent_deadline = config.daemon.shutdown_grace + Duration::from_secs(5);
        if tokio::time::timeout(agent_deadline, self.agents.wait())
            .await
            .is_err()
        {
            tracing::warn!("some agent connections did not close in time");
        }
        self.upstreams.cancel();
        let stop_deadline = config
            .servers
            .values()
            .map(|s| s.health.stop_grace * 2)
            .max()
            .unwrap_or_default()
            + Duration::from_secs(5);
        if tokio::time::timeout(stop_deadline, self.supervisor_task)
            .await
            .is_err()
        {
            tracing::error!("the supervisor did not finish stopping servers in time");
        }
        // The supervisor held the last sentinel handle: its IO task now ends and reaps it.
        let _ = tokio::time::timeout(Duration::from_secs(3), self.sentinel_task).await;
        // Every server has stopped: their temporary directories go.
        if let Some(claim) = self.temp_dirs {
            claim.release();
        }
        // Whatever else was spawned (actors whose handles are now gone, a revocation, a
        // status query) gets a last moment to finish.
        match mcpd_runtime::tracker::drain(TASKS_DEADLINE).await {
            0 => tracing::debug!("every task ended"),
            n => tracing::warn!(tasks = n, "{n} tasks were still running at exit"),
        }
        if keep {
            tracing::info!("drained for the upgrade");
            return;
        }
        if let Some(p) = self.pointer {
            p.remove().await;
        }
        #[allow(
            clippy::disallowed_methods,
            reason = "one unlink, the last step of shutdown"
        )]
        let removed = if self.owns_socket {
            std::fs::remove_file(socket)
        } else {
            Ok(())
        };
        if let Err(e) = removed {
            tracing::warn!(socket = %socket.display(), "could not remove the socket: {e}");
        }
        tracing::info!("mcpd stopped");
    }
}
