//! A report page ([`callsmith_domain::communication::report`]) as an HTTP answer.

use axum::response::{IntoResponse, Response};
use http::{HeaderValue, header};

use crate::communication::report;

/// A report page as an HTTP answer: `text/html`, the page's [`report::csp`],
/// `X-Content-Type-Options: nosniff` and `Referrer-Policy: no-referrer`. Every route
/// serving a report answers through here.
pub fn response(page: String) -> Response {
    let mut r = page.into_response();
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    if let Ok(v) = HeaderValue::from_str(report::csp()) {
        h.insert(header::CONTENT_SECURITY_POLICY, v);
    }
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    r
}
