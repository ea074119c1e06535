//! Unit tests of the metrics actor.
//!
//! `ctl metrics` text kept byte for byte, and the per-server history under tokio's paused
//! clock (minutes turning, an hour passing, quantiles, errors, the cap on servers).

use super::*;
use tokio::time::advance;

const MINUTE: Duration = Duration::from_secs(60);

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// Waits until the actor has taken every message sent so far: it records a call at the
/// time it receives it, and `advance` may move the clock before the actor has run.
async fn settle(m: &Metrics) {
    m.render().await;
}

/// `d` within a microsecond of `want` (the quantiles are computed in f64 seconds).
fn near(d: Option<Duration>, want: Duration) -> bool {
    d.is_some_and(|d| d.abs_diff(want) < Duration::from_micros(1))
}

#[tokio::test(start_paused = true)]
async fn ctl_metrics_text_is_what_it_was_before_the_history() {
    let m = Metrics::spawn();
    m.call("b", "tools/call", ms(3), false);
    m.call("b", "tools/call", ms(200), true);
    m.call("a", "tools/list", Duration::from_secs(200), false);
    m.bytes(10, 20);
    assert_eq!(m.render().await, GOLDEN);
}

#[tokio::test(start_paused = true)]
async fn a_call_moves_back_one_minute_when_a_minute_passes() {
    let m = Metrics::spawn();
    m.call("a", "tools/call", ms(3), false);
    let h = m.history("a").await.unwrap();
    assert_eq!(h.minutes.len(), MINUTES);
    assert_eq!(h.minutes[MINUTES - 1].calls, 1);
    assert_eq!(h.minutes.iter().map(|m| m.calls).sum::<u64>(), 1);

    settle(&m).await;

    advance(MINUTE).await;
    let h = m.history("a").await.unwrap();
    assert_eq!(h.minutes.len(), MINUTES);
    assert_eq!(h.minutes[MINUTES - 2].calls, 1);
    assert_eq!(h.minutes[MINUTES - 1], Minute::default());

    m.call("a", "tools/call", ms(3), false);
    m.call("a", "tools/call", ms(3), false);
    let h = m.history("a").await.unwrap();
    assert_eq!(h.minutes[MINUTES - 2].calls, 1);
    assert_eq!(h.minutes[MINUTES - 1].calls, 2);
    assert_eq!(h.total().calls, 3);
}

#[tokio::test(start_paused = true)]
async fn after_an_hour_the_old_minutes_read_empty_and_a_reused_slot_starts_from_zero() {
    let m = Metrics::spawn();
    m.call("a", "tools/call", ms(3), true);
    m.call("a", "tools/call", ms(3), false);
    settle(&m).await;
    advance(MINUTE * 59).await;
    let h = m.history("a").await.unwrap();
    assert_eq!(
        h.minutes[0].calls, 2,
        "59 minutes on, still the oldest minute"
    );

    settle(&m).await;

    advance(MINUTE).await;
    let h = m.history("a").await.unwrap();
    assert_eq!(h, History::default(), "an hour on, gone");
    assert_eq!(h.total(), Minute::default());

    // Minute 60 uses minute 0's slot: it must not count minute 0's calls.
    m.call("a", "tools/call", ms(3), false);
    let h = m.history("a").await.unwrap();
    assert_eq!(h.minutes[MINUTES - 1].calls, 1);
    assert_eq!(h.minutes[MINUTES - 1].errors, 0);
    assert_eq!(h.total().calls, 1);

    settle(&m).await;

    advance(MINUTE * 61 + Duration::from_secs(7)).await;
    let h = m.history("a").await.unwrap();
    assert_eq!(h.minutes.len(), MINUTES);
    assert_eq!(h.total(), Minute::default());
}

#[tokio::test(start_paused = true)]
async fn errors_are_counted_per_minute_and_for_the_hour() {
    let m = Metrics::spawn();
    m.call("a", "tools/call", ms(3), true);
    m.call("a", "tools/call", ms(3), false);
    settle(&m).await;
    advance(MINUTE * 2).await;
    m.call("a", "tools/call", ms(3), true);
    m.call("b", "tools/call", ms(3), true);
    let h = m.history("a").await.unwrap();
    assert_eq!(
        (h.minutes[MINUTES - 3].calls, h.minutes[MINUTES - 3].errors),
        (2, 1)
    );
    assert_eq!(
        (h.minutes[MINUTES - 1].calls, h.minutes[MINUTES - 1].errors),
        (1, 1)
    );
    let total = h.total();
    assert_eq!((total.calls, total.errors), (3, 2));
    assert_eq!(m.history("b").await.unwrap().total().errors, 1);
}

#[tokio::test(start_paused = true)]
async fn quantiles_interpolate_inside_the_bucket_they_fall_in() {
    let m = Metrics::spawn();
    // One call of 3 ms, in the bucket (2.5 ms, 5 ms]: halfway and 95% of the way up.
    m.call("one", "tools/call", ms(3), false);
    let one = m.history("one").await.unwrap().total();
    assert!(near(one.p50, Duration::from_micros(3750)), "{one:?}");
    assert!(near(one.p95, Duration::from_micros(4875)), "{one:?}");

    // Half the calls at or under 0.5 ms (the first bucket starts at 0), half in
    // (100 ms, 250 ms], in different minutes: the hour's quantiles come from both.
    for _ in 0..50 {
        m.call("two", "tools/call", Duration::from_micros(300), false);
    }
    settle(&m).await;
    advance(MINUTE).await;
    for _ in 0..50 {
        m.call("two", "tools/call", ms(200), false);
    }
    let h = m.history("two").await.unwrap();
    let fast = h.minutes[MINUTES - 2];
    assert!(near(fast.p50, Duration::from_micros(250)), "{fast:?}");
    assert!(near(fast.p95, Duration::from_micros(475)), "{fast:?}");
    let total = h.total();
    assert!(near(total.p50, Duration::from_micros(500)), "{total:?}");
    assert!(near(total.p95, ms(235)), "{total:?}");

    // Slower than the last bound (120 s): that bound is all that can be said.
    m.call("slow", "tools/call", Duration::from_secs(600), false);
    let slow = m.history("slow").await.unwrap().total();
    assert_eq!(slow.p50, Some(Duration::from_secs(120)));
    assert_eq!(slow.p95, Some(Duration::from_secs(120)));

    let quiet = m.history("two").await.unwrap().minutes[0];
    assert_eq!((quiet.p50, quiet.p95), (None, None));
}

#[tokio::test(start_paused = true)]
async fn only_the_first_256_servers_get_a_history() {
    let m = Metrics::spawn();
    for i in 0..300 {
        m.call(&format!("s{i}"), "tools/call", ms(1), false);
    }
    m.call("s0", "tools/call", ms(1), false);
    m.call("s300", "tools/call", ms(1), false);
    assert_eq!(m.history("s0").await.unwrap().total().calls, 2);
    assert_eq!(m.history("s255").await.unwrap().total().calls, 1);
    assert_eq!(m.history("s256").await, None);
    assert_eq!(m.history("s300").await, None);
    // `ctl metrics` is not capped.
    assert!(m.render().await.contains("server=\"s299\""));
}

#[tokio::test(start_paused = true)]
async fn no_history_for_a_server_never_called_or_when_the_counters_are_gone() {
    let m = Metrics::spawn();
    m.call("a", "tools/call", ms(1), false);
    assert_eq!(m.history("b").await, None);
    let (tx, rx) = mpsc::channel(1);
    drop(rx);
    assert_eq!(Metrics { tx }.history("a").await, None);
}

/// `mcpd ctl metrics` for the calls in the first test, as it was printed before the
/// history was added.
const GOLDEN: &str = r#"# HELP mcpd_calls_total Requests agents sent to servers.
# TYPE mcpd_calls_total counter
mcpd_calls_total{server="a",method="tools/list"} 1
mcpd_calls_total{server="b",method="tools/call"} 2
# HELP mcpd_call_errors_total Requests that ended in an error (the server's or mcpd's).
# TYPE mcpd_call_errors_total counter
mcpd_call_errors_total{server="a",method="tools/list"} 0
mcpd_call_errors_total{server="b",method="tools/call"} 1
# HELP mcpd_call_duration_seconds Time from an agent's request to its answer.
# TYPE mcpd_call_duration_seconds histogram
mcpd_call_duration_seconds_bucket{server="a",method="tools/list",le="0.0005"} 0
mcpd_call_duration_seconds_bucket{server="a",method="tools/list",le="0.001"} 0
mcpd_call_duration_seconds_bucket{server="a",method="tools/list",le="0.0025"} 0
mcpd_call_duration_seconds_bucket{server="a",method="tools/list",le="0.005"} 0
mcpd_call_duration_seconds_bucket{server="a",method="tools/list",le="0.01"} 0
mcpd_call_duration_seconds_bucket{server="a",method="tools/list",le="0.025"} 0
mcpd_call_duration_seconds_bucket{server="a",method="tools/list",le="0.05"} 0
mcpd_call_duration_seconds_bucket{server="a",method="tools/list",le="0.1"} 0
mcpd_call_duration_seconds_bucket{server="a",method="tools/list",le="0.25"} 0
mcpd_call_duration_seconds_bucket{server="a",method="tools/list",le="0.5"} 0
mcpd_call_duration_seconds_bucket{server="a",method="tools/list",le="1"} 0
mcpd_call_duration_seconds_bucket{server="a",method="tools/list",le="5"} 0
mcpd_call_duration_seconds_bucket{server="a",method="tools/list",le="30"} 0
mcpd_call_duration_seconds_bucket{server="a",method="tools/list",le="120"} 0
mcpd_call_duration_seconds_bucket{server="a",method="tools/list",le="+Inf"} 1
mcpd_call_duration_seconds_sum{server="a",method="tools/list"} 200
mcpd_call_duration_seconds_count{server="a",method="tools/list"} 1
mcpd_call_duration_seconds_bucket{server="b",method="tools/call",le="0.0005"} 0
mcpd_call_duration_seconds_bucket{server="b",method="tools/call",le="0.001"} 0
mcpd_call_duration_seconds_bucket{server="b",method="tools/call",le="0.0025"} 0
mcpd_call_duration_seconds_bucket{server="b",method="tools/call",le="0.005"} 1
mcpd_call_duration_seconds_bucket{server="b",method="tools/call",le="0.01"} 1
mcpd_call_duration_seconds_bucket{server="b",method="tools/call",le="0.025"} 1
mcpd_call_duration_seconds_bucket{server="b",method="tools/call",le="0.05"} 1
mcpd_call_duration_seconds_bucket{server="b",method="tools/call",le="0.1"} 1
mcpd_call_duration_seconds_bucket{server="b",method="tools/call",le="0.25"} 2
mcpd_call_duration_seconds_bucket{server="b",method="tools/call",le="0.5"} 2
mcpd_call_duration_seconds_bucket{server="b",method="tools/call",le="1"} 2
mcpd_call_duration_seconds_bucket{server="b",method="tools/call",le="5"} 2
mcpd_call_duration_seconds_bucket{server="b",method="tools/call",le="30"} 2
mcpd_call_duration_seconds_bucket{server="b",method="tools/call",le="120"} 2
mcpd_call_duration_seconds_bucket{server="b",method="tools/call",le="+Inf"} 2
mcpd_call_duration_seconds_sum{server="b",method="tools/call"} 0.203
mcpd_call_duration_seconds_count{server="b",method="tools/call"} 2
# HELP mcpd_agent_bytes_received_total Bytes read from agents.
# TYPE mcpd_agent_bytes_received_total counter
mcpd_agent_bytes_received_total 10
# HELP mcpd_agent_bytes_sent_total Bytes written to agents.
# TYPE mcpd_agent_bytes_sent_total counter
mcpd_agent_bytes_sent_total 20
"#;
