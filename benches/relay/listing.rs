//! tools/list with 20 servers x 100 tools: the time to the first complete listing (nothing
//! cached, then from the catalog cache) and the latency of full listings.

use crate::daemon::{Daemon, ServerDef, temp_dir, toml_str};
use crate::options::Opts;
use crate::{LIST_SERVERS, LOAD_BUF, READY_WAIT, TOOLS_PER_SERVER};
use std::time::{Duration, Instant};

pub struct ListReport {
    /// From starting a daemon with nothing cached to its first complete listing.
    pub cold_full_list: Duration,
    /// The same with `pin = "off"`: what pinning (hashing every definition of a new list)
    /// adds to it.
    pub cold_unpinned: Duration,
    pub socket_after: Duration,
    pub first_full_list: Duration,
    pub partial_listings: usize,
    pub pages: usize,
    pub lat_us: Vec<f64>,
    pub failures: Vec<String>,
    pub shutdown: Result<(), String>,
}

pub async fn measure_listing(opts: &Opts) -> Result<ListReport, String> {
    let servers: Vec<ServerDef> = (0..LIST_SERVERS)
        .map(|i| {
            let args = vec![
                "--tools".into(),
                "echo".into(),
                "--extra-tools".into(),
                (TOOLS_PER_SERVER - 1).to_string(),
            ];
            ServerDef::shared(format!("list{i:02}"), args)
        })
        .collect();
    let want = LIST_SERVERS * TOOLS_PER_SERVER;
    // Pins off, in a state directory of its own: the yardstick of the pinned cold start.
    let off_state = temp_dir()?;
    let off_lines = [
        format!(
            "state_dir = {}",
            toml_str(&off_state.path().to_string_lossy())
        ),
        "pin = \"off\"".to_owned(),
    ];
    let cold_unpinned = cold_listing(&servers, &off_lines, want).await?;
    // A first daemon starts with nothing cached and fills the catalog cache (and its pins);
    // the measured one starts from that cache, as a restarted mcpd does.
    let state = temp_dir()?;
    let state_line = format!("state_dir = {}", toml_str(&state.path().to_string_lossy()));
    let cold_full_list = cold_listing(&servers, std::slice::from_ref(&state_line), want).await?;
    let t0 = Instant::now();
    let daemon = Daemon::start(&servers, &[state_line])?;
    let mut client = daemon.connect(LOAD_BUF).await?;
    let socket_after = t0.elapsed();
    client.initialize().await?;
    let mut partial_listings = 0;
    let (first_full_list, mut pages) = loop {
        let (tools, pages) = client.list_tools().await?;
        if tools == want {
            break (t0.elapsed(), pages);
        }
        if tools > want {
            return Err(format!(
                "tools/list returned {tools} tools, expected {want}"
            ));
        }
        partial_listings += 1;
        if t0.elapsed() > READY_WAIT {
            return Err(format!(
                "tools/list still had {tools} of {want} tools after {READY_WAIT:?}"
            ));
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    };
    daemon.wait_ready().await?;
    let mut lat_us = Vec::with_capacity(opts.listings);
    let mut failures = Vec::new();
    for _ in 0..opts.listings {
        let start = Instant::now();
        match client.list_tools().await {
            Ok((tools, p)) if tools == want => {
                lat_us.push(start.elapsed().as_nanos() as f64 / 1000.0);
                pages = p;
            }
            Ok((tools, _)) => failures.push(format!("a listing had {tools} tools, not {want}")),
            Err(e) => {
                failures.push(e);
                break;
            }
        }
    }
    lat_us.sort_by(f64::total_cmp);
    drop(client);
    let shutdown = daemon.shutdown();
    Ok(ListReport {
        cold_full_list,
        cold_unpinned,
        socket_after,
        first_full_list,
        partial_listings,
        pages,
        lat_us,
        failures,
        shutdown,
    })
}

/// Starts a daemon with `lines` and nothing cached; the time to its first complete listing.
async fn cold_listing(
    servers: &[ServerDef],
    lines: &[String],
    want: usize,
) -> Result<Duration, String> {
    let t0 = Instant::now();
    let cold = Daemon::start(servers, lines)?;
    let mut client = cold.connect(LOAD_BUF).await?;
    client.initialize().await?;
    let took = loop {
        if client.list_tools().await?.0 == want {
            break t0.elapsed();
        }
        if t0.elapsed() > READY_WAIT {
            return Err(format!(
                "tools/list never had {want} tools after {READY_WAIT:?}"
            ));
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    };
    drop(client);
    cold.shutdown()?;
    Ok(took)
}
