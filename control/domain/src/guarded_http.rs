//! The one guarded outbound HTTP client: every request to a URL a tenant can name goes
//! through [`GuardedClient`] (scenario webhooks, result deliveries, SMS gateways, audio
//! prompts fetched by URL). Upstreams an operator configures in the config file (TTS and
//! STT nodes, LLM providers, the remote classifier) are trusted and use their own clients.
//!
//! The guard refuses loopback, private, link-local (cloud metadata at 169.254.169.254),
//! shared (CGNAT), unique-local, unspecified and broadcast addresses, and the IPv4-mapped
//! forms of those, unless the operator sets `webhook.allow_private`, or lists the host (a
//! name or an address, as written in the URL) in `webhook.allow_hosts` (an internal SMS
//! gateway, say, without opening the whole private network). It is enforced at three
//! depths:
//! * when a resource naming a URL is created or updated, [`literal_refusal`] refuses a
//!   URL whose host is such an address written out, or `localhost` (a clear 422 early);
//! * before each hop of a request (the first and every redirect), the host is resolved
//!   and every address it resolves to must be public (a clear error naming the address);
//! * the client's DNS resolver drops non-public addresses, so the connection itself can
//!   never reach one (a name that resolves differently the second time gains nothing).
//!
//! Redirects are followed by hand so every hop is checked and reported; a response body
//! is read up to a cap, so a target cannot make the engine buffer without limit.

use std::{
    collections::HashSet,
    net::{IpAddr, SocketAddr},
    sync::Arc,
    time::{Duration, Instant},
};

use bytes::{Bytes, BytesMut};

use crate::reach::is_private;
use thiserror::Error;

/// Most redirects followed before a request fails.
pub const MAX_REDIRECTS: usize = 10;

/// Time allowed to open a connection (TCP and TLS) to a target.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Why an outbound request did not produce a response.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum OutboundError {
    /// The target (or a redirect hop, or the proxy) is not allowed: a non-public address
    /// or a scheme other than http(s). Permanent: retrying cannot help.
    #[error("{0}")]
    Refused(String),
    /// The request itself is malformed (URL, method, header).
    #[error("{0}")]
    Invalid(String),
    /// The whole exchange took longer than its timeout.
    #[error("timed out after {0:.1}s")]
    Timeout(f64),
    /// The response body is larger than the cap.
    #[error("response larger than {0} bytes")]
    TooLarge(usize),
    /// Connecting, sending or reading failed.
    #[error("{0}")]
    Transport(String),
}

impl OutboundError {
    /// Whether the same request may succeed later (transport failures and timeouts).
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            OutboundError::Timeout(_) | OutboundError::Transport(_)
        )
    }
}

/// One request through the guarded client.
#[derive(Debug, Clone)]
pub struct OutboundRequest {
    pub method: String,
    pub url: String,
    pub headers: Vec<(String, String)>,
    pub body: Option<Bytes>,
    /// For the whole exchange: every hop, and reading the body.
    pub timeout: Duration,
    /// Most body bytes read before the request fails with [`OutboundError::TooLarge`];
    /// 0 reads no body at all (the response's body is empty).
    pub max_body: usize,
    /// Redirects are followed (and each hop checked) when true; otherwise a 3xx is the
    /// response.
    pub follow_redirects: bool,
    /// An http(s) proxy to send through; it is guarded like the target.
    pub proxy: Option<String>,
    /// Accept invalid TLS certificates.
    pub insecure_skip_verify: bool,
}

impl OutboundRequest {
    /// A request of `method` to `url` with no body: 30 s, a 32 MiB body cap, redirects followed.
    pub fn new(method: impl Into<String>, url: impl Into<String>) -> OutboundRequest {
        OutboundRequest {
            method: method.into(),
            url: url.into(),
            headers: Vec::new(),
            body: None,
            timeout: Duration::from_secs(30),
            max_body: 32 * 1024 * 1024,
            follow_redirects: true,
            proxy: None,
            insecure_skip_verify: false,
        }
    }

    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    pub fn body(mut self, body: impl Into<Bytes>) -> Self {
        self.body = Some(body.into());
        self
    }

    pub fn timeout(mut self, t: Duration) -> Self {
        self.timeout = t;
        self
    }

    pub fn max_body(mut self, n: usize) -> Self {
        self.max_body = n;
        self
    }
}

/// A redirect that was followed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hop {
    pub code: u16,
    pub url: String,
    /// The method the next request used (301–303 turn into GET).
    pub method: String,
}

/// The final response of a request.
#[derive(Debug, Clone)]
pub struct OutboundResponse {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Bytes,
    /// Redirects followed on the way, in order.
    pub redirects: Vec<Hop>,
    /// From the first byte sent to the last byte read.
    pub elapsed: Duration,
}

impl OutboundResponse {
    pub fn is_success(&self) -> bool {
        (200..300).contains(&self.status)
    }
}

/// The guarded client. Cheap to clone (the underlying clients are reference counted).
#[derive(Clone, Debug)]
pub struct GuardedClient {
    client: reqwest::Client,
    /// Same as `client` but accepting invalid certificates.
    insecure: reqwest::Client,
    policy: Arc<Policy>,
}

/// Which non-public targets the operator allows.
#[derive(Debug, Default)]
struct Policy {
    allow_private: bool,
    /// Hosts (lower-case names or addresses, as written in URLs) exempt from the guard.
    allow_hosts: HashSet<String>,
}

impl Policy {
    fn allows_host(&self, host: &str) -> bool {
        self.allow_private
            || self
                .allow_hosts
                .contains(host.trim_end_matches('.').to_ascii_lowercase().as_str())
    }
}

impl GuardedClient {
    /// Builds the client; `allow_private` (the operator's `webhook.allow_private`) lets
    /// requests reach loopback, link-local and private addresses.
    pub fn new(allow_private: bool) -> Result<GuardedClient, String> {
        Self::with_allowed_hosts(allow_private, &[])
    }

    /// Like [`GuardedClient::new`], also letting requests reach `allow_hosts` (names or
    /// addresses as written in URLs; IPv6 in brackets) whatever they resolve to.
    pub fn with_allowed_hosts(
        allow_private: bool,
        allow_hosts: &[String],
    ) -> Result<GuardedClient, String> {
        let policy = Arc::new(Policy {
            allow_private,
            allow_hosts: allow_hosts
                .iter()
                .map(|h| h.trim().trim_end_matches('.').to_ascii_lowercase())
                .filter(|h| !h.is_empty())
                .collect(),
        });
        Ok(GuardedClient {
            client: builder(&policy)
                .build()
                .map_err(|e| format!("outbound client: {e}"))?,
            insecure: builder(&policy)
                .danger_accept_invalid_certs(true)
                .build()
                .map_err(|e| format!("outbound client: {e}"))?,
            policy,
        })
    }

    /// Whether private targets are allowed.
    pub fn allow_private(&self) -> bool {
        self.policy.allow_private
    }

    /// Why `url` may not be stored as a target (see [`literal_refusal`]), given this
    /// client's policy; None when it may.
    pub fn refusal(&self, url: &str) -> Option<String> {
        let allowed = url::Url::parse(url.trim())
            .ok()
            .and_then(|u| u.host_str().map(|h| self.policy.allows_host(h)))
            .unwrap_or(false);
        literal_refusal(url, self.policy.allow_private || allowed)
    }

    /// Sends `req`. `redirects` collects every hop followed, also when the request fails
    /// on a later hop (the webhook outcome reports them).
    pub async fn send_recording(
        &self,
        req: &OutboundRequest,
        redirects: &mut Vec<Hop>,
    ) -> Result<OutboundResponse, OutboundError> {
        let client = self.client_for(req)?;
        let timeout = req.timeout;
        let deadline = Instant::now() + timeout;
        let timed_out = || OutboundError::Timeout(timeout.as_secs_f64());
        let mut method = req.method.trim().to_ascii_uppercase();
        let mut url = parse_http_url(&req.url)?;
        let mut body = req.body.clone();
        let mut headers = req.headers.clone();
        let t0 = Instant::now();
        // A proxy is contacted instead of the target, so it is guarded too; the target
        // (every hop) is still checked when a proxy carries the request, or a public proxy
        // would reach into private ranges on the tenant's behalf.
        if let Some(p) = &req.proxy {
            let proxy = url::Url::parse(p)
                .map_err(|e| OutboundError::Invalid(format!("invalid proxy {p:?}: {e}")))?;
            check_host(&self.policy, "proxy", &proxy).await?;
        }
        loop {
            check_host(&self.policy, "target", &url).await?;
            let left = deadline
                .checked_duration_since(Instant::now())
                .ok_or_else(timed_out)?;
            let m = reqwest::Method::from_bytes(method.as_bytes())
                .map_err(|e| OutboundError::Invalid(format!("invalid method {method:?}: {e}")))?;
            let mut b = client.request(m, url.clone()).timeout(left);
            for (k, v) in &headers {
                b = b.header(k, v);
            }
            if let Some(body) = &body {
                b = b.body(body.clone());
            }
            let resp = b.send().await.map_err(|e| transport(e, timeout))?;
            let status = resp.status();
            let location = resp
                .headers()
                .get(reqwest::header::LOCATION)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string);
            if req.follow_redirects
                && status.is_redirection()
                && let Some(loc) = location
            {
                if redirects.len() >= MAX_REDIRECTS {
                    return Err(OutboundError::Transport(format!(
                        "more than {MAX_REDIRECTS} redirects"
                    )));
                }
                let next = url.join(&loc).map_err(|e| {
                    OutboundError::Invalid(format!("invalid redirect location {loc:?}: {e}"))
                })?;
                if !matches!(next.scheme(), "http" | "https") {
                    return Err(OutboundError::Refused(format!(
                        "redirect to {next} refused: only http and https are followed"
                    )));
                }
                let code = status.as_u16();
                // 301/302/303 turn into GET without a body (as browsers and curl -L do);
                // 307/308 repeat the request unchanged.
                if matches!(code, 301..=303) && method != "HEAD" {
                    method = "GET".into();
                    body = None;
                    headers.retain(|(k, _)| !k.eq_ignore_ascii_case("content-type"));
                }
                // Credentials are not handed to another origin.
                if next.origin() != url.origin() {
                    headers.retain(|(k, _)| !k.eq_ignore_ascii_case("authorization"));
                }
                redirects.push(Hop {
                    code,
                    url: next.to_string(),
                    method: method.clone(),
                });
                url = next;
                continue;
            }
            let out_headers = resp
                .headers()
                .iter()
                .map(|(k, v)| {
                    (
                        k.to_string(),
                        String::from_utf8_lossy(v.as_bytes()).into_owned(),
                    )
                })
                .collect();
            let body = if req.max_body == 0 {
                Bytes::new()
            } else {
                read_capped(resp, req.max_body, deadline, timeout).await?
            };
            return Ok(OutboundResponse {
                status: status.as_u16(),
                headers: out_headers,
                body,
                redirects: std::mem::take(redirects),
                elapsed: t0.elapsed(),
            });
        }
    }

    /// Sends `req` and returns the final response.
    pub async fn send(&self, req: &OutboundRequest) -> Result<OutboundResponse, OutboundError> {
        self.send_recording(req, &mut Vec::new()).await
    }

    /// GETs `url` and returns its body when the status is 2xx.
    pub async fn get_bytes(
        &self,
        url: &str,
        timeout: Duration,
        max_body: usize,
    ) -> Result<Bytes, OutboundError> {
        let r = self
            .send(
                &OutboundRequest::new("GET", url)
                    .timeout(timeout)
                    .max_body(max_body),
            )
            .await?;
        if r.is_success() {
            Ok(r.body)
        } else {
            Err(OutboundError::Transport(format!(
                "{} answered HTTP {}",
                host_of(url),
                r.status
            )))
        }
    }

    /// The client for one request: a proxied request gets its own client (reqwest binds
    /// proxies per client); otherwise the shared (or certificate-lenient) one.
    fn client_for(&self, req: &OutboundRequest) -> Result<reqwest::Client, OutboundError> {
        match &req.proxy {
            Some(p) => {
                let proxy = reqwest::Proxy::all(p)
                    .map_err(|e| OutboundError::Invalid(format!("invalid proxy {p:?}: {e}")))?;
                builder(&self.policy)
                    .proxy(proxy)
                    .danger_accept_invalid_certs(req.insecure_skip_verify)
                    .build()
                    .map_err(|e| OutboundError::Invalid(format!("outbound client: {e}")))
            }
            None if req.insecure_skip_verify => Ok(self.insecure.clone()),
            None => Ok(self.client.clone()),
        }
    }
}

fn host_of(url: &str) -> String {
    url::Url::parse(url)
        .ok()
        .and_then(|u| u.host_str().map(str::to_string))
        .unwrap_or_else(|| url.to_string())
}

fn parse_http_url(raw: &str) -> Result<url::Url, OutboundError> {
    let url = url::Url::parse(raw.trim())
        .map_err(|e| OutboundError::Invalid(format!("invalid url {raw:?}: {e}")))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(OutboundError::Refused(format!(
            "{raw:?}: only http and https URLs are allowed"
        )));
    }
    if url.host().is_none() {
        return Err(OutboundError::Invalid(format!(
            "invalid url {raw:?}: no host"
        )));
    }
    Ok(url)
}

/// Reads a response body up to `max` bytes and before `deadline`.
async fn read_capped(
    mut resp: reqwest::Response,
    max: usize,
    deadline: Instant,
    timeout: Duration,
) -> Result<Bytes, OutboundError> {
    if resp.content_length().is_some_and(|n| n > max as u64) {
        return Err(OutboundError::TooLarge(max));
    }
    let mut out = BytesMut::new();
    loop {
        let chunk = tokio::time::timeout_at(deadline.into(), resp.chunk())
            .await
            .map_err(|_| OutboundError::Timeout(timeout.as_secs_f64()))?
            .map_err(|e| transport(e, timeout))?;
        let Some(chunk) = chunk else {
            return Ok(out.freeze());
        };
        if out.len() + chunk.len() > max {
            return Err(OutboundError::TooLarge(max));
        }
        out.extend_from_slice(&chunk);
    }
}

fn builder(policy: &Arc<Policy>) -> reqwest::ClientBuilder {
    let b = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .connect_timeout(CONNECT_TIMEOUT)
        .user_agent(concat!("callsmith/", env!("CARGO_PKG_VERSION")));
    if policy.allow_private {
        b
    } else {
        b.dns_resolver(Arc::new(PublicOnlyResolver(policy.clone())))
    }
}

fn transport(e: reqwest::Error, timeout: Duration) -> OutboundError {
    if e.is_timeout() {
        return OutboundError::Timeout(timeout.as_secs_f64());
    }
    OutboundError::Transport(error_text(&e))
}

/// The error text with its causes (reqwest's top-level message alone hides the reason).
fn error_text(e: &reqwest::Error) -> String {
    let mut s = e.to_string();
    let mut src = std::error::Error::source(e);
    while let Some(c) = src {
        s.push_str(": ");
        s.push_str(&c.to_string());
        src = c.source();
    }
    s
}

/// Why a URL may not be stored as an outbound target, judged from its text alone (no DNS):
/// not an absolute http(s) URL with a host, or (unless `allow_private`) a host that is a
/// non-public address written out or a `localhost` name. None when it may. Names are
/// resolved and checked again at send time.
pub fn literal_refusal(raw: &str, allow_private: bool) -> Option<String> {
    let url = match parse_http_url(raw) {
        Ok(u) => u,
        Err(e) => return Some(e.to_string()),
    };
    if allow_private {
        return None;
    }
    let ip = match url.host()? {
        url::Host::Ipv4(ip) => IpAddr::V4(ip),
        url::Host::Ipv6(ip) => IpAddr::V6(ip),
        url::Host::Domain(d) => {
            let d = d.trim_end_matches('.').to_ascii_lowercase();
            if d == "localhost" || d.ends_with(".localhost") {
                return Some(format!(
                    "{raw:?} names the local host; refused (only public addresses are reachable)"
                ));
            }
            return None;
        }
    };
    is_private(ip).then(|| {
        format!("{raw:?} names the non-public address {ip}; refused (only public addresses are reachable)")
    })
}

/// Refuses a URL whose host is, or resolves to, a non-public address (unless the policy
/// allows it); `what` (`target` or `proxy`) names it in the error.
async fn check_host(policy: &Policy, what: &str, url: &url::Url) -> Result<(), OutboundError> {
    if url.host_str().is_some_and(|h| policy.allows_host(h)) {
        return Ok(());
    }
    let host = match url.host() {
        Some(url::Host::Ipv4(ip)) => return public_or_refuse(what, url, IpAddr::V4(ip)),
        Some(url::Host::Ipv6(ip)) => return public_or_refuse(what, url, IpAddr::V6(ip)),
        Some(url::Host::Domain(d)) => d.to_string(),
        None => {
            return Err(OutboundError::Invalid(format!(
                "invalid url {url}: no host"
            )));
        }
    };
    let port = url.port_or_known_default().unwrap_or(80);
    let addrs: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), port))
        .await
        .map_err(|e| OutboundError::Transport(format!("cannot resolve {host}: {e}")))?
        .collect();
    for a in addrs {
        public_or_refuse(what, url, a.ip())?;
    }
    Ok(())
}

fn public_or_refuse(what: &str, url: &url::Url, ip: IpAddr) -> Result<(), OutboundError> {
    if is_private(ip) {
        Err(OutboundError::Refused(format!(
            "{what} {} resolves to the non-public address {ip}; refused (set webhook.allow_private to allow)",
            url.host_str().unwrap_or_default()
        )))
    } else {
        Ok(())
    }
}

/// DNS resolver that drops non-public addresses (of names the policy does not allow), so a
/// connection can never reach one.
struct PublicOnlyResolver(Arc<Policy>);

impl reqwest::dns::Resolve for PublicOnlyResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let allowed = self.0.allows_host(name.as_str());
        Box::pin(async move {
            let host = name.as_str().to_string();
            let all: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let public: Vec<SocketAddr> = all
                .into_iter()
                .filter(|a| allowed || !is_private(a.ip()))
                .collect();
            if public.is_empty() {
                return Err(format!("{host} resolves to no public address; refused").into());
            }
            Ok(Box::new(public.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reach::is_private;

    #[test]
    fn private_ranges() {
        for ip in [
            "127.0.0.1",
            "127.8.9.10",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "255.255.255.255",
            "::1",
            "::",
            "fe80::1",
            "fd00::1",
            "::ffff:127.0.0.1",
            "::ffff:169.254.169.254",
            "::127.0.0.1",
        ] {
            assert!(is_private(ip.parse().unwrap()), "{ip}");
        }
        for ip in ["8.8.8.8", "1.1.1.1", "2606:4700::1111", "::ffff:8.8.8.8"] {
            assert!(!is_private(ip.parse().unwrap()), "{ip}");
        }
    }

    #[test]
    fn literal_targets() {
        for url in [
            "http://127.0.0.1:8080/x",
            "http://169.254.169.254/latest/meta-data/",
            "https://10.0.0.5/",
            "http://[::1]:9000/",
            "http://[::ffff:7f00:1]/",
            "http://[64:ff9b::10.0.0.5]/",
            "http://[2002:c0a8:101::]/",
            "http://[2001:0:4136:e378:8000:63bf:f5ff:fffa]/",
            "http://localhost/",
            "http://LOCALHOST./",
            "http://api.localhost:3000/",
            "http://0.0.0.0/",
            // Decimal and hex forms are normalised by the URL parser.
            "http://2130706433/",
            "http://0x7f.1/",
        ] {
            let why = literal_refusal(url, false);
            assert!(why.is_some(), "{url} accepted");
            assert!(
                literal_refusal(url, true).is_none(),
                "{url} with allow_private"
            );
        }
        for url in [
            "ftp://example.test/x",
            "file:///etc/passwd",
            "not a url",
            "http://",
        ] {
            assert!(literal_refusal(url, false).is_some(), "{url}");
            assert!(
                literal_refusal(url, true).is_some(),
                "{url} (allow_private)"
            );
        }
        for url in [
            "https://example.test/hook",
            "http://203.0.113.9:8080/x",
            "http://[64:ff9b::203.0.113.9]/x",
        ] {
            assert_eq!(literal_refusal(url, false), None, "{url}");
        }
    }

    #[tokio::test]
    async fn sends_to_private_targets_are_refused_before_connecting() {
        let c = GuardedClient::new(false).unwrap();
        for url in [
            "http://127.0.0.1:9/",
            "http://localhost:9/",
            "http://[::1]:9/",
            "http://169.254.169.254/",
            // IPv6 addresses a translator or tunnel would deliver to an IPv4 loopback,
            // private or metadata address: NAT64, local-use NAT64, 6to4, Teredo (the client
            // is the last 32 bits inverted), IPv4-translated.
            "http://[64:ff9b::7f00:1]:9/",
            "http://[64:ff9b::169.254.169.254]/",
            "http://[64:ff9b:1::a00:5]:9/",
            "http://[2002:7f00:1::1]:9/",
            "http://[2002:a9fe:a9fe::]/",
            "http://[2001:0:4136:e378:8000:63bf:80ff:fffe]:9/",
            "http://[::ffff:0:10.0.0.5]:9/",
        ] {
            let e = c.send(&OutboundRequest::new("GET", url)).await.unwrap_err();
            assert!(matches!(e, OutboundError::Refused(_)), "{url}: {e:?}");
            assert!(!e.is_retryable());
        }
        let e = c
            .send(&OutboundRequest::new("GET", "file:///etc/passwd"))
            .await
            .unwrap_err();
        assert!(matches!(e, OutboundError::Refused(_)), "{e:?}");
    }
}
