//! The call runtime: everything a live call needs (store, SIP stack, media engine, TTS,
//! recognition nodes, object storage) in one cheap-to-clone handle, plus the count of live
//! calls the dialer's limits and the drain on shutdown look at.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use callsmith_domain::{Services, Store, objects::Objects, store::ScenarioVersionRecord};
use callsmith_media::{MediaEngine, prompt::PromptCache, stt::SttPool, tts::TtsService};
use callsmith_scenarios::{Program, Snapshot};
use callsmith_sip::SipStack;
use parking_lot::Mutex;
use prometheus_client::metrics::{
    counter::Counter, family::Family, gauge::Gauge, histogram::Histogram,
};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::config::DialerConfig;
use crate::journal::Journal;
use crate::pacing::{LoopLag, StartRate};

/// Settings of the runtime that come from `[dialer]` and `[sip]`.
#[derive(Debug, Clone)]
pub struct RuntimeSettings {
    /// This process, as written into `claimed_by` (host:pid).
    pub instance: String,
    /// The claim token of this process (one per process; see `store::communications`).
    pub claim_token: String,
    /// Where peers reach this node's control API (`http.internal_url`), written with its
    /// heartbeat.
    pub internal_url: Option<String>,
    pub lease: Duration,
    pub ring_timeout: Duration,
    /// A call is hung up after this long (answer to end).
    pub max_call: Duration,
    /// TTS engine when a brick names none.
    pub default_tts_engine: String,
    /// The synthesizer of the local speech node (`crate::speech`), if one was registered:
    /// prompts for it are spoken with espeak-ng while the node is not ready.
    pub local_tts_engine: Option<String>,
    /// Recognition engine when a brick names none.
    pub default_stt_engine: String,
    /// Address RTP is advertised at in SDP.
    pub media_ip: std::net::IpAddr,
    pub dialer: DialerConfig,
    /// Bound on one LLM answer inside a live call (`adapters.llm_call_timeout_secs`).
    pub llm_call_timeout: Duration,
}

/// Live calls of this process; the dialer waits on it when draining.
#[derive(Debug, Default)]
pub struct LiveCalls {
    count: AtomicUsize,
    changed: Notify,
    /// The count on /metrics (`callsmith_live_calls`).
    gauge: Gauge,
}

/// Decrements the live count when the call task ends, however it ends.
pub struct LiveGuard {
    live: Arc<LiveCalls>,
}

impl LiveCalls {
    /// Counts a call from its start (a claimed row, an INVITE received) to its end.
    pub fn enter(self: &Arc<Self>) -> LiveGuard {
        self.count.fetch_add(1, Ordering::SeqCst);
        self.gauge.inc();
        LiveGuard { live: self.clone() }
    }
    pub fn total(&self) -> usize {
        self.count.load(Ordering::SeqCst)
    }
    /// Waits until no call is live or `within` elapsed; true when none is live.
    pub async fn wait_idle(&self, within: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            let notified = self.changed.notified();
            if self.total() == 0 {
                return true;
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return self.total() == 0;
            }
        }
    }
}

impl Drop for LiveGuard {
    fn drop(&mut self) {
        self.live.count.fetch_sub(1, Ordering::SeqCst);
        self.live.gauge.dec();
        self.live.changed.notify_waiters();
    }
}

/// Seconds a caller refused for capacity is told to wait (`Retry-After`).
pub const RETRY_AFTER_SECS: u32 = 1;

/// Writes a new call makes before it is answered or placed, at most; the journal keeps
/// this much room per call it admits (see [`Capacity::room`]).
const WRITES_PER_SETUP: usize = 4;

/// Whether this node takes another call now: the one rule the dialer (how many rows to
/// claim) and inbound admission (answer or 503) share. A node takes no new call while it
/// drains, while `dialer.max_live_calls` calls are live, or while its write-behind queue
/// ([`Journal`]) is nearly full, i.e. the database is behind.
#[derive(Clone)]
pub struct Capacity {
    pub live: Arc<LiveCalls>,
    pub journal: Journal,
    /// Cancelled when the process starts draining: no new calls.
    pub draining: CancellationToken,
    max_live: usize,
    /// How late the runtime runs its timers (see [`LoopLag`]).
    pub lag: Arc<LoopLag>,
    max_lag_us: u64,
    /// `dialer.max_inbound_cps` (None: no limit).
    inbound_rate: Option<Arc<parking_lot::Mutex<StartRate>>>,
    /// INVITEs answered 503 by admission, by reason (`callsmith_inbound_calls_refused`).
    refused: Family<Vec<(String, String)>, Counter>,
}

impl Capacity {
    pub fn new(services: &Services, dialer: &DialerConfig) -> Capacity {
        let live = Arc::new(LiveCalls::default());
        services.metrics.registry().register(
            "callsmith_live_calls",
            "Calls of this process from their first step (a claimed row, an INVITE admitted) to their end being stored",
            live.gauge.clone(),
        );
        let refused = Family::<Vec<(String, String)>, Counter>::default();
        services.metrics.registry().register(
            "callsmith_inbound_calls_refused",
            "Inbound INVITEs answered 503 by admission, by reason (shutting down, at the live-call limit, overloaded, the database is behind, over the node's inbound call rate)",
            refused.clone(),
        );
        Capacity {
            live,
            refused,
            journal: Journal::start(
                services.store.clone(),
                dialer.write_queue,
                &services.metrics,
            ),
            draining: CancellationToken::new(),
            max_live: dialer.max_live_calls.max(1),
            lag: {
                let lag = Arc::new(LoopLag::default());
                LoopLag::start(&lag);
                lag
            },
            max_lag_us: dialer.max_timer_lag_ms.saturating_mul(1000),
            inbound_rate: (dialer.max_inbound_cps > 0).then(|| {
                Arc::new(parking_lot::Mutex::new(StartRate::new(
                    dialer.max_inbound_cps,
                    std::time::Instant::now(),
                )))
            }),
        }
    }

    /// New calls this node may start now.
    pub fn room(&self) -> usize {
        if self.draining.is_cancelled() || self.overloaded() {
            return 0;
        }
        let live = self.max_live.saturating_sub(self.live.total());
        let writes = self.journal.free() / WRITES_PER_SETUP;
        live.min(writes.saturating_sub(1))
    }

    /// The process runs its timers later than `dialer.max_timer_lag_ms` (0: never).
    fn overloaded(&self) -> bool {
        self.max_lag_us > 0 && self.lag.recent_us() > self.max_lag_us
    }

    /// Why a new call is refused now; None when there is room.
    pub fn refusal(&self) -> Option<&'static str> {
        if self.draining.is_cancelled() {
            Some(SHUTTING_DOWN)
        } else if self.live.total() >= self.max_live {
            Some("at the live-call limit")
        } else if self.overloaded() {
            Some("overloaded")
        } else if self.room() == 0 {
            Some("the database is behind")
        } else {
            None
        }
    }
}

/// Why a draining node refuses calls (INVITE and OPTIONS both answer 503 with it).
const SHUTTING_DOWN: &str = "shutting down";

/// Inbound admission: every INVITE to a served number is admitted while there is room.
/// (Which agent serves the number is decided by `crate::inbound`, which answers 404 for a
/// number no active agent serves.)
impl callsmith_sip::CallRouter for Capacity {
    fn admit(&self, _trunk: &str, _called: &str) -> callsmith_sip::Admission {
        let over_rate = || {
            self.inbound_rate
                .as_ref()
                .is_some_and(|r| !r.lock().take(std::time::Instant::now()))
        };
        let reason = match self.refusal() {
            Some(reason) => reason,
            None if over_rate() => "over the node's inbound call rate",
            None => return callsmith_sip::Admission::Admit,
        };
        self.refused
            .get_or_create(&vec![("reason".to_string(), reason.to_string())])
            .inc();
        callsmith_sip::Admission::Busy {
            retry_after_secs: RETRY_AFTER_SECS,
            reason: reason.into(),
        }
    }

    /// A draining node is out of service (OPTIONS 503), so an edge stops sending it calls
    /// while its own finish; a full one is not (its INVITEs get 503, the edge tries another).
    fn out_of_service(&self) -> Option<String> {
        self.draining
            .is_cancelled()
            .then(|| SHUTTING_DOWN.to_string())
    }
}

/// The runtime handle: one shared allocation, so every call and task holds a pointer to
/// it instead of its own copy of every service handle (464 bytes of them).
#[derive(Clone)]
pub struct Runtime(Arc<Shared>);

impl std::ops::Deref for Runtime {
    type Target = Shared;

    fn deref(&self) -> &Shared {
        &self.0
    }
}

/// What the runtime handle points at.
pub struct Shared {
    pub store: Store,
    /// The domain services shared with the HTTP layer (store, storage, clients, registries).
    pub services: Services,
    pub sip: Arc<SipStack>,
    pub media: MediaEngine,
    pub tts: Arc<TtsService>,
    pub settings: Arc<RuntimeSettings>,
    pub live: Arc<LiveCalls>,
    /// Call progress, written behind the calls (see [`crate::journal`]).
    pub journal: Journal,
    /// Whether the node takes another call (live calls, journal room, drain).
    pub capacity: Capacity,
    /// Cancelled when the process starts draining: no new calls.
    pub draining: CancellationToken,
    /// Cancelled when the drain time is up: live calls hang up.
    pub hangup_all: CancellationToken,
    /// Round-robin position per number pool (fair rotation over its active numbers).
    pool_cursor: Mutex<HashMap<String, usize>>,
    /// Turn latency on /metrics (see [`TurnMetrics`]).
    pub turns: TurnMetrics,
    /// Indexed scenario programs (see [`Runtime::program`]).
    programs: Programs,
    /// Recorded prompts decoded once and shared by every call that plays them, keyed by
    /// the stored object's path and version (see `call::play`).
    pub prompts: PromptCache,
}

/// Recorded prompts the runtime keeps decoded at most (the byte budget,
/// [`callsmith_media::prompt::PROMPT_CACHE_BYTES`], usually binds first).
const MAX_PROMPTS: usize = 4096;

/// Programs kept at most; when full, all go.
const MAX_PROGRAMS: usize = 256;

/// Indexed scenario programs by version record, each with the text it was parsed from.
#[derive(Debug, Default)]
pub struct Programs {
    by_record: Mutex<HashMap<String, (String, Arc<Program>)>>,
    /// Published versions by (scenario sid, version number): a published version's text
    /// never changes, so an outbound call to it needs no read.
    published: Mutex<HashMap<(String, i64), Arc<Program>>>,
}

impl Programs {
    /// The program of `record`, parsed and indexed now unless this record's current text
    /// was before.
    pub fn get(&self, record: &ScenarioVersionRecord) -> Result<Arc<Program>, String> {
        if let Some((text, parsed)) = self.by_record.lock().get(&record.sid)
            && *text == record.snapshot
        {
            return Ok(parsed.clone());
        }
        let parsed = Arc::new(Program::new(
            Snapshot::from_owned(record.snapshot_value()).map_err(|e| format!("scenario: {e}"))?,
        ));
        let mut kept = self.by_record.lock();
        if kept.len() >= MAX_PROGRAMS && !kept.contains_key(&record.sid) {
            kept.clear();
        }
        kept.insert(
            record.sid.clone(),
            (record.snapshot.clone(), parsed.clone()),
        );
        if let Some(v) = record.version {
            let mut published = self.published.lock();
            if published.len() >= MAX_PROGRAMS {
                published.clear();
            }
            published.insert((record.scenario_sid.clone(), v), parsed.clone());
        }
        Ok(parsed)
    }

    /// The program of a published version seen before.
    pub fn published(&self, scenario_sid: &str, version: i64) -> Option<Arc<Program>> {
        self.published
            .lock()
            .get(&(scenario_sid.to_string(), version))
            .cloned()
    }
}

/// Turn latency histograms, exported on /metrics (docs/communications.md, "Turn latency"):
/// from the moment a turn's answer (final transcript or completed DTMF entry) is available
/// to the first RTP packet of the reply, in total and the engine's share of it (answer →
/// the reply handed to the media worker; the rest is waiting for the session's next 20 ms
/// frame slot).
#[derive(Clone, Debug)]
pub struct TurnMetrics {
    /// End of the caller's speech → first RTP of the reply (what the caller waits).
    pub response: Histogram,
    pub latency: Histogram,
    pub engine: Histogram,
    /// Recognition streams that could not start or failed mid-turn, by engine.
    pub recognition_failures: Family<Vec<(String, String)>, Counter>,
    /// The stages of a turn, by `stage` (see [`TurnMetrics::observe_stages`]).
    pub stages: Family<Vec<(String, String)>, Histogram>,
}

impl TurnMetrics {
    fn new() -> TurnMetrics {
        let buckets = [
            0.0005, 0.001, 0.002, 0.005, 0.01, 0.015, 0.02, 0.025, 0.03, 0.05, 0.1, 0.25, 0.5, 1.0,
        ];
        TurnMetrics {
            response: Histogram::new([
                0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 1.0, 1.25, 1.5, 2.0, 3.0, 5.0,
            ]),
            latency: Histogram::new(buckets),
            engine: Histogram::new(buckets),
            recognition_failures: Family::default(),
            stages: Family::new_with_constructor(|| {
                Histogram::new([
                    0.02, 0.05, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0,
                ])
            }),
        }
    }

    /// Observes the stages of a turn whose reply went out, each where both its ends are
    /// known: `end_of_turn` (end of speech → the recogniser's end-of-turn decision),
    /// `transcript` (decision → final transcript), `reply` (the answer → the reply known:
    /// classifier, model, webhook), `synthesis` (reply known → its first synthesised audio),
    /// `send` (first synthesised audio → its first RTP packet).
    pub fn observe_stages(&self, t: &callsmith_domain::communication::history::TurnLog) {
        let answer = t.final_ms.or(t.dtmf.as_ref().map(|_| t.ended_ms));
        self.observe_speech_end(t);
        let stages = [
            ("transcript", t.end_of_turn_ms, t.final_ms),
            ("reply", answer, t.reply_ready_ms),
            ("synthesis", t.reply_ready_ms, t.first_synthesis_ms),
            ("send", t.first_synthesis_ms, t.reply_first_rtp_ms),
        ];
        for (stage, from, to) in stages {
            self.observe_stage(stage, from, to);
        }
    }

    /// The `end_of_turn` stage (speech end → the recogniser's end of turn), when both are
    /// known: with the other stages, or once the speech end arrives after the reply
    /// ([`crate::call`]'s late speech end).
    pub fn observe_speech_end(&self, t: &callsmith_domain::communication::history::TurnLog) {
        self.observe_stage("end_of_turn", t.speech_ended_ms, t.end_of_turn_ms);
    }

    fn observe_stage(&self, stage: &str, from: Option<u64>, to: Option<u64>) {
        if let (Some(from), Some(to)) = (from, to) {
            self.stages
                .get_or_create(&vec![("stage".to_string(), stage.to_string())])
                .observe(to.saturating_sub(from) as f64 / 1000.0);
        }
    }

    fn register(&self, metrics: &callsmith_domain::metrics::Metrics) {
        let mut r = metrics.registry();
        r.register(
            "callsmith_turn_response_seconds",
            "End of the caller's speech (VAD) to the first RTP packet of the reply: what the caller waits",
            self.response.clone(),
        );
        r.register(
            "callsmith_turn_latency_seconds",
            "Answer available (final transcript or DTMF entry) to the first RTP packet of the reply",
            self.latency.clone(),
        );
        r.register(
            "callsmith_turn_engine_seconds",
            "Answer available to the reply handed to the media worker (the engine's share of the turn latency)",
            self.engine.clone(),
        );
        r.register(
            "callsmith_turn_stage_seconds",
            "The stages of a turn by stage: end_of_turn (end of speech to the end-of-turn decision), transcript (decision to final transcript), reply (answer to the reply known), synthesis (reply known to its first synthesised audio), send (first synthesised audio to its first RTP packet)",
            self.stages.clone(),
        );
        r.register(
            "callsmith_recognition_failures",
            "Speech turns whose recognition stream could not start or failed (no ready node, node error), by engine",
            self.recognition_failures.clone(),
        );
    }
}

impl Runtime {
    pub fn new(
        services: Services,
        sip: Arc<SipStack>,
        media: MediaEngine,
        tts: Arc<TtsService>,
        settings: RuntimeSettings,
        capacity: Capacity,
    ) -> Runtime {
        let turns = TurnMetrics::new();
        turns.register(&services.metrics);
        Runtime(Arc::new(Shared {
            store: services.store.clone(),
            services,
            sip,
            media,
            tts,
            settings: Arc::new(settings),
            live: capacity.live.clone(),
            journal: capacity.journal.clone(),
            draining: capacity.draining.clone(),
            capacity,
            hangup_all: CancellationToken::new(),
            pool_cursor: Mutex::default(),
            turns,
            programs: Programs::default(),
            prompts: PromptCache::new(MAX_PROMPTS),
        }))
    }

    /// The scenario a version record holds, parsed and indexed once and shared by every
    /// call that runs the same text: a live call then holds a reference to it, not its own
    /// copy of the parsed bricks (about 11 KiB a call for the load scenario) and of their
    /// index (about 1 KiB), a call start skips the parse, and compiled condition patterns
    /// are shared. Kept with the text it was parsed from, so an edited draft is parsed
    /// again.
    pub fn program(&self, record: &ScenarioVersionRecord) -> Result<Arc<Program>, String> {
        self.programs.get(record)
    }

    /// The program of published version `version` of a scenario, if a call ran it before.
    pub fn published_program(&self, scenario_sid: &str, version: i64) -> Option<Arc<Program>> {
        self.programs.published(scenario_sid, version)
    }

    pub fn objects(&self) -> &Arc<Objects> {
        &self.services.objects
    }

    /// `engine` is the local speech node's synthesizer and the node is not ready.
    pub fn local_speech_down(&self, engine: &str) -> bool {
        self.settings.local_tts_engine.as_deref() == Some(engine)
            && self.services.readiness.get(crate::speech::COMPONENT)
                != Some(callsmith_domain::readiness::ComponentStatus::Ok)
    }

    /// The recognition node pool for `engine` (see [`stt_engine_for`]).
    pub fn stt_pool(&self, engine: &str) -> Option<SttPool> {
        let stt = &self.services.stt;
        stt_engine_for(stt, &self.settings.default_stt_engine, engine)
            .and_then(|e| stt.pool(e))
            .cloned()
    }

    /// The next position of a pool's rotation.
    pub fn next_in_pool(&self, pool_sid: &str, len: usize) -> usize {
        let mut m = self.pool_cursor.lock();
        let c = m.entry(pool_sid.to_string()).or_default();
        let i = *c % len.max(1);
        *c = c.wrapping_add(1);
        i
    }
}

/// The recognition engine whose node pool serves a turn that asks for `engine`: `engine`
/// when it has a pool, else `default` (`dialer.default_stt_engine`) when that has one, else
/// none (the turn hears nothing and says why in its history).
pub fn stt_engine_for<'a>(
    stt: &callsmith_domain::catalog::SttEngines,
    default: &'a str,
    engine: &'a str,
) -> Option<&'a str> {
    [engine, default]
        .into_iter()
        .find(|e| stt.pool(e).is_some())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Domain services on an in-memory database, objects in a temporary folder (kept
    /// while the guard lives).
    async fn services() -> (Services, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::connect("sqlite::memory:", 1).await.unwrap();
        let mut settings = callsmith_domain::Settings::default();
        settings.objects.local_dir = dir.path().to_path_buf();
        (Services::new(store, &settings).unwrap(), dir)
    }

    #[tokio::test]
    async fn a_saturated_process_takes_no_new_call() {
        let (services, _dir) = services().await;
        let dialer = DialerConfig {
            max_timer_lag_ms: 100,
            ..Default::default()
        };
        let cap = Capacity::new(&services, &dialer);
        assert_eq!(cap.refusal(), None);
        assert!(cap.room() > 0);
        cap.lag.observe(Duration::from_millis(250));
        assert_eq!(cap.refusal(), Some("overloaded"));
        assert_eq!(cap.room(), 0, "the dialer claims nothing either");
        let off = Capacity::new(
            &services,
            &DialerConfig {
                max_timer_lag_ms: 0,
                ..Default::default()
            },
        );
        off.lag.observe(Duration::from_secs(1));
        assert_eq!(off.refusal(), None, "0 turns the check off");
    }

    #[tokio::test]
    async fn a_draining_node_is_out_of_service_and_a_full_one_is_not() {
        use callsmith_sip::{Admission, CallRouter};
        let (services, _dir) = services().await;
        let cap = Capacity::new(
            &services,
            &DialerConfig {
                max_live_calls: 1,
                ..Default::default()
            },
        );
        assert_eq!(cap.out_of_service(), None);
        let _live = cap.live.enter();
        assert!(matches!(
            cap.admit("edge", "+4930100900"),
            Admission::Busy { .. }
        ));
        assert_eq!(cap.out_of_service(), None, "full is not out of service");
        cap.draining.cancel();
        assert_eq!(cap.out_of_service().as_deref(), Some("shutting down"));
        assert_eq!(
            cap.admit("edge", "+4930100900"),
            Admission::Busy {
                retry_after_secs: RETRY_AFTER_SECS,
                reason: "shutting down".into()
            }
        );
    }

    #[tokio::test]
    async fn inbound_calls_above_the_node_rate_are_refused_at_once() {
        use callsmith_sip::{Admission, CallRouter};
        let (services, _dir) = services().await;
        let cap = Capacity::new(
            &services,
            &DialerConfig {
                max_inbound_cps: 20,
                ..Default::default()
            },
        );
        assert_eq!(cap.admit("carrier", "+4930100900"), Admission::Admit);
        assert_eq!(cap.admit("carrier", "+4930100900"), Admission::Admit);
        assert_eq!(
            cap.admit("carrier", "+4930100900"),
            Admission::Busy {
                retry_after_secs: RETRY_AFTER_SECS,
                reason: "over the node's inbound call rate".into()
            }
        );
        // The dialer's room is not the inbound rate's business.
        assert!(cap.room() > 0);
        assert!(
            services.metrics.render().contains(
                "callsmith_inbound_calls_refused_total{reason=\"over the node's inbound call rate\"} 1"
            ),
            "{}",
            services.metrics.render()
        );
        let open = Capacity::new(&services, &DialerConfig::default());
        assert!((0..100).all(|_| open.admit("carrier", "+4930100900") == Admission::Admit));
    }

    fn record(sid: &str, text: &str) -> ScenarioVersionRecord {
        ScenarioVersionRecord {
            sid: sid.into(),
            scenario_sid: "scn_1".into(),
            account_sid: "acc_1".into(),
            version: Some(1),
            draft_version: None,
            content_hash: String::new(),
            snapshot: text.into(),
            created_at: chrono::Utc::now(),
            updated_at: chrono::Utc::now(),
        }
    }

    #[test]
    fn calls_of_one_scenario_text_share_one_parse() {
        let kept = Programs::default();
        let a = record("scv_1", r#"{"name": "a"}"#);
        let first = kept.get(&a).unwrap();
        assert!(Arc::ptr_eq(&first, &kept.get(&a).unwrap()));
        // An edited draft (same record, new text) is parsed again; so is another record.
        let edited = kept.get(&record("scv_1", r#"{"name": "b"}"#)).unwrap();
        assert!(!Arc::ptr_eq(&first, &edited));
        let other = kept.get(&record("scv_2", r#"{"name": "a"}"#)).unwrap();
        assert!(!Arc::ptr_eq(&first, &other));
        assert_eq!(first.snapshot().to_value(), other.snapshot().to_value());
    }
}
