//! The statistics service: reads the set of an account's communications a selector names
//! (agent, direction, creation time range, dispatch batch), at most `max_communications`
//! of them, and computes their [`CallStatistics`] with the quality of their saved
//! histories. `GET /v1/communication/-/statistics` and `…/report.html` read through it,
//! so the page shows the figures the API gives; the legacy attempt statistics and reports
//! read an attempt's calls through it, under the same limit.

use super::{
    history::CallHistory,
    statistics::{CallStatistics, Quality, read_histories},
};
use crate::{
    objects::Objects,
    store::{
        AttemptCall, CommunicationRecord, Store, StoreError, communications::CommunicationFilter,
    },
};

/// Most communications one statistics request reads by default.
pub const DEFAULT_MAX_COMMUNICATIONS: i64 = 200_000;

/// Why a set could not be read.
#[derive(Debug)]
pub enum SelectError {
    /// More communications match than one request reads.
    TooMany {
        total: i64,
        max: i64,
    },
    Store(StoreError),
}

impl From<StoreError> for SelectError {
    fn from(e: StoreError) -> Self {
        SelectError::Store(e)
    }
}

/// A set of communications (newest first) with its statistics and the histories its
/// quality figures were read from.
#[derive(Debug)]
pub struct CallSet {
    pub communications: Vec<CommunicationRecord>,
    pub statistics: CallStatistics,
    pub histories: Vec<CallHistory>,
}

/// Reads sets of communications and their statistics (see the module).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StatisticsService {
    max_communications: i64,
}

impl Default for StatisticsService {
    fn default() -> Self {
        StatisticsService::new(DEFAULT_MAX_COMMUNICATIONS)
    }
}

impl StatisticsService {
    /// A service that reads at most `max_communications` per set (at least 1).
    pub fn new(max_communications: i64) -> StatisticsService {
        StatisticsService {
            max_communications: max_communications.max(1),
        }
    }

    pub fn max_communications(&self) -> i64 {
        self.max_communications
    }

    /// The communications of `account_sid` that `filter` selects, newest first;
    /// [`SelectError::TooMany`] when more than `max_communications` match.
    pub async fn select(
        &self,
        store: &Store,
        account_sid: &str,
        filter: &CommunicationFilter,
    ) -> Result<Vec<CommunicationRecord>, SelectError> {
        const PAGE: i64 = 5000;
        let mut rows: Vec<CommunicationRecord> = Vec::new();
        loop {
            let (page, total) = store
                .communication_list(account_sid, filter, PAGE, rows.len() as i64)
                .await?;
            self.within_limit(total)?;
            let n = page.len();
            rows.extend(page);
            if n == 0 || rows.len() as i64 >= total {
                return Ok(rows);
            }
        }
    }

    /// The calls of the legacy attempt `attempt_sid` of `account_sid`, oldest first;
    /// [`SelectError::TooMany`] when it has more than `max_communications`. At most one
    /// more than the limit is read.
    pub async fn attempt_calls(
        &self,
        store: &Store,
        account_sid: &str,
        attempt_sid: &str,
    ) -> Result<Vec<AttemptCall>, SelectError> {
        let calls = store
            .legacy_attempt_calls(
                account_sid,
                attempt_sid,
                self.max_communications.saturating_add(1),
            )
            .await?;
        if calls.len() as i64 > self.max_communications {
            let total = store
                .legacy_attempt_call_count(account_sid, attempt_sid)
                .await?;
            self.within_limit(total.max(calls.len() as i64))?;
        }
        Ok(calls)
    }

    /// [`SelectError::TooMany`] when `total` communications are more than one request
    /// reads.
    fn within_limit(&self, total: i64) -> Result<(), SelectError> {
        if total > self.max_communications {
            return Err(SelectError::TooMany {
                total,
                max: self.max_communications,
            });
        }
        Ok(())
    }

    /// The set `filter` selects with its statistics; the quality figures are those of the
    /// newest saved histories (rows come newest first).
    pub async fn read(
        &self,
        store: &Store,
        objects: &Objects,
        account_sid: &str,
        filter: &CommunicationFilter,
    ) -> Result<CallSet, SelectError> {
        let communications = self.select(store, account_sid, filter).await?;
        let mut statistics = CallStatistics::of(&communications);
        let refs: Vec<&CommunicationRecord> = communications.iter().collect();
        let histories = read_histories(objects, account_sid, &refs).await;
        statistics.quality = Some(Quality::of(&histories));
        Ok(CallSet {
            communications,
            statistics,
            histories,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_limit_is_200_000() {
        assert_eq!(DEFAULT_MAX_COMMUNICATIONS, 200_000);
        assert_eq!(StatisticsService::default().max_communications(), 200_000);
        assert_eq!(
            crate::settings::Settings::default().statistics_max_communications,
            200_000
        );
        assert_eq!(StatisticsService::new(0).max_communications(), 1);
    }
}
