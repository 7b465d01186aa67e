//! A browser test call (`POST /v1/communication/-/browser-call`): the browser's WebRTC
//! offer is answered by the engine's runner ([`crate::browser_calls`]) and the call runs a
//! scenario's draft or published version with the browser as its leg.

use serde_json::Value;

use super::{
    Ops,
    error::{UseCaseError, UseCaseResult},
    rows::{Direction, Parties, ScenarioRun, flat_data, new_communication},
};
use crate::{
    browser_calls::{BrowserCallError, BrowserCallStarted},
    communication::caller,
    store::AccountRecord,
};

/// Longest SDP offer taken (a browser's audio offer is a few KiB).
pub const MAX_OFFER_BYTES: usize = 32 * 1024;

/// The recipient and from-number a browser call carries (it has no phone number).
pub const BROWSER_PARTY: &str = "browser";

/// What a browser call asks for (the v1 browser-call body, decoded).
#[derive(Debug, Clone)]
pub struct BrowserCallInput {
    pub scenario_sid: String,
    /// Run the current draft (validated, then frozen as a test dispatch freezes it).
    pub draft: bool,
    /// The direction the scenario sees.
    pub direction: Direction,
    /// The browser's complete SDP offer.
    pub sdp: String,
    /// Test variables (checked with [`flat_data`]).
    pub data: Option<Value>,
    /// Record the call.
    pub record: bool,
}

impl Ops<'_> {
    /// Starts a browser call on this node. Refusals: `invalid_sdp` (empty or longer than
    /// [`MAX_OFFER_BYTES`], or an offer the runner cannot answer), `data_not_flat`,
    /// `browser_calls_unavailable` (this process runs no calls, or cannot take one now),
    /// `too_many_test_calls`, and those of [`Ops::test_version`]. A refusal writes nothing
    /// (no draft frozen).
    pub async fn browser_call(
        &self,
        account: &AccountRecord,
        input: &BrowserCallInput,
    ) -> UseCaseResult<BrowserCallStarted> {
        if input.sdp.trim().is_empty() || input.sdp.len() > MAX_OFFER_BYTES {
            return Err(UseCaseError::invalid(
                "invalid_sdp",
                format!("sdp: the offer must be 1 to {MAX_OFFER_BYTES} bytes"),
            ));
        }
        let data = flat_data("data", input.data.as_ref())?;
        let Some(runner) = self.services.browser.runner() else {
            return Err(unavailable("this process runs no calls"));
        };
        // Held until the runner has stored the call.
        let _admitted = self.admit_test_call(account).await?;
        let (_, record) = self
            .test_version(account, &input.scenario_sid, input.draft)
            .await?;
        let parties = Parties {
            tenant_sid: account.tenant_sid.clone(),
            account_sid: account.sid.clone(),
            recipient: BROWSER_PARTY.into(),
            from_number: BROWSER_PARTY.into(),
            trunk: None,
            timezone: caller::call_timezone(None, account),
        };
        let new = new_communication(parties, ScenarioRun::of(&record), input.direction)
            .with_data(&data)?;
        match runner.start(new, &input.sdp, input.record).await {
            Ok(started) => Ok(started),
            Err(BrowserCallError::InvalidOffer(why)) => {
                Err(UseCaseError::invalid("invalid_sdp", format!("sdp: {why}")))
            }
            Err(BrowserCallError::Unavailable(why)) => Err(unavailable(&why)),
        }
    }
}

fn unavailable(why: &str) -> UseCaseError {
    UseCaseError::Unavailable {
        reason: "browser_calls_unavailable".into(),
        message: format!("browser calls are unavailable: {why}"),
    }
}
