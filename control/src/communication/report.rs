//! A report of a set of calls as one HTML page with no outside resources: the statistics
//! (`statistics::CallStatistics`), a plot of live calls against the cpl and one of setup
//! time over the run. `callsmith load` writes it, and `GET /v1/communication/-/report.html`
//! serves it for any set of an account's communications.
//!
//! Its input is JSON: `statistics`, `communications` (the API's Communication objects),
//! `started_at`, `finished_at`, and optionally `title`, `target`, `scenario`, `calls`,
//! `cps` and `cpl`.

use serde::Serialize;
use serde_json::{Value, json};

use crate::{communication::Communication, store::CommunicationRecord};

/// The page of a set of stored communications (oldest first) and their statistics: the run
/// starts at the first call's INVITE (or the first creation when none was dialled) and
/// ends at the last hang-up.
pub fn page<'a>(
    title: &str,
    calls: impl Iterator<Item = &'a CommunicationRecord> + Clone,
    statistics: &impl Serialize,
) -> String {
    let started = calls
        .clone()
        .filter_map(|c| c.started_at)
        .min()
        .or_else(|| calls.clone().map(|c| c.created_at).min());
    let finished = calls.clone().filter_map(|c| c.ended_at).max();
    html(&json!({
        "title": title,
        "started_at": started,
        "finished_at": finished,
        "statistics": statistics,
        "communications": calls.map(Communication::from).collect::<Vec<_>>(),
    }))
}

/// Calls live per second from the start of the run (a call is live from `started_at` to
/// `ended_at`).
fn concurrency(report: &Value) -> Vec<(f64, f64)> {
    let Some(t0) = report["started_at"]
        .as_str()
        .and_then(|s| s.parse::<chrono::DateTime<chrono::Utc>>().ok())
    else {
        return Vec::new();
    };
    let at = |v: &Value| {
        v.as_str()
            .and_then(|s| s.parse::<chrono::DateTime<chrono::Utc>>().ok())
            .map(|t| (t - t0).num_milliseconds() as f64 / 1000.0)
    };
    let (mut starts, mut ends): (Vec<f64>, Vec<f64>) = report["communications"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| Some((at(&c["started_at"])?, at(&c["ended_at"])?)))
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

/// Most points a plot draws.
const MAX_POINTS: f64 = 1000.0;

/// (seconds from the start, setup time in ms) of each answered call.
fn setup_times(report: &Value) -> Vec<(f64, f64)> {
    let Some(t0) = report["started_at"]
        .as_str()
        .and_then(|s| s.parse::<chrono::DateTime<chrono::Utc>>().ok())
    else {
        return Vec::new();
    };
    let time = |v: &Value| {
        v.as_str()
            .and_then(|s| s.parse::<chrono::DateTime<chrono::Utc>>().ok())
    };
    let mut points: Vec<(f64, f64)> = report["communications"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| {
            let started = time(&c["started_at"])?;
            let answered = time(&c["answered_at"])?;
            Some((
                (started - t0).num_milliseconds() as f64 / 1000.0,
                (answered - started).num_milliseconds() as f64,
            ))
        })
        .collect();
    points.sort_by(|a, b| a.0.total_cmp(&b.0));
    // Beyond MAX_POINTS calls, every k-th call (the plot's shape, not each call).
    let k = (points.len() as f64 / MAX_POINTS).ceil().max(1.0) as usize;
    points.into_iter().step_by(k).collect()
}

/// An SVG polyline plot of `points`, with a dashed line at `limit` when it is above 0.
fn svg(points: &[(f64, f64)], limit: f64, x_label: &str, y_label: &str) -> String {
    let (w, h, pad) = (640.0, 240.0, 40.0);
    let max_x = points.iter().map(|p| p.0).fold(1.0, f64::max);
    let max_y = points.iter().map(|p| p.1).fold(limit, f64::max).max(1.0);
    let x = |v: f64| pad + v / max_x * (w - 2.0 * pad);
    let y = |v: f64| h - pad - v / max_y * (h - 2.0 * pad);
    let line: Vec<String> = points
        .iter()
        .map(|p| format!("{:.1},{:.1}", x(p.0), y(p.1)))
        .collect();
    let (limit_line, limit_label) = if limit > 0.0 {
        (
            format!(
                r##"<line x1="{pad}" y1="{ly:.1}" x2="{r}" y2="{ly:.1}" stroke="#c33" stroke-dasharray="4 3"/>"##,
                ly = y(limit),
                r = w - pad
            ),
            format!("; dashed: {limit:.0}"),
        )
    } else {
        (String::new(), String::new())
    };
    format!(
        r##"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" role="img">
<rect width="{w}" height="{h}" fill="#fff"/>
<line x1="{pad}" y1="{b}" x2="{r}" y2="{b}" stroke="#888"/><line x1="{pad}" y1="{pad}" x2="{pad}" y2="{b}" stroke="#888"/>
{limit_line}
<polyline fill="none" stroke="#26c" stroke-width="2" points="{pts}"/>
<text x="{r}" y="{tb}" text-anchor="end" font-size="11">{x_label} (0–{max_x:.0})</text>
<text x="4" y="14" font-size="11">{y_label} (max {max_y:.0}{limit_label})</text>
</svg>"##,
        b = h - pad,
        r = w - pad,
        tb = h - 10.0,
        pts = line.join(" ")
    )
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The report as one HTML page with no outside resources.
pub fn html(report: &Value) -> String {
    let s = &report["statistics"];
    let mut rows = String::new();
    let mut row = |k: &str, v: String| {
        rows.push_str(&format!(
            "<tr><th>{}</th><td>{}</td></tr>\n",
            esc(k),
            esc(&v)
        ));
    };
    for key in ["target", "scenario"] {
        if let Some(v) = report[key].as_str() {
            row(key, v.into());
        }
    }
    if report["calls"].is_number() {
        row(
            "calls / cps / cpl",
            format!(
                "{} / {} / {}",
                report["calls"], report["cps"], report["cpl"]
            ),
        );
    }
    row("communications", s["total"].to_string());
    row("dialled", s["dialled"].to_string());
    row("answered", s["answered"].to_string());
    row(
        "answer rate",
        format!("{:.1} %", s["answer_rate"].as_f64().unwrap_or(0.0) * 100.0),
    );
    for (k, unit) in [("setup_time_ms", "ms"), ("duration_seconds", "s")] {
        let p = &s[k];
        row(
            k,
            format!(
                "p50 {} {unit}, p95 {} {unit}, p99 {} {unit} ({} calls)",
                p["p50"], p["p95"], p["p99"], p["count"]
            ),
        );
    }
    row(
        "communication status",
        s["communication_status"].to_string(),
    );
    row("call status", s["call_status"].to_string());
    row("goals reached", s["goals"].to_string());
    let q = &s["quality"];
    if q["calls"].as_i64().unwrap_or(0) > 0 {
        row(
            "RTP loss",
            format!(
                "{:.3} % ({} of {} packets, {} calls)",
                q["loss_percent"].as_f64().unwrap_or(0.0),
                q["packets_lost"],
                q["packets_expected"],
                q["calls"]
            ),
        );
        row(
            "jitter",
            format!(
                "p50 {} ms, p95 {} ms",
                q["jitter_ms"]["p50"], q["jitter_ms"]["p95"]
            ),
        );
        row(
            "estimated MOS (E-model)",
            format!(
                "median {:.2}",
                q["mos_x100"]["p50"].as_f64().unwrap_or(0.0) / 100.0
            ),
        );
        let t = &q["turn_latency_ms"];
        if t["count"].as_i64().unwrap_or(0) > 0 {
            row(
                "turn latency",
                format!(
                    "p50 {} ms, p95 {} ms, p99 {} ms ({} turns)",
                    t["p50"], t["p95"], t["p99"], t["count"]
                ),
            );
        }
        if q["amd"].as_object().is_some_and(|m| !m.is_empty()) {
            row("answering-machine verdicts", q["amd"].to_string());
        }
    }
    if report["timed_out"].as_bool() == Some(true) {
        row(
            "note",
            "some calls were still open when the run stopped waiting".into(),
        );
    }
    let cpl = report["cpl"].as_f64().unwrap_or(0.0);
    let live = svg(&concurrency(report), cpl, "seconds", "live calls");
    let setup = svg(&setup_times(report), 0.0, "seconds", "setup time, ms");
    let title = report["title"].as_str().unwrap_or("callsmith load report");
    format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{t}</title>\n\
<style>body{{font-family:sans-serif;margin:2em}}th{{text-align:left;padding-right:1em}}td,th{{padding:2px 6px}}</style></head>\n\
<body><h1>{t}</h1>\n<p>{} → {}</p>\n<table>\n{rows}</table>\n<h2>Live calls{}</h2>\n{live}\n<h2>Setup time of each call, by when it started</h2>\n{setup}\n</body></html>\n",
        esc(report["started_at"].as_str().unwrap_or("")),
        esc(report["finished_at"].as_str().unwrap_or("")),
        if cpl > 0.0 { " (cpl dashed)" } else { "" },
        t = esc(title),
    )
}

#[cfg(test)]
mod tests {
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
        let page = html(&json!({"statistics": {}, "started_at": "x<y", "cpl": 3}));
        assert!(page.contains("x&lt;y") && page.contains("<svg"));
    }
}
