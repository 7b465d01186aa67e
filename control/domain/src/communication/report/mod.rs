//! A report of a set of calls as one HTML page with no outside resources: the statistics
//! (`statistics::CallStatistics`, also embedded as JSON), live calls against the cpl, the
//! setup time of each call and the latency of each turn over the run, and the outcomes
//! (by communication status, call status, goal and answering-machine verdict) as bars.
//! `callsmith load` writes it, and `GET /v1/communication/-/report.html` and the legacy
//! attempt report serve it for any set of an account's communications.
//!
//! Its input is JSON: `statistics`, `communications` (the API's Communication objects),
//! `started_at`, `finished_at`, and optionally `title`, `target`, `scenario`, `calls`,
//! `cps`, `cpl` (the dashed line of the live-calls plot), `cpl_note` (why there is no
//! such line), `turns` (`[{at, latency_ms}]`, see [`TurnPoint`]) and `timed_out`.
//!
//! The page runs no script: its one `<style>` block is [`STYLE`], its plots are inline
//! SVG drawn with presentation attributes, and its figures sit in a
//! `<script type="application/json">` data block, which browsers never execute. Served
//! over HTTP (by the HTTP crate) it carries the Content-Security-Policy [`csp`], which
//! allows that style block by hash and nothing else.

mod cpl;
mod plot;
mod series;

use std::sync::OnceLock;

use base64::Engine;
use serde::Serialize;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

pub use cpl::CplLine;
use plot::esc;
pub use series::{TurnPoint, turn_points};

use crate::{communication::Communication, store::CommunicationRecord};

/// What the page draws besides the calls themselves.
#[derive(Debug, Clone)]
pub struct Plots {
    /// The dashed line of the live-calls plot, or why there is none.
    pub cpl: CplLine,
    /// The turns of the calls' saved histories (see [`turn_points`]).
    pub turns: Vec<TurnPoint>,
}

/// The page of a set of stored communications (oldest first) and their statistics: the run
/// starts at the first call's INVITE (or the first creation when none was dialled) and
/// ends at the last hang-up.
pub fn page<'a>(
    title: &str,
    calls: impl Iterator<Item = &'a CommunicationRecord> + Clone,
    statistics: &impl Serialize,
    plots: &Plots,
) -> String {
    let started = calls
        .clone()
        .filter_map(|c| c.started_at)
        .min()
        .or_else(|| calls.clone().map(|c| c.created_at).min());
    let finished = calls.clone().filter_map(|c| c.ended_at).max();
    let mut report = json!({
        "title": title,
        "started_at": started,
        "finished_at": finished,
        "statistics": statistics,
        "communications": calls.map(Communication::from).collect::<Vec<_>>(),
        "turns": plots.turns,
    });
    match &plots.cpl {
        CplLine::Agent { cpl, .. } => report["cpl"] = json!(cpl),
        CplLine::None(why) => report["cpl_note"] = json!(why),
    }
    html(&report)
}

/// `p` as "p50 … , p95 … , p99 … (n what)".
fn percentiles(p: &Value, unit: &str, what: &str) -> String {
    format!(
        "p50 {} {unit}, p95 {} {unit}, p99 {} {unit} ({} {what})",
        p["p50"], p["p95"], p["p99"], p["count"]
    )
}

/// The non-zero counts of an object of counts, largest first.
fn counts(v: &Value) -> Vec<(String, i64)> {
    let mut out: Vec<(String, i64)> = v
        .as_object()
        .into_iter()
        .flatten()
        .filter_map(|(k, n)| Some((k.clone(), n.as_i64().filter(|n| *n > 0)?)))
        .collect();
    out.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    out
}

/// The page's only style sheet (inline; [`csp`] allows it by its hash).
pub const STYLE: &str = "body{font-family:sans-serif;margin:2em}th{text-align:left;padding-right:1em}td,th{padding:2px 6px}";

/// The Content-Security-Policy of a served report page: nothing loads or runs but the
/// page's own [`STYLE`] block (by its SHA-256), and the page cannot be framed, post a
/// form or change its base URL.
pub fn csp() -> &'static str {
    static CSP: OnceLock<String> = OnceLock::new();
    CSP.get_or_init(|| {
        let hash =
            base64::engine::general_purpose::STANDARD.encode(Sha256::digest(STYLE.as_bytes()));
        format!(
            "default-src 'none'; style-src 'sha256-{hash}'; base-uri 'none'; \
             form-action 'none'; frame-ancestors 'none'"
        )
    })
}

/// The headers of a served report page, for its OpenAPI description.
pub const PAGE_HEADERS: &str = "The report page. Served with a `Content-Security-Policy` that runs no script and \
allows only the page's own style block (by hash), `X-Content-Type-Options: nosniff` and `Referrer-Policy: no-referrer`";

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
    row(
        "setup_time_ms",
        percentiles(&s["setup_time_ms"], "ms", "calls"),
    );
    row(
        "duration_seconds",
        percentiles(&s["duration_seconds"], "s", "calls"),
    );
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
        row("jitter", percentiles(&q["jitter_ms"], "ms", "calls"));
        let m = &q["mos_x100"];
        let mos = |k: &str| m[k].as_f64().unwrap_or(0.0) / 100.0;
        row(
            "estimated MOS (E-model)",
            format!(
                "p50 {:.2}, p95 {:.2}, p99 {:.2} ({} calls)",
                mos("p50"),
                mos("p95"),
                mos("p99"),
                m["count"]
            ),
        );
        row(
            "caller's wait (end of the caller's speech or key → first reply RTP)",
            percentiles(&q["caller_wait_ms"], "ms", "turns"),
        );
        row(
            "turn latency, the engine's share (answer known → first reply RTP)",
            percentiles(&q["turn_latency_ms"], "ms", "turns"),
        );
        row("answering-machine verdicts", q["amd"].to_string());
    }
    let o = &report["outcome"];
    if o.is_object() {
        row(
            "answered / failed",
            format!(
                "{} / {} of {} calls",
                o["answered"], o["failed"], o["calls"]
            ),
        );
        row(
            "calls started per second",
            format!("{:.2} achieved", o["cps_achieved"].as_f64().unwrap_or(0.0)),
        );
        let r = &o["sip_retransmissions"];
        row(
            "SIP retransmissions",
            if r.is_object() {
                format!("{} sent, {} received", r["sent"], r["received"])
            } else {
                "not counted".into()
            },
        );
    }
    if report["timed_out"].as_bool() == Some(true) {
        row(
            "note",
            "some calls were still open when the run stopped waiting".into(),
        );
    }
    let cpl = report["cpl"].as_f64().unwrap_or(0.0);
    let mut live = plot::line(&series::concurrency(report), cpl, "seconds", "live calls");
    if let Some(note) = report["cpl_note"].as_str() {
        live.push_str(&format!("\n<p class=\"cpl-note\">{}</p>", esc(note)));
    }
    let setup = plot::scatter(&series::setup_times(report), "seconds", "setup time, ms");
    let waits = series::caller_waits(report);
    let waits = if waits.is_empty() {
        "<p>No caller's wait measured: no saved history of these calls has a turn with a reply.</p>"
            .to_string()
    } else {
        plot::scatter(&waits, "seconds", "caller's wait, ms")
    };
    let turn_points = series::turn_latencies(report);
    let turns = if turn_points.is_empty() {
        "<p>No turn latency measured: no saved history of these calls has a turn with a reply.</p>"
            .to_string()
    } else {
        plot::scatter(&turn_points, "seconds", "turn latency, ms")
    };
    let mut outcomes = String::new();
    for (name, v) in [
        ("By communication status", &s["communication_status"]),
        ("By call status", &s["call_status"]),
        ("By goal reached", &s["goals"]),
        ("By answering-machine verdict", &q["amd"]),
    ] {
        if let Some(svg) = plot::bars(&counts(v)) {
            outcomes.push_str(&format!("<h3>{name}</h3>\n{svg}\n"));
        }
    }
    // The figures as data too; `<` is escaped so no text in them closes the script.
    let data = s.to_string().replace('<', "\\u003c");
    let title = report["title"].as_str().unwrap_or("callsmith load report");
    format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{t}</title>\n\
<style>{STYLE}</style></head>\n\
<body><h1>{t}</h1>\n<p>{} → {}</p>\n<table>\n{rows}</table>\n\
<script type=\"application/json\" id=\"statistics\">{data}</script>\n\
<h2>Live calls{}</h2>\n{live}\n\
{run}\
<h2>Setup time over time: each answered call, by when it started</h2>\n{setup}\n\
<h2>Caller's wait over time (end of the caller's speech or key → first reply RTP): each turn, by when its reply started</h2>\n{waits}\n\
<h2>Turn latency over time (the engine's share: answer known → first reply RTP): each turn, by when its reply started</h2>\n{turns}\n\
<h2>Outcomes</h2>\n{outcomes}</body></html>\n",
        esc(report["started_at"].as_str().unwrap_or("")),
        esc(report["finished_at"].as_str().unwrap_or("")),
        if cpl > 0.0 { " (cpl dashed)" } else { "" },
        run = run_sections(report),
        t = esc(title),
    )
}

/// The sections of a `callsmith load` run (its `outcome`, `calls_started_per_second` and
/// `thresholds`): calls started per second against the `cps` asked (dashed), the SIP final
/// codes, the failed calls with their reasons, and the thresholds checked. Empty for any
/// other set of calls.
fn run_sections(report: &Value) -> String {
    let o = &report["outcome"];
    if !o.is_object() {
        return String::new();
    }
    let mut out = format!(
        "<h2>Calls started per second{}</h2>\n{}\n",
        if report["cps"].is_number() {
            " (cps dashed)"
        } else {
            ""
        },
        plot::line(
            &series::started_per_second(report),
            report["cps"].as_f64().unwrap_or(0.0),
            "seconds",
            "calls started",
        )
    );
    let table = |head: &[&str], rows: Vec<Vec<String>>| {
        let mut t = String::from("<table>\n<tr>");
        for h in head {
            t.push_str(&format!("<th>{}</th>", esc(h)));
        }
        t.push_str("</tr>\n");
        for r in rows {
            t.push_str("<tr>");
            for c in r {
                t.push_str(&format!("<td>{}</td>", esc(&c)));
            }
            t.push_str("</tr>\n");
        }
        t.push_str("</table>\n");
        t
    };
    let codes = counts(&o["sip_codes"])
        .into_iter()
        .map(|(code, n)| vec![code, n.to_string()])
        .collect();
    out.push_str("<h2>SIP final codes</h2>\n");
    out.push_str(&table(&["code", "calls"], codes));
    let failed: Vec<&Value> = o["failed_calls"].as_array().into_iter().flatten().collect();
    out.push_str(&format!("<h2>Failed calls ({})</h2>\n", o["failed"]));
    if !failed.is_empty() {
        // A call with no final SIP response (never dialled, or no answer at all) shows "none".
        let text = |v: &Value| match v {
            Value::Null => "none".to_string(),
            Value::String(s) => s.clone(),
            v => v.to_string(),
        };
        let rows = failed
            .iter()
            .map(|c| vec![text(&c["id"]), text(&c["sip_code"]), text(&c["reason"])])
            .collect();
        out.push_str(&table(&["communication", "SIP code", "reason"], rows));
    }
    if let Some(checks) = report["thresholds"].as_array() {
        let rows = checks
            .iter()
            .map(|c| {
                vec![
                    c["threshold"].as_str().unwrap_or("").to_string(),
                    c["measured"].as_str().unwrap_or("").to_string(),
                    if c["passed"].as_bool() == Some(true) {
                        "passed"
                    } else {
                        "FAILED"
                    }
                    .to_string(),
                ]
            })
            .collect();
        out.push_str("<h2>Thresholds</h2>\n");
        out.push_str(&table(&["threshold", "measured", "result"], rows));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_load_run_shows_its_codes_failures_rate_and_thresholds() {
        let page = html(&json!({
            "statistics": {"total": 3},
            "started_at": "2030-01-01T00:00:00Z",
            "cps": 2,
            "calls_started_per_second": [2, 1],
            "outcome": {"calls": 3, "answered": 1, "failed": 2, "cps_achieved": 2.0,
                "sip_codes": {"200": 1, "408": 2}, "sip_retransmissions": {"sent": 4, "received": 1},
                "failed_calls": [{"id": "com_a", "sip_code": 408, "reason": "not answered: SIP 408 <no_answer>"},
                    {"id": "com_b", "sip_code": null, "reason": "x"}]},
            "thresholds": [{"threshold": "--max-failed 0", "measured": "2 failed", "passed": false}],
        }));
        for shown in [
            "<h2>Calls started per second (cps dashed)</h2>",
            "<tr><td>408</td><td>2</td></tr>",
            "<tr><td>200</td><td>1</td></tr>",
            "<h2>Failed calls (2)</h2>",
            "<td>com_a</td><td>408</td><td>not answered: SIP 408 &lt;no_answer&gt;</td>",
            "<td>com_b</td><td>none</td>",
            "<tr><td>--max-failed 0</td><td>2 failed</td><td>FAILED</td></tr>",
            "<tr><th>answered / failed</th><td>1 / 2 of 3 calls</td></tr>",
            "<tr><th>SIP retransmissions</th><td>4 sent, 1 received</td></tr>",
        ] {
            assert!(page.contains(shown), "{shown}: {page}");
        }
    }

    #[test]
    fn the_page_draws_every_plot() {
        let page = html(&json!({
            "statistics": {"total": 2, "communication_status": {"completed": 2, "new": 0},
                "call_status": {"answered": 1, "busy": 1}, "goals": {"sale": 1},
                "quality": {"calls": 1, "amd": {"human": 1}, "turn_latency_ms": {"count": 1, "p50": 400, "p95": 400, "p99": 400},
                    "mos_x100": {"count": 1, "p50": 441, "p95": 441, "p99": 441}}},
            "started_at": "2030-01-01T00:00:00Z",
            "communications": [{"started_at": "2030-01-01T00:00:00Z", "answered_at": "2030-01-01T00:00:00.200Z",
                "ended_at": "2030-01-01T00:00:03Z"}],
            "turns": [{"at": "2030-01-01T00:00:01Z", "latency_ms": 400}],
            "cpl": 3,
            "title": "x<y",
        }));
        assert!(page.contains("x&lt;y"));
        assert!(page.contains("(cpl dashed)") && page.contains("class=\"limit\""));
        assert!(page.contains("Turn latency over time") && page.contains("<circle"));
        for h in [
            "By communication status",
            "By call status",
            "By goal reached",
            "By answering-machine verdict",
        ] {
            assert!(page.contains(h), "{h}");
        }
        assert!(page.contains("<tr><th>estimated MOS (E-model)</th><td>p50 4.41, p95 4.41, p99 4.41 (1 calls)</td></tr>"));
        let none = html(
            &json!({"statistics": {"goals": {"</script>": 1}}, "cpl_note": "no cpl line: two agents"}),
        );
        assert!(none.contains("no cpl line: two agents") && !none.contains("class=\"limit\""));
        assert!(none.contains("No turn latency measured"));
        assert!(none.contains("No caller's wait measured") && !none.contains("SIP final codes"));
        assert_eq!(none.matches("</script>").count(), 1, "{none}");
    }
}
