//! The daemon's resident memory: idle with 10 servers, with many idle agent connections, and
//! after closing them; each as what it owns (`RssAnon`), its file pages and `VmRSS`.

use crate::client::Client;
use crate::daemon::{Daemon, ServerDef};
use crate::machine::{Rss, fd_limits_of};
use crate::options::Opts;
use crate::{IDLE_BUF, IDLE_SERVERS, OPEN_PARALLEL};
use futures::StreamExt;
use std::time::Duration;

pub struct MemReport {
    pub servers_ready_in: Duration,
    pub idle: Option<Rss>,
    pub agents: usize,
    pub agents_opened: usize,
    pub agent_failures: Vec<String>,
    pub with_agents: Option<Rss>,
    pub after_close: Option<Rss>,
    pub daemon_fd_limit: String,
    pub still_answers: Result<(), String>,
    pub shutdown: Result<(), String>,
}

pub async fn measure_memory(opts: &Opts) -> Result<MemReport, String> {
    let servers: Vec<ServerDef> = (0..IDLE_SERVERS)
        .map(|i| ServerDef::shared(format!("idle{i:02}"), Vec::new()))
        .collect();
    let max_agents = format!("max_agents = {}", opts.idle_agents + 64);
    let daemon = Daemon::start(&servers, &[max_agents])?;
    let servers_ready_in = daemon.wait_ready().await?;
    // Measured when ready, not after settling: what a daemon costs the moment it serves.
    let idle = daemon.rss();
    let socket = daemon.socket.clone();
    let results: Vec<Result<Client, String>> = futures::stream::iter(0..opts.idle_agents)
        .map(|_| {
            let socket = socket.clone();
            async move {
                let mut c = Client::connect(&socket, IDLE_BUF).await?;
                c.initialize().await?;
                Ok(c)
            }
        })
        .buffer_unordered(OPEN_PARALLEL)
        .collect()
        .await;
    let mut agents = Vec::new();
    let mut agent_failures = Vec::new();
    for r in results {
        match r {
            Ok(c) => agents.push(c),
            Err(e) => agent_failures.push(e),
        }
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let with_agents = daemon.rss();
    let still_answers = daemon.status().await.map(|_| ());
    let agents_opened = agents.len();
    drop(agents);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let after_close = daemon.rss();
    let daemon_fd_limit = fd_limits_of(daemon.pid());
    let shutdown = daemon.shutdown();
    Ok(MemReport {
        servers_ready_in,
        idle,
        agents: opts.idle_agents,
        agents_opened,
        agent_failures,
        with_agents,
        after_close,
        daemon_fd_limit,
        still_answers,
        shutdown,
    })
}

impl MemReport {
    /// KiB more per idle agent connection, of the measure `of` picks (`|r| r.anon`, …).
    pub fn per_agent_kib(&self, of: impl Fn(&Rss) -> u64) -> Option<f64> {
        match (&self.idle, &self.with_agents) {
            (Some(a), Some(b)) if self.agents_opened > 0 => {
                Some((of(b) as f64 - of(a) as f64) / self.agents_opened as f64)
            }
            _ => None,
        }
    }
}
