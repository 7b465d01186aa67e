//! The `Idempotency-Key` request header of the creating routes that take it (v1 dispatch,
//! legacy attempt creation): a repeated key within the window answers the first request's
//! result instead of creating again (docs/strategies.md, "Idempotent dispatch").

use axum::http::HeaderMap;

use super::{ApiError, ApiResult};
use crate::usecases::{MAX_IDEMPOTENCY_KEY_LEN, is_idempotency_key};

/// The request header.
pub const HEADER: &str = "idempotency-key";
/// The response header set (to `true`) on a replayed answer.
pub const REPLAYED_HEADER: &str = "idempotent-replayed";

/// The request's `Idempotency-Key`; None when absent. 400 `invalid_idempotency_key` for a
/// value that is not 1 to 255 visible ASCII characters, or a header sent twice.
pub fn key(headers: &HeaderMap) -> ApiResult<Option<String>> {
    let mut values = headers.get_all(HEADER).iter();
    let Some(first) = values.next() else {
        return Ok(None);
    };
    match (first.to_str(), values.next()) {
        (Ok(v), None) if is_idempotency_key(v) => Ok(Some(v.to_string())),
        _ => Err(ApiError::bad_request(
            "invalid_idempotency_key",
            format!(
                "Idempotency-Key: one header of 1 to {MAX_IDEMPOTENCY_KEY_LEN} visible ASCII characters"
            ),
        )),
    }
}
