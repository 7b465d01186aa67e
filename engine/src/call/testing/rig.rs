//! The rig an in-process call runs on: a [`Runtime`] without transports (a SIP stack with
//! no listener, an in-memory database, objects in a temporary folder, a synthesizer of
//! silence, a recognition engine whose node is the scripted caller), the call's records,
//! and [`CallTest`], which answers the call, runs it and reads its saved history back (the
//! end is built as it would be written; with [`CallTest::stored`] the call's row is in the
//! rig's database and the end is written to it as a call's end is).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use callsmith_domain::objects::CallObjects;
use callsmith_domain::store::CommunicationRecord;
use callsmith_domain::store::communications::{CallFinish, CallWrite, Claim, CommunicationStatus};
use callsmith_domain::store::{NewAccount, NewCommunication};
use callsmith_domain::{Services, Store};
use callsmith_media::prompt::Prompt;
use callsmith_media::stt::{SttNodeConfig, SttProtocol};
use callsmith_media::tts::{TtsEngine, TtsError, TtsRequest, TtsService};
use callsmith_media::{MediaConfig, MediaEngine};
use callsmith_scenarios::interpreter::{CallDirection, Program, Tz};
use callsmith_scenarios::model::Snapshot;
use callsmith_sip::{SipConfig, SipStack};
use parking_lot::Mutex;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::peer::{Heard, Peer, Script};
use crate::call::AnsweredCall;
use crate::call::leg::Leg;
use crate::call::media::CallMedia;
use crate::call::prepare::Prepared;
use crate::config::DialerConfig;
use crate::runtime::{Capacity, Runtime, RuntimeSettings};

/// The synthesizer of the rig: every prompt is a faint hum (a constant level above
/// the silence a synthesis's start is trimmed of), 60 ms a character; the texts it was
/// asked for are kept.
struct SilenceTts {
    said: Arc<Mutex<Vec<String>>>,
}

/// The rig's synthesizer and recognition engine.
const ENGINE: &str = "scripted";
const STT_ENGINE: &str = "whisper";

#[async_trait]
impl TtsEngine for SilenceTts {
    async fn synthesize(&self, req: &TtsRequest) -> Result<Prompt, TtsError> {
        self.said.lock().push(req.text.clone());
        let samples = req.text.chars().count() * 480;
        Ok(Prompt::from_pcm(vec![100; samples]))
    }
}

/// One scenario to run against one scripted caller.
pub struct CallTest {
    snapshot: Value,
    script: Script,
    data: BTreeMap<String, String>,
    max_call: Duration,
    /// The row is stored and the end written, following this strategy definition (None:
    /// no strategy); None: nothing is stored.
    stored: Option<Option<Value>>,
}

/// What a user checks after the call: its saved history, and what the caller heard.
#[derive(Debug)]
pub struct CallResult {
    /// The communication's end (status, goals, `end_reason`, duration).
    pub finish: CallFinish,
    /// The history as saved (`GET /v1/communication/{id}/history`).
    pub history: Value,
    /// The texts the synthesizer was asked to speak, in order.
    pub said: Vec<String>,
    /// The prompts as the caller heard them, and the REFERs it got.
    pub heard: Heard,
    /// How long the call took on the call's clock (simulated under paused time).
    pub took: Duration,
    /// The rig's database (with [`CallTest::stored`], the call's row as its end left it).
    pub store: Store,
    /// The communication the call ran as.
    pub communication_sid: String,
}

impl CallTest {
    /// `snapshot` (a scenario as the API takes it) run as an outbound test call.
    pub fn new(snapshot: Value) -> CallTest {
        CallTest {
            snapshot,
            script: Script::new(),
            data: BTreeMap::new(),
            max_call: Duration::from_secs(600),
            stored: None,
        }
    }

    /// The call's row is stored (claimed, in an account of its own), following a strategy
    /// with `strategy` as its definition when given, and its end is written to it as a
    /// call's end is (the strategy's decision, the attempt, an opt-out's listing).
    pub fn stored(mut self, strategy: Option<Value>) -> CallTest {
        self.stored = Some(strategy);
        self
    }

    /// What the caller does.
    pub fn caller(mut self, script: Script) -> CallTest {
        self.script = script;
        self
    }

    /// A variable the call starts with (dispatch `data`).
    pub fn data(mut self, name: &str, value: &str) -> CallTest {
        self.data.insert(name.into(), value.into());
        self
    }

    /// The engine hangs the call up after `max` (`dialer.max_call_secs`).
    pub fn max_call(mut self, max: Duration) -> CallTest {
        self.max_call = max;
        self
    }

    /// Answers the call, runs the scenario to its end and stores the end; the history is
    /// read back from object storage. Panics when the rig cannot be built (a test's
    /// failure).
    pub async fn run(self) -> CallResult {
        // The rig on the real clock: the database's pool times its connections.
        tokio::time::resume();
        let dir = tempfile::tempdir().expect("temporary folder");
        let said = Arc::new(Mutex::new(Vec::new()));
        let rt = runtime(dir.path(), self.max_call, said.clone()).await;
        let mut comm = communication();
        if let Some(strategy) = &self.stored {
            store_row(&rt, &mut comm, strategy.as_ref()).await;
        }
        let communication_sid = comm.sid.clone();
        let snapshot = Snapshot::from_owned(self.snapshot).expect("scenario snapshot");
        let prep = Prepared {
            program: Arc::new(Program::new(snapshot)),
            agent: None,
            from_number: comm.from_number.clone(),
            trunk: None,
            tz: Tz::UTC,
            data: self.data,
            hangup: CancellationToken::new(),
            live: None,
            record: false,
        };
        // The call on the paused clock.
        tokio::time::pause();
        let started = tokio::time::Instant::now();
        let (peer, leg, media) = Peer::answer(self.script);
        let history_path = CallObjects::new(&comm.account_sid, &comm.sid).history();
        let mut call = AnsweredCall::over(
            rt.clone(),
            comm,
            prep,
            CallMedia::Fake(media),
            Leg::Fake(leg),
            CallDirection::Outbound,
        );
        let run = {
            let c = &mut *call;
            Box::pin(c.program.run(&c.info, &mut c.port)).await
        };
        let took = started.elapsed();
        // The end on the real clock: the history and the final write are stored.
        tokio::time::resume();
        // The end as it would be written (the rig has no row to write it to).
        let ended = call.end(run).await;
        let finish = ended.finish.clone();
        if self.stored.is_some() {
            ended.write().await;
        }
        let bytes = rt
            .objects()
            .get(&history_path)
            .await
            .expect("the call's history was saved");
        let history = serde_json::from_slice(&bytes).expect("history JSON");
        // A stored call's test reads the database next, on the real clock (its pool times
        // its connections).
        if self.stored.is_none() {
            tokio::time::pause();
        }
        let said = said.lock().clone();
        CallResult {
            finish,
            history,
            said,
            heard: peer.heard(),
            took,
            store: rt.store.clone(),
            communication_sid,
        }
    }
}

/// The rig's runtime: a SIP stack without transports, one idle media worker, an in-memory
/// database, objects in `dir`, the silent synthesizer and the scripted recognition node.
async fn runtime(
    dir: &std::path::Path,
    max_call: Duration,
    said: Arc<Mutex<Vec<String>>>,
) -> Runtime {
    let store = Store::connect("sqlite::memory:", 1)
        .await
        .expect("database");
    let mut settings = callsmith_domain::Settings::default();
    settings.objects.local_dir = dir.to_path_buf();
    let node = SttNodeConfig::new(ENGINE, "ws://127.0.0.1:9/scripted", SttProtocol::Vosk);
    settings.stt.engines.insert(STT_ENGINE.into(), vec![node]);
    let services = Services::new(store, &settings).expect("services");
    let dialer = DialerConfig::default();
    let capacity = Capacity::new(&services, &dialer);
    let sip = SipConfig {
        udp: None,
        tcp: None,
        ..SipConfig::default()
    };
    let sip = SipStack::start(sip, capacity.clone())
        .await
        .expect("SIP stack");
    let media = MediaEngine::new(MediaConfig {
        workers: 1,
        ..MediaConfig::default()
    })
    .expect("media engine");
    let mut tts = TtsService::new(64);
    tts.register(ENGINE, Arc::new(SilenceTts { said }));
    let settings = RuntimeSettings {
        instance: "in-process:1".into(),
        claim_token: "clm_in_process".into(),
        internal_url: None,
        lease: Duration::from_secs(60),
        ring_timeout: Duration::from_secs(30),
        max_call,
        default_tts_engine: ENGINE.into(),
        local_tts_engine: None,
        default_stt_engine: STT_ENGINE.into(),
        media_ip: [127, 0, 0, 1].into(),
        dialer,
        llm_call_timeout: Duration::from_secs(30),
    };
    Runtime::new(
        services,
        Arc::new(sip),
        media,
        Arc::new(tts),
        settings,
        capacity,
    )
}

/// Stores `comm` claimed by the rig's runtime, in a tenant and account of its own,
/// following a strategy of `strategy` when given.
async fn store_row(rt: &Runtime, comm: &mut CommunicationRecord, strategy: Option<&Value>) {
    let store = &rt.store;
    store.migrate().await.expect("the rig's schema");
    store
        .tenant_create(&comm.tenant_sid, "in process")
        .await
        .expect("tenant");
    store
        .account_create(&NewAccount {
            sid: comm.account_sid.clone(),
            tenant_sid: comm.tenant_sid.clone(),
            name: "in process".into(),
            email: String::new(),
            external_id: String::new(),
            country: String::new(),
            region: String::new(),
            timezone: "UTC".into(),
            phone: String::new(),
            status: "active".into(),
        })
        .await
        .expect("account");
    if let Some(definition) = strategy {
        let sid = "stg_in_process";
        store
            .strategy_create(
                sid,
                &comm.tenant_sid,
                &comm.account_sid,
                "in process",
                &definition.to_string(),
            )
            .await
            .expect("strategy");
        comm.strategy_sid = Some(sid.into());
    }
    let new = NewCommunication {
        sid: comm.sid.clone(),
        tenant_sid: comm.tenant_sid.clone(),
        account_sid: comm.account_sid.clone(),
        agent_sid: None,
        scenario_sid: comm.scenario_sid.clone(),
        version: comm.version,
        draft_version: comm.draft_version,
        recipient: comm.recipient.clone(),
        from_number: comm.from_number.clone(),
        trunk: None,
        direction: comm.direction.clone(),
        is_test: true,
        data: "{}".into(),
        strategy_sid: comm.strategy_sid.clone(),
        batch_sid: None,
        timezone: comm.timezone.clone(),
        scheduled_at: None,
        schedule: None,
        due_at: comm.due_at,
    };
    let claim = Claim {
        token: rt.settings.claim_token.clone(),
        by: rt.settings.instance.clone(),
        until: chrono::Utc::now() + chrono::Duration::seconds(600),
    };
    let created = store
        .communication_apply(CallWrite::CreateClaimed {
            new: Box::new(new),
            claim,
            at: comm.created_at,
        })
        .await
        .expect("the call's row");
    assert!(created, "the call's row is stored");
}

/// The communication the call runs as: a scenario test call, answered.
fn communication() -> CommunicationRecord {
    let now = chrono::Utc::now();
    CommunicationRecord {
        sid: "com_in_process".into(),
        tenant_sid: "ten_in_process".into(),
        account_sid: "acc_in_process".into(),
        agent_sid: None,
        scenario_sid: "scn_in_process".into(),
        version: None,
        draft_version: Some(1),
        recipient: "+4915550777".into(),
        from_number: "+4930100700".into(),
        trunk: None,
        direction: "outbound".into(),
        communication_status: CommunicationStatus::InProgress,
        call_status: None,
        sip_code: None,
        duration: 0,
        goals: "[]".into(),
        variables: "{}".into(),
        is_test: true,
        consent_granted: false,
        has_recording: false,
        has_history: false,
        history_path: None,
        recording_path: None,
        data: "{}".into(),
        strategy_sid: None,
        batch_sid: None,
        timezone: "UTC".into(),
        end_reason: None,
        error: None,
        call_id: None,
        scheduled_at: None,
        schedule: None,
        due_at: now,
        claim_token: None,
        claimed_by: None,
        claimed_until: None,
        started_at: Some(now),
        answered_at: Some(now),
        ended_at: None,
        created_at: now,
        updated_at: now,
    }
}
