//! Statistics: what a set of an account's communications came to, read through the
//! statistics service ([`crate::communication::service`]), and its report page. The v1
//! statistics and report routes select the set with a filter
//! ([`Ops::communication_set`]); the legacy attempt routes take an attempt's calls
//! ([`Ops::attempt_calls`]); both draw the page with [`Ops::report_page`].

use serde::Serialize;

use super::{
    Ops,
    error::{UseCaseError, UseCaseResult},
};
use crate::{
    communication::{
        history::CallHistory,
        report::{self, CplLine, Plots},
        service::{CallSet, SelectError},
        statistics::{self, Quality},
    },
    store::{AttemptCall, CommunicationRecord, communications::CommunicationFilter},
};

/// `too_many_communications`: the set is larger than one request reads.
fn too_many(message: String) -> UseCaseError {
    UseCaseError::invalid("too_many_communications", message)
}

impl Ops<'_> {
    /// The communications of `account_sid` that `filter` selects, their statistics and
    /// saved histories; `too_many_communications` above the service's limit.
    pub async fn communication_set(
        &self,
        account_sid: &str,
        filter: &CommunicationFilter,
    ) -> UseCaseResult<CallSet> {
        let s = self.services;
        s.statistics
            .read(&s.store, &s.objects, account_sid, filter)
            .await
            .map_err(|e| match e {
                SelectError::TooMany { total, max } => too_many(format!(
                    "{total} communications match; one request reads at most {max}: narrow the set (agent_sid, batch, created_from/created_to)"
                )),
                SelectError::Store(e) => e.into(),
            })
    }

    /// The calls of legacy attempt `attempt_sid` of `account_sid`;
    /// `too_many_communications` when it has more than one request reads.
    pub async fn attempt_calls(
        &self,
        account_sid: &str,
        attempt_sid: &str,
    ) -> UseCaseResult<Vec<AttemptCall>> {
        let s = self.services;
        s.statistics
            .attempt_calls(&s.store, account_sid, attempt_sid)
            .await
            .map_err(|e| match e {
                SelectError::TooMany { total, max } => too_many(format!(
                    "the attempt has {total} calls; one request reads at most {max}"
                )),
                SelectError::Store(e) => e.into(),
            })
    }

    /// The saved histories of `calls` of `account_sid` (those that have one).
    pub async fn histories(
        &self,
        account_sid: &str,
        calls: &[&CommunicationRecord],
    ) -> Vec<CallHistory> {
        statistics::read_histories(&self.services.objects, account_sid, calls).await
    }

    /// The audio and turn quality of the saved histories of `calls` of `account_sid`.
    pub async fn quality(&self, account_sid: &str, calls: &[&CommunicationRecord]) -> Quality {
        Quality::read(&self.services.objects, account_sid, calls).await
    }

    /// The report page titled `title` of `calls` of `account_sid` (oldest first), their
    /// `statistics` and saved `histories`: the figures, live calls over time against the
    /// agent's cpl, setup time and turn latency over time, and the outcomes
    /// ([`report::page`]).
    pub async fn report_page<'a>(
        &self,
        account_sid: &str,
        title: &str,
        calls: impl Iterator<Item = &'a CommunicationRecord> + Clone,
        statistics: &impl Serialize,
        histories: &[CallHistory],
    ) -> UseCaseResult<String> {
        let plots = Plots {
            cpl: CplLine::of(&self.services.store, account_sid, calls.clone()).await?,
            turns: report::turn_points(histories),
        };
        Ok(report::page(title, calls, statistics, &plots))
    }
}
