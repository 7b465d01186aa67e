//! Why a call could not be set up, and whether trying again later can help.

use std::fmt;

use callsmith_domain::{communication::caller::CallerIdError, store::StoreError};

/// A call that could not be set up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallError {
    /// Something this node lacks for now (the store did not answer, no media port): an
    /// outbound row's claim is released and it is dialled again later; an inbound call is
    /// refused with 503 so the caller may retry.
    Retryable(String),
    /// The communication cannot be placed as it is (its agent, scenario version or number
    /// is gone, its scenario does not compile): it ends `failed` with this reason.
    Permanent(String),
}

impl CallError {
    pub fn permanent(why: impl Into<String>) -> CallError {
        CallError::Permanent(why.into())
    }

    pub fn reason(&self) -> &str {
        match self {
            CallError::Retryable(why) | CallError::Permanent(why) => why,
        }
    }
}

impl fmt::Display for CallError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.reason())
    }
}

impl std::error::Error for CallError {}

/// A database that fails to answer is a passing condition (a timeout, a pool exhausted
/// under load), not a property of the communication; what the store says about the data
/// is.
impl From<StoreError> for CallError {
    fn from(e: StoreError) -> CallError {
        match e {
            StoreError::Db(_) => CallError::Retryable(format!("store: {e}")),
            e => CallError::Permanent(format!("store: {e}")),
        }
    }
}

impl From<CallerIdError> for CallError {
    fn from(e: CallerIdError) -> CallError {
        match e {
            CallerIdError::Store(e) => e.into(),
            e => CallError::Permanent(e.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sqlx_timeout() -> callsmith_domain::store::sqlx::Error {
        callsmith_domain::store::sqlx::Error::PoolTimedOut
    }

    #[test]
    fn store_failures_are_retryable_and_missing_things_are_not() {
        let e: CallError = StoreError::Db(sqlx_timeout()).into();
        assert!(matches!(e, CallError::Retryable(_)));
        let e: CallError = StoreError::NotFound.into();
        assert!(matches!(e, CallError::Permanent(_)));
        let e: CallError = CallerIdError::PoolEmpty.into();
        assert!(matches!(e, CallError::Permanent(_)));
        assert_eq!(e.reason(), "the agent's number pool has no active number");
        let e: CallError = CallerIdError::Store(StoreError::Db(sqlx_timeout())).into();
        assert!(matches!(e, CallError::Retryable(_)));
    }
}
