//! The paged list envelope and the validated `limit`/`offset` pair.

use std::collections::BTreeMap;

use serde::Serialize;
use utoipa::ToSchema;

use super::error::ApiError;

/// Default page size.
pub const DEFAULT_LIMIT: i64 = 100;
/// Largest accepted page size; above is 400.
pub const MAX_LIMIT: i64 = 500;

/// Paged envelope of every v1 list response.
#[derive(Debug, Clone, Serialize, serde::Deserialize, ToSchema)]
pub struct Page<T> {
    /// The rows of this page.
    pub items: Vec<T>,
    /// Total rows matching, ignoring paging.
    pub total: i64,
    /// Page size applied.
    pub limit: i64,
    /// Offset applied.
    pub offset: i64,
    /// Whether more rows match beyond this page.
    pub has_more: bool,
    /// One map per requested relation, keyed by the related resource's id; only on lists
    /// that support `include`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub included: Option<BTreeMap<String, BTreeMap<String, serde_json::Value>>>,
}

impl<T> Page<T> {
    pub fn new(items: Vec<T>, total: i64, params: PageParams) -> Self {
        let has_more = params.offset + (items.len() as i64) < total;
        Page {
            items,
            total,
            limit: params.limit,
            offset: params.offset,
            has_more,
            included: None,
        }
    }
    /// Converts the rows, keeping the paging fields.
    pub fn map<U>(self, f: impl FnMut(T) -> U) -> Page<U> {
        Page {
            items: self.items.into_iter().map(f).collect(),
            total: self.total,
            limit: self.limit,
            offset: self.offset,
            has_more: self.has_more,
            included: self.included,
        }
    }
}

/// A validated page request. List query structs carry `limit: Option<i64>` and
/// `offset: Option<i64>` themselves (flattening does not mix with
/// `deny_unknown_fields`) and call [`PageParams::new`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageParams {
    pub limit: i64,
    pub offset: i64,
}

impl PageParams {
    /// limit: default 100, 0..=500 (0 returns only the count); offset: default 0, ≥ 0.
    pub fn new(limit: Option<i64>, offset: Option<i64>) -> Result<Self, ApiError> {
        let limit = limit.unwrap_or(DEFAULT_LIMIT);
        if limit < 0 {
            return Err(ApiError::bad_request(
                "invalid_query",
                "limit: must not be negative",
            ));
        }
        if limit > MAX_LIMIT {
            return Err(ApiError::bad_request(
                "invalid_query",
                format!("limit: must be at most {MAX_LIMIT}"),
            ));
        }
        let offset = offset.unwrap_or(0);
        if offset < 0 {
            return Err(ApiError::bad_request(
                "invalid_query",
                "offset: must not be negative",
            ));
        }
        Ok(PageParams { limit, offset })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds() {
        assert_eq!(
            PageParams::new(None, None).unwrap(),
            PageParams {
                limit: 100,
                offset: 0
            }
        );
        assert!(PageParams::new(Some(500), Some(3)).is_ok());
        assert_eq!(
            PageParams::new(Some(501), None)
                .unwrap_err()
                .status
                .as_u16(),
            400
        );
        assert_eq!(
            PageParams::new(Some(-1), None).unwrap_err().status.as_u16(),
            400
        );
        assert_eq!(
            PageParams::new(None, Some(-1)).unwrap_err().status.as_u16(),
            400
        );
        let p = Page::new(
            vec![1, 2],
            5,
            PageParams {
                limit: 2,
                offset: 2,
            },
        );
        assert!(p.has_more);
        let p = Page::new(
            vec![1],
            5,
            PageParams {
                limit: 2,
                offset: 4,
            },
        );
        assert!(!p.has_more);
    }
}
