//! A server's last hour as an SVG chart drawn on the server.
//!
//! Calls per minute with their errors, and p50 and p95 latency. Only numbers this file
//! formats go into it (no names, no text from a server), and only presentation
//! attributes: the page's CSP allows no inline style, and there is no script.

use crate::metrics::{History, MINUTES, Minute};
use std::fmt::Write as _;
use std::time::Duration;

const WIDTH: u32 = 640;
const HEIGHT: u32 = 260;
/// Where the plots start; the y-axis labels sit to the left of it.
const LEFT: u32 = 40;
/// Horizontal pixels per minute: 60 minutes fill the width after `LEFT`.
const STEP: u32 = (WIDTH - LEFT) / MINUTES as u32;
/// Each panel's height; panel tops below.
const PANEL: f64 = 88.0;
const CALLS_TOP: f64 = 22.0;
const LATENCY_TOP: f64 = 138.0;

const TEXT: &str = "#555";
const AXIS: &str = "#ccc";
const OK: &str = "#4a7ebb";
const ERROR: &str = "#d62728";
const P50: &str = "#1f77b4";
const P95: &str = "#ff7f0e";

/// The chart of `history` as a standalone SVG document (served as `image/svg+xml`).
pub(crate) fn latency_svg(history: &History) -> String {
    let summary = latency_summary(history);
    let mut svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{WIDTH}\" height=\"{HEIGHT}\" \
         viewBox=\"0 0 {WIDTH} {HEIGHT}\" role=\"img\" aria-label=\"{summary}\" \
         font-family=\"sans-serif\" font-size=\"10\" fill=\"{TEXT}\">\n<title>{summary}</title>\n"
    );
    // Writing to a String cannot fail, here and below.
    if history.total().calls == 0 {
        let _ = writeln!(
            svg,
            "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" font-size=\"14\">no calls in the last hour</text>",
            WIDTH / 2,
            HEIGHT / 2
        );
    } else {
        calls_panel(&mut svg, &history.minutes);
        latency_panel(&mut svg, &history.minutes);
        time_axis(&mut svg);
    }
    svg.push_str("</svg>\n");
    svg
}

/// One sentence for the whole hour: the chart's title, and fit for an `<img>`'s `alt`.
pub(crate) fn latency_summary(history: &History) -> String {
    let total = history.total();
    if total.calls == 0 {
        return "no calls in the last hour".to_owned();
    }
    let mut s = format!(
        "{}, {}",
        count(total.calls, "call", "calls"),
        count(total.errors, "error", "errors")
    );
    if let (Some(p50), Some(p95)) = (total.p50, total.p95) {
        let _ = write!(s, ", p50 {} ms, p95 {} ms", ms(p50), ms(p95));
    }
    s.push_str(" in the last hour");
    s
}

fn count(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// `d` in milliseconds, with a precision that suits its size.
fn ms(d: Duration) -> String {
    ms_text(d.as_secs_f64() * 1000.0)
}

fn ms_text(ms: f64) -> String {
    if ms < 10.0 {
        format!("{ms:.1}")
    } else {
        format!("{ms:.0}")
    }
}

/// The left edge of minute `i`'s column.
fn column(i: usize) -> u32 {
    LEFT + STEP * i as u32
}

/// The y of `value` in a panel whose top is `top` and whose top value is `max` (> 0).
fn y(top: f64, value: f64, max: f64) -> f64 {
    top + PANEL - PANEL * (value / max).clamp(0.0, 1.0)
}

/// A panel's title, its axis line and its top and bottom labels.
fn frame(svg: &mut String, top: f64, title: &str, max_label: &str) {
    let bottom = top + PANEL;
    let _ = writeln!(
        svg,
        "<text x=\"{LEFT}\" y=\"{:.1}\">{title}</text>\n\
         <line x1=\"{LEFT}\" y1=\"{bottom:.1}\" x2=\"{WIDTH}\" y2=\"{bottom:.1}\" stroke=\"{AXIS}\"/>\n\
         <line x1=\"{LEFT}\" y1=\"{top:.1}\" x2=\"{WIDTH}\" y2=\"{top:.1}\" stroke=\"{AXIS}\" stroke-dasharray=\"2 3\"/>\n\
         <text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{max_label}</text>\n\
         <text x=\"{}\" y=\"{bottom:.1}\" text-anchor=\"end\">0</text>",
        top - 8.0,
        LEFT - 4,
        top + 8.0,
        LEFT - 4,
    );
}

/// Bars of calls per minute, the errors stacked on top in red.
fn calls_panel(svg: &mut String, minutes: &[Minute]) {
    let max = minutes.iter().map(|m| m.calls).max().unwrap_or(0).max(1);
    frame(svg, CALLS_TOP, "calls per minute", &max.to_string());
    let _ = writeln!(
        svg,
        "<text x=\"{WIDTH}\" y=\"{:.1}\" text-anchor=\"end\" fill=\"{ERROR}\">errors</text>",
        CALLS_TOP - 8.0
    );
    let max = max as f64;
    for (i, m) in minutes.iter().enumerate() {
        let errors = m.errors.min(m.calls);
        let ok_top = y(CALLS_TOP, (m.calls - errors) as f64, max);
        let all_top = y(CALLS_TOP, m.calls as f64, max);
        let x = column(i) + 1;
        let w = STEP - 2;
        if m.calls > errors {
            let h = CALLS_TOP + PANEL - ok_top;
            let _ = writeln!(
                svg,
                "<rect x=\"{x}\" y=\"{ok_top:.1}\" width=\"{w}\" height=\"{h:.1}\" fill=\"{OK}\"/>"
            );
        }
        if errors > 0 {
            let h = ok_top - all_top;
            let _ = writeln!(
                svg,
                "<rect x=\"{x}\" y=\"{all_top:.1}\" width=\"{w}\" height=\"{h:.1}\" fill=\"{ERROR}\"/>"
            );
        }
    }
}

/// The p50 and p95 lines in milliseconds, broken where a minute had no calls, with a
/// dot on every minute that had (so a lone minute shows too).
fn latency_panel(svg: &mut String, minutes: &[Minute]) {
    let max_ms = minutes
        .iter()
        .flat_map(|m| [m.p50, m.p95])
        .flatten()
        .map(|d| d.as_secs_f64() * 1000.0)
        .fold(0.0, f64::max);
    // A quantile is above 0 whenever there were calls; the floor only keeps the
    // division finite.
    let max_ms = max_ms.max(0.001);
    frame(svg, LATENCY_TOP, "latency, ms", &ms_text(max_ms));
    let _ = writeln!(
        svg,
        "<text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\" fill=\"{P50}\">p50</text>\n\
         <text x=\"{WIDTH}\" y=\"{:.1}\" text-anchor=\"end\" fill=\"{P95}\">p95</text>",
        WIDTH - 28,
        LATENCY_TOP - 8.0,
        LATENCY_TOP - 8.0,
    );
    for (pick, colour) in [
        ((|m: &Minute| m.p50) as fn(&Minute) -> Option<Duration>, P50),
        (|m: &Minute| m.p95, P95),
    ] {
        let points: Vec<Option<(f64, f64)>> = minutes
            .iter()
            .enumerate()
            .map(|(i, m)| {
                let v = pick(m)?.as_secs_f64() * 1000.0;
                let x = f64::from(column(i)) + f64::from(STEP) / 2.0;
                Some((x, y(LATENCY_TOP, v, max_ms)))
            })
            .collect();
        for run in points.split(Option::is_none).filter(|r| r.len() > 1) {
            let line: Vec<String> = run
                .iter()
                .flatten()
                .map(|(x, y)| format!("{x:.1},{y:.1}"))
                .collect();
            let _ = writeln!(
                svg,
                "<polyline points=\"{}\" fill=\"none\" stroke=\"{colour}\" stroke-width=\"1.5\"/>",
                line.join(" ")
            );
        }
        for (x, y) in points.iter().flatten() {
            let _ = writeln!(
                svg,
                "<circle cx=\"{x:.1}\" cy=\"{y:.1}\" r=\"1.5\" fill=\"{colour}\"/>"
            );
        }
    }
}

/// The shared time axis under both panels.
fn time_axis(svg: &mut String) {
    let base = LATENCY_TOP + PANEL + 16.0;
    let _ = writeln!(
        svg,
        "<text x=\"{LEFT}\" y=\"{base:.1}\">{MINUTES} min ago</text>\n\
         <text x=\"{}\" y=\"{base:.1}\" text-anchor=\"middle\">{} min ago</text>\n\
         <text x=\"{WIDTH}\" y=\"{base:.1}\" text-anchor=\"end\">now</text>",
        column(MINUTES / 2),
        MINUTES / 2,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// What no chart may contain: the CSP forbids inline style, and the image must not
    /// script or fetch anything.
    fn assert_inert(svg: &str) {
        for bad in ["style", "<script", "href", "NaN", "inf", "javascript:"] {
            assert!(!svg.contains(bad), "{bad} in {svg}");
        }
        assert!(svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
        assert!(svg.contains("role=\"img\""));
        // Every number in an attribute is a finite number.
        for attr in svg.split('"').skip(1).step_by(2) {
            for n in attr.split([' ', ',']) {
                if n.starts_with(|c: char| c.is_ascii_digit() || c == '-') {
                    assert!(n.parse::<f64>().is_ok_and(f64::is_finite), "{n} in {svg}");
                }
            }
        }
    }

    #[test]
    fn an_empty_hour_says_so() {
        let svg = latency_svg(&History::default());
        assert_inert(&svg);
        assert!(
            svg.contains("<title>no calls in the last hour</title>"),
            "{svg}"
        );
        assert!(svg.contains(">no calls in the last hour</text>"), "{svg}");
        assert!(
            !svg.contains("<rect") && !svg.contains("<polyline"),
            "{svg}"
        );
    }

    #[test]
    fn each_minute_with_calls_is_a_bar_and_a_point_on_each_line() {
        // Minutes 10, 11, 12 have calls (one run), 30 alone, 59 (now) with errors only.
        let mut calls = Vec::new();
        for minute in [10, 11, 12, 30] {
            calls.extend([(minute, ms(3), false), (minute, ms(80), false)]);
        }
        calls.extend([(11, ms(40), true), (59, ms(7), true)]);
        let h = History::of_calls(&calls);
        let svg = latency_svg(&h);
        assert_inert(&svg);
        assert_eq!(svg.matches(&format!("fill=\"{OK}\"/>")).count(), 4, "{svg}");
        assert_eq!(
            svg.matches(&format!("fill=\"{ERROR}\"/>")).count(),
            2,
            "{svg}"
        );
        assert_eq!(svg.matches(&format!("r=\"1.5\" fill=\"{P50}\"")).count(), 5);
        assert_eq!(svg.matches(&format!("r=\"1.5\" fill=\"{P95}\"")).count(), 5);
        // One line per colour over minutes 10 to 12; minutes 30 and 59 stand alone.
        assert_eq!(svg.matches("<polyline").count(), 2, "{svg}");
        let line = svg.split("<polyline points=\"").nth(1).unwrap();
        assert_eq!(line.split('"').next().unwrap().split(' ').count(), 3);
        assert!(
            svg.contains(">3</text>"),
            "the busiest minute had 3 calls: {svg}"
        );
        let total = h.total();
        assert_eq!((total.calls, total.errors), (10, 2));
        assert!(svg.contains("<title>10 calls, 2 errors, p50 "), "{svg}");
        assert!(svg.contains(" ms in the last hour</title>"), "{svg}");
        assert!(
            svg.contains("60 min ago") && svg.contains(">now</text>"),
            "{svg}"
        );
    }

    #[test]
    fn one_slow_call_still_draws_finite_numbers() {
        let h = History::of_calls(&[(59, Duration::from_secs(3600), true)]);
        let svg = latency_svg(&h);
        assert_inert(&svg);
        assert!(
            svg.contains(">120000</text>"),
            "the last bound, in ms: {svg}"
        );
        assert_eq!(
            latency_summary(&h),
            "1 call, 1 error, p50 120000 ms, p95 120000 ms in the last hour"
        );
    }

    #[test]
    fn the_summary_rounds_milliseconds_to_their_size() {
        // Three calls up to 0.5 ms and one in (1 ms, 2.5 ms]: p50 is two thirds of the
        // way up the first bucket, p95 80% of the way up the third.
        let fast = Duration::from_micros(300);
        let h = History::of_calls(&[
            (0, fast, false),
            (0, fast, false),
            (1, fast, false),
            (1, ms(2), false),
        ]);
        assert_eq!(
            latency_summary(&h),
            "4 calls, 0 errors, p50 0.3 ms, p95 2.2 ms in the last hour"
        );
    }
}
