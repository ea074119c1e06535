//! The last hour of calls per server, a minute at a time, for the dashboard's chart.
//!
//! A ring of 60 one-minute slots per server (calls, errors, a latency histogram), turned
//! lazily when a call is recorded or the history is read, never by a timer.

use super::BUCKETS;
use std::collections::HashMap;
use std::time::Duration;
use tokio::time::Instant;

/// How many minutes a history holds: the last hour, the current minute included.
pub const MINUTES: usize = 60;

/// Latency bins per minute: one per bound in `BUCKETS` (calls above the previous bound
/// and at most this one), then one for calls slower than the last bound.
const BINS: usize = BUCKETS.len() + 1;

/// How many servers get a history. Server names come from the config, so this is only
/// reached by a config with hundreds of servers or many reloads that rename them; it
/// keeps the table's memory fixed (about 5 KiB a server) whatever happens.
const MAX_SERVERS: usize = 256;

/// One server's or one minute's history, reduced to what the dashboard shows.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Minute {
    pub calls: u64,
    pub errors: u64,
    /// Estimated from the latency histogram; None when there were no calls.
    pub p50: Option<Duration>,
    pub p95: Option<Duration>,
}

/// One server's last hour.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct History {
    /// Exactly `MINUTES` entries, oldest first; the last is the current minute.
    pub minutes: Vec<Minute>,
    /// Every minute's latency bins added together, so `total` estimates the hour's
    /// quantiles from all its calls rather than from the minutes' quantiles.
    hour: [u64; BINS],
}

impl History {
    /// The whole hour as one minute: its calls, its errors, and the quantiles of all its
    /// calls' latencies.
    pub fn total(&self) -> Minute {
        let calls = self.minutes.iter().map(|m| m.calls).sum();
        let errors = self.minutes.iter().map(|m| m.errors).sum();
        Minute::of(calls, errors, &self.hour)
    }
}

impl Default for History {
    /// An hour without calls (what a server nobody has called yet has).
    fn default() -> History {
        History {
            minutes: vec![Minute::default(); MINUTES],
            hour: [0; BINS],
        }
    }
}

impl Minute {
    fn of(calls: u64, errors: u64, bins: &[u64; BINS]) -> Minute {
        Minute {
            calls,
            errors,
            p50: quantile(bins, 0.5),
            p95: quantile(bins, 0.95),
        }
    }
}

/// The `q` quantile of the latencies counted in `bins`, interpolated linearly inside the
/// bin it falls in (the first bin starts at 0); a quantile among the calls slower than
/// the last bound is that bound, since nothing says how much slower they were.
fn quantile(bins: &[u64; BINS], q: f64) -> Option<Duration> {
    let n: u64 = bins.iter().sum();
    if n == 0 {
        return None;
    }
    let rank = q * n as f64;
    let (mut below, mut lower) = (0u64, 0.0);
    for (&count, upper) in bins.iter().zip(BUCKETS) {
        if count > 0 && (below + count) as f64 >= rank {
            let secs = lower + (upper - lower) * (rank - below as f64) / count as f64;
            return Duration::try_from_secs_f64(secs).ok();
        }
        below += count;
        lower = upper;
    }
    Duration::try_from_secs_f64(lower).ok()
}

/// Which bin a call that took `took` goes in: the first whose bound it does not exceed,
/// as the Prometheus buckets count it.
fn bin(took: Duration) -> usize {
    let secs = took.as_secs_f64();
    BUCKETS
        .iter()
        .position(|&bound| secs <= bound)
        .unwrap_or(BUCKETS.len())
}

/// One minute's counts. Counters are u32 (a server would need 70,000 calls a second to
/// fill one in a minute, and they saturate rather than wrap) to keep a ring small.
#[derive(Clone, Copy)]
struct Slot {
    /// The minute (since the recorder started) the counts belong to: a slot stamped
    /// with another minute is left over from an earlier hour and reads as empty.
    minute: u64,
    calls: u32,
    errors: u32,
    bins: [u32; BINS],
}

/// A slot no minute has used yet.
const UNUSED: Slot = Slot {
    minute: u64::MAX,
    calls: 0,
    errors: 0,
    bins: [0; BINS],
};

/// One server's last hour: minute `m` lives in slot `m % MINUTES`.
struct Ring {
    slots: [Slot; MINUTES],
}

impl Default for Ring {
    fn default() -> Ring {
        Ring {
            slots: [UNUSED; MINUTES],
        }
    }
}

impl Ring {
    fn record(&mut self, minute: u64, took: Duration, error: bool) {
        let Some(slot) = self.slots.get_mut(minute as usize % MINUTES) else {
            return; // unreachable: the index is below MINUTES
        };
        if slot.minute != minute {
            *slot = Slot { minute, ..UNUSED };
        }
        slot.calls = slot.calls.saturating_add(1);
        slot.errors = slot.errors.saturating_add(u32::from(error));
        if let Some(count) = slot.bins.get_mut(bin(took)) {
            *count = count.saturating_add(1);
        }
    }

    /// The hour that ends with minute `now`.
    fn history(&self, now: u64) -> History {
        let mut hour = [0u64; BINS];
        let mut minutes = Vec::with_capacity(MINUTES);
        for back in (0..MINUTES as u64).rev() {
            let slot = now.checked_sub(back).and_then(|m| {
                self.slots
                    .get(m as usize % MINUTES)
                    .filter(|s| s.minute == m)
            });
            let Some(slot) = slot else {
                minutes.push(Minute::default());
                continue;
            };
            let bins = slot.bins.map(u64::from);
            for (sum, count) in hour.iter_mut().zip(bins) {
                *sum += count;
            }
            minutes.push(Minute::of(slot.calls.into(), slot.errors.into(), &bins));
        }
        History { minutes, hour }
    }
}

/// Every server's ring, the minutes counted from when the recorder started.
pub(super) struct Histories {
    start: Instant,
    /// Boxed: a ring is a few KiB, and the map moves its values when it grows.
    rings: HashMap<String, Box<Ring>>,
    /// Whether a call has been left out for want of room, so that is logged once.
    refused: bool,
}

impl Histories {
    pub(super) fn new(start: Instant) -> Histories {
        Histories {
            start,
            rings: HashMap::new(),
            refused: false,
        }
    }

    fn minute(&self, now: Instant) -> u64 {
        now.saturating_duration_since(self.start).as_secs() / 60
    }

    /// Counts a call that ended at `now`; a server beyond the first `MAX_SERVERS` gets
    /// no history.
    pub(super) fn record(&mut self, server: &str, now: Instant, took: Duration, error: bool) {
        let minute = self.minute(now);
        if let Some(ring) = self.rings.get_mut(server) {
            ring.record(minute, took, error);
        } else if self.rings.len() < MAX_SERVERS {
            let mut ring = Box::<Ring>::default();
            ring.record(minute, took, error);
            self.rings.insert(server.to_owned(), ring);
        } else if !self.refused {
            self.refused = true;
            tracing::debug!(
                upstream = %server,
                limit = MAX_SERVERS,
                "more servers than the dashboard keeps a latency history for; calls to this one and to any other new name are left out of it"
            );
        }
    }

    /// The hour up to `now` of a server that has been called.
    pub(super) fn read(&self, server: &str, now: Instant) -> Option<History> {
        let ring = self.rings.get(server)?;
        Some(ring.history(self.minute(now)))
    }
}

#[cfg(test)]
impl History {
    /// The history of calls given as (minute, took, error), minute 0 being the oldest
    /// and `MINUTES - 1` the current one.
    pub(crate) fn of_calls(calls: &[(usize, Duration, bool)]) -> History {
        let mut ring = Ring::default();
        for &(minute, took, error) in calls {
            ring.record(minute as u64, took, error);
        }
        ring.history(MINUTES as u64 - 1)
    }
}
