//! Statistics of a set of communications, as a load tester reads them: counts by
//! communication and call status, calls dialled and answered, the answer rate, and setup
//! time and duration percentiles. One computation for every set (a legacy attempt's calls,
//! the v1 communications of an agent or a time range).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{CommunicationStatus, history::CallHistory};
use crate::store::CommunicationRecord;

/// Nearest-rank percentiles of a set of values (all 0 when `count` is 0).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Percentiles {
    /// Values measured.
    pub count: i64,
    pub p50: i64,
    pub p95: i64,
    pub p99: i64,
}

impl Percentiles {
    pub fn of(mut values: Vec<i64>) -> Percentiles {
        values.sort_unstable();
        let n = values.len();
        if n == 0 {
            return Percentiles::default();
        }
        // The smallest value with at least p% of the values at or below it.
        let rank = |p: usize| values[(p * n).div_ceil(100).max(1) - 1];
        Percentiles {
            count: n as i64,
            p50: rank(50),
            p95: rank(95),
            p99: rank(99),
        }
    }
}

/// Statistics of a set of communications.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CallStatistics {
    /// Communications in the set.
    pub total: i64,
    /// Communications by `communication_status`; every status of the vocabulary is present.
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub communication_status: BTreeMap<String, i64>,
    /// Communications by `call_status` (how the call leg ended), for those that have one;
    /// only the values seen are present.
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub call_status: BTreeMap<String, i64>,
    /// Communications whose INVITE was sent (`started_at` set).
    pub dialled: i64,
    /// Communications answered (`answered_at` set).
    pub answered: i64,
    /// answered / dialled; 0 when nothing was dialled.
    pub answer_rate: f64,
    /// Milliseconds from the INVITE to the answer, over the answered calls.
    pub setup_time_ms: Percentiles,
    /// Seconds from answer to hang-up, over the answered calls that ended.
    pub duration_seconds: Percentiles,
    /// Communications that reached each goal (only goals reached are present).
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub goals: BTreeMap<String, i64>,
    /// What the saved histories of the calls say about their audio and turns; absent
    /// where the figures are read from the rows alone (legacy attempt statistics).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quality: Option<Quality>,
}

/// Audio and turn quality from call histories.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Quality {
    /// Histories read (answered calls save one; at most [`MAX_QUALITY_HISTORIES`]).
    pub calls: i64,
    /// RTP packets the engine expected from the callers (sequence numbers), over all calls.
    pub packets_expected: i64,
    /// Of those, packets that never arrived.
    pub packets_lost: i64,
    /// packets_lost / packets_expected, in percent (0 when nothing was expected).
    pub loss_percent: f64,
    /// Interarrival jitter at the end of each call (RFC 3550), in ms.
    pub jitter_ms: Percentiles,
    /// Estimated MOS of each call ×100 (E-model, see [`mos`]), e.g. 441 for 4.41.
    pub mos_x100: Percentiles,
    /// The engine's share of a turn: the answer known (final transcript or key) → first
    /// RTP of the reply, in ms, over every turn that has one.
    pub turn_latency_ms: Percentiles,
    /// The caller's wait: end of the caller's input → first RTP of the reply, in ms, over
    /// every turn with a reply (`TurnLog::caller_wait_ms`).
    #[serde(default)]
    pub caller_wait_ms: Percentiles,
    /// Answering-machine detection verdicts (`human`, `machine`, `unknown`), one per
    /// detection a call ran; only verdicts seen are present.
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub amd: BTreeMap<String, i64>,
}

/// An estimated MOS (1–4.5) for G.711 from packet loss (percent) and jitter (ms), by the
/// simplified E-model (ITU-T G.107): effective latency = 2 × jitter + 10 ms (the one-way
/// network delay is unknown to the engine and taken as 0), R = 93.2 − latency / 40 (or
/// 93.2 − (latency − 120) / 10 above 160 ms) − 2.5 × loss, MOS = 1 + 0.035 R +
/// 7·10⁻⁶ R (R − 60)(100 − R).
pub fn mos(loss_percent: f64, jitter_ms: f64) -> f64 {
    let latency = 2.0 * jitter_ms.max(0.0) + 10.0;
    let mut r = if latency < 160.0 {
        93.2 - latency / 40.0
    } else {
        93.2 - (latency - 120.0) / 10.0
    };
    r -= 2.5 * loss_percent.max(0.0);
    if r <= 0.0 {
        return 1.0;
    }
    let r = r.min(100.0);
    (1.0 + 0.035 * r + 0.000_007 * r * (r - 60.0) * (100.0 - r)).clamp(1.0, 4.5)
}

/// Most call histories [`Quality::read`] reads.
pub const MAX_QUALITY_HISTORIES: usize = 2000;

/// The saved histories of the first [`MAX_QUALITY_HISTORIES`] of `calls` that saved one,
/// read from object storage. A history that cannot be read (removed by retention,
/// unreadable) is left out.
pub async fn read_histories(
    objects: &crate::objects::Objects,
    account_sid: &str,
    calls: &[&CommunicationRecord],
) -> Vec<CallHistory> {
    let mut histories = Vec::new();
    for c in calls
        .iter()
        .filter(|c| c.has_history)
        .take(MAX_QUALITY_HISTORIES)
    {
        let path = c
            .history_path
            .clone()
            .unwrap_or_else(|| crate::objects::CallObjects::new(account_sid, &c.sid).history());
        if let Ok(bytes) = objects.get(&path).await
            && let Ok(h) = serde_json::from_slice::<CallHistory>(&bytes)
        {
            histories.push(h);
        }
    }
    histories
}

impl Quality {
    /// The quality of the histories [`read_histories`] reads for `calls`; `calls` of the
    /// result says how many were read.
    pub async fn read(
        objects: &crate::objects::Objects,
        account_sid: &str,
        calls: &[&CommunicationRecord],
    ) -> Quality {
        Quality::of(&read_histories(objects, account_sid, calls).await)
    }

    pub fn of<'a>(histories: impl IntoIterator<Item = &'a CallHistory>) -> Quality {
        let mut q = Quality::default();
        let (mut jitter, mut mos_x100, mut turns) = (Vec::new(), Vec::new(), Vec::new());
        let mut waits = Vec::new();
        for h in histories {
            q.calls += 1;
            if let Some(m) = &h.media {
                let expected = m.packets_expected as i64;
                let lost = m.packets_lost.max(0);
                q.packets_expected += expected;
                q.packets_lost += lost;
                let loss = if expected > 0 {
                    lost as f64 * 100.0 / expected as f64
                } else {
                    0.0
                };
                jitter.push(m.jitter_ms.round() as i64);
                mos_x100.push((mos(loss, m.jitter_ms) * 100.0).round() as i64);
            }
            for e in &h.trace {
                if let callsmith_scenarios::history::Event::AnsweringMachine { verdict, .. } =
                    &e.event
                {
                    let name = serde_json::to_value(verdict)
                        .ok()
                        .and_then(|v| v.as_str().map(String::from))
                        .unwrap_or_default();
                    *q.amd.entry(name).or_default() += 1;
                }
            }
            turns.extend(
                h.turns
                    .iter()
                    .filter_map(|t| t.turn_latency_us)
                    .map(|us| (us / 1000) as i64),
            );
            waits.extend(
                h.turns
                    .iter()
                    .filter_map(|t| t.caller_wait_ms())
                    .map(|ms| ms as i64),
            );
        }
        q.loss_percent = if q.packets_expected > 0 {
            q.packets_lost as f64 * 100.0 / q.packets_expected as f64
        } else {
            0.0
        };
        q.jitter_ms = Percentiles::of(jitter);
        q.mos_x100 = Percentiles::of(mos_x100);
        q.turn_latency_ms = Percentiles::of(turns);
        q.caller_wait_ms = Percentiles::of(waits);
        q
    }
}

impl CallStatistics {
    pub fn of<'a>(calls: impl IntoIterator<Item = &'a CommunicationRecord>) -> CallStatistics {
        let mut communication_status: BTreeMap<String, i64> = CommunicationStatus::ALL
            .iter()
            .map(|s| (s.as_str().to_string(), 0))
            .collect();
        let mut call_status = BTreeMap::new();
        let (mut total, mut dialled, mut answered) = (0, 0, 0);
        let mut goals: BTreeMap<String, i64> = BTreeMap::new();
        let (mut setup, mut duration) = (Vec::new(), Vec::new());
        for c in calls {
            total += 1;
            *communication_status
                .entry(c.communication_status.as_str().to_string())
                .or_default() += 1;
            if let Some(s) = &c.call_status {
                *call_status.entry(s.clone()).or_default() += 1;
            }
            if c.started_at.is_some() {
                dialled += 1;
            }
            let mut reached = c.goal_list();
            reached.sort();
            reached.dedup();
            for g in reached {
                *goals.entry(g).or_default() += 1;
            }
            if c.answered_at.is_some() {
                answered += 1;
                setup.extend(setup_time_ms(c));
                if c.communication_status.is_final() {
                    duration.push(c.duration);
                }
            }
        }
        CallStatistics {
            total,
            communication_status,
            call_status,
            dialled,
            answered,
            answer_rate: if dialled == 0 {
                0.0
            } else {
                answered as f64 / dialled as f64
            },
            setup_time_ms: Percentiles::of(setup),
            duration_seconds: Percentiles::of(duration),
            goals,
            quality: None,
        }
    }
}

/// Milliseconds from the INVITE to the answer; None unless both are known.
pub fn setup_time_ms(c: &CommunicationRecord) -> Option<i64> {
    Some((c.answered_at? - c.started_at?).num_milliseconds())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::communication::history::{Direction, Heard};

    fn history(
        lost: i64,
        jitter_ms: f64,
        turn_us: Option<u64>,
        amd: Option<callsmith_scenarios::port::AmdVerdict>,
    ) -> CallHistory {
        use callsmith_scenarios::history::{EndReason, Event, TraceEvent};
        let now = chrono::Utc::now();
        CallHistory {
            communication_id: "com_1".into(),
            direction: Direction::Outbound,
            recipient: "+15550001".into(),
            from_number: "+4911".into(),
            call_id: "abc@127.0.0.1".into(),
            answered_at: now,
            ended_at: now,
            duration_ms: 2000,
            end: EndReason::End {
                brick_id: "e".into(),
            },
            forced_end: None,
            hangup: None,
            goals: Vec::new(),
            variables: Default::default(),
            steps: 1,
            trace: amd
                .map(|verdict| TraceEvent {
                    at_ms: 10,
                    event: Event::AnsweringMachine {
                        brick_id: "o".into(),
                        verdict,
                    },
                })
                .into_iter()
                .collect(),
            prompts: Vec::new(),
            turns: vec![super::super::history::TurnLog {
                turn_latency_us: turn_us,
                ..Default::default()
            }],
            errors: Vec::new(),
            transfers: Vec::new(),
            media: Some(callsmith_media::SessionStats {
                packets_expected: 100,
                packets_received: (100 - lost) as u64,
                packets_lost: lost,
                jitter_ms,
                ..Default::default()
            }),
        }
    }

    #[test]
    fn the_callers_wait_is_apart_from_the_engines_share() {
        use super::super::history::TurnLog;
        let mut h = history(0, 1.0, None, None);
        h.turns = vec![
            // Speech: the caller waited 520 ms, of which the engine's share was 6 ms.
            TurnLog {
                heard: Heard::Speech,
                response_ms: Some(520),
                turn_latency_us: Some(6_000),
                ..Default::default()
            },
            // Keys: the answer is there at the key, so the wait is the turn latency.
            TurnLog {
                heard: Heard::Dtmf,
                turn_latency_us: Some(300_000),
                ..Default::default()
            },
            // No reply: no wait measured.
            TurnLog {
                heard: Heard::NoInput,
                ..Default::default()
            },
        ];
        let q = Quality::of(&[h]);
        assert_eq!(q.caller_wait_ms.count, 2);
        assert_eq!((q.caller_wait_ms.p50, q.caller_wait_ms.p99), (300, 520));
        assert_eq!(q.turn_latency_ms.count, 2);
        assert_eq!((q.turn_latency_ms.p50, q.turn_latency_ms.p99), (6, 300));
    }

    #[test]
    fn quality_sums_the_histories() {
        use callsmith_scenarios::port::AmdVerdict;
        let q = Quality::of(&[
            history(0, 1.0, Some(450_000), Some(AmdVerdict::Human)),
            history(2, 3.0, Some(650_000), Some(AmdVerdict::Machine)),
            history(0, 1.0, None, None),
        ]);
        assert_eq!(q.calls, 3);
        assert_eq!((q.packets_expected, q.packets_lost), (300, 2));
        assert!((q.loss_percent - 2.0 / 3.0).abs() < 1e-9);
        assert_eq!(q.jitter_ms.p50, 1);
        assert_eq!(q.turn_latency_ms.count, 2);
        assert_eq!((q.turn_latency_ms.p50, q.turn_latency_ms.p99), (450, 650));
        assert_eq!(q.mos_x100.count, 3);
        assert!(q.mos_x100.p50 >= 440, "{:?}", q.mos_x100);
        assert_eq!(
            q.amd,
            [("human".to_string(), 1), ("machine".to_string(), 1)].into()
        );
        assert_eq!(Quality::of(&[]), Quality::default());
    }

    #[test]
    fn mos_falls_with_loss_and_jitter() {
        let clean = mos(0.0, 0.0);
        assert!((4.40..=4.45).contains(&clean), "{clean}");
        assert!(mos(1.0, 0.0) < clean);
        assert!(mos(0.0, 40.0) < clean);
        assert!(mos(5.0, 20.0) < mos(1.0, 20.0));
        assert_eq!(mos(100.0, 0.0), 1.0);
        assert!(mos(0.0, 500.0) >= 1.0);
    }

    #[test]
    fn nearest_rank_percentiles() {
        assert_eq!(Percentiles::of(vec![]), Percentiles::default());
        assert_eq!(
            Percentiles::of(vec![7]),
            Percentiles {
                count: 1,
                p50: 7,
                p95: 7,
                p99: 7
            }
        );
        let p = Percentiles::of((1..=100).rev().collect());
        assert_eq!((p.count, p.p50, p.p95, p.p99), (100, 50, 95, 99));
        let p = Percentiles::of(vec![10, 40, 20, 30]);
        assert_eq!((p.p50, p.p95, p.p99), (20, 40, 40));
    }
}
