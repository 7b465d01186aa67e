//! Configuration of the `callsmith` binary.
//!
//! Sources, later ones overriding earlier ones:
//! 1. built-in defaults (work out of the box: HTTP on 127.0.0.1:8080, data under `./data`,
//!    SQLite at `data/callsmith.db`);
//! 2. a TOML file (`--config <path>`, or `callsmith.toml` in the working directory if it
//!    exists);
//! 3. environment variables `CALLSMITH_<KEY>`, nested keys joined with `__`
//!    (`CALLSMITH_HTTP__LISTEN=0.0.0.0:8080`, `CALLSMITH_DATABASE__URL=postgres://…`).
//!
//! Every field is documented here and in `docs/configuration.md` (a test checks that the
//! document names every key). Later subsystems add their own section structs (`[sip]`,
//! `[media]`, `[stt]`, `[tts]`, `[speech]`, `[dialer]`) as fields of [`Config`] with
//! `#[serde(default)]`, so existing files keep working.

use std::{
    net::SocketAddr,
    path::{Path, PathBuf},
};

use figment::{
    Figment,
    providers::{Env, Format, Serialized, Toml},
};
use serde::{Deserialize, Serialize};

mod adapters;
mod media;
mod speech;
mod tts;
pub use adapters::AdaptersSection;
pub use media::MediaSection;
pub use speech::{SpeechPlan, SpeechSection};
#[cfg(test)]
pub use tts::TtsEngineKind;
pub use tts::{FALLBACK_ENGINE as FALLBACK_TTS_ENGINE, TtsEngineSection, TtsSection};

/// Top-level keys of [`Config`]; a new section must be added here too (a test checks).
pub const TOP_LEVEL_KEYS: &[&str] = &[
    "data_dir",
    "bootstrap_superuser_token",
    "worker_threads",
    "http",
    "database",
    "auth",
    "log",
    "sip",
    "media",
    "stt",
    "tts",
    "speech",
    "dialer",
    "webhook",
    "adapters",
    "objects",
];

/// The whole configuration.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Directory for local state: the SQLite database, the generated superuser token,
    /// later recordings and audio. Default `./data`.
    pub data_dir: PathBuf,
    /// A superuser bearer token to install at start-up (`cs_su_` + at least 32
    /// characters), for automation and tests. Usually set through
    /// `CALLSMITH_BOOTSTRAP_SUPERUSER_TOKEN`. Unset: a token is generated on first start
    /// and written to `<data_dir>/superuser.token` (mode 0600).
    pub bootstrap_superuser_token: Option<String>,
    /// Threads of the async runtime (SIP signalling, scenarios, the database client, the
    /// control API). Unset: the cores left after `media.workers`, at least 1. On a small
    /// machine one runtime thread beside the media worker costs less per call than one per
    /// core: the threads stop waking each other to steal work.
    pub worker_threads: Option<usize>,
    /// HTTP server of the control API.
    pub http: HttpConfig,
    /// Database.
    pub database: DatabaseConfig,
    /// Authentication lifetimes and password cost.
    pub auth: AuthConfig,
    /// Logging.
    pub log: LogConfig,
    /// SIP stack and trunks (gateways calls leave through and come from).
    pub sip: SipSection,
    /// RTP media.
    pub media: MediaSection,
    /// Speech recognition nodes per engine.
    pub stt: SttSection,
    /// Speech synthesis.
    pub tts: TtsSection,
    /// The local speech node `callsmith serve` starts and supervises.
    pub speech: SpeechSection,
    /// The dialer, call limits, leases, drain and result delivery.
    pub dialer: DialerConfig,
    /// Webhook bricks and `POST /v1/scenario/webhook/run`.
    pub webhook: WebhookSection,
    /// Language adapters: classifier training, LLM providers (chat routes and LLM bricks).
    pub adapters: AdaptersSection,
    /// Object storage: audio files, recordings, call histories.
    pub objects: ObjectsSection,
}

/// `[objects]`: where audio files, recordings and call histories are stored.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct ObjectsSection {
    /// `local` (a directory) or `s3` (an S3-compatible bucket). Default `local`.
    pub provider: callsmith_domain::objects::Provider,
    /// Directory of the local provider. Default `<data_dir>/objects`.
    pub local_dir: Option<PathBuf>,
    /// The bucket of the `s3` provider.
    pub s3: callsmith_domain::objects::S3Config,
    /// Key for signed links and capability URLs (at least 32 characters). Unset: read from
    /// `signing_key_file`, generated there on first start.
    pub signing_key: Option<String>,
    /// Where the generated signing key lives. Default: beside `local_dir` (`<local_dir>.key`).
    pub signing_key_file: Option<PathBuf>,
}

impl ObjectsSection {
    /// The control plane's settings, with the local directory under `data_dir` by default.
    pub fn to_control(&self, data_dir: &Path) -> callsmith_domain::objects::ObjectsConfig {
        callsmith_domain::objects::ObjectsConfig {
            provider: self.provider,
            local_dir: self
                .local_dir
                .clone()
                .unwrap_or_else(|| data_dir.join("objects")),
            s3: self.s3.clone(),
            signing_key: self.signing_key.clone(),
            signing_key_file: self.signing_key_file.clone(),
        }
    }
}

/// `[webhook]`
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct WebhookSection {
    /// Let every URL a tenant names (scenario webhooks and their proxies, result delivery
    /// targets, SMS provider URLs, audio prompt URLs) reach loopback, link-local and private
    /// addresses. Default `false`: such targets are refused so tenants cannot probe the
    /// platform's own network (see docs/security.md).
    pub allow_private: bool,
    /// Hosts (names, or addresses as written in URLs, IPv6 in brackets) those URLs may
    /// reach whatever they resolve to, when `allow_private` is off: an internal gateway
    /// without opening the whole private network.
    pub allow_hosts: Vec<String>,
}

/// `[http]`
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct HttpConfig {
    /// Address the control API listens on. Default `127.0.0.1:8080`.
    pub listen: SocketAddr,
    /// Absolute base URL clients use to reach the API (magic-link `consume_url`s are
    /// built from it). Default: `http://<listen>`.
    pub public_url: Option<String>,
    /// Base URL this node's peers reach its control API at (operator configuration, never
    /// a tenant's): a peer serving the live view of a call this node runs relays it from
    /// here. Default: `http://<listen>` when `listen` names one address; none when it is
    /// unspecified (`0.0.0.0`, `::`).
    pub internal_url: Option<String>,
    /// A request head must be complete within this many ms of its first byte, else the
    /// connection is closed. Default 10000.
    pub header_read_timeout_ms: u64,
    /// A connection with no request under way is closed after this many ms without a byte
    /// from the client (keep-alive included). Default 60000.
    pub idle_timeout_ms: u64,
    /// Longest wait, in ms, for the next bytes of a request body being read; a body that
    /// runs out answers 408 `request_timeout`. Default 20000.
    pub body_read_timeout_ms: u64,
    /// Slowest average pace of a request body, bytes per second: all waits for one body
    /// together may last `body_read_timeout_ms` plus one second per this many bytes
    /// received. 0: no floor. Default 1024.
    pub body_min_bytes_per_sec: u64,
    /// A response write the client leaves blocked for this many ms closes the connection.
    /// Default 30000.
    pub send_timeout_ms: u64,
    /// Most connections open at once from one IPv4 address or IPv6 /64; more are closed
    /// as they are accepted. 0: no cap. Default 128.
    pub max_connections_per_address: usize,
}

impl HttpConfig {
    /// The control plane's connection limits; every timeout must be above zero.
    pub fn to_control(&self) -> anyhow::Result<callsmith_domain::settings::HttpSettings> {
        for (key, ms) in [
            ("header_read_timeout_ms", self.header_read_timeout_ms),
            ("idle_timeout_ms", self.idle_timeout_ms),
            ("body_read_timeout_ms", self.body_read_timeout_ms),
            ("send_timeout_ms", self.send_timeout_ms),
        ] {
            anyhow::ensure!(ms > 0, "http.{key} must be above 0");
        }
        let ms = std::time::Duration::from_millis;
        Ok(callsmith_domain::settings::HttpSettings {
            header_read_timeout: ms(self.header_read_timeout_ms),
            idle_timeout: ms(self.idle_timeout_ms),
            body_read_timeout: ms(self.body_read_timeout_ms),
            body_min_rate: self.body_min_bytes_per_sec,
            send_timeout: ms(self.send_timeout_ms),
            max_connections_per_address: self.max_connections_per_address,
        })
    }
}

/// `[database]`
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct DatabaseConfig {
    /// `postgres://user:pass@host/db` selects PostgreSQL; `sqlite://path` or a plain
    /// path selects SQLite. Default: SQLite at `<data_dir>/callsmith.db`.
    pub url: Option<String>,
    /// Connection pool size. Default: 4 for SQLite, 16 for PostgreSQL
    /// ([`callsmith_domain::store::default_pool_size`]).
    pub max_connections: Option<u32>,
}

/// `[auth]`
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct AuthConfig {
    /// Lifetime of a user session, seconds. Default 43200 (12 h).
    pub session_ttl_secs: u64,
    /// Lifetime of a password-reset token, seconds. Default 3600.
    pub password_reset_ttl_secs: u64,
    /// Lifetime of a magic-link token, seconds. Default 900.
    pub magic_link_ttl_secs: u64,
    /// argon2id memory cost for new password hashes, KiB. Default 19456.
    pub argon2_memory_kib: u32,
    /// argon2id iterations. Default 2.
    pub argon2_iterations: u32,
    /// Failed logins per account email within `login_failure_window_secs` before that
    /// email is refused (429) for the rest of the window; 0: no limit. Default 5.
    pub login_max_failures_per_email: u32,
    /// Failed logins per source address (IPv6: per /64) within the window before that
    /// address is refused; 0: no limit. Default 20.
    pub login_max_failures_per_address: u32,
    /// The window of both login limits, seconds; it opens at a key's first failure.
    /// Default 900.
    pub login_failure_window_secs: u64,
}

impl AuthConfig {
    /// The login throttle's limits; the window must be above zero.
    pub fn login_throttle(
        &self,
    ) -> anyhow::Result<callsmith_domain::auth::throttle::ThrottleSettings> {
        use callsmith_domain::auth::throttle::{Limit, ThrottleSettings};
        anyhow::ensure!(
            self.login_failure_window_secs > 0,
            "auth.login_failure_window_secs must be above 0"
        );
        let window = std::time::Duration::from_secs(self.login_failure_window_secs);
        Ok(ThrottleSettings {
            per_email: Limit {
                max_failures: self.login_max_failures_per_email,
                window,
            },
            per_address: Limit {
                max_failures: self.login_max_failures_per_address,
                window,
            },
        })
    }
}

/// Log output format.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

/// `[log]`
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct LogConfig {
    /// `text` (default) or `json`.
    pub format: LogFormat,
    /// tracing filter directive, e.g. `info,callsmith_control=debug`. `RUST_LOG` wins
    /// when set. Default `info`.
    pub filter: String,
}

impl Config {
    /// Threads of the async runtime: `worker_threads`, or the cores the media workers leave.
    pub fn runtime_threads(&self) -> usize {
        self.worker_threads
            .unwrap_or_else(|| {
                let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
                cores.saturating_sub(self.media.workers.max(1))
            })
            .max(1)
    }
}

impl Default for Config {
    fn default() -> Self {
        Config {
            data_dir: PathBuf::from("data"),
            bootstrap_superuser_token: None,
            worker_threads: None,
            http: HttpConfig::default(),
            database: DatabaseConfig::default(),
            auth: AuthConfig::default(),
            log: LogConfig::default(),
            sip: SipSection::default(),
            media: MediaSection::default(),
            stt: SttSection::default(),
            tts: TtsSection::default(),
            speech: SpeechSection::default(),
            dialer: DialerConfig::default(),
            webhook: WebhookSection::default(),
            adapters: AdaptersSection::default(),
            objects: ObjectsSection::default(),
        }
    }
}

impl Default for HttpConfig {
    fn default() -> Self {
        let limits = callsmith_domain::settings::HttpSettings::default();
        HttpConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 8080)),
            public_url: None,
            internal_url: None,
            header_read_timeout_ms: limits.header_read_timeout.as_millis() as u64,
            idle_timeout_ms: limits.idle_timeout.as_millis() as u64,
            body_read_timeout_ms: limits.body_read_timeout.as_millis() as u64,
            body_min_bytes_per_sec: limits.body_min_rate,
            send_timeout_ms: limits.send_timeout.as_millis() as u64,
            max_connections_per_address: limits.max_connections_per_address,
        }
    }
}

impl Default for AuthConfig {
    fn default() -> Self {
        let throttle = callsmith_domain::auth::throttle::ThrottleSettings::default();
        AuthConfig {
            session_ttl_secs: 12 * 3600,
            password_reset_ttl_secs: 3600,
            magic_link_ttl_secs: 900,
            argon2_memory_kib: 19 * 1024,
            argon2_iterations: 2,
            login_max_failures_per_email: throttle.per_email.max_failures,
            login_max_failures_per_address: throttle.per_address.max_failures,
            login_failure_window_secs: throttle.per_email.window.as_secs(),
        }
    }
}

/// `[sip]`
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct SipSection {
    /// UDP listen address (port 0 picks one). Default `127.0.0.1:5060`; unset disables UDP.
    pub udp: Option<SocketAddr>,
    /// TCP listen address. Default unset (no TCP).
    pub tcp: Option<SocketAddr>,
    /// SIP over TLS (`[sip.tls]`): listen address, the node's certificate and key, the CA
    /// bundle peers are verified against, mutual TLS and the allow-list of client
    /// certificate names (docs/trunks.md "TLS and SRTP"). Default unset (no TLS).
    pub tls: Option<callsmith_sip::SipTlsConfig>,
    /// Trunks: `[[sip.trunks]] name = "carrier", gateway = "127.0.0.1:5070"` (or a
    /// `host:port`, resolved at start and every 60 s; plus optional `transport`,
    /// `credentials`, `from_domain`, `number_format`, `inbound_sources`,
    /// `inbound_tenant`: the tenant sid whose numbers alone the trunk's inbound calls reach,
    /// `codecs`: `PCMU`, `PCMA`, `G722`, most preferred first, and `srtp`: `off`,
    /// `optional` or `required`).
    /// Names are unique. A number's `trunk` names one; otherwise the tenant's oldest trunk
    /// (control API) whose name is configured here; otherwise `default_trunk` (docs/trunks.md).
    pub trunks: Vec<callsmith_sip::TrunkConfig>,
    /// Trunk used when neither the number nor the tenant names a configured one; must
    /// name one of `trunks` (checked at start).
    pub default_trunk: Option<String>,
    /// User-Agent header. Default `callsmith`.
    pub user_agent: String,
    /// Outbound calls not answered within this many seconds are canceled (`no_answer`);
    /// a call the gateway has not answered at all by then ends `failed`. Default 45.
    pub ring_timeout_secs: u64,
    /// Receive buffer of the UDP socket, bytes; at least 65536. Default 4194304. The
    /// kernel caps it at `net.core.rmem_max` (the start-up log warns when it does).
    pub udp_receive_buffer_bytes: usize,
}

impl SipSection {
    /// The SIP stack's configuration, checked: the receive buffer must be at least 64 KiB,
    /// trunk names unique and `default_trunk` one of them ([`callsmith_sip::SipConfig::check`]).
    pub fn to_sip(&self) -> anyhow::Result<callsmith_sip::SipConfig> {
        anyhow::ensure!(
            self.udp_receive_buffer_bytes >= 65536,
            "sip.udp_receive_buffer_bytes must be at least 65536"
        );
        let sip = callsmith_sip::SipConfig {
            udp: self.udp,
            tcp: self.tcp,
            tls: self.tls.clone(),
            trunks: self.trunks.clone(),
            default_trunk: self.default_trunk.clone(),
            user_agent: self.user_agent.clone(),
            udp_receive_buffer_bytes: self.udp_receive_buffer_bytes,
            ..Default::default()
        };
        sip.check().map_err(|e| anyhow::anyhow!("sip.{e}"))?;
        Ok(sip)
    }

    /// The trunks calls leave through, as the control plane checks dispatches and numbers
    /// against them.
    pub fn node_trunks(&self) -> callsmith_domain::communication::caller::NodeTrunks {
        callsmith_domain::communication::caller::NodeTrunks {
            names: self.trunks.iter().map(|t| t.name.clone()).collect(),
            default: self.default_trunk.clone(),
        }
    }
}

impl Default for SipSection {
    fn default() -> Self {
        SipSection {
            udp: Some(SocketAddr::from(([127, 0, 0, 1], 5060))),
            tcp: None,
            tls: None,
            trunks: Vec::new(),
            default_trunk: None,
            user_agent: "callsmith".into(),
            ring_timeout_secs: 45,
            udp_receive_buffer_bytes: callsmith_sip::UDP_RECEIVE_BUFFER_BYTES,
        }
    }
}

/// `[stt]`
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct SttSection {
    /// A recognition catalog file replacing the shipped one.
    pub catalog_path: Option<PathBuf>,
    /// Recognition nodes per engine: `[[stt.engines.whisper]] name = "local", url =
    /// "ws://127.0.0.1:2700", protocol = "vosk", ready_url = "http://127.0.0.1:2700/ready"`.
    pub engines: std::collections::BTreeMap<String, Vec<callsmith_media::stt::SttNodeConfig>>,
}

impl SttSection {
    /// Checks every node before the start: its URL (`ws://` or `wss://`), that its
    /// `api_key_env` variable is set and that its `ca_file` reads as PEM certificates.
    pub fn check(&self) -> anyhow::Result<()> {
        for (engine, nodes) in &self.engines {
            for (i, n) in nodes.iter().enumerate() {
                n.check()
                    .map_err(|e| anyhow::anyhow!("stt.engines.{engine}[{i}] ({}): {e}", n.name))?;
            }
        }
        Ok(())
    }
}

/// `[dialer]`
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct DialerConfig {
    /// Run the call engine (SIP, dialer, inbound, result delivery). Default true.
    pub enabled: bool,
    /// How often due communications are looked for, ms. Default 200.
    pub poll_interval_ms: u64,
    /// Claim lease, seconds: a claim not renewed for this long is reconciled by any engine
    /// (`interrupted`, never redialled). Default 30.
    pub lease_secs: u64,
    /// How often expired claims are reconciled, seconds. Default 5.
    pub reconcile_interval_secs: u64,
    /// How often this node writes its heartbeat and looks for lost peers, ms. Default 1000.
    pub heartbeat_interval_ms: u64,
    /// A node whose heartbeat is older than this, ms, is lost: a peer takes it over (ends
    /// its answered calls with a BYE, `end_reason` `node_lost`; interrupts its other live
    /// calls). Keep it several heartbeats long. Default 3000.
    pub node_timeout_ms: u64,
    /// Live calls of this process at most (test calls and inbound calls included): the
    /// dialer claims no more, and an INVITE beyond it is answered 503 with Retry-After.
    /// Default 200.
    pub max_live_calls: usize,
    /// Test and browser calls one account may have open at once (from the request that
    /// creates one until it ends, across the nodes): a request over it is refused with 429
    /// `too_many_test_calls` before any call is stored, so one account's tests cannot take
    /// the live-call capacity of the others. 0: no bound. Default 10.
    pub max_test_calls_per_account: u32,
    /// Call progress writes (row created, INVITE sent, answered, ended) queued behind the
    /// calls at most (see `engine::journal`). While the queue is nearly full the node takes
    /// no new calls. Default 4096.
    pub write_queue: usize,
    /// New calls are refused (inbound 503, the dialer claims none) while the process runs
    /// its timers later than this, ms: its CPU is saturated, and more calls would make
    /// every call late. 0 turns the check off. Default 100.
    pub max_timer_lag_ms: u64,
    /// New inbound calls this node admits per second (a token bucket holding a tenth of a
    /// second's worth); INVITEs above it are answered 503 with Retry-After at once, before
    /// any work is spent on them, so the calls admitted stay clean. 0: no limit (the
    /// timer-lag check alone). Default 0; `bench/src/bin/call_rate.rs` measures what a
    /// machine takes.
    pub max_inbound_cps: u32,
    /// Calls are hung up after this many seconds. Default 3600.
    pub max_call_secs: u64,
    /// On SIGTERM, live calls get this many seconds to finish before they are hung up. Default 30.
    pub drain_timeout_secs: u64,
    /// An inactive agent's due calls are looked at again after this many seconds. Default 60.
    pub inactive_retry_secs: u64,
    /// Recognition engine when a brick names none. Default `whisper`.
    pub default_stt_engine: String,
    /// Result delivery attempts before a delivery is `failed`. Default 8.
    pub result_max_attempts: u32,
    /// First retry delay of a result delivery, ms (doubles per attempt, at most 1 h). Default 2000.
    pub result_backoff_base_ms: u64,
}

impl Default for DialerConfig {
    fn default() -> Self {
        DialerConfig {
            enabled: true,
            poll_interval_ms: 200,
            lease_secs: 30,
            reconcile_interval_secs: 5,
            heartbeat_interval_ms: 1000,
            node_timeout_ms: 3000,
            max_live_calls: 200,
            max_test_calls_per_account:
                callsmith_domain::test_calls::DEFAULT_MAX_TEST_CALLS_PER_ACCOUNT,
            write_queue: 4096,
            max_timer_lag_ms: 100,
            max_inbound_cps: 0,
            max_call_secs: 3600,
            drain_timeout_secs: 30,
            inactive_retry_secs: 60,
            default_stt_engine: "whisper".into(),
            result_max_attempts: 8,
            result_backoff_base_ms: 2000,
        }
    }
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            format: LogFormat::Text,
            filter: "info".into(),
        }
    }
}

impl Config {
    /// Loads defaults, then the TOML file (explicit path, or `callsmith.toml` if
    /// present), then `CALLSMITH_*` variables from `env`.
    pub fn load(path: Option<&Path>, env: Env) -> anyhow::Result<Config> {
        let mut fig = Figment::from(Serialized::defaults(Config::default()));
        match path {
            Some(p) => {
                anyhow::ensure!(p.exists(), "config file {} does not exist", p.display());
                fig = fig.merge(Toml::file(p));
            }
            None if Path::new("callsmith.toml").exists() => {
                fig = fig.merge(Toml::file("callsmith.toml"))
            }
            None => {}
        }
        Ok(fig.merge(env).extract()?)
    }

    /// The `CALLSMITH_*` environment provider (nested keys split at `__`). Only
    /// variables whose first segment is a key of [`Config`] are read, so unrelated
    /// `CALLSMITH_*` variables (`CALLSMITH_CONFIG`, test settings…) do not trip
    /// `deny_unknown_fields`; a typo inside a known section still does.
    pub fn env() -> Env {
        Env::prefixed("CALLSMITH_")
            .filter(|k| {
                let first = k.as_str().split("__").next().unwrap_or_default();
                TOP_LEVEL_KEYS.iter().any(|t| first.eq_ignore_ascii_case(t))
            })
            .split("__")
    }

    /// The connection pool size in effect.
    pub fn database_pool_size(&self) -> u32 {
        self.database
            .max_connections
            .unwrap_or_else(|| callsmith_domain::store::default_pool_size(&self.database_url()))
    }

    /// The database URL in effect.
    pub fn database_url(&self) -> String {
        self.database
            .url
            .clone()
            .unwrap_or_else(|| format!("sqlite://{}", self.data_dir.join("callsmith.db").display()))
    }

    /// The public base URL in effect.
    pub fn public_url(&self) -> String {
        self.http
            .public_url
            .clone()
            .unwrap_or_else(|| format!("http://{}", self.http.listen))
    }

    /// Where this node's peers reach its control API (`http.internal_url`, else the listen
    /// address when it names one); an error names a value that is not an http(s) URL.
    pub fn internal_url(&self) -> anyhow::Result<Option<String>> {
        match &self.http.internal_url {
            Some(u) => {
                let url = reqwest::Url::parse(u)
                    .map_err(|e| anyhow::anyhow!("http.internal_url {u:?}: {e}"))?;
                if !matches!(url.scheme(), "http" | "https") || url.host().is_none() {
                    anyhow::bail!("http.internal_url {u:?}: not an http(s) URL with a host");
                }
                Ok(Some(u.trim_end_matches('/').to_string()))
            }
            None if self.http.listen.ip().is_unspecified() => Ok(None),
            None => Ok(Some(format!("http://{}", self.http.listen))),
        }
    }

    /// Where the web console opens, for the start-up log: `http.public_url` when set, else
    /// the address the API is `bound` to (loopback in place of an unspecified address,
    /// which a browser cannot open).
    pub fn console_url(&self, bound: SocketAddr) -> String {
        if let Some(public) = &self.http.public_url {
            return format!("{}/", public.trim_end_matches('/'));
        }
        let mut at = bound;
        if at.ip().is_unspecified() {
            at.set_ip(if at.is_ipv4() {
                std::net::Ipv4Addr::LOCALHOST.into()
            } else {
                std::net::Ipv6Addr::LOCALHOST.into()
            });
        }
        format!("http://{at}/")
    }
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod trunk_tests;
