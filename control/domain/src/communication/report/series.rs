//! The series the report plots, read from its JSON input: live calls per second, the
//! setup time of each call and the latency of each turn over the run, at most
//! [`MAX_POINTS`] points each.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::communication::history::CallHistory;

/// Most points a plot draws.
pub(super) const MAX_POINTS: f64 = 1000.0;

/// One turn of a call for the turn plots: when the reply's first RTP packet left (the end
/// of the turn when none was measured), the turn latency (the engine's share) and the
/// caller's wait (`TurnLog::caller_wait_ms`), when measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TurnPoint {
    pub at: DateTime<Utc>,
    pub latency_ms: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub caller_wait_ms: Option<i64>,
}

/// Every turn with a measured latency in `histories`.
pub fn turn_points<'a>(histories: impl IntoIterator<Item = &'a CallHistory>) -> Vec<TurnPoint> {
    histories
        .into_iter()
        .flat_map(|h| {
            h.turns.iter().filter_map(move |t| {
                let us = t.turn_latency_us?;
                let ms = t.reply_first_rtp_ms.unwrap_or(t.ended_ms);
                Some(TurnPoint {
                    at: h.answered_at + chrono::Duration::milliseconds(ms as i64),
                    latency_ms: (us / 1000) as i64,
                    caller_wait_ms: t.caller_wait_ms().map(|ms| ms as i64),
                })
            })
        })
        .collect()
}

fn time(v: &Value) -> Option<DateTime<Utc>> {
    v.as_str().and_then(|s| s.parse::<DateTime<Utc>>().ok())
}

/// The start of the run, when the report has one.
fn start(report: &Value) -> Option<DateTime<Utc>> {
    time(&report["started_at"])
}

fn seconds(t0: DateTime<Utc>, t: DateTime<Utc>) -> f64 {
    (t - t0).num_milliseconds() as f64 / 1000.0
}

fn communications(report: &Value) -> impl Iterator<Item = &Value> {
    report["communications"].as_array().into_iter().flatten()
}

/// `points` sorted by time; beyond [`MAX_POINTS`], every k-th (the plot's shape, not each
/// point).
fn sampled(mut points: Vec<(f64, f64)>) -> Vec<(f64, f64)> {
    points.sort_by(|a, b| a.0.total_cmp(&b.0));
    let k = (points.len() as f64 / MAX_POINTS).ceil().max(1.0) as usize;
    points.into_iter().step_by(k).collect()
}

/// Calls live per second from the start of the run (a call is live from `started_at` to
/// `ended_at`).
pub(super) fn concurrency(report: &Value) -> Vec<(f64, f64)> {
    let Some(t0) = start(report) else {
        return Vec::new();
    };
    let (mut starts, mut ends): (Vec<f64>, Vec<f64>) = communications(report)
        .filter_map(|c| {
            Some((
                seconds(t0, time(&c["started_at"])?),
                seconds(t0, time(&c["ended_at"])?),
            ))
        })
        .unzip();
    starts.sort_by(f64::total_cmp);
    ends.sort_by(f64::total_cmp);
    let end = ends.last().copied().unwrap_or(0.0).max(0.0).ceil();
    // Every second, or MAX_POINTS samples over a longer span.
    let step = (end / MAX_POINTS).ceil().max(1.0);
    let samples = (end / step).ceil() as usize;
    (0..=samples)
        .map(|k| {
            let t = k as f64 * step;
            // Live at t: started at or before t, not ended at or before t.
            let started = starts.partition_point(|s| *s <= t);
            let ended = ends.partition_point(|e| *e <= t);
            (t, started.saturating_sub(ended) as f64)
        })
        .collect()
}

/// (seconds from the start, setup time in ms) of each answered call.
pub(super) fn setup_times(report: &Value) -> Vec<(f64, f64)> {
    let Some(t0) = start(report) else {
        return Vec::new();
    };
    sampled(
        communications(report)
            .filter_map(|c| {
                let started = time(&c["started_at"])?;
                let answered = time(&c["answered_at"])?;
                Some((
                    seconds(t0, started),
                    (answered - started).num_milliseconds() as f64,
                ))
            })
            .collect(),
    )
}

/// (seconds from the start, turn latency in ms) of each turn in the report's `turns`.
pub(super) fn turn_latencies(report: &Value) -> Vec<(f64, f64)> {
    turn_series(report, "latency_ms")
}

/// (seconds from the start, caller's wait in ms) of each turn in the report's `turns` that
/// has one.
pub(super) fn caller_waits(report: &Value) -> Vec<(f64, f64)> {
    turn_series(report, "caller_wait_ms")
}

fn turn_series(report: &Value, field: &str) -> Vec<(f64, f64)> {
    let Some(t0) = start(report) else {
        return Vec::new();
    };
    sampled(
        report["turns"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|t| Some((seconds(t0, time(&t["at"])?).max(0.0), t[field].as_f64()?)))
            .collect(),
    )
}

/// (seconds from the start, calls started in that second) over the run, from the report's
/// `calls_started_per_second` (a count per second from `started_at`).
pub(super) fn started_per_second(report: &Value) -> Vec<(f64, f64)> {
    let counts: Vec<f64> = report["calls_started_per_second"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_f64)
        .collect();
    let k = (counts.len() as f64 / MAX_POINTS).ceil().max(1.0) as usize;
    // Beyond MAX_POINTS seconds, the mean of each k seconds.
    counts
        .chunks(k)
        .enumerate()
        .map(|(i, c)| ((i * k) as f64, c.iter().sum::<f64>() / c.len() as f64))
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn concurrency_counts_calls_live_each_second() {
        let report = json!({
            "started_at": "2030-01-01T00:00:00Z",
            "communications": [
                {"started_at": "2030-01-01T00:00:00Z", "ended_at": "2030-01-01T00:00:02.500Z"},
                {"started_at": "2030-01-01T00:00:01Z", "ended_at": "2030-01-01T00:00:02Z"},
                {"started_at": null, "ended_at": null},
            ]
        });
        let c = concurrency(&report);
        assert_eq!(c, vec![(0.0, 1.0), (1.0, 2.0), (2.0, 1.0), (3.0, 0.0)]);
        // A span of years is sampled, not walked second by second.
        let years = json!({
            "started_at": "2026-01-01T00:00:00Z",
            "communications": [
                {"started_at": "2026-01-01T00:00:00Z", "ended_at": "2030-01-01T00:00:00Z"},
                {"started_at": "2029-06-01T00:00:00Z", "ended_at": "2029-06-01T00:01:00Z"},
            ]
        });
        let c = concurrency(&years);
        assert!(c.len() <= 1001, "{} points", c.len());
        assert_eq!(c[0], (0.0, 1.0));
        assert_eq!(c.last().map(|p| p.1), Some(0.0));
    }

    #[test]
    fn setup_and_turn_latency_over_time() {
        let report = json!({
            "started_at": "2030-01-01T00:00:00Z",
            "communications": [
                {"started_at": "2030-01-01T00:00:02Z", "answered_at": "2030-01-01T00:00:02.300Z"},
                {"started_at": "2030-01-01T00:00:00Z", "answered_at": "2030-01-01T00:00:00.100Z"},
                {"started_at": "2030-01-01T00:00:01Z", "answered_at": null},
            ],
            "turns": [
                {"at": "2030-01-01T00:00:05Z", "latency_ms": 420},
                {"at": "2030-01-01T00:00:03Z", "latency_ms": 610},
                {"at": "bad", "latency_ms": 1},
            ]
        });
        assert_eq!(setup_times(&report), vec![(0.0, 100.0), (2.0, 300.0)]);
        assert_eq!(turn_latencies(&report), vec![(3.0, 610.0), (5.0, 420.0)]);
        assert!(caller_waits(&report).is_empty());
        let waits = json!({
            "started_at": "2030-01-01T00:00:00Z",
            "turns": [
                {"at": "2030-01-01T00:00:02Z", "latency_ms": 6, "caller_wait_ms": 480},
                {"at": "2030-01-01T00:00:04Z", "latency_ms": 7},
            ]
        });
        assert_eq!(caller_waits(&waits), vec![(2.0, 480.0)]);
        let cps = json!({"calls_started_per_second": [4, 4, 0, 1]});
        assert_eq!(
            started_per_second(&cps),
            vec![(0.0, 4.0), (1.0, 4.0), (2.0, 0.0), (3.0, 1.0)]
        );
        let long = json!({"calls_started_per_second": vec![2; 3000]});
        let s = started_per_second(&long);
        assert_eq!(s.len(), 1000);
        assert_eq!(s[1], (3.0, 2.0));
        let many: Vec<Value> = (0..5000)
            .map(|i| json!({"at": "2030-01-01T00:00:01Z", "latency_ms": i}))
            .collect();
        let report = json!({"started_at": "2030-01-01T00:00:00Z", "turns": many});
        assert!(turn_latencies(&report).len() <= 1000);
    }
}
