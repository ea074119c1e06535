//! The daemon's resident memory after a burst of 64 concurrent 1 MiB results: how long what
//! it owns (`RssAnon`) takes to come back within 2 MiB of where it was before the burst.
//! `VmRSS` is followed beside it; it also counts the code the burst ran for the first
//! time, which stays mapped and is not the daemon's to give back.

use crate::client::Client;
use crate::daemon::{Daemon, ServerDef};
use crate::machine::Rss;
use crate::{BIG, LOAD_BUF};
use std::time::{Duration, Instant};

/// Agents in the burst, each with one 1 MiB call in flight.
pub const BURST: usize = 64;
/// How far above the pre-burst `RssAnon` counts as "back".
pub const WITHIN_KIB: u64 = 2 * 1024;
/// How long the daemon gets to come back.
pub const SETTLE: Duration = Duration::from_secs(10);

pub struct BurstReport {
    /// With the 64 agents connected and initialized, before any call.
    pub before: Rss,
    /// The highest of each measure sampled from the first call until all results had
    /// arrived (each at its own moment).
    pub peak: Rss,
    /// How long after the last result arrived `RssAnon` was first back within
    /// `WITHIN_KIB`, if it was within `SETTLE`.
    pub back_after: Option<Duration>,
    /// At that moment, or at the end of `SETTLE`.
    pub last: Rss,
    pub shutdown: Result<(), String>,
}

fn rss(d: &Daemon) -> Result<Rss, String> {
    d.rss()
        .ok_or_else(|| "cannot read the daemon's /proc/PID/status".to_owned())
}

fn max(a: Rss, b: Rss) -> Rss {
    Rss {
        vm: a.vm.max(b.vm),
        anon: a.anon.max(b.anon),
        file: a.file.max(b.file),
    }
}

pub async fn measure_burst() -> Result<BurstReport, String> {
    let fx = [ServerDef::shared("fx", Vec::new())];
    let max_agents = format!("max_agents = {}", BURST + 16);
    let daemon = Daemon::start(&fx, &[max_agents])?;
    daemon.wait_ready().await?;
    let mut agents = Vec::with_capacity(BURST);
    for _ in 0..BURST {
        let mut c = daemon.connect(LOAD_BUF).await?;
        c.initialize().await?;
        agents.push(c);
    }
    let before = rss(&daemon)?;
    let call = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\",\"params\":{{\"name\":\"fx__big\",\"arguments\":{{\"bytes\":{BIG}}}}}}}\n"
    );
    for a in &mut agents {
        a.send(call.as_bytes()).await?;
    }
    let mut peak = before;
    let results = {
        let reads = futures::future::join_all(agents.iter_mut().map(one_result));
        tokio::pin!(reads);
        loop {
            tokio::select! {
                r = &mut reads => break r,
                _ = tokio::time::sleep(Duration::from_millis(20)) => {
                    peak = max(peak, rss(&daemon)?);
                }
            }
        }
    };
    if let Some(e) = results.into_iter().find_map(Result::err) {
        return Err(format!("a burst call failed: {e}"));
    }
    peak = max(peak, rss(&daemon)?);
    let done = Instant::now();
    let (back_after, last) = loop {
        let now = rss(&daemon)?;
        if now.anon <= before.anon + WITHIN_KIB {
            break (Some(done.elapsed()), now);
        }
        if done.elapsed() >= SETTLE {
            break (None, now);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    drop(agents);
    Ok(BurstReport {
        before,
        peak,
        back_after,
        last,
        shutdown: daemon.shutdown(),
    })
}

/// Reads one agent's response to its burst call and checks it carries the 1 MiB text.
async fn one_result(c: &mut Client) -> Result<(), String> {
    let line = c.recv().await?;
    if line.len() < BIG || !line.starts_with(b"{") {
        return Err(format!("a short or odd response ({} bytes)", line.len()));
    }
    Ok(())
}
