//! The use cases: what a caller of callsmith can do, written once beneath every front end.
//! The v1 API, the legacy API, browser calls, the load generator (`callsmith load`) and
//! the call runtime's inbound calls decode their own inputs into the types here, call the
//! same operation and turn its one error, [`UseCaseError`], into their own answers.
//!
//! * [`Ops::dispatch`] creates an agent call or a scenario test call; [`AgentDispatch`]
//!   is an agent made ready to dial many contacts (a legacy attempt).
//! * [`Ops::browser_call`] starts a browser test call.
//! * [`inbound_communication`] is the row of a call to one of our numbers.
//! * [`new_communication`] is the one place a communication row is written.
//! * [`check_strategy_definition`], [`Ops::account_strategy`], [`Ops::check_not_suppressed`]
//!   and [`Ops::idempotency_start`] are the strategy, do-not-call and idempotency rules.
//! * [`Ops::test_version`], [`Ops::admit_test_call`], [`Ops::check_snapshot`] and
//!   [`Ops::check_placeable`] are the rules test calls, publishing and dispatch share.
//! * [`Ops::create_agent`], [`Ops::update_agent`] and [`Ops::check_agent`]: an agent (a
//!   legacy campaign) checked whole by the rules of docs/agents.md.
//! * [`Ops::create_scenario`], [`Ops::validate_draft`] and [`Ops::publish_draft`]: a
//!   scenario and its draft (the legacy create is a create and a publish).
//! * [`Ops::create_tenant`], [`Ops::create_trunk`], [`Ops::create_account`] and
//!   [`Ops::create_number`]: provisioning, with the field rules their changes share.
//! * [`Ops::communication_set`], [`Ops::attempt_calls`] and [`Ops::report_page`]: the
//!   statistics and report page of a set of calls (v1) or of a legacy attempt.

mod agents;
mod browser_call;
mod dispatch;
mod error;
mod provision;
mod rows;
mod scenarios;
mod statistics;
mod strategies;

pub use agents::{AgentDraft, NewAgent, check_schedule};
pub use browser_call::{BROWSER_PARTY, BrowserCallInput, MAX_OFFER_BYTES};
pub use dispatch::{AgentDispatch, DispatchInput, is_batch_sid};
pub use error::{UseCaseError, UseCaseResult};
pub use provision::{
    NewAccountInput, NewNumberInput, check_country, check_email, check_identifier, check_line,
    check_phone, check_region, check_timezone, check_trunk_name, non_blank, number_write_error,
};
pub use rows::{
    Direction, Parties, ScenarioRun, check_recipient, flat_data, inbound_communication,
    new_communication,
};
pub use scenarios::{NewScenario, check_description, snapshot_of};
pub use strategies::{
    IDEMPOTENCY_WINDOW_HOURS, Idempotent, MAX_IDEMPOTENCY_KEY_LEN, check_strategy_definition,
    do_not_call_key, is_idempotency_key, normalize_e164, opt_out_number, parse_do_not_call_csv,
    request_hash,
};

use crate::{services::Services, settings::Settings, test_calls::TestCallGate};

/// What the operations run against: the shared services, the control plane's settings
/// and the admission gate of test calls. Each front end lends its own (the HTTP layer's
/// `AppState::ops`).
#[derive(Clone, Copy)]
pub struct Ops<'a> {
    pub services: &'a Services,
    pub settings: &'a Settings,
    pub test_calls: &'a TestCallGate,
}
