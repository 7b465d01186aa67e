//! The one webhook HTTP executor: runs a [`CompiledRequest`] (from the sans-IO
//! `callsmith_scenarios::webhook::compile`) and returns the [`WebhookOutcome`]. It backs both
//! `POST /v1/scenario/webhook/run` and the engine's `CallPort::webhook`, so a test run and a
//! live call behave the same.
//!
//! Why redirects are followed by hand: the outcome records every hop (`redirects`), and each
//! hop's target is checked against the private-address guard before it is contacted.
//!
//! Why a private-address guard: webhook URLs come from scenario designers, so without it a
//! scenario could probe the platform's own network (loopback, link-local metadata services,
//! private ranges). A target resolving to such an address is refused unless
//! `allow_private` is set (settings `webhook_allow_private`, engine key
//! `webhook.allow_private`). The guard is enforced twice: a pre-check per hop gives a clear
//! error, and a filtering DNS resolver makes the connection itself unable to reach a private
//! address (a name that resolves differently the second time gains nothing). With a
//! `request.proxy` both the proxy and the target (each hop, resolved here) must be public:
//! the proxy would otherwise reach a private target on the scenario's behalf.

use std::{
    collections::BTreeMap,
    net::{IpAddr, SocketAddr},
    sync::Arc,
    time::{Duration, Instant},
};

use callsmith_scenarios::{
    model::MappingEntry,
    webhook::{self, CompiledRequest, Redirect, WebhookOutcome, WebhookResponse},
};

/// Most redirects followed before the run fails.
pub const MAX_REDIRECTS: usize = 10;

/// The shared webhook executor. Cheap to clone (clients are reference counted).
#[derive(Clone, Debug)]
pub struct WebhookExecutor {
    client: reqwest::Client,
    /// Same as `client` but accepting invalid certificates (`insecure_skip_verify`).
    insecure: reqwest::Client,
    allow_private: bool,
}

impl WebhookExecutor {
    /// Builds the executor; `allow_private` lets requests reach loopback, link-local and
    /// private addresses (tests, on-premise targets).
    pub fn new(allow_private: bool) -> Result<Self, String> {
        Ok(WebhookExecutor {
            client: builder(allow_private)
                .build()
                .map_err(|e| format!("webhook client: {e}"))?,
            insecure: builder(allow_private)
                .danger_accept_invalid_certs(true)
                .build()
                .map_err(|e| format!("webhook client: {e}"))?,
            allow_private,
        })
    }

    /// Whether private targets are allowed.
    pub fn allow_private(&self) -> bool {
        self.allow_private
    }

    /// Executes `req` and maps the response with `mapping`. Never errors: a transport
    /// failure, a refused target or a status of 300 or above is an outcome with status fail.
    pub async fn execute(&self, req: &CompiledRequest, mapping: &[MappingEntry]) -> WebhookOutcome {
        let curl = webhook::to_curl(req);
        let mut redirects = Vec::new();
        let received = self.send(req, &mut redirects).await;
        let redirects = (!redirects.is_empty()).then_some(redirects);
        WebhookOutcome::finish(curl, redirects, received, mapping)
    }

    async fn send(
        &self,
        req: &CompiledRequest,
        redirects: &mut Vec<Redirect>,
    ) -> Result<WebhookResponse, String> {
        let client = self.client_for(req)?;
        let timeout =
            Duration::from_secs_f64(req.timeout_secs.clamp(0.1, webhook::MAX_TIMEOUT_SECS));
        let deadline = Instant::now() + timeout;
        let mut method = req.method.clone();
        let mut url = url::Url::parse(&req.url).map_err(|e| format!("invalid url: {e}"))?;
        let mut body = req.body.clone();
        let mut headers = req.headers.clone();
        let t0 = Instant::now();
        // A proxy is contacted instead of the target, so it is guarded too; the target
        // (every hop) is still checked when a proxy carries the request, or a public proxy
        // would reach into private ranges on the scenario's behalf.
        if !self.allow_private
            && let Some(p) = &req.proxy_url
        {
            let proxy = url::Url::parse(p).map_err(|e| format!("invalid proxy {p:?}: {e}"))?;
            check_host("proxy", &proxy).await?;
        }
        loop {
            if !self.allow_private {
                check_host("target", &url).await?;
            }
            let left = deadline
                .checked_duration_since(Instant::now())
                .ok_or_else(|| format!("timed out after {:.1}s", timeout.as_secs_f64()))?;
            let m = reqwest::Method::from_bytes(method.as_bytes()).map_err(|e| e.to_string())?;
            let mut b = client.request(m, url.clone()).timeout(left);
            for (k, v) in &headers {
                b = b.header(k, v);
            }
            if let Some(body) = &body {
                b = b.body(body.clone());
            }
            let resp = b.send().await.map_err(error_text)?;
            let status = resp.status();
            let location = resp
                .headers()
                .get(reqwest::header::LOCATION)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string);
            if status.is_redirection()
                && let Some(loc) = location
                && redirects.len() < MAX_REDIRECTS
            {
                let next = url
                    .join(&loc)
                    .map_err(|e| format!("invalid redirect location {loc:?}: {e}"))?;
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
                redirects.push(Redirect {
                    code: i64::from(code),
                    url: next.to_string(),
                    method: method.clone(),
                });
                url = next;
                continue;
            }
            let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
            for (k, v) in resp.headers() {
                out.entry(k.to_string())
                    .or_default()
                    .push(String::from_utf8_lossy(v.as_bytes()).into_owned());
            }
            let text = resp.text().await.map_err(error_text)?;
            return Ok(WebhookResponse {
                http_status_code: i64::from(status.as_u16()),
                http_status_text: status.canonical_reason().unwrap_or("").to_string(),
                headers: out,
                body: text,
                duration: i64::try_from(t0.elapsed().as_millis()).unwrap_or(i64::MAX),
            });
        }
    }

    /// The client for one request: a proxied request gets its own client (reqwest binds
    /// proxies per client); otherwise the shared (or certificate-lenient) one.
    fn client_for(&self, req: &CompiledRequest) -> Result<reqwest::Client, String> {
        match &req.proxy_url {
            Some(p) => {
                let proxy =
                    reqwest::Proxy::all(p).map_err(|e| format!("invalid proxy {p:?}: {e}"))?;
                builder(self.allow_private)
                    .proxy(proxy)
                    .danger_accept_invalid_certs(req.insecure_skip_verify)
                    .build()
                    .map_err(|e| format!("webhook client: {e}"))
            }
            None if req.insecure_skip_verify => Ok(self.insecure.clone()),
            None => Ok(self.client.clone()),
        }
    }
}

fn builder(allow_private: bool) -> reqwest::ClientBuilder {
    let b = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .user_agent(concat!("callsmith-webhook/", env!("CARGO_PKG_VERSION")));
    if allow_private {
        b
    } else {
        b.dns_resolver(Arc::new(PublicOnlyResolver))
    }
}

/// The error text with its causes (reqwest's top-level message alone hides the reason).
fn error_text(e: reqwest::Error) -> String {
    let mut s = e.to_string();
    let mut src = std::error::Error::source(&e);
    while let Some(c) = src {
        s.push_str(": ");
        s.push_str(&c.to_string());
        src = c.source();
    }
    s
}

/// Refuses a URL whose host is, or resolves to, a non-public address; `what` (`target`
/// or `proxy`) names it in the error.
async fn check_host(what: &str, url: &url::Url) -> Result<(), String> {
    let host = match url.host() {
        Some(url::Host::Ipv4(ip)) => return public_or_refuse(what, url, IpAddr::V4(ip)),
        Some(url::Host::Ipv6(ip)) => return public_or_refuse(what, url, IpAddr::V6(ip)),
        Some(url::Host::Domain(d)) => d.to_string(),
        None => return Err(format!("invalid url {url}: no host")),
    };
    let port = url.port_or_known_default().unwrap_or(80);
    let addrs: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), port))
        .await
        .map_err(|e| format!("cannot resolve {host}: {e}"))?
        .collect();
    for a in addrs {
        public_or_refuse(what, url, a.ip())?;
    }
    Ok(())
}

fn public_or_refuse(what: &str, url: &url::Url, ip: IpAddr) -> Result<(), String> {
    if is_private(ip) {
        Err(format!(
            "{what} {} resolves to the non-public address {ip}; refused (set webhook.allow_private to allow)",
            url.host_str().unwrap_or_default()
        ))
    } else {
        Ok(())
    }
}

/// Loopback, link-local, private, unspecified, shared (CGNAT), unique-local and the
/// IPv4-mapped forms of those.
pub fn is_private(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            let o = v4.octets();
            v4.is_loopback()
                || v4.is_private()
                || v4.is_link_local()
                || v4.is_unspecified()
                || v4.is_broadcast()
                || (o[0] == 100 && (o[1] & 0xc0) == 64)
                || o[0] == 0
        }
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return is_private(IpAddr::V4(v4));
            }
            let seg = v6.segments();
            v6.is_loopback()
                || v6.is_unspecified()
                || (seg[0] & 0xfe00) == 0xfc00
                || (seg[0] & 0xffc0) == 0xfe80
        }
    }
}

/// DNS resolver that drops non-public addresses, so a connection can never reach one.
struct PublicOnlyResolver;

impl reqwest::dns::Resolve for PublicOnlyResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        Box::pin(async move {
            let host = name.as_str().to_string();
            let all: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let public: Vec<SocketAddr> = all.into_iter().filter(|a| !is_private(a.ip())).collect();
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

    #[test]
    fn private_ranges() {
        for ip in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "::1",
            "fe80::1",
            "fd00::1",
            "::ffff:127.0.0.1",
        ] {
            assert!(is_private(ip.parse().unwrap()), "{ip}");
        }
        for ip in ["8.8.8.8", "1.1.1.1", "2606:4700::1111"] {
            assert!(!is_private(ip.parse().unwrap()), "{ip}");
        }
    }
}
