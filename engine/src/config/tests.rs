#![allow(clippy::result_large_err)] // figment::Jail's closure error type is figment's own

use super::*;

#[test]
fn defaults_work_out_of_the_box() {
    let c = Config::default();
    assert_eq!(c.http.listen.to_string(), "127.0.0.1:8080");
    assert_eq!(c.database_url(), "sqlite://data/callsmith.db");
    assert_eq!(c.database_pool_size(), 4, "SQLite: a few connections");
    assert_eq!(c.public_url(), "http://127.0.0.1:8080");
}

#[test]
fn file_then_env_override() {
    figment::Jail::expect_with(|jail| {
        jail.create_file("c.toml", "data_dir = \"/tmp/x\"\n[http]\nlisten = \"127.0.0.1:9000\"\n[log]\nformat = \"json\"\n")?;
        jail.set_env("CALLSMITH_HTTP__LISTEN", "127.0.0.1:9100");
        jail.set_env("CALLSMITH_DATABASE__URL", "postgres://u:p@127.0.0.1/db");
        jail.set_env("CALLSMITH_BOOTSTRAP_SUPERUSER_TOKEN", "cs_su_abc");
        let c =
            Config::load(Some(Path::new("c.toml")), Config::env()).map_err(|e| e.to_string())?;
        assert_eq!(c.http.listen.to_string(), "127.0.0.1:9100");
        assert_eq!(c.data_dir, PathBuf::from("/tmp/x"));
        assert_eq!(c.log.format, LogFormat::Json);
        assert_eq!(c.database_url(), "postgres://u:p@127.0.0.1/db");
        assert_eq!(c.database_pool_size(), 16, "PostgreSQL's default pool");
        assert_eq!(c.bootstrap_superuser_token.as_deref(), Some("cs_su_abc"));
        jail.set_env("CALLSMITH_DATABASE__MAX_CONNECTIONS", "3");
        let c =
            Config::load(Some(Path::new("c.toml")), Config::env()).map_err(|e| e.to_string())?;
        assert_eq!(c.database_pool_size(), 3, "a configured pool size wins");
        Ok(())
    });
}

/// A configuration with every nested table; `#@name` marks where a key of that table
/// may go.
const EVERY_TABLE: &str = r#"
#@top
data_dir = "/tmp/x"
[http]
#@http
[database]
#@database
[auth]
#@auth
[log]
#@log
[sip]
#@sip
[[sip.trunks]]
#@trunk
name = "carrier"
gateway = "127.0.0.1:5080"
[sip.trunks.credentials]
#@credentials
username = "alice"
password = "secret"
[sip.trunks.number_format]
#@number_format
kind = "national"
country_code = "49"
trunk_prefix = "0"
[media]
#@media
[stt]
#@stt
[[stt.engines.whisper]]
#@stt_node
name = "local"
url = "ws://127.0.0.1:2700"
protocol = "vosk"
[tts]
#@tts
[[tts.engines]]
#@tts_engine
name = "piper"
kind = "openai"
url = "http://127.0.0.1:2700"
[speech]
#@speech
[dialer]
#@dialer
[objects]
#@objects
[objects.s3]
#@s3
[webhook]
#@webhook
[adapters]
#@adapters
[[adapters.llm_providers]]
#@llm_provider
name = "p"
base_url = "https://llm.example.test/v1"
"#;

#[test]
fn unknown_keys_are_refused_at_every_depth() {
    let tables: Vec<&str> = EVERY_TABLE
        .lines()
        .filter_map(|l| l.strip_prefix("#@"))
        .collect();
    assert!(tables.len() >= 19, "{tables:?}");
    figment::Jail::expect_with(|jail| {
        jail.create_file("ok.toml", EVERY_TABLE)?;
        Config::load(Some(Path::new("ok.toml")), Config::env())
            .map_err(|e| format!("the base configuration loads: {e:#}"))?;
        for t in &tables {
            let text = EVERY_TABLE.replace(&format!("#@{t}\n"), "credential = 1\n");
            jail.create_file("bad.toml", &text)?;
            match Config::load(Some(Path::new("bad.toml")), Config::env()) {
                Ok(_) => return Err(format!("a typo in the {t} table was accepted").into()),
                Err(e) => {
                    let msg = format!("{e:#}");
                    assert!(msg.contains("credential"), "{t}: {msg}");
                }
            }
        }
        Ok(())
    });
}

#[test]
fn top_level_keys_are_complete() {
    let value = toml::Value::try_from(Config::default()).expect("serialize");
    for k in value.as_table().unwrap().keys() {
        assert!(
            TOP_LEVEL_KEYS.contains(&k.as_str()),
            "TOP_LEVEL_KEYS lacks {k}"
        );
    }
}

#[test]
fn unrelated_env_vars_are_ignored() {
    figment::Jail::expect_with(|jail| {
        jail.set_env("CALLSMITH_TEST_PG_URL", "postgres://x");
        jail.set_env("CALLSMITH_CONFIG", "x.toml");
        jail.set_env("CALLSMITH_LOG__FILTER", "debug");
        let c = Config::load(None, Config::env()).map_err(|e| e.to_string())?;
        assert_eq!(c.log.filter, "debug");
        jail.set_env("CALLSMITH_HTTP__LISTN", "127.0.0.1:1");
        assert!(
            Config::load(None, Config::env()).is_err(),
            "a typo inside a known section is an error"
        );
        Ok(())
    });
}

#[test]
fn llm_providers_from_file_and_env() {
    figment::Jail::expect_with(|jail| {
        jail.create_file(
            "c.toml",
            "[adapters]\nllm_call_timeout_secs = 5\n[[adapters.llm_providers]]\nname = \"eu\"\nbase_url = \"http://127.0.0.1:9/v1\"\napi_key_env = \"E2E_LLM_KEY\"\ngdpr = true\nmodels = [\"m1\"]\n",
        )?;
        jail.set_env("E2E_LLM_KEY", "sk-test");
        jail.set_env("CALLSMITH_ADAPTERS__TRAINING_WORKERS", "3");
        let c =
            Config::load(Some(Path::new("c.toml")), Config::env()).map_err(|e| e.to_string())?;
        assert_eq!(c.adapters.llm_call_timeout_secs, 5);
        let a = c.adapters.to_control().map_err(|e| e.to_string())?;
        assert_eq!(a.training_workers, 3);
        assert_eq!(a.llm_providers.len(), 1);
        assert_eq!(a.llm_providers[0].api_key.as_deref(), Some("sk-test"));
        assert!(a.llm_providers[0].gdpr);
        assert_eq!(a.llm_providers[0].models, vec!["m1".to_string()]);
        // A key variable that is not set, and a provider without a URL, are errors.
        let mut bad = c.adapters.clone();
        bad.llm_providers[0].api_key_env = Some("E2E_LLM_KEY_UNSET".into());
        assert!(bad.to_control().is_err());
        let mut bad = c.adapters.clone();
        bad.llm_providers[0].base_url = String::new();
        assert!(bad.to_control().is_err());
        Ok(())
    });
}

#[test]
fn tts_engines_from_file_and_env() {
    figment::Jail::expect_with(|jail| {
        jail.create_file(
            "c.toml",
            "[tts]\ndefault_engine = \"piper\"\n[[tts.engines]]\nname = \"piper\"\nkind = \"openai\"\nurl = \"http://127.0.0.1:2700\"\nvoice = \"joe\"\n[[tts.engines]]\nname = \"cloud\"\nurl = \"https://api.openai.com\"\napi_key_env = \"E2E_TTS_KEY\"\nmodel = \"tts-1-hd\"\ntimeout_secs = 20\n",
        )?;
        jail.set_env("E2E_TTS_KEY", "sk-test");
        let c =
            Config::load(Some(Path::new("c.toml")), Config::env()).map_err(|e| e.to_string())?;
        let t = &c.tts;
        assert_eq!(t.engines.len(), 2);
        assert_eq!(t.engines[0].kind, TtsEngineKind::Openai);
        assert_eq!(t.engines[0].voice, "joe");
        assert_eq!(t.engines[0].model, "tts-1");
        assert_eq!(t.engines[1].voice, "alloy");
        assert_eq!(t.engines[1].timeout_secs, 20);
        assert_eq!(t.engines[1].pcm_sample_rate, 24000);
        let svc = t.service().map_err(|e| e.to_string())?;
        for name in ["espeak-ng", "flite", "piper", "cloud"] {
            assert!(svc.has_engine(name), "{name}");
        }
        // Each mistake is refused with the key that holds it.
        let refused = |t: &TtsSection, want: &str| {
            let e = t.service().err().map(|e| e.to_string()).unwrap_or_default();
            assert!(e.contains(want), "{want:?} not in {e:?}");
        };
        let mut bad = t.clone();
        bad.engines[1].api_key_env = Some("E2E_TTS_KEY_UNSET".into());
        refused(
            &bad,
            "tts.engines[1].api_key_env: E2E_TTS_KEY_UNSET is not set",
        );
        let mut bad = t.clone();
        bad.engines[0].url = "ftp://127.0.0.1".into();
        refused(&bad, "tts.engines[0] (piper): invalid synthesis URL");
        let mut bad = t.clone();
        bad.engines[0].pcm_sample_rate = 0;
        refused(&bad, "tts.engines[0] (piper): pcm_sample_rate 0 is outside");
        let mut bad = t.clone();
        bad.engines[1].name = "piper".into();
        refused(&bad, "tts.engines[1]: the name \"piper\" is taken");
        let mut bad = t.clone();
        bad.engines[1].name = "flite".into();
        refused(&bad, "is taken");
        let mut bad = t.clone();
        bad.engines[0].name = " ".into();
        refused(&bad, "tts.engines[0].name is required");
        let mut bad = t.clone();
        bad.default_engine = Some("nobody".into());
        refused(&bad, "tts.default_engine \"nobody\"");
        // An unknown kind is a load error.
        jail.create_file(
            "k.toml",
            "[[tts.engines]]\nname = \"x\"\nkind = \"polly\"\nurl = \"http://127.0.0.1:9\"\n",
        )?;
        assert!(Config::load(Some(Path::new("k.toml")), Config::env()).is_err());
        Ok(())
    });
}

#[test]
fn objects_on_s3_from_file_and_env() {
    use callsmith_domain::objects::Provider;
    figment::Jail::expect_with(|jail| {
        jail.create_file(
            "c.toml",
            "data_dir = \"/srv/cs\"\n[objects]\nprovider = \"s3\"\n[objects.s3]\nendpoint = \"http://127.0.0.1:9000\"\nbucket = \"calls\"\nregion = \"us-east-1\"\nallow_http = true\n",
        )?;
        jail.set_env("CALLSMITH_OBJECTS__S3__SECRET_ACCESS_KEY", "from-env");
        let c =
            Config::load(Some(Path::new("c.toml")), Config::env()).map_err(|e| e.to_string())?;
        let o = c.objects.to_control(&c.data_dir);
        assert_eq!(o.provider, Provider::S3);
        assert_eq!(o.s3.bucket, "calls");
        assert_eq!(o.s3.endpoint.as_deref(), Some("http://127.0.0.1:9000"));
        assert!(o.s3.allow_http);
        assert_eq!(o.s3.secret_access_key.as_deref(), Some("from-env"));
        assert_eq!(o.local_dir, PathBuf::from("/srv/cs/objects"));
        Ok(())
    });
    let d = Config::default();
    let o = d.objects.to_control(&d.data_dir);
    assert_eq!(o.provider, Provider::Local);
    assert_eq!(o.local_dir, PathBuf::from("data/objects"));
}

#[test]
fn http_limits_and_login_throttle_from_file() {
    use std::time::Duration;
    let d = Config::default();
    assert_eq!(
        d.http.to_control().unwrap(),
        callsmith_domain::settings::HttpSettings::default()
    );
    assert_eq!(
        d.auth.login_throttle().unwrap(),
        callsmith_domain::auth::throttle::ThrottleSettings::default()
    );
    figment::Jail::expect_with(|jail| {
        jail.create_file(
            "c.toml",
            "[http]\nheader_read_timeout_ms = 2500\nidle_timeout_ms = 30000\nbody_read_timeout_ms = 4000\nbody_min_bytes_per_sec = 0\nsend_timeout_ms = 7000\nmax_connections_per_address = 16\n[auth]\nlogin_max_failures_per_email = 3\nlogin_max_failures_per_address = 0\nlogin_failure_window_secs = 60\n",
        )?;
        let c =
            Config::load(Some(Path::new("c.toml")), Config::env()).map_err(|e| e.to_string())?;
        let h = c.http.to_control().map_err(|e| e.to_string())?;
        assert_eq!(h.header_read_timeout, Duration::from_millis(2500));
        assert_eq!(h.idle_timeout, Duration::from_secs(30));
        assert_eq!(h.body_read_timeout, Duration::from_secs(4));
        assert_eq!(h.body_min_rate, 0);
        assert_eq!(h.send_timeout, Duration::from_secs(7));
        assert_eq!(h.max_connections_per_address, 16);
        let t = c.auth.login_throttle().map_err(|e| e.to_string())?;
        assert_eq!(t.per_email.max_failures, 3);
        assert_eq!(t.per_address.max_failures, 0);
        assert_eq!(t.per_email.window, Duration::from_secs(60));
        assert_eq!(t.per_address.window, Duration::from_secs(60));
        // Zero timeouts and a zero window are configuration errors.
        let mut bad = c.clone();
        bad.http.header_read_timeout_ms = 0;
        assert!(bad.http.to_control().is_err());
        let mut bad = c.clone();
        bad.http.idle_timeout_ms = 0;
        assert!(bad.http.to_control().is_err());
        let mut bad = c.clone();
        bad.http.body_read_timeout_ms = 0;
        assert!(bad.http.to_control().is_err());
        let mut bad = c.clone();
        bad.http.send_timeout_ms = 0;
        assert!(bad.http.to_control().is_err());
        let mut bad = c.clone();
        bad.auth.login_failure_window_secs = 0;
        assert!(bad.auth.login_throttle().is_err());
        Ok(())
    });
}

#[test]
fn the_sip_udp_receive_buffer_is_configurable_and_at_least_64_kib() {
    let d = Config::default();
    assert_eq!(d.sip.to_sip().unwrap().udp_receive_buffer_bytes, 4 << 20);
    figment::Jail::expect_with(|jail| {
        jail.create_file("c.toml", "[sip]\nudp_receive_buffer_bytes = 1048576\n")?;
        let c =
            Config::load(Some(Path::new("c.toml")), Config::env()).map_err(|e| e.to_string())?;
        let sip = c.sip.to_sip().map_err(|e| e.to_string())?;
        assert_eq!(sip.udp_receive_buffer_bytes, 1 << 20);
        assert_eq!(sip.udp, c.sip.udp);
        let mut bad = c.clone();
        bad.sip.udp_receive_buffer_bytes = 65535;
        let err = bad.sip.to_sip().unwrap_err().to_string();
        assert!(err.contains("sip.udp_receive_buffer_bytes"), "{err}");
        Ok(())
    });
}

#[test]
fn the_console_url_is_the_public_url_or_the_bound_address() {
    let mut c = Config::default();
    let bound = |s: &str| s.parse::<SocketAddr>().unwrap();
    assert_eq!(
        c.console_url(bound("127.0.0.1:8080")),
        "http://127.0.0.1:8080/"
    );
    assert_eq!(
        c.console_url(bound("0.0.0.0:9000")),
        "http://127.0.0.1:9000/"
    );
    assert_eq!(c.console_url(bound("[::]:9000")), "http://[::1]:9000/");
    c.http.public_url = Some("https://calls.example.test/".into());
    assert_eq!(
        c.console_url(bound("0.0.0.0:9000")),
        "https://calls.example.test/"
    );
}

#[test]
fn the_internal_url_is_the_setting_or_the_listen_address() {
    let mut c = Config::default();
    assert_eq!(
        c.internal_url().unwrap().as_deref(),
        Some("http://127.0.0.1:8080")
    );
    c.http.listen = "0.0.0.0:8080".parse().unwrap();
    assert_eq!(
        c.internal_url().unwrap(),
        None,
        "no address peers could use"
    );
    c.http.internal_url = Some("http://10.0.0.21:8080/".into());
    assert_eq!(
        c.internal_url().unwrap().as_deref(),
        Some("http://10.0.0.21:8080")
    );
    for bad in ["10.0.0.21:8080", "ftp://10.0.0.21/", "http://"] {
        c.http.internal_url = Some(bad.into());
        let e = c.internal_url().unwrap_err().to_string();
        assert!(e.contains("http.internal_url"), "{bad}: {e}");
    }
}

#[test]
fn unknown_keys_are_rejected() {
    figment::Jail::expect_with(|jail| {
        jail.create_file("c.toml", "[http]\nlisten_typo = \"x\"\n")?;
        assert!(Config::load(Some(Path::new("c.toml")), Config::env()).is_err());
        Ok(())
    });
}

/// docs/configuration.md names every key of the default configuration.
#[test]
fn docs_cover_every_key() {
    let doc = include_str!("../../../docs/configuration.md");
    let value = toml::Value::try_from(Config::default()).expect("serialize");
    let mut keys = Vec::new();
    fn walk(prefix: &str, v: &toml::Value, out: &mut Vec<String>) {
        if let toml::Value::Table(t) = v {
            for (k, v) in t {
                let key = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                if v.is_table() {
                    walk(&key, v, out)
                } else {
                    out.push(key)
                }
            }
        }
    }
    walk("", &value, &mut keys);
    // Option fields that default to None are not serialized; name them explicitly.
    keys.extend(
        [
            "bootstrap_superuser_token",
            "http.public_url",
            "database.url",
            "adapters.remote_classifier_url",
            "adapters.llm_providers.name",
            "adapters.llm_providers.base_url",
            "adapters.llm_providers.api_key",
            "adapters.llm_providers.api_key_env",
            "adapters.llm_providers.gdpr",
            "adapters.llm_providers.models",
            "tts.default_engine",
            "stt.engines.name",
            "stt.engines.url",
            "stt.engines.protocol",
            "stt.engines.ready_url",
            "stt.engines.api_key",
            "stt.engines.api_key_env",
            "stt.engines.ca_file",
            "speech.local",
            "speech.python",
            "speech.server",
            "speech.threads",
            "tts.engines.name",
            "tts.engines.kind",
            "tts.engines.url",
            "tts.engines.api_key",
            "tts.engines.api_key_env",
            "tts.engines.model",
            "tts.engines.voice",
            "tts.engines.timeout_secs",
            "tts.engines.pcm_sample_rate",
            "objects.local_dir",
            "objects.signing_key",
            "objects.signing_key_file",
            "objects.s3.endpoint",
            "objects.s3.access_key_id",
            "objects.s3.secret_access_key",
            "sip.tls.listen",
            "sip.tls.cert_file",
            "sip.tls.key_file",
            "sip.tls.ca_file",
            "sip.tls.require_client_cert",
            "sip.tls.allowed_names",
        ]
        .map(String::from),
    );
    for k in keys {
        assert!(
            doc.contains(&format!("`{k}`")),
            "docs/configuration.md does not document `{k}`"
        );
    }
}

#[test]
fn runtime_threads_leave_the_media_workers_their_cores() {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut c = Config::default();
    assert_eq!(c.runtime_threads(), cores.saturating_sub(1).max(1));
    c.media.workers = cores + 4;
    assert_eq!(c.runtime_threads(), 1, "never fewer than one");
    c.worker_threads = Some(3);
    assert_eq!(c.runtime_threads(), 3);
    c.worker_threads = Some(0);
    assert_eq!(c.runtime_threads(), 1, "0 means at least one");
    figment::Jail::expect_with(|jail| {
        jail.set_env("CALLSMITH_WORKER_THREADS", "2");
        let c = Config::load(None, Config::env()).map_err(|e| e.to_string())?;
        assert_eq!(c.worker_threads, Some(2));
        Ok(())
    });
}

#[test]
fn sdp_never_carries_a_wildcard_address() {
    let ip = |s: &str| s.parse::<std::net::IpAddr>().unwrap();
    let media = |bind: &str, advertised: Option<&str>| MediaSection {
        bind_ip: ip(bind),
        advertised_ip: advertised.map(ip),
        ..MediaSection::default()
    };
    // This host: loopback, link-local, one LAN address of each family.
    let host = [
        ip("127.0.0.1"),
        ip("169.254.3.4"),
        ip("10.20.0.5"),
        ip("::1"),
        ip("fe80::1"),
        ip("fd00::5"),
    ];
    // A concrete bind address is what SDP carries; the announced one wins over it.
    assert_eq!(
        media("127.0.0.1", None).sdp_address(&host).unwrap(),
        ip("127.0.0.1")
    );
    assert_eq!(
        media("10.20.0.5", Some("203.0.113.9"))
            .sdp_address(&host)
            .unwrap(),
        ip("203.0.113.9")
    );
    assert_eq!(
        media("0.0.0.0", Some("203.0.113.9"))
            .sdp_address(&host)
            .unwrap(),
        ip("203.0.113.9")
    );
    // A wildcard bind: the host's one address of its family that peers can reach.
    assert_eq!(
        media("0.0.0.0", None).sdp_address(&host).unwrap(),
        ip("10.20.0.5")
    );
    assert_eq!(media("::", None).sdp_address(&host).unwrap(), ip("fd00::5"));
    // None, or several: no start, and the message names the setting.
    let e = media("0.0.0.0", None)
        .sdp_address(&[ip("127.0.0.1"), ip("169.254.3.4")])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("media.bind_ip is 0.0.0.0")
            && e.contains("no IPv4 address")
            && e.contains("set media.advertised_ip"),
        "{e}"
    );
    let e = media("0.0.0.0", None)
        .sdp_address(&[ip("10.20.0.5"), ip("192.168.7.2"), ip("127.0.0.1")])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("several IPv4 addresses (10.20.0.5, 192.168.7.2)")
            && e.contains("set media.advertised_ip"),
        "{e}"
    );
    // The announced address itself is checked.
    for (bind, bad, says) in [
        ("0.0.0.0", "0.0.0.0", "must be the concrete address"),
        ("127.0.0.1", "::", "must be the concrete address"),
        ("10.20.0.5", "224.0.0.1", "must be the concrete address"),
        ("10.20.0.5", "fd00::5", "not an IPv4 address"),
    ] {
        let e = media(bind, Some(bad))
            .sdp_address(&host)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("media.advertised_ip") && e.contains(says),
            "{bind} {bad}: {e}"
        );
    }
}
