//! Sending one SMS through an account's `http` provider. The request is built from the
//! provider's templates with [`crate::sms_template::render`] (the language the API checks
//! a provider with) and sent through the guarded client ([`crate::guarded_http`]), since a
//! provider's URL is tenant-named.
//!
//! Each substituted value is encoded for where it lands: percent-encoded in the url,
//! JSON-escaped in a body sent as JSON, form-encoded in a body sent as
//! `application/x-www-form-urlencoded`, verbatim in header values and other bodies.

use std::time::Duration;

use crate::{
    guarded_http::{GuardedClient, OutboundError, OutboundRequest},
    sms_template::{self, TemplateError, url_escape},
    store::SmsProviderRecord,
};

/// Why a message was not sent (the sms brick shows the message in `sms_error`).
#[derive(Debug, thiserror::Error)]
pub enum SmsError {
    /// The provider is not active.
    #[error("the SMS provider is inactive")]
    Inactive,
    /// A template of the provider does not render.
    #[error("provider template: {} ({:?})", .0.reason, .0.fragment)]
    Template(TemplateError),
    /// The request could not be sent (refused target, network, timeout).
    #[error(transparent)]
    Send(#[from] OutboundError),
    /// The provider answered with this non-2xx status.
    #[error("provider answered {0}")]
    Rejected(u16),
}

/// Time allowed for one provider request.
pub const SEND_TIMEOUT: Duration = Duration::from_secs(15);

/// How a body template's values are encoded, by the request's content type.
fn body_escape(content_type: Option<&str>) -> fn(&str) -> String {
    match content_type.map(str::to_ascii_lowercase) {
        Some(ct) if ct.contains("json") => json_escape,
        Some(ct) if ct.contains("x-www-form-urlencoded") => url_escape,
        _ => str::to_string,
    }
}

/// The text of `v` as it appears inside a JSON string literal.
fn json_escape(v: &str) -> String {
    let quoted = serde_json::Value::String(v.to_string()).to_string();
    quoted[1..quoted.len() - 1].to_string()
}

/// Builds the provider request for one message (`from`, `to`, `text`).
pub fn request(
    p: &SmsProviderRecord,
    from: &str,
    to: &str,
    text: &str,
) -> Result<OutboundRequest, SmsError> {
    let render = |t: &str, esc: fn(&str) -> String| {
        sms_template::render(t, from, to, text, esc).map_err(SmsError::Template)
    };
    let method = if p.method.trim().is_empty() {
        "POST".to_string()
    } else {
        p.method.trim().to_ascii_uppercase()
    };
    let mut req = OutboundRequest::new(method, render(&p.url, url_escape)?)
        .timeout(SEND_TIMEOUT)
        .max_body(0);
    let headers: Vec<serde_json::Value> = serde_json::from_str(&p.headers).unwrap_or_default();
    let mut content_type = None;
    for h in &headers {
        let (Some(n), Some(v)) = (
            h.get("name").and_then(|v| v.as_str()),
            h.get("value").and_then(|v| v.as_str()),
        ) else {
            continue;
        };
        let v = render(v, str::to_string)?;
        if n.eq_ignore_ascii_case("content-type") {
            content_type = Some(v.clone());
        }
        req = req.header(n, v);
    }
    if !p.body_template.is_empty() {
        req = req.body(render(
            &p.body_template,
            body_escape(content_type.as_deref()),
        )?);
    }
    Ok(req)
}

/// Sends one message through provider `p`; Err says why it was not accepted.
pub async fn send(
    outbound: &GuardedClient,
    p: &SmsProviderRecord,
    from: &str,
    to: &str,
    text: &str,
) -> Result<(), SmsError> {
    if p.status != "active" {
        return Err(SmsError::Inactive);
    }
    let req = request(p, from, to, text)?;
    let resp = outbound.send(&req).await?;
    if resp.is_success() {
        Ok(())
    } else {
        Err(SmsError::Rejected(resp.status))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn provider(url: &str, headers: &str, body: &str) -> SmsProviderRecord {
        SmsProviderRecord {
            sid: "smp_1".into(),
            tenant_sid: "ten_1".into(),
            account_sid: "acc_1".into(),
            name: "p".into(),
            kind: "http".into(),
            url: url.into(),
            method: "post".into(),
            headers: headers.into(),
            body_template: body.into(),
            alphas: "[]".into(),
            numbers: "[]".into(),
            status: "active".into(),
            created_at: chrono::Utc::now(),
            updated_at: chrono::Utc::now(),
        }
    }

    #[test]
    fn values_are_encoded_where_they_land() {
        let p = provider(
            "https://sms.test/send?to={{ to }}&from={{from}}",
            r#"[{"name":"Content-Type","value":"application/json"},{"name":"X-To","value":"{{to}}"}]"#,
            r#"{"text":"{{text}}"}"#,
        );
        let r = request(&p, "+49 1", "+49 2", "say \"hi\" & bye").unwrap();
        assert_eq!(r.method, "POST");
        assert_eq!(r.url, "https://sms.test/send?to=%2B49%202&from=%2B49%201");
        assert!(r.headers.contains(&("X-To".into(), "+49 2".into())));
        let body: serde_json::Value = serde_json::from_slice(r.body.as_ref().unwrap()).unwrap();
        assert_eq!(body["text"], "say \"hi\" & bye");

        let form = provider(
            "https://sms.test/send",
            r#"[{"name":"content-type","value":"application/x-www-form-urlencoded"}]"#,
            "to={{to}}&msg={{text}}",
        );
        let r = request(&form, "a", "+1 2", "a&b=c").unwrap();
        assert_eq!(r.body.unwrap().as_ref(), b"to=%2B1%202&msg=a%26b%3Dc");
    }

    #[tokio::test]
    async fn private_providers_and_inactive_ones_are_refused() {
        let c = GuardedClient::new(false).unwrap();
        let p = provider("http://127.0.0.1:9/send?to={{to}}", "[]", "");
        let e = send(&c, &p, "a", "b", "c").await.unwrap_err();
        assert!(matches!(e, SmsError::Send(_)), "{e:?}");
        assert!(e.to_string().contains("non-public"), "{e}");
        let mut off = provider("https://sms.test/x", "[]", "");
        off.status = "inactive".into();
        let e = send(&c, &off, "a", "b", "c").await.unwrap_err();
        assert!(matches!(e, SmsError::Inactive), "{e:?}");
        assert_eq!(e.to_string(), "the SMS provider is inactive");
        let bad = provider("https://sms.test/{{nope}}", "[]", "");
        let e = request(&bad, "a", "b", "c").unwrap_err();
        assert!(matches!(e, SmsError::Template(_)), "{e:?}");
        assert!(e.to_string().starts_with("provider template: "), "{e}");
    }
}
