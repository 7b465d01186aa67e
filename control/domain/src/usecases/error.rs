//! The one error of the use cases. Each front end turns it into its own answer: the v1 API
//! into its envelope (`From<UseCaseError> for ApiError` in the HTTP crate), the legacy API
//! through the v1 mapping, the call runtime through its `Display`.

use std::borrow::Cow;

use callsmith_scenarios::ScenarioError;

use crate::{communication::caller::CallerIdError, scenario_check::CheckError, store::StoreError};

/// Why an operation refused or failed. `reason` is the stable lower_snake_case use-case
/// code the APIs answer with (`unknown_agent`, `too_many_test_calls`…).
#[derive(Debug, thiserror::Error)]
pub enum UseCaseError {
    /// The request breaks a rule of the domain (v1: 422 with `data.topic = validation`,
    /// merged with `data` when there is structure to carry).
    #[error("{reason}: {message}")]
    Invalid {
        reason: Cow<'static, str>,
        message: String,
        data: Option<serde_json::Value>,
    },
    /// The request is malformed beyond a broken rule (v1: 400 `reason`).
    #[error("{reason}: {message}")]
    Malformed {
        reason: Cow<'static, str>,
        message: String,
    },
    /// The account already uses its share; try again after `retry_after_secs` (v1: 429
    /// with `Retry-After`).
    #[error("{reason}: {message}")]
    TooMany {
        reason: Cow<'static, str>,
        message: String,
        retry_after_secs: u64,
    },
    /// The request conflicts with one still running (v1: 409).
    #[error("{reason}: {message}")]
    Conflict {
        reason: Cow<'static, str>,
        message: String,
    },
    /// This process cannot do it (v1: 503).
    #[error("{reason}: {message}")]
    Unavailable {
        reason: Cow<'static, str>,
        message: String,
    },
    /// The `entity` the operation works on is gone (v1: 404 `<entity>_not_found`).
    #[error("{entity} not found")]
    NotFound { entity: &'static str },
    /// The store failed or refused (the front ends map it as they map store errors).
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Anything else; the cause is for the log, never for the caller.
    #[error("{0}")]
    Internal(String),
}

pub type UseCaseResult<T> = Result<T, UseCaseError>;

impl UseCaseError {
    /// A broken rule: `reason` and a message naming the field.
    pub fn invalid(reason: impl Into<Cow<'static, str>>, message: impl Into<String>) -> Self {
        UseCaseError::Invalid {
            reason: reason.into(),
            message: message.into(),
            data: None,
        }
    }

    /// A malformed request: `reason` and a message naming the field.
    pub fn malformed(reason: impl Into<Cow<'static, str>>, message: impl Into<String>) -> Self {
        UseCaseError::Malformed {
            reason: reason.into(),
            message: message.into(),
        }
    }

    /// `scenario_invalid`: the snapshot failed validation; the SCN errors travel as
    /// `data.errors.scenario`.
    pub fn invalid_scenario(errors: Vec<ScenarioError>) -> Self {
        UseCaseError::Invalid {
            reason: "scenario_invalid".into(),
            message: format!("the scenario has {} validation error(s)", errors.len()),
            data: Some(serde_json::json!({"errors": {"scenario": errors}})),
        }
    }

    /// A failure that is not the caller's.
    pub fn internal(cause: impl std::fmt::Display) -> Self {
        UseCaseError::Internal(cause.to_string())
    }
}

impl From<CheckError> for UseCaseError {
    fn from(e: CheckError) -> Self {
        match e {
            CheckError::Store(e) => UseCaseError::Store(e),
            e => UseCaseError::internal(e),
        }
    }
}

/// `no_from_number` for a call with no number to call from; a store failure stays a store
/// failure.
impl From<CallerIdError> for UseCaseError {
    fn from(e: CallerIdError) -> Self {
        match e {
            CallerIdError::Store(e) => UseCaseError::Store(e),
            e => UseCaseError::invalid("no_from_number", e.to_string()),
        }
    }
}
