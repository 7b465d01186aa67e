//! What a `callsmith load` run came to, read from its calls (the API's Communication
//! objects) and its statistics: answered and failed calls with their reasons, the SIP final
//! codes, calls started per second, the thresholds checked, and the summary printed at the
//! end.
//!
//! A call *succeeds* when the target answered it and it completed; every other call of the
//! run *fails*, with a reason: not answered (its SIP final code and call status), not
//! attempted (the engine's error), canceled, interrupted, or still open when the run stopped
//! waiting. Calls asked for but never created count as failed too, so a run in which every
//! call failed can never read "0 failed".

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::Value;

/// A call of the run that did not succeed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FailedCall {
    /// The communication id.
    pub id: String,
    /// Its final SIP response code; None when it got none (never dialled, or no answer at
    /// all).
    pub sip_code: Option<i64>,
    pub reason: String,
}

/// SIP messages sent or received again, identically (see `callsmith_sip::Retransmissions`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Retransmissions {
    pub sent: u64,
    pub received: u64,
}

/// The run's figures beside the statistics.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Outcome {
    /// Calls asked for (`--calls`).
    pub calls: u64,
    /// Calls whose INVITE was sent.
    pub dialled: u64,
    /// Calls the target answered.
    pub answered: u64,
    /// Calls that did not succeed (see the module documentation).
    pub failed: u64,
    /// Calls by final SIP response code (`"none"`: no final response).
    pub sip_codes: BTreeMap<String, u64>,
    pub failed_calls: Vec<FailedCall>,
    /// Calls started (INVITE sent) over the span from the first to the last start; the
    /// calls dialled when they all started in the same instant.
    pub cps_achieved: f64,
    /// None when the SIP stack did not count them.
    pub sip_retransmissions: Option<Retransmissions>,
}

fn time(v: &Value) -> Option<DateTime<Utc>> {
    v.as_str().and_then(|s| s.parse().ok())
}

fn text(v: &Value) -> &str {
    v.as_str().unwrap_or("")
}

/// Why `c` did not succeed; None when it did.
pub fn failure(c: &Value) -> Option<String> {
    let status = text(&c["communication_status"]);
    let call_status = text(&c["call_status"]);
    let answered = !c["answered_at"].is_null();
    let error = c["error"].as_str().filter(|e| !e.is_empty());
    let with_error = |what: String| match error {
        Some(e) => format!("{what}: {e}"),
        None => what,
    };
    Some(match status {
        "completed" if answered => return None,
        "completed" => {
            let code = c["sip_code"].as_i64().map(|c| format!("SIP {c}, "));
            with_error(format!(
                "not answered ({}{})",
                code.unwrap_or_default(),
                if call_status.is_empty() {
                    "no call status"
                } else {
                    call_status
                }
            ))
        }
        "failed" => with_error("not attempted".into()),
        "canceled" => with_error("canceled before it was dialled".into()),
        "interrupted" => with_error("the engine stopped while the call was live".into()),
        open => format!("still {open} when the run stopped waiting"),
    })
}

impl Outcome {
    /// The outcome of `calls_asked` calls from their communications; `started_at`: when the
    /// run began dispatching.
    pub fn of(
        calls_asked: u64,
        communications: &[Value],
        sip_retransmissions: Option<Retransmissions>,
    ) -> Outcome {
        let mut o = Outcome {
            calls: calls_asked,
            dialled: 0,
            answered: 0,
            failed: 0,
            sip_codes: BTreeMap::new(),
            failed_calls: Vec::new(),
            cps_achieved: 0.0,
            sip_retransmissions,
        };
        let mut succeeded = 0u64;
        let mut starts = Vec::new();
        for c in communications {
            if let Some(t) = time(&c["started_at"]) {
                o.dialled += 1;
                starts.push(t);
            }
            if !c["answered_at"].is_null() {
                o.answered += 1;
            }
            let code = c["sip_code"].as_i64();
            *o.sip_codes
                .entry(code.map_or_else(|| "none".to_string(), |c| c.to_string()))
                .or_default() += 1;
            match failure(c) {
                None => succeeded += 1,
                Some(reason) => o.failed_calls.push(FailedCall {
                    id: text(&c["id"]).to_string(),
                    sip_code: code,
                    reason,
                }),
            }
        }
        o.failed = calls_asked.max(communications.len() as u64) - succeeded;
        starts.sort();
        o.cps_achieved = match (starts.first(), starts.last()) {
            (Some(a), Some(b)) if b > a => {
                (starts.len() - 1) as f64 / ((*b - *a).num_milliseconds() as f64 / 1000.0)
            }
            _ => starts.len() as f64,
        };
        o
    }
}

/// Calls started (`started_at`) in each second from `t0`, up to the last start.
pub fn started_per_second(t0: DateTime<Utc>, communications: &[Value]) -> Vec<u64> {
    let mut out: Vec<u64> = Vec::new();
    for t in communications.iter().filter_map(|c| time(&c["started_at"])) {
        let s = ((t - t0).num_milliseconds().max(0) / 1000) as usize;
        if out.len() <= s {
            out.resize(s + 1, 0);
        }
        out[s] += 1;
    }
    out
}

/// The limits a run must keep to exit 0 (`--max-failed`, `--min-answered`,
/// `--max-turn-p95-ms`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Thresholds {
    pub max_failed: u64,
    pub min_answered: Option<u64>,
    pub max_turn_p95_ms: Option<u64>,
}

/// One threshold as checked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Check {
    /// The option and its value, e.g. `--max-failed 0`.
    pub threshold: String,
    pub measured: String,
    pub passed: bool,
}

/// Checks the thresholds against the outcome and the statistics (the caller's wait p95 is
/// `quality.caller_wait_ms.p95`); a run that stopped waiting for open calls fails a check
/// of its own.
pub fn check(
    t: &Thresholds,
    o: &Outcome,
    statistics: &Value,
    timed_out: Option<u64>,
) -> Vec<Check> {
    let mut out = vec![Check {
        threshold: format!("--max-failed {}", t.max_failed),
        measured: format!("{} failed", o.failed),
        passed: o.failed <= t.max_failed,
    }];
    if let Some(min) = t.min_answered {
        out.push(Check {
            threshold: format!("--min-answered {min}"),
            measured: format!("{} answered", o.answered),
            passed: o.answered >= min,
        });
    }
    if let Some(max) = t.max_turn_p95_ms {
        let w = &statistics["quality"]["caller_wait_ms"];
        let count = w["count"].as_u64().unwrap_or(0);
        let p95 = w["p95"].as_u64().unwrap_or(0);
        out.push(Check {
            threshold: format!("--max-turn-p95-ms {max}"),
            measured: if count == 0 {
                "no caller's wait measured (no turn with a reply)".into()
            } else {
                format!("caller's wait p95 {p95} ms over {count} turns")
            },
            passed: count > 0 && p95 <= max,
        });
    }
    if let Some(secs) = timed_out {
        out.push(Check {
            threshold: format!("--timeout-secs {secs}"),
            measured: "calls still open when the run stopped waiting".into(),
            passed: false,
        });
    }
    out
}

/// `p` (a percentiles object) as "p50 … p95 … p99 … ms (n what)", or "none measured".
fn percentiles(p: &Value, what: &str) -> String {
    if p["count"].as_u64().unwrap_or(0) == 0 {
        return "none measured".into();
    }
    format!(
        "p50 {} ms, p95 {} ms, p99 {} ms ({} {what})",
        p["p50"], p["p95"], p["p99"], p["count"]
    )
}

/// The most failed calls the summary lists (the report lists them all).
const SUMMARY_FAILED: usize = 10;

/// The summary printed at the end of a run, like SIPp's final screen: totals, answered and
/// failed, SIP codes, retransmissions, the cps achieved, setup time and turn percentiles,
/// the first failed calls, and each threshold with its result.
pub fn summary(
    target: &str,
    cps: u32,
    elapsed_secs: f64,
    o: &Outcome,
    statistics: &Value,
    checks: &[Check],
) -> String {
    let mut s = String::new();
    let mut line = |k: &str, v: String| s.push_str(&format!("  {k:<16}{v}\n"));
    line("target", target.to_string());
    line(
        "calls",
        format!(
            "{} total, {} dialled, {} answered, {} failed  ({elapsed_secs:.1} s)",
            o.calls, o.dialled, o.answered, o.failed
        ),
    );
    line(
        "rate",
        format!(
            "{:.2} calls started per second ({cps} asked)",
            o.cps_achieved
        ),
    );
    let mut codes: Vec<(&String, &u64)> = o.sip_codes.iter().collect();
    codes.sort_by(|a, b| b.1.cmp(a.1).then_with(|| a.0.cmp(b.0)));
    line(
        "SIP final codes",
        if codes.is_empty() {
            "none".into()
        } else {
            codes
                .iter()
                .map(|(c, n)| format!("{c}: {n}"))
                .collect::<Vec<_>>()
                .join(", ")
        },
    );
    line(
        "retransmissions",
        match o.sip_retransmissions {
            Some(r) => format!("{} sent, {} received", r.sent, r.received),
            None => "not counted".into(),
        },
    );
    line(
        "setup time",
        percentiles(&statistics["setup_time_ms"], "calls"),
    );
    let q = &statistics["quality"];
    line(
        "caller's wait",
        format!(
            "{}  end of the caller's speech or key → first reply RTP",
            percentiles(&q["caller_wait_ms"], "turns")
        ),
    );
    line(
        "engine's share",
        format!(
            "{}  answer known → first reply RTP",
            percentiles(&q["turn_latency_ms"], "turns")
        ),
    );
    for f in o.failed_calls.iter().take(SUMMARY_FAILED) {
        line("failed call", format!("{}: {}", f.id, f.reason));
    }
    if o.failed_calls.len() > SUMMARY_FAILED {
        line(
            "",
            format!(
                "… and {} more in the report",
                o.failed_calls.len() - SUMMARY_FAILED
            ),
        );
    }
    let missing = o.failed - o.failed_calls.len() as u64;
    if missing > 0 {
        line(
            "failed",
            format!("{missing} calls asked for were never created"),
        );
    }
    for c in checks {
        line(
            "threshold",
            format!(
                "{}: {} ({})",
                c.threshold,
                if c.passed { "passed" } else { "FAILED" },
                c.measured
            ),
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn call(id: &str, status: &str, call_status: Option<&str>, code: Option<i64>) -> Value {
        let answered = call_status == Some("answered");
        json!({"id": id, "communication_status": status, "call_status": call_status,
            "sip_code": code, "started_at": "2030-01-01T00:00:00Z",
            "answered_at": answered.then_some("2030-01-01T00:00:00.100Z"), "error": null})
    }

    #[test]
    fn every_call_that_was_not_answered_is_failed_with_its_reason() {
        let mut calls = vec![
            call("a", "completed", Some("answered"), Some(200)),
            call("b", "completed", Some("no_answer"), Some(408)),
            call("c", "completed", Some("failed"), None),
            call("d", "dialing", None, None),
            call("e", "failed", None, None),
        ];
        calls[2]["error"] = json!("no response from the gateway");
        calls[4]["error"] = json!("no trunk");
        calls[4]["started_at"] = Value::Null;
        let o = Outcome::of(6, &calls, None);
        assert_eq!((o.calls, o.dialled, o.answered), (6, 4, 1));
        assert_eq!(o.failed, 5, "four calls and one never created");
        assert_eq!(
            o.sip_codes,
            BTreeMap::from([("200".into(), 1), ("408".into(), 1), ("none".into(), 3)])
        );
        let reasons: Vec<&str> = o.failed_calls.iter().map(|f| f.reason.as_str()).collect();
        assert_eq!(
            reasons,
            [
                "not answered (SIP 408, no_answer)",
                "not answered (failed): no response from the gateway",
                "still dialing when the run stopped waiting",
                "not attempted: no trunk",
            ]
        );
        assert_eq!(o.failed_calls[0].sip_code, Some(408));
    }

    #[test]
    fn a_run_where_every_call_failed_never_reads_zero_failed() {
        let calls: Vec<Value> = (0..3)
            .map(|i| call(&format!("c{i}"), "completed", Some("no_answer"), Some(408)))
            .collect();
        let o = Outcome::of(
            3,
            &calls,
            Some(Retransmissions {
                sent: 2,
                received: 0,
            }),
        );
        assert_eq!((o.answered, o.failed), (0, 3));
        let t = Thresholds {
            max_failed: 0,
            min_answered: None,
            max_turn_p95_ms: None,
        };
        let checks = check(&t, &o, &json!({}), None);
        assert!(!checks[0].passed);
        let s = summary("sip:1@127.0.0.1:5070", 1, 3.0, &o, &json!({}), &checks);
        assert!(s.contains("3 failed"), "{s}");
        assert!(!s.contains(" 0 failed"), "{s}");
        assert!(s.contains("SIP final codes 408: 3"), "{s}");
        assert!(s.contains("2 sent, 0 received"), "{s}");
        assert!(
            s.contains("threshold       --max-failed 0: FAILED (3 failed)"),
            "{s}"
        );
        // Nothing created at all: every call asked for failed.
        assert_eq!(Outcome::of(4, &[], None).failed, 4);
    }

    #[test]
    fn thresholds_pass_and_fail_on_their_own_figures() {
        let calls = vec![
            call("a", "completed", Some("answered"), Some(200)),
            call("b", "completed", Some("busy"), Some(486)),
        ];
        let o = Outcome::of(2, &calls, None);
        let stats = json!({"quality": {"caller_wait_ms": {"count": 4, "p50": 500, "p95": 700, "p99": 700}}});
        let t = Thresholds {
            max_failed: 1,
            min_answered: Some(2),
            max_turn_p95_ms: Some(600),
        };
        let checks = check(&t, &o, &stats, None);
        let got: Vec<(&str, &str, bool)> = checks
            .iter()
            .map(|c| (c.threshold.as_str(), c.measured.as_str(), c.passed))
            .collect();
        assert_eq!(
            got,
            [
                ("--max-failed 1", "1 failed", true),
                ("--min-answered 2", "1 answered", false),
                (
                    "--max-turn-p95-ms 600",
                    "caller's wait p95 700 ms over 4 turns",
                    false
                ),
            ]
        );
        // No turn measured is a failure of the turn threshold, not a pass.
        let none = check(&t, &o, &json!({}), Some(300));
        assert!(!none[2].passed && none[2].measured.contains("no caller's wait"));
        assert_eq!(none[3].threshold, "--timeout-secs 300");
        assert!(!none[3].passed);
        let s = summary("t", 1, 1.0, &o, &stats, &checks);
        assert!(s.contains("--min-answered 2: FAILED (1 answered)"), "{s}");
        assert!(s.contains("--max-failed 1: passed"), "{s}");
        assert!(
            s.contains("failed call     b: not answered (SIP 486, busy)"),
            "{s}"
        );
    }

    #[test]
    fn rates_over_the_run() {
        let t0: DateTime<Utc> = "2030-01-01T00:00:00Z".parse().unwrap();
        let at = |s: &str| json!({"started_at": s, "answered_at": null, "communication_status": "completed"});
        let calls = vec![
            at("2030-01-01T00:00:00.000Z"),
            at("2030-01-01T00:00:00.500Z"),
            at("2030-01-01T00:00:01.000Z"),
            at("2030-01-01T00:00:02.500Z"),
            json!({"started_at": null}),
        ];
        assert_eq!(started_per_second(t0, &calls), vec![2, 1, 1]);
        let o = Outcome::of(5, &calls, None);
        assert!(
            (o.cps_achieved - 3.0 / 2.5).abs() < 1e-9,
            "{}",
            o.cps_achieved
        );
        assert_eq!(Outcome::of(1, &calls[..1], None).cps_achieved, 1.0);
    }
}
