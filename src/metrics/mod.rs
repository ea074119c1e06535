//! Counters for `mcpd ctl metrics` and each server's last hour for the dashboard.
//!
//! The counters are calls, errors and latency per server and method, and bytes to and
//! from agents; the last hour is in `history.rs`. An actor owns them; the call path only
//! does a `try_send`.

mod history;
#[cfg(test)]
mod tests;

pub use history::{History, MINUTES, Minute};

use history::Histories;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

/// Latency histogram bucket bounds, in seconds.
const BUCKETS: [f64; 14] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0, 30.0, 120.0,
];

#[derive(Debug)]
enum Msg {
    Call {
        server: String,
        method: &'static str,
        took: Duration,
        error: bool,
    },
    Bytes {
        received: u64,
        sent: u64,
    },
    Render {
        respond_to: oneshot::Sender<String>,
    },
    History {
        server: String,
        respond_to: oneshot::Sender<Option<History>>,
    },
}

#[derive(Default)]
struct Series {
    calls: u64,
    errors: u64,
    /// Cumulative counts per bucket, then the sum of seconds.
    buckets: [u64; BUCKETS.len()],
    seconds: f64,
}

/// The cloneable way to record and read metrics.
#[derive(Clone, Debug)]
pub struct Metrics {
    tx: mpsc::Sender<Msg>,
}

impl Metrics {
    pub fn spawn() -> Metrics {
        let (tx, rx) = mpsc::channel::<Msg>(4096);
        let counters = Counters {
            series: BTreeMap::new(),
            received: 0,
            sent: 0,
            history: Histories::new(Instant::now()),
            rx,
        };
        mcpd_runtime::tracker::spawn(counters.run());
        Metrics { tx }
    }

    /// Records one finished call. Dropped when the recorder is behind: metrics must
    /// never slow a call down.
    pub fn call(&self, server: &str, method: &'static str, took: Duration, error: bool) {
        let _ = self.tx.try_send(Msg::Call {
            server: server.to_owned(),
            method,
            took,
            error,
        });
    }

    pub fn bytes(&self, received: u64, sent: u64) {
        if received + sent > 0 {
            let _ = self.tx.try_send(Msg::Bytes { received, sent });
        }
    }

    /// The call and byte metrics in Prometheus text format.
    pub async fn render(&self) -> String {
        mcpd_runtime::ask::ask(&self.tx, RENDER_TIMEOUT, |respond_to| Msg::Render {
            respond_to,
        })
        .await
        .unwrap_or_default()
    }

    /// `server`'s calls, errors and latency in each of the last `MINUTES` minutes; None
    /// if it has had no call since the daemon started (or is beyond the servers kept),
    /// or the counters did not answer.
    pub async fn history(&self, server: &str) -> Option<History> {
        mcpd_runtime::ask::ask(&self.tx, HISTORY_TIMEOUT, |respond_to| Msg::History {
            server: server.to_owned(),
            respond_to,
        })
        .await
        .ok()
        .flatten()
    }
}

/// How long `ctl metrics` waits for the counters.
const RENDER_TIMEOUT: Duration = Duration::from_secs(5);

/// How long a dashboard page waits for a history: a chart missing is better than a page
/// that hangs.
const HISTORY_TIMEOUT: Duration = Duration::from_secs(2);

/// The actor behind `Metrics`: every series, the byte totals, each server's last hour.
struct Counters {
    series: BTreeMap<(String, &'static str), Series>,
    received: u64,
    sent: u64,
    /// Per server, not per method: what the dashboard charts.
    history: Histories,
    rx: mpsc::Receiver<Msg>,
}

impl Counters {
    async fn run(mut self) {
        while let Some(msg) = self.rx.recv().await {
            self.on_msg(msg);
        }
    }

    fn on_msg(&mut self, msg: Msg) {
        match msg {
            Msg::Call {
                server,
                method,
                took,
                error,
            } => {
                // The time of receipt stands for the time the call ended: the queue in
                // between is short, and a minute is coarse.
                self.history.record(&server, Instant::now(), took, error);
                let s = self.series.entry((server, method)).or_default();
                s.calls += 1;
                s.errors += u64::from(error);
                let secs = took.as_secs_f64();
                s.seconds += secs;
                for (count, bound) in s.buckets.iter_mut().zip(BUCKETS) {
                    if secs <= bound {
                        *count += 1;
                    }
                }
            }
            Msg::Bytes {
                received: r,
                sent: w,
            } => {
                self.received += r;
                self.sent += w;
            }
            Msg::Render { respond_to } => {
                let _ = respond_to.send(render(&self.series, self.received, self.sent)); // the asker may have left
            }
            Msg::History { server, respond_to } => {
                let _ = respond_to.send(self.history.read(&server, Instant::now())); // the asker may have left
            }
        }
    }
}

fn render(series: &BTreeMap<(String, &'static str), Series>, received: u64, sent: u64) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# HELP mcpd_calls_total Requests agents sent to servers."
    );
    let _ = writeln!(out, "# TYPE mcpd_calls_total counter");
    for ((server, method), s) in series {
        let _ = writeln!(
            out,
            "mcpd_calls_total{{server=\"{server}\",method=\"{method}\"}} {}",
            s.calls
        );
    }
    let _ = writeln!(
        out,
        "# HELP mcpd_call_errors_total Requests that ended in an error (the server's or mcpd's)."
    );
    let _ = writeln!(out, "# TYPE mcpd_call_errors_total counter");
    for ((server, method), s) in series {
        let _ = writeln!(
            out,
            "mcpd_call_errors_total{{server=\"{server}\",method=\"{method}\"}} {}",
            s.errors
        );
    }
    let _ = writeln!(
        out,
        "# HELP mcpd_call_duration_seconds Time from an agent's request to its answer."
    );
    let _ = writeln!(out, "# TYPE mcpd_call_duration_seconds histogram");
    for ((server, method), s) in series {
        let labels = format!("server=\"{server}\",method=\"{method}\"");
        for (count, bound) in s.buckets.iter().zip(BUCKETS) {
            let _ = writeln!(
                out,
                "mcpd_call_duration_seconds_bucket{{{labels},le=\"{bound}\"}} {count}"
            );
        }
        let _ = writeln!(
            out,
            "mcpd_call_duration_seconds_bucket{{{labels},le=\"+Inf\"}} {}",
            s.calls
        );
        let _ = writeln!(
            out,
            "mcpd_call_duration_seconds_sum{{{labels}}} {}",
            s.seconds
        );
        let _ = writeln!(
            out,
            "mcpd_call_duration_seconds_count{{{labels}}} {}",
            s.calls
        );
    }
    let _ = writeln!(
        out,
        "# HELP mcpd_agent_bytes_received_total Bytes read from agents."
    );
    let _ = writeln!(out, "# TYPE mcpd_agent_bytes_received_total counter");
    let _ = writeln!(out, "mcpd_agent_bytes_received_total {received}");
    let _ = writeln!(
        out,
        "# HELP mcpd_agent_bytes_sent_total Bytes written to agents."
    );
    let _ = writeln!(out, "# TYPE mcpd_agent_bytes_sent_total counter");
    let _ = writeln!(out, "mcpd_agent_bytes_sent_total {sent}");
    out
}
