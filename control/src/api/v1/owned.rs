//! Helpers shared by the account-owned telephony resources (numbers, pools, SMS
//! providers, agents, scenarios): row visibility, delete conflicts, nullable patch
//! fields and `include` parsing.

use serde::{Deserialize, Deserializer};

use crate::api::caller::Caller;
use crate::api::{ApiError, ApiResult, AppState, comma_list};

/// Whether the caller may see a row owned by `account_sid` of `tenant_sid`: the row is
/// in the caller's scope and, when X-Account-Sid is sent, in the declared account (the
/// header is checked by the usual rules first). Out-of-scope rows read as absent.
pub(crate) async fn sees_row(
    state: &AppState,
    caller: &Caller,
    account_sid: &str,
    tenant_sid: &str,
) -> ApiResult<bool> {
    if caller.header_account.is_some() {
        let declared = caller.account_scope(state).await?;
        if declared.sid != account_sid {
            return Ok(false);
        }
    }
    Ok(caller.sees_account(account_sid, tenant_sid))
}

/// 409 `<entity>_in_use`: agents reference the resource a delete was asked for.
/// `data.agents` holds the first ids (at most 20), the message the total count.
pub(crate) fn in_use(entity: &str, agents: Vec<String>, total: i64) -> ApiError {
    let noun = if total == 1 { "agent" } else { "agents" };
    ApiError::conflict(
        format!("{entity}_in_use"),
        format!("{entity} is referenced by {total} {noun}; change or delete them first"),
    )
    .with_data(serde_json::json!({"topic": "conflict", "agents": agents}))
}

/// How many referencing agent ids a delete conflict lists.
pub(crate) const CONFLICT_AGENTS_LISTED: i64 = 20;

/// Deserializes a field that may be absent (outer None), null (Some(None)) or a value,
/// for partial updates of nullable fields. Use with `#[serde(default, deserialize_with = "nullable")]`.
pub(crate) fn nullable<'de, D, T>(d: D) -> Result<Option<Option<T>>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(d).map(Some)
}

/// Parses a comma-separated `include` against the accepted relation names; an unlisted
/// name is 400 `invalid_include`.
pub(crate) fn parse_include(
    raw: Option<&str>,
    accepted: &[(&'static str, &'static str)],
) -> ApiResult<Vec<&'static str>> {
    comma_list::parse(raw, accepted).map_err(|part| {
        ApiError::bad_request(
            "invalid_include",
            format!(
                "include: unknown relation {part:?} (accepted: {})",
                comma_list::names(accepted)
            ),
        )
    })
}
