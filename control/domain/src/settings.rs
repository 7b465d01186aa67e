//! Settings of the control plane and the services it shares with the call engine (the
//! binary fills them from its configuration).

use std::time::Duration;

use crate::auth::{password::PasswordCost, throttle::ThrottleSettings};

/// Runtime settings of the control plane (filled by the engine from its config).
#[derive(Debug, Clone)]
pub struct Settings {
    /// Absolute base URL clients reach this server at (used in `consume_url`).
    pub public_url: String,
    /// Lifetime of a login / reset / magic-link session.
    pub session_ttl: Duration,
    /// Lifetime of a password-reset token.
    pub password_reset_ttl: Duration,
    /// Lifetime of a magic-link token.
    pub magic_link_ttl: Duration,
    /// argon2id cost for new password hashes.
    pub password_cost: PasswordCost,
    /// Failed-login limits per email and per source address (see [`crate::auth::throttle`]).
    pub login_throttle: ThrottleSettings,
    /// Connection limits of [`crate::api::serve`]: timeouts and the per-address cap.
    pub http: HttpSettings,
    /// Object storage (audio files, recordings, histories): `[objects]`.
    pub objects: crate::objects::ObjectsConfig,
    /// Recognition catalog and nodes: `[stt]`.
    pub stt: crate::catalog::SttConfig,
    /// Names of the synthesizers this node speaks with (`espeak-ng`, `flite` and the
    /// `[[tts.engines]]` names): the engine names scenario validation accepts (SCN125).
    pub tts_engines: Vec<String>,
    /// Classifier training pool, remote classifier service, LLM providers: `[adapters]`.
    pub adapters: crate::adapters::AdaptersConfig,
    /// Lets every request to a URL a tenant names (webhooks, result deliveries, SMS
    /// gateways, audio prompt URLs) reach loopback, link-local and private addresses
    /// (refused by default so tenants cannot probe the platform's network; engine key
    /// `webhook.allow_private`). See [`crate::guarded_http`].
    pub webhook_allow_private: bool,
    /// Hosts (names or addresses as written in URLs) tenant-named URLs may reach whatever
    /// they resolve to (engine key `webhook.allow_hosts`).
    pub webhook_allow_hosts: Vec<String>,
    /// Most communications one statistics or report request reads (a larger set is 422
    /// `too_many_communications`); see [`crate::communication::service`].
    pub statistics_max_communications: i64,
    /// Most contacts a legacy campaign holds (an add that would pass it is 400
    /// FAILED_PRECONDITION); [`DEFAULT_LEGACY_MAX_CONTACTS_PER_CAMPAIGN`] by default.
    pub legacy_max_contacts_per_campaign: i64,
    /// Test and browser calls one account may have open at once (engine key
    /// `dialer.max_test_calls_per_account`; 0: no bound); see [`crate::test_calls`].
    pub max_test_calls_per_account: u32,
    /// The SIP trunks this process places calls through (engine `[sip]`), checked when a
    /// call is dispatched (422 `no_trunk`) and a number names a trunk (422
    /// `trunk_not_configured`). `None` when the process places no calls (`[dialer] enabled
    /// = false`): the nodes that do may have other trunks, so nothing is checked.
    pub sip_trunks: Option<crate::communication::caller::NodeTrunks>,
}

/// Most contacts a legacy campaign holds by default. An attempt dials a campaign's contacts
/// in one request and one transaction, and its statistics and reports read them under the
/// statistics limit (200,000 by default), so a campaign at this size stays within both.
pub const DEFAULT_LEGACY_MAX_CONTACTS_PER_CAMPAIGN: i64 = 200_000;

impl Default for Settings {
    fn default() -> Self {
        Settings {
            public_url: "http://127.0.0.1:8080".into(),
            session_ttl: Duration::from_secs(12 * 3600),
            password_reset_ttl: Duration::from_secs(3600),
            magic_link_ttl: Duration::from_secs(15 * 60),
            password_cost: PasswordCost::default(),
            login_throttle: ThrottleSettings::default(),
            http: HttpSettings::default(),
            objects: Default::default(),
            stt: Default::default(),
            tts_engines: callsmith_media::tts::LOCAL_ENGINES
                .iter()
                .map(|e| e.to_string())
                .collect(),
            adapters: Default::default(),
            webhook_allow_private: false,
            webhook_allow_hosts: Vec::new(),
            statistics_max_communications:
                crate::communication::service::DEFAULT_MAX_COMMUNICATIONS,
            legacy_max_contacts_per_campaign: DEFAULT_LEGACY_MAX_CONTACTS_PER_CAMPAIGN,
            max_test_calls_per_account: crate::test_calls::DEFAULT_MAX_TEST_CALLS_PER_ACCOUNT,
            sip_trunks: None,
        }
    }
}

/// Connection limits of the server: `[http]` in the engine's configuration. See
/// [`crate::api::serve`] for where each applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HttpSettings {
    /// A request head must be complete within this long of its first byte.
    pub header_read_timeout: Duration,
    /// A connection with no request under way is closed after this long without a byte
    /// from the client.
    pub idle_timeout: Duration,
    /// Longest the server waits for the next bytes of a request body it is reading.
    pub body_read_timeout: Duration,
    /// Slowest pace a request body may keep, in bytes per second: all the server's waits
    /// for one body together may last `body_read_timeout` plus one second per this many
    /// bytes received. 0: only `body_read_timeout` applies, to each wait.
    pub body_min_rate: u64,
    /// A response write the client leaves blocked (it reads nothing) for this long closes
    /// the connection.
    pub send_timeout: Duration,
    /// Most connections open at once from one source: an IPv4 address, or an IPv6 /64.
    /// More are closed as they are accepted. 0: no cap.
    pub max_connections_per_address: usize,
}

impl Default for HttpSettings {
    /// 10 s to send a head, 60 s idle; a body may pause 20 s and must average 1 KiB/s
    /// beyond that; a blocked write waits 30 s; 128 connections per address.
    fn default() -> Self {
        HttpSettings {
            header_read_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            body_read_timeout: Duration::from_secs(20),
            body_min_rate: 1024,
            send_timeout: Duration::from_secs(30),
            max_connections_per_address: 128,
        }
    }
}
