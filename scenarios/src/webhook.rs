//! Sans-IO parts of webhooks, shared by the `webhook` brick and `POST /v1/scenario/webhook/run`:
//! validating a configuration, compiling the request against variables, rendering the
//! equivalent `curl` command, mapping a received response into variables, and the
//! [`WebhookOutcome`] the executor returns. The HTTP executor itself lives in the control plane.

use std::collections::BTreeMap;

use base64::Engine as _;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::codes::{Code, ScenarioError, value_text};
use crate::model::{MappingEntry, WebhookProps};
use crate::opt::Opt;
use crate::template::{self, Vars};
use crate::walk::{check_fields, type_error};

/// Request timeout used when neither `request.timeout` nor `options.timeout` is set (seconds).
pub const DEFAULT_TIMEOUT_SECS: f64 = 10.0;
/// Largest accepted timeout (seconds).
pub const MAX_TIMEOUT_SECS: f64 = 300.0;
/// Methods a webhook may use.
pub const METHODS: &[&str] = &["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"];

/// A request ready to execute: every placeholder rendered, authentication folded into headers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompiledRequest {
    /// Upper-case method.
    pub method: String,
    pub url: String,
    /// Headers in order, including `Content-Type` and `Authorization` when they apply.
    pub headers: Vec<(String, String)>,
    /// Body text, `None` when the request has no body.
    pub body: Option<String>,
    /// Timeout in seconds (request.timeout, else options.timeout, else 10).
    pub timeout_secs: f64,
    pub insecure_skip_verify: bool,
    pub proxy_url: Option<String>,
    /// `options.async`: the scenario does not wait for the response.
    pub is_async: bool,
}

/// Call facts attached as headers when `attach_call_metadata` is true (a brick in a live call).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CallMetadata {
    pub communication_id: String,
    pub recipient: String,
    pub from: String,
}

/// Outcome status the scenario branches on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WebhookStatus {
    Processed,
    Fail,
}

/// One redirect followed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Redirect {
    pub code: i64,
    pub url: String,
    pub method: String,
}

/// The response received.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WebhookResponse {
    pub http_status_code: i64,
    pub http_status_text: String,
    /// Header name (as received) to its values.
    pub headers: BTreeMap<String, Vec<String>>,
    pub body: String,
    /// Round trip in milliseconds.
    pub duration: i64,
}

/// The spec's "Webhook run outcome", field for field.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WebhookOutcome {
    pub status: WebhookStatus,
    /// Failure detail, "" when processed.
    pub error: String,
    /// Extracted variables, names unwrapped.
    pub variables: BTreeMap<String, String>,
    /// Equivalent curl command.
    pub curl: String,
    /// Redirects followed; `null` when none were recorded.
    pub redirects: Option<Vec<Redirect>>,
    /// `null` when no response was received.
    pub response: Option<WebhookResponse>,
}

impl WebhookOutcome {
    /// Builds the outcome from what the executor observed: a response (mapped when its status
    /// is below 300) or a transport error. A status of 300 or above is `fail` with the status
    /// in `error`; variables are only extracted from a `processed` response.
    pub fn finish(
        curl: String,
        redirects: Option<Vec<Redirect>>,
        received: Result<WebhookResponse, String>,
        mapping: &[MappingEntry],
    ) -> WebhookOutcome {
        match received {
            Err(error) => WebhookOutcome {
                status: WebhookStatus::Fail,
                error,
                variables: BTreeMap::new(),
                curl,
                redirects,
                response: None,
            },
            Ok(resp) if resp.http_status_code >= 300 || resp.http_status_code < 100 => {
                WebhookOutcome {
                    status: WebhookStatus::Fail,
                    error: format!("status {} {}", resp.http_status_code, resp.http_status_text)
                        .trim_end()
                        .to_string(),
                    variables: BTreeMap::new(),
                    curl,
                    redirects,
                    response: Some(resp),
                }
            }
            Ok(resp) => WebhookOutcome {
                status: WebhookStatus::Processed,
                error: String::new(),
                variables: map_response(mapping, &resp),
                curl,
                redirects,
                response: Some(resp),
            },
        }
    }
}

/// The response mapping entries of a configuration (empty when absent or malformed).
pub fn mapping(props: &WebhookProps) -> &[MappingEntry] {
    props
        .response_mapping
        .get()
        .map(|m| m.variables.items())
        .unwrap_or(&[])
}

fn effective_timeout(props: &WebhookProps) -> f64 {
    let req = props
        .request
        .get()
        .and_then(|r| r.timeout.f64())
        .filter(|t| *t > 0.0);
    let opt = props
        .options
        .get()
        .and_then(|o| o.timeout.f64())
        .filter(|t| *t > 0.0);
    req.or(opt)
        .unwrap_or(DEFAULT_TIMEOUT_SECS)
        .min(MAX_TIMEOUT_SECS)
}

/// Percent-encodes a form component (application/x-www-form-urlencoded).
fn form_encode(s: &str) -> String {
    url::form_urlencoded::byte_serialize(s.as_bytes()).collect()
}

/// Compiles the request against `vars`. Errors when the rendered URL or method is unusable
/// (validation catches the static cases; a placeholder may still render to a bad URL).
pub fn compile(
    props: &WebhookProps,
    vars: &dyn Vars,
    metadata: Option<&CallMetadata>,
) -> Result<CompiledRequest, String> {
    let Some(req) = props.request.get() else {
        return Err("webhook has no request".to_string());
    };
    let method = req.method.str().trim().to_ascii_uppercase();
    if !METHODS.contains(&method.as_str()) {
        return Err(format!("unsupported method {:?}", req.method.str()));
    }
    let url = template::render(req.url.str(), vars).trim().to_string();
    check_url(&url)?;
    let mut headers: Vec<(String, String)> = Vec::new();
    let mut body = None;
    if let Some(b) = req.body.get() {
        match b.kind.str() {
            "json" => {
                headers.push(("Content-Type".into(), "application/json".into()));
                body = Some(template::render(b.data.str(), vars));
            }
            "text" => {
                headers.push(("Content-Type".into(), "text/plain; charset=utf-8".into()));
                body = Some(template::render(b.data.str(), vars));
            }
            "form" => {
                headers.push((
                    "Content-Type".into(),
                    "application/x-www-form-urlencoded".into(),
                ));
                let pairs: Vec<String> = b
                    .form_values
                    .items()
                    .iter()
                    .map(|nv| {
                        format!(
                            "{}={}",
                            form_encode(&template::render(nv.name.str(), vars)),
                            form_encode(&template::render(nv.value.str(), vars))
                        )
                    })
                    .collect();
                body = Some(pairs.join("&"));
            }
            _ => {}
        }
    }
    if let Some(auth) = req.authentication.get() {
        match auth.kind.str() {
            "basic" => {
                let (u, p) = auth
                    .basic
                    .get()
                    .map(|b| {
                        (
                            template::render(b.username.str(), vars),
                            template::render(b.password.str(), vars),
                        )
                    })
                    .unwrap_or_default();
                let token = base64::engine::general_purpose::STANDARD.encode(format!("{u}:{p}"));
                headers.push(("Authorization".into(), format!("Basic {token}")));
            }
            "bearer" => {
                let t = auth
                    .bearer
                    .get()
                    .map(|b| template::render(b.token.str(), vars))
                    .unwrap_or_default();
                headers.push(("Authorization".into(), format!("Bearer {t}")));
            }
            _ => {}
        }
    }
    if let Some(h) = req.header.get() {
        for nv in h.headers.items() {
            let name = template::render(nv.name.str(), vars).trim().to_string();
            if name.is_empty() {
                continue;
            }
            headers.push((name, template::render(nv.value.str(), vars)));
        }
    }
    if req.attach_call_metadata.flag()
        && let Some(m) = metadata
    {
        headers.push((
            "X-Callsmith-Communication-Id".into(),
            m.communication_id.clone(),
        ));
        headers.push(("X-Callsmith-Recipient".into(), m.recipient.clone()));
        headers.push(("X-Callsmith-From".into(), m.from.clone()));
    }
    let proxy_url = req
        .proxy
        .get()
        .map(|p| template::render(p.url.str(), vars).trim().to_string())
        .filter(|u| !u.is_empty());
    Ok(CompiledRequest {
        method,
        url,
        headers,
        body,
        timeout_secs: effective_timeout(props),
        insecure_skip_verify: req.insecure_skip_verify.flag(),
        proxy_url,
        is_async: props
            .options
            .get()
            .map(|o| o.is_async.flag())
            .unwrap_or(false),
    })
}

fn check_url(url: &str) -> Result<(), String> {
    let parsed = url::Url::parse(url).map_err(|e| format!("invalid url {url:?}: {e}"))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(format!("invalid url {url:?}: scheme must be http or https"));
    }
    if parsed.host_str().is_none_or(str::is_empty) {
        return Err(format!("invalid url {url:?}: no host"));
    }
    Ok(())
}

/// Quotes a string for a POSIX shell.
fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// The equivalent `curl` command of a compiled request.
pub fn to_curl(req: &CompiledRequest) -> String {
    let mut parts = vec![
        "curl".to_string(),
        "-X".to_string(),
        req.method.clone(),
        shell_quote(&req.url),
    ];
    for (n, v) in &req.headers {
        parts.push("-H".into());
        parts.push(shell_quote(&format!("{n}: {v}")));
    }
    if let Some(b) = &req.body {
        parts.push("--data-raw".into());
        parts.push(shell_quote(b));
    }
    if req.insecure_skip_verify {
        parts.push("-k".into());
    }
    if let Some(p) = &req.proxy_url {
        parts.push("--proxy".into());
        parts.push(shell_quote(p));
    }
    parts.push("--max-time".into());
    parts.push(format_secs(req.timeout_secs));
    parts.join(" ")
}

fn format_secs(s: f64) -> String {
    if s.fract() == 0.0 {
        format!("{}", s as i64)
    } else {
        format!("{s}")
    }
}

/// A JSON value as a variable value: strings verbatim, everything else as compact JSON.
pub fn json_to_var(v: &Value) -> String {
    value_text(v)
}

/// Deepest nesting of brackets and parentheses a JSONPath may have. serde_json_path's
/// parser backtracks exponentially in the nesting depth of filter selectors (each level of
/// `$.a[?@.b[?@.c…` doubles the parse time: about a second at 16 levels in a debug build), so
/// deeper paths are refused before they reach it. Real mapping paths nest two or three levels.
pub const MAX_JSON_PATH_DEPTH: usize = 8;

/// Parses a JSONPath (RFC 9535), refusing paths nested deeper than [`MAX_JSON_PATH_DEPTH`].
pub fn parse_json_path(path: &str) -> Result<serde_json_path::JsonPath, String> {
    let (mut depth, mut max) = (0usize, 0usize);
    let mut quote: Option<char> = None;
    let mut escaped = false;
    for c in path.chars() {
        match quote {
            Some(_) if escaped => escaped = false,
            Some(_) if c == '\\' => escaped = true,
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None => match c {
                '\'' | '"' => quote = Some(c),
                '[' | '(' => {
                    depth += 1;
                    max = max.max(depth);
                }
                ']' | ')' => depth = depth.saturating_sub(1),
                _ => {}
            },
        }
    }
    if max > MAX_JSON_PATH_DEPTH {
        return Err(format!(
            "nested deeper than {MAX_JSON_PATH_DEPTH} brackets or parentheses"
        ));
    }
    serde_json_path::JsonPath::parse(path).map_err(|e| e.to_string())
}

/// Applies a JSONPath to a document: the first node, as variable text.
pub fn json_path_first(path: &str, doc: &Value) -> Option<String> {
    let p = parse_json_path(path).ok()?;
    p.query(doc).first().map(json_to_var)
}

/// Maps a response into variables (names unwrapped). Every valid entry yields a variable: the
/// found value, or `set_if_not_found` when the path finds nothing or the body is not JSON.
pub fn map_response(mapping: &[MappingEntry], resp: &WebhookResponse) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut doc: Option<Option<Value>> = None;
    for m in mapping {
        let Some(name) = template::unwrap_target(m.name.str()) else {
            continue;
        };
        let found = match m.source.str() {
            "header" => {
                let want = m.path.str().trim();
                resp.headers
                    .iter()
                    .find(|(k, _)| k.eq_ignore_ascii_case(want))
                    .and_then(|(_, vs)| vs.first().cloned())
            }
            _ => {
                let parsed =
                    doc.get_or_insert_with(|| serde_json::from_str::<Value>(&resp.body).ok());
                parsed
                    .as_ref()
                    .and_then(|d| json_path_first(m.path.str(), d))
            }
        };
        out.insert(
            name.to_string(),
            found.unwrap_or_else(|| m.set_if_not_found.str().to_string()),
        );
    }
    out
}

/// Semantic checks of a webhook configuration (required fields, method, URL, body and
/// authentication types, timeouts, mapping targets and JSONPaths). Wrong JSON types and
/// placeholder syntax are reported by the generic field walk ([`crate::walk::check_fields`]);
/// [`parse_properties`] runs both. `prefix` is prepended to every `property` path
/// (`properties.` for a brick, "" for the webhook run route).
pub fn validate_webhook(props: &WebhookProps, prefix: &str, out: &mut Vec<ScenarioError>) {
    let p = |s: &str| format!("{prefix}{s}");
    let Some(req) = props.request.get() else {
        if props.request.invalid().is_none() {
            out.push(
                ScenarioError::new(Code::MissingProperty, "webhook request is required")
                    .property(p("request")),
            );
        }
        return;
    };
    match &req.method {
        Opt::Set(m) if !m.trim().is_empty() => {
            if !METHODS.contains(&m.trim().to_ascii_uppercase().as_str()) {
                out.push(
                    ScenarioError::new(Code::InvalidEnumValue, format!("unsupported method {m:?}"))
                        .property(p("request.method"))
                        .value(m.clone()),
                )
            }
        }
        Opt::Invalid(_) => {}
        _ => out.push(
            ScenarioError::new(Code::MissingProperty, "request.method is required")
                .property(p("request.method")),
        ),
    }
    match &req.url {
        Opt::Set(u) if !u.trim().is_empty() => {
            let u = u.trim();
            if template::check(u).is_ok() && !u.starts_with("{{") {
                let probe = template::render(u, &Probe);
                if let Err(e) = check_url(&probe) {
                    out.push(
                        ScenarioError::new(Code::InvalidUrl, e)
                            .property(p("request.url"))
                            .value(u),
                    );
                }
            }
        }
        Opt::Invalid(_) => {}
        _ => out.push(
            ScenarioError::new(Code::MissingProperty, "request.url is required")
                .property(p("request.url")),
        ),
    }
    if let Some(b) = req.body.get() {
        let kind = b.kind.str();
        if !matches!(kind, "" | "none" | "json" | "text" | "form") {
            out.push(
                ScenarioError::new(
                    Code::InvalidEnumValue,
                    format!("unknown body type {kind:?} (json, text, form)"),
                )
                .property(p("request.body.type"))
                .value(kind),
            );
        }
    }
    if let Some(a) = req.authentication.get() {
        match a.kind.str() {
            "" | "none" => {}
            "basic" => {
                if a.basic
                    .get()
                    .map(|b| b.username.str())
                    .unwrap_or("")
                    .trim()
                    .is_empty()
                {
                    out.push(
                        ScenarioError::new(
                            Code::MissingProperty,
                            "basic authentication needs a username",
                        )
                        .property(p("request.authentication.basic.username")),
                    );
                }
            }
            "bearer" => {
                if a.bearer
                    .get()
                    .map(|b| b.token.str())
                    .unwrap_or("")
                    .trim()
                    .is_empty()
                {
                    out.push(
                        ScenarioError::new(
                            Code::MissingProperty,
                            "bearer authentication needs a token",
                        )
                        .property(p("request.authentication.bearer.token")),
                    );
                }
            }
            other => out.push(
                ScenarioError::new(
                    Code::InvalidEnumValue,
                    format!("unknown authentication type {other:?} (none, basic, bearer)"),
                )
                .property(p("request.authentication.type"))
                .value(other),
            ),
        }
    }
    if let Some(h) = req.header.get() {
        for (i, nv) in h.headers.items().iter().enumerate() {
            if nv.name.str().trim().is_empty() {
                out.push(
                    ScenarioError::new(Code::MissingProperty, "a header needs a name")
                        .property(p(&format!("request.header.headers[{i}].name"))),
                );
            }
        }
    }
    if let Some(px) = req.proxy.get() {
        let u = px.url.str().trim();
        if !u.is_empty()
            && template::check(u).is_ok()
            && !u.starts_with("{{")
            && url::Url::parse(&template::render(u, &Probe)).is_err()
        {
            out.push(
                ScenarioError::new(Code::InvalidUrl, format!("invalid proxy url {u:?}"))
                    .property(p("request.proxy.url"))
                    .value(u),
            );
        }
    }
    check_timeout(&req.timeout, &p("request.timeout"), out);
    if let Some(o) = props.options.get() {
        check_timeout(&o.timeout, &p("options.timeout"), out);
    }
    if let Some(rm) = props.response_mapping.get() {
        validate_mapping(&rm.variables, &p("response_mapping.variables"), true, out);
    }
}

/// Validates mapping entries (webhook response mapping, or data_mapping variables when
/// `allow_header` is false): target names, sources and JSONPaths.
pub fn validate_mapping(
    entries: &Opt<Vec<MappingEntry>>,
    path: &str,
    allow_header: bool,
    out: &mut Vec<ScenarioError>,
) {
    for (i, m) in entries.items().iter().enumerate() {
        let at = format!("{path}[{i}]");
        let name = m.name.str();
        if name.trim().is_empty() {
            out.push(
                ScenarioError::new(Code::MissingProperty, "a mapping needs a target name")
                    .property(format!("{at}.name")),
            );
        } else if template::check(name).is_ok() && template::unwrap_target(name).is_none() {
            // A broken `{{` is already reported as SCN115 by the field walk.
            out.push(
                ScenarioError::new(
                    Code::InvalidVariableName,
                    format!("invalid target variable {name:?}"),
                )
                .property(format!("{at}.name"))
                .value(name),
            );
        }
        let source = m.source.str();
        let is_header = source == "header";
        if !(matches!(source, "" | "body") || (allow_header && is_header)) {
            out.push(
                ScenarioError::new(
                    Code::InvalidEnumValue,
                    format!("unknown mapping source {source:?}"),
                )
                .property(format!("{at}.source"))
                .value(source),
            );
        }
        let path_s = m.path.str();
        if path_s.trim().is_empty() {
            out.push(
                ScenarioError::new(Code::MissingProperty, "a mapping needs a path")
                    .property(format!("{at}.path")),
            );
        } else if matches!(source, "" | "body")
            && let Err(e) = parse_json_path(path_s)
        {
            out.push(
                ScenarioError::new(
                    Code::InvalidJsonPath,
                    format!("invalid JSONPath {path_s:?}: {e}"),
                )
                .property(format!("{at}.path"))
                .value(path_s),
            );
        }
    }
}

/// Renders every placeholder as `x` so a URL's static shape can be checked.
struct Probe;
impl Vars for Probe {
    fn lookup(&self, _: &str) -> Option<String> {
        Some("x".to_string())
    }
}

fn check_timeout(o: &Opt<serde_json::Number>, path: &str, out: &mut Vec<ScenarioError>) {
    if let Opt::Set(n) = o {
        let t = n.as_f64().unwrap_or(-1.0);
        if !(0.0..=MAX_TIMEOUT_SECS).contains(&t) {
            out.push(
                ScenarioError::new(
                    Code::OutOfRange,
                    format!("{path} must be between 0 and {MAX_TIMEOUT_SECS} seconds"),
                )
                .property(path)
                .value(n.to_string()),
            );
        }
    }
}

/// Parses and validates the `properties` of a webhook run request: the configuration, or
/// every problem found (the route answers 422 with them).
pub fn parse_properties(v: &Value) -> Result<WebhookProps, Vec<ScenarioError>> {
    let props = match WebhookProps::deserialize(v) {
        Ok(p) => p,
        Err(_) => return Err(vec![type_error("properties", "an object", v)]),
    };
    let mut errs = Vec::new();
    check_fields(&props, "", &mut errs);
    validate_webhook(&props, "", &mut errs);
    if errs.is_empty() {
        Ok(props)
    } else {
        Err(errs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deeply_nested_json_paths_are_refused_before_parsing() {
        // Each level of nested filters doubles serde_json_path's parse time.
        let deep = format!("$.a{}", "[?@.b".repeat(40));
        assert!(
            parse_json_path(&deep)
                .unwrap_err()
                .contains("nested deeper")
        );
        assert!(json_path_first(&deep, &serde_json::json!({})).is_none());
        let ok = "$.orders[?@.items[?@.price > 1]].id";
        assert!(parse_json_path(ok).is_ok());
        // Brackets inside string literals do not count.
        let quoted = format!("$['{}']", "[(".repeat(20));
        assert!(parse_json_path(&quoted).is_ok());
    }
}
