//! Statistics of a set of communications, as a load tester reads them: counts by
//! communication and call status, calls dialled and answered, the answer rate, and setup
//! time and duration percentiles. One computation for every set (a legacy attempt's calls,
//! the v1 communications of an agent or a time range).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::CommunicationStatus;
use crate::store::CommunicationRecord;

/// Nearest-rank percentiles of a set of values (all 0 when `count` is 0).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
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
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct CallStatistics {
    /// Communications in the set.
    pub total: i64,
    /// Communications by `communication_status`; every status of the vocabulary is present.
    #[schema(value_type = Object)]
    pub communication_status: BTreeMap<String, i64>,
    /// Communications by `call_status` (how the call leg ended), for those that have one;
    /// only the values seen are present.
    #[schema(value_type = Object)]
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
}

impl CallStatistics {
    pub fn of<'a>(calls: impl IntoIterator<Item = &'a CommunicationRecord>) -> CallStatistics {
        let mut communication_status: BTreeMap<String, i64> = CommunicationStatus::ALL
            .iter()
            .map(|s| (s.as_str().to_string(), 0))
            .collect();
        let mut call_status = BTreeMap::new();
        let (mut total, mut dialled, mut answered) = (0, 0, 0);
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
