//! One call, outbound or inbound: resolve what it runs, place or answer it through the SIP
//! stack, open its media session, run the scenario interpreter over [`LivePort`] (the
//! engine's `CallPort`: prompts, listening with STT + DTMF, webhooks, SMS, transfer,
//! classifiers), then save the history (and recording) and write how it ended.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use callsmith_control::store::{
    AgentRecord, CommunicationRecord,
    communications::{CallFinish, status},
};
use callsmith_media::{
    MediaEvent, MediaSession, PlayEnd,
    amd::{AmdConfig, AmdVerdict as Amd},
    prompt::{Playable, Prompt},
    recording::RecordingTarget,
    stt::{SttEvent, SttParams},
    tts::TtsRequest,
};
use callsmith_scenarios::{
    interpreter::{CallInfo, CallRun, Direction, Program, Tz},
    model::MappingEntry,
    port::*,
    webhook::{CompiledRequest, WebhookOutcome},
};
use callsmith_sip::{CallLeg, EndInfo, LegEvent, LocalMedia, NegotiatedMedia};
use chrono::{DateTime, Utc};
use futures::StreamExt;
use serde::Serialize;
use serde_json::{Value, json};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::runtime::Runtime;

mod transfer;

/// Bucket label in front of object paths referenced from a saved history
/// (`speech_recognition_recording`), as GET …/speech-recording expects them.
pub const BUCKET: &str = "callsmith";

/// Object path prefix of a communication's artefacts (`calls/<account>/<communication>/`).
pub fn call_prefix(account_sid: &str, communication_sid: &str) -> String {
    format!("calls/{account_sid}/{communication_sid}")
}

/// What a call runs, resolved before dialling.
pub struct Prepared {
    /// Shared with every call running the same scenario text (see `Runtime::program`).
    pub program: Arc<Program>,
    pub agent: Option<AgentRecord>,
    pub from_number: String,
    pub trunk: Option<String>,
    pub tz: Tz,
    pub data: BTreeMap<String, String>,
}

/// Waits until `at` (at once when it has passed); false when `draining` is cancelled first.
async fn wait_for_slot(draining: &CancellationToken, at: DateTime<Utc>) -> bool {
    if draining.is_cancelled() {
        return false;
    }
    let Ok(wait) = (at - Utc::now()).to_std() else {
        return true;
    };
    tokio::select! {
        _ = tokio::time::sleep(wait) => true,
        _ = draining.cancelled() => false,
    }
}

/// Loads the scenario version, the agent, the from-number and the trunk of a claimed row.
pub async fn prepare(rt: &Runtime, comm: &CommunicationRecord) -> Result<Prepared, String> {
    let store = &rt.store;
    let agent = match &comm.agent_sid {
        Some(a) => Some(
            store
                .agent_get(a)
                .await
                .map_err(|e| e.to_string())?
                .ok_or("the agent no longer exists")?,
        ),
        None => None,
    };
    let record = match (comm.version, comm.draft_version) {
        (Some(v), _) => {
            store
                .scenario_version_by_axis(&comm.scenario_sid, v, false)
                .await
        }
        (None, Some(d)) => {
            store
                .scenario_version_by_axis(&comm.scenario_sid, d, true)
                .await
        }
        (None, None) => return Err("no scenario version recorded".into()),
    }
    .map_err(|e| e.to_string())?
    .ok_or("the scenario version no longer exists")?;
    let program = rt.program(&record)?;
    let mut from_number = comm.from_number.clone();
    let mut trunk = comm.trunk.clone();
    if from_number.is_empty()
        && let Some(a) = &agent
    {
        if let Some(n) = &a.number_sid {
            let num = store
                .number_get(n)
                .await
                .map_err(|e| e.to_string())?
                .ok_or("the agent's number no longer exists")?;
            from_number = num.identifier;
            trunk = num.trunk;
        } else if let Some(p) = &a.number_pool_sid {
            let nums = store
                .pool_active_numbers(p)
                .await
                .map_err(|e| e.to_string())?;
            if nums.is_empty() {
                return Err("the agent's number pool has no active number".into());
            }
            let num = &nums[rt.next_in_pool(p, nums.len())];
            from_number = num.identifier.clone();
            trunk = num.trunk.clone();
        }
    }
    if from_number.is_empty() {
        return Err("no from-number".into());
    }
    let known = |t: &str| rt.sip.trunks().iter().any(|c| c.name == t);
    let trunk = match trunk.filter(|t| !t.is_empty() && known(t)) {
        Some(t) => Some(t),
        None => {
            // The tenant's trunks, oldest first, that this engine has a gateway for.
            let (trunks, _) = store
                .trunk_list(&comm.tenant_sid, false, 100, 0)
                .await
                .map_err(|e| e.to_string())?;
            trunks.into_iter().map(|t| t.name).find(|n| known(n))
        }
    };
    let tz: Tz = comm.timezone.parse().unwrap_or(Tz::UTC);
    let data: serde_json::Map<String, Value> = serde_json::from_str(&comm.data).unwrap_or_default();
    Ok(Prepared {
        program,
        agent,
        from_number,
        trunk,
        tz,
        data: callsmith_scenarios::interpreter::data_to_vars(&data),
    })
}

fn media_codec(c: callsmith_sip::Codec) -> callsmith_media::g711::Codec {
    match c {
        callsmith_sip::Codec::Pcmu => callsmith_media::g711::Codec::Pcmu,
        callsmith_sip::Codec::Pcma => callsmith_media::g711::Codec::Pcma,
    }
}

/// Runs a claimed outbound communication to its end. Never panics on bad data: every
/// failure ends as a `failed` row with the reason.
///
/// The task holds pointers only: the dialling phase is boxed (and freed once the call is
/// answered or over), and the answered call is one [`AnsweredCall`] box.
pub fn run_outbound(
    rt: Runtime,
    comm: CommunicationRecord,
    start_at: Option<DateTime<Utc>>,
) -> impl std::future::Future<Output = ()> + Send {
    let live = rt.live.enter(comm.agent_sid.as_deref());
    let dialling = Box::pin(dial(rt, comm, start_at));
    async move {
        let _live = live;
        if let Some(call) = dialling.await {
            call.run().await;
        }
    }
}

/// Dials a claimed communication until it is answered. Every other outcome is written
/// here (failed, not answered, claim released or lost), and then it returns None.
/// `start_at` is the call's cps start slot, which the dialer claims up to one poll ahead.
async fn dial(
    rt: Runtime,
    comm: CommunicationRecord,
    start_at: Option<DateTime<Utc>>,
) -> Option<Box<AnsweredCall>> {
    let token = rt.settings.claim_token.clone();
    let prep = match prepare(&rt, &comm).await {
        Ok(p) => p,
        Err(e) => {
            warn!(communication = %comm.sid, error = %e, "communication cannot be dialled");
            let _ = rt
                .store
                .communication_fail_unclaimed(&comm.sid, &token, &e)
                .await;
            crate::delivery::enqueue(&rt, &comm.sid).await;
            return None;
        }
    };
    if let Some(at) = start_at
        && !wait_for_slot(&rt.draining, at).await
    {
        // Draining began before the slot: the call is not placed, the row goes back.
        let _ = rt.store.communication_release(&comm.sid, &token).await;
        return None;
    }
    let session = match rt.media.open_session(None) {
        Ok(s) => s,
        Err(e) => {
            // No media resources now: give the row back for a later attempt.
            warn!(error = %e, "no media session; releasing the claim");
            let _ = rt.store.communication_release(&comm.sid, &token).await;
            return None;
        }
    };
    match rt
        .store
        .communication_mark_started(&comm.sid, &token, &prep.from_number, prep.trunk.as_deref())
        .await
    {
        Ok(true) => {}
        _ => {
            warn!(communication = %comm.sid, "claim lost before dialling");
            return None;
        }
    }
    let local = LocalMedia::g711(rt.settings.media_ip, session.local_port());
    let placed = rt
        .sip
        .place_call(callsmith_sip::OutboundCall {
            trunk: prep.trunk.clone(),
            from_number: prep.from_number.clone(),
            from_display: None,
            to_number: comm.recipient.clone(),
            headers: Vec::new(),
            local_media: local,
            ring_timeout: rt.settings.ring_timeout,
        })
        .await;
    let mut leg = match placed {
        Ok(l) => l,
        Err(e) => {
            let f = CallFinish {
                communication_status: status::FAILED.into(),
                call_status: Some("failed".into()),
                error: Some(format!("placing the call: {e}")),
                variables: "{}".into(),
                ..Default::default()
            };
            finish(&rt, &comm, &f).await;
            return None;
        }
    };
    info!(communication = %comm.sid, call_id = leg.call_id(), "call placed");
    // Wait for the answer (or the end) — bounded by the ring timeout plus a margin.
    let answer_deadline = Instant::now() + rt.settings.ring_timeout + Duration::from_secs(40);
    let media = loop {
        let ev = tokio::select! {
            ev = leg.next_event() => ev,
            _ = tokio::time::sleep_until(answer_deadline) => { leg.hangup(); None }
            _ = rt.hangup_all.cancelled() => { leg.hangup(); None }
        };
        match ev {
            Some(LegEvent::Answered(m)) => break Some(m),
            Some(LegEvent::EarlyMedia(m)) => {
                let _ = session.set_remote(m.remote_rtp, media_codec(m.codec), m.telephone_event);
            }
            Some(LegEvent::Ended(end)) => {
                let f = CallFinish {
                    communication_status: status::COMPLETED.into(),
                    call_status: Some(end.call_status.as_str().into()),
                    sip_code: end.sip_code.map(i64::from),
                    variables: "{}".into(),
                    end_reason: Some("not_answered".into()),
                    ..Default::default()
                };
                finish(&rt, &comm, &f).await;
                return None;
            }
            Some(_) => {}
            None => break None,
        }
    };
    let Some(media) = media else {
        let end = wait_end(&mut leg, Duration::from_secs(10)).await;
        let f = CallFinish {
            communication_status: status::COMPLETED.into(),
            call_status: Some(
                end.as_ref()
                    .map_or("canceled", |e| e.call_status.as_str())
                    .into(),
            ),
            sip_code: end.and_then(|e| e.sip_code.map(i64::from)),
            variables: "{}".into(),
            end_reason: Some("not_answered".into()),
            ..Default::default()
        };
        finish(&rt, &comm, &f).await;
        return None;
    };
    let _ = rt
        .store
        .communication_mark_answered(&comm.sid, &token, leg.call_id())
        .await;
    Some(AnsweredCall::new(
        rt,
        comm,
        prep,
        session,
        leg,
        media,
        Direction::Outbound,
    ))
}

/// Waits for a leg's `Ended` event.
async fn wait_end(leg: &mut CallLeg, within: Duration) -> Option<EndInfo> {
    tokio::time::timeout(within, async {
        while let Some(ev) = leg.next_event().await {
            if let LegEvent::Ended(e) = ev {
                return Some(e);
            }
        }
        None
    })
    .await
    .ok()
    .flatten()
}

/// Writes the end of a communication and queues its result deliveries.
async fn finish(rt: &Runtime, comm: &CommunicationRecord, f: &CallFinish) {
    match rt
        .store
        .communication_finish(&comm.sid, &rt.settings.claim_token, f)
        .await
    {
        Ok(true) => {}
        Ok(false) => warn!(communication = %comm.sid, "claim lost; end of call not recorded"),
        Err(e) => {
            warn!(communication = %comm.sid, error = %e, "recording the end of a call failed")
        }
    }
    crate::delivery::enqueue(rt, &comm.sid).await;
}

/// An answered call, ready to run its scenario: everything a call holds while it is up,
/// in one heap allocation. The tasks around it hold only a pointer, and nothing is kept
/// twice: an async fn keeps its arguments in its state for its whole life, even after
/// they are moved on, so the call's records are handed over in this box instead.
pub struct AnsweredCall {
    port: LivePort,
    info: CallInfo,
    program: Arc<Program>,
    answered_at: DateTime<Utc>,
    /// Object-store prefix of this call's files.
    prefix: String,
    recording_path: String,
    call_id: String,
}

impl AnsweredCall {
    /// Points the media at the answer, starts the recording when the agent asks for it,
    /// and builds the call's port.
    pub fn new(
        rt: Runtime,
        comm: CommunicationRecord,
        prep: Prepared,
        mut session: MediaSession,
        leg: CallLeg,
        media: NegotiatedMedia,
        direction: Direction,
    ) -> Box<AnsweredCall> {
        let answered_at = Utc::now();
        if let Err(e) = session.set_remote(
            media.remote_rtp,
            media_codec(media.codec),
            media.telephone_event,
        ) {
            warn!(error = %e, "setting the media peer failed");
        }
        let prefix = call_prefix(&comm.account_sid, &comm.sid);
        let recording_path = format!("{prefix}/recording.wav");
        let Prepared {
            program,
            agent,
            from_number,
            tz,
            data,
            ..
        } = prep;
        if agent.as_ref().is_some_and(|a| a.call_recording) {
            match recording_target(&rt, &recording_path) {
                Ok(t) => {
                    if let Err(e) = session.start_recording(t) {
                        warn!(error = %e, "recording could not start");
                    }
                }
                Err(e) => warn!(error = %e, "recording target unavailable"),
            }
        }
        let call_id = leg.call_id().to_string();
        let trunk = leg.trunk().to_string();
        let media_events = session.take_events();
        let info = CallInfo {
            direction,
            recipient: comm.recipient.clone(),
            from: from_number.clone(),
            communication_id: comm.sid.clone(),
            timezone: tz,
            data,
        };
        let port = LivePort {
            deadline: Instant::now() + rt.settings.max_call,
            rt,
            comm,
            agent,
            from_number,
            session,
            media_events,
            leg,
            ended: None,
            started: Instant::now(),
            pending_dtmf: String::new(),
            turns: Vec::new(),
            prompts: Vec::new(),
            errors: Vec::new(),
            turn_audio_saves: Vec::new(),
            trunk,
            transfers: Vec::new(),
            answer_ns: None,
        };
        Box::new(AnsweredCall {
            port,
            info,
            program,
            answered_at,
            prefix,
            recording_path,
            call_id,
        })
    }

    /// Runs the scenario, then stores the history and recording and writes the end.
    pub async fn run(mut self: Box<Self>) {
        let call = &mut *self;
        // The scenario's future is boxed in a statement of its own: a temporary of the
        // statement that awaits keeps its room in this future across the await.
        let scenario = Box::pin(call.program.run(&call.info, &mut call.port));
        let run = scenario.await;
        // The end (hang-up, media close, history, the final write) gets its own
        // allocation, made only when the call ends.
        let end = Box::pin(self.close(run));
        end.await;
    }

    async fn close(self: Box<Self>, run: CallRun) {
        let AnsweredCall {
            mut port,
            answered_at,
            prefix,
            recording_path,
            call_id,
            ..
        } = *self;
        // Hang up if the scenario ended without the caller leaving, and wait for the end.
        if port.ended.is_none() {
            port.leg.hangup();
            port.wait_leg_end(Duration::from_secs(10)).await;
        }
        let ended_at = Utc::now();
        let LivePort {
            rt,
            comm,
            from_number,
            session,
            mut turns,
            turn_audio_saves,
            prompts,
            errors,
            ended,
            transfers,
            ..
        } = port;
        for (i, save) in turn_audio_saves {
            if !save.await.unwrap_or(false)
                && let Some(t) = turns.get_mut(i)
            {
                t.speech_recognition_recording = None;
            }
        }
        let (stats, rec_info) = match session.close().await {
            Ok((s, r)) => (Some(s), r),
            Err(e) => {
                warn!(error = %e, "closing the media session failed");
                (None, None)
            }
        };
        let end_reason = serde_json::to_value(&run.end)
            .ok()
            .and_then(|v| v.get("reason").and_then(|r| r.as_str()).map(String::from));
        let duration = (ended_at - answered_at).num_milliseconds().max(0);
        let history = json!({
            "communication_id": comm.sid,
            "direction": comm.direction,
            "recipient": comm.recipient,
            "from_number": from_number,
            "call_id": call_id,
            "answered_at": answered_at,
            "ended_at": ended_at,
            "duration_ms": duration,
            "end": run.end,
            "hangup": ended.as_ref().map(|e| json!({"call_status": e.call_status.as_str(), "sip_code": e.sip_code, "reason": e.reason, "by": format!("{:?}", e.by).to_lowercase()})),
            "goals": run.goals,
            "variables": run.variables,
            "steps": run.steps,
            "trace": run.history.events,
            "prompts": prompts,
            "turns": turns,
            "errors": errors,
            "transfers": transfers,
            "media": stats,
        });
        let history_path = format!("{prefix}/history.json");
        let saved = match serde_json::to_vec(&history) {
            Ok(bytes) => rt
                .objects()
                .put(&history_path, Bytes::from(bytes), Some("application/json"))
                .await
                .map_err(|e| e.to_string()),
            Err(e) => Err(e.to_string()),
        };
        if let Err(e) = &saved {
            warn!(error = %e, "saving the call history failed");
        }
        let f = CallFinish {
            communication_status: status::COMPLETED.into(),
            call_status: Some("answered".into()),
            sip_code: Some(200),
            duration: (duration + 500) / 1000,
            goals: run.goals.clone(),
            variables: serde_json::to_string(&run.variables).unwrap_or_else(|_| "{}".into()),
            history_path: saved.ok().map(|_| history_path),
            recording_path: rec_info.map(|_| recording_path),
            end_reason,
            error: None,
            answered_at: Some(answered_at),
            consent_granted: callsmith_control::store::communications::consent_granted(
                run.variables
                    .get(callsmith_control::store::communications::CONSENT_VARIABLE)
                    .map(String::as_str),
            ),
        };
        finish(&rt, &comm, &f).await;
        info!(communication = %comm.sid, goals = ?f.goals, duration = f.duration, "call ended");
    }
}

fn recording_target(rt: &Runtime, path: &str) -> Result<RecordingTarget, String> {
    let uri = rt.objects().uri(path);
    let url = url::Url::parse(&uri).map_err(|e| e.to_string())?;
    let (store, p) = object_store::parse_url(&url).map_err(|e| e.to_string())?;
    Ok(RecordingTarget {
        store: Arc::from(store),
        path: p,
    })
}

/// The leg events an answered call acts on.
#[derive(Debug)]
enum Signal {
    Dtmf(char),
    Ended(EndInfo),
}

/// The next [`Signal`] of the leg, passing over the events an answered call has no use
/// for; `None` once the leg is gone. Cancel-safe: an event is taken only when returned or
/// passed over.
async fn next_signal(leg: &mut CallLeg) -> Option<Signal> {
    loop {
        match leg.next_event().await? {
            LegEvent::Dtmf(d) => return Some(Signal::Dtmf(d)),
            LegEvent::Ended(e) => return Some(Signal::Ended(e)),
            _ => {}
        }
    }
}

/// One prompt as played, for the history.
#[derive(Debug, Clone, Serialize)]
struct PromptLog {
    at_ms: u64,
    prompt: PromptSpec,
    interruptible: bool,
    outcome: String,
    played_ms: u64,
    /// Time from the play request to the end of playout.
    elapsed_ms: u64,
    /// Why nothing was played (outcome `failed`): the audio could not be had.
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

/// One listen turn, for the history (per-turn timings and transcripts).
#[derive(Debug, Clone, Serialize, Default)]
struct Turn {
    index: usize,
    started_ms: u64,
    ended_ms: u64,
    /// VAD onset of caller speech.
    speech_started_ms: Option<u64>,
    first_partial_ms: Option<u64>,
    final_ms: Option<u64>,
    /// Final transcript minus the end of speech (recognition latency).
    final_latency_ms: Option<u64>,
    transcript: Option<String>,
    dtmf: Option<String>,
    heard: String,
    interim: Vec<(u64, String)>,
    stt_node: Option<String>,
    stt_error: Option<String>,
    /// Bucket-qualified storage path of the caller audio of this turn.
    speech_recognition_recording: Option<String>,
    /// Call time of the first RTP packet of the reply to this turn's answer.
    reply_first_rtp_ms: Option<u64>,
    /// Turn latency: answer available (final transcript / DTMF entry) → first RTP packet
    /// of the reply, µs.
    turn_latency_us: Option<u64>,
    /// The engine's share of it: answer available → reply handed to the media worker, µs.
    turn_engine_us: Option<u64>,
}

/// The engine's `CallPort`: one answered call over SIP + media.
pub struct LivePort {
    rt: Runtime,
    comm: CommunicationRecord,
    agent: Option<AgentRecord>,
    from_number: String,
    session: MediaSession,
    media_events: Option<callsmith_media::MediaEvents>,
    /// The call's SIP leg: its events, and hanging up or transferring it.
    leg: CallLeg,
    ended: Option<EndInfo>,
    started: Instant,
    deadline: Instant,
    pending_dtmf: String,
    turns: Vec<Turn>,
    prompts: Vec<PromptLog>,
    errors: Vec<String>,
    /// Uploads of turn audio still running: (index into `turns`, upload). They are
    /// awaited before the history is written; a failed one clears its reference.
    turn_audio_saves: Vec<(usize, tokio::task::JoinHandle<bool>)>,
    /// The trunk the call runs on (a bridged transfer's second leg leaves through it).
    trunk: String,
    /// call_transfer attempts, for the history.
    transfers: Vec<transfer::TransferLog>,
    /// When the last turn's answer became available ([`callsmith_media::clock::now_ns`]),
    /// until the reply's first RTP packet is measured.
    answer_ns: Option<u64>,
}

/// Something that happened while waiting.
enum Happening {
    Media(Option<MediaEvent>),
    Signal(Option<Signal>),
    Deadline,
    Shutdown,
}

impl LivePort {
    fn ms(&self) -> u64 {
        self.started.elapsed().as_millis() as u64
    }

    async fn next_happening(&mut self) -> Happening {
        let deadline = self.deadline;
        let hangup_all = self.rt.hangup_all.clone();
        let media = async {
            match self.media_events.as_mut() {
                Some(rx) => rx.next().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            m = media => Happening::Media(m),
            s = next_signal(&mut self.leg) => Happening::Signal(s),
            _ = tokio::time::sleep_until(deadline) => Happening::Deadline,
            _ = hangup_all.cancelled() => Happening::Shutdown,
        }
    }

    /// Handles a signal; true when the call ended.
    fn on_signal(&mut self, s: Option<Signal>) -> Option<char> {
        match s {
            Some(Signal::Dtmf(d)) => Some(d),
            Some(Signal::Ended(e)) => {
                self.ended = Some(e);
                None
            }
            None => {
                if self.ended.is_none() {
                    self.ended = Some(EndInfo {
                        call_status: callsmith_sip::CallStatus::Answered,
                        sip_code: None,
                        reason: "leg closed".into(),
                        by: callsmith_sip::Party::Remote,
                    });
                }
                None
            }
        }
    }

    /// Waits, at most `within`, for the leg to report its end (after we hung it up). Keys
    /// pressed meanwhile are of no use any more.
    async fn wait_leg_end(&mut self, within: Duration) {
        let until = Instant::now() + within;
        while self.ended.is_none() {
            match tokio::time::timeout_at(until, next_signal(&mut self.leg)).await {
                Ok(s) => {
                    self.on_signal(s);
                }
                Err(_) => break,
            }
        }
    }

    /// Records a turn's latency (answer → first RTP of the reply) on the last turn and on
    /// /metrics.
    fn record_turn_latency(&mut self, answer_ns: u64, requested_ns: u64, first_rtp_ns: u64) {
        let total_us = first_rtp_ns.saturating_sub(answer_ns) / 1000;
        let engine_us = requested_ns.saturating_sub(answer_ns) / 1000;
        self.rt.turns.latency.observe(total_us as f64 / 1e6);
        self.rt.turns.engine.observe(engine_us as f64 / 1e6);
        let now_ns = callsmith_media::clock::now_ns();
        let at_ms = self
            .ms()
            .saturating_sub(now_ns.saturating_sub(first_rtp_ns) / 1_000_000);
        if let Some(t) = self.turns.last_mut() {
            t.reply_first_rtp_ms = Some(at_ms);
            t.turn_latency_us = Some(total_us);
            t.turn_engine_us = Some(engine_us);
        }
    }

    /// Takes in what happened while the call waits on something else (a model's answer,
    /// the answering-machine detector): keys pressed are kept for the next question, the
    /// call's end is noted, and the deadline or a shutdown ends the call. Returns why the
    /// wait must stop, if it must.
    fn wait_interrupted(&mut self, h: Happening) -> Option<&'static str> {
        match h {
            Happening::Media(Some(MediaEvent::Dtmf { digit, .. })) => {
                self.pending_dtmf.push(digit);
                None
            }
            Happening::Media(Some(_)) => None,
            Happening::Media(None) => {
                self.media_events = None;
                None
            }
            Happening::Signal(s) => {
                if let Some(d) = self.on_signal(s) {
                    self.pending_dtmf.push(d);
                }
                self.ended.is_some().then_some("the caller hung up")
            }
            Happening::Deadline => {
                self.force_end("maximum call duration reached");
                Some("the call ended")
            }
            Happening::Shutdown => {
                self.force_end("engine shutting down");
                Some("the call ended")
            }
        }
    }

    fn force_end(&mut self, why: &str) {
        self.errors.push(why.to_string());
        self.leg.hangup();
    }

    async fn playable(&mut self, prompt: &PromptSpec) -> Result<Playable, String> {
        match prompt {
            PromptSpec::Tts { text, voice } => {
                let req = TtsRequest {
                    engine: if voice.engine.is_empty() {
                        self.rt.settings.default_tts_engine.clone()
                    } else {
                        voice.engine.clone()
                    },
                    voice: voice.voice.clone(),
                    language: voice.language.clone(),
                    model: voice.model.clone(),
                    speed: voice.speed.unwrap_or(1.0),
                    text: text.clone(),
                };
                let req = if self.rt.tts.cached(&req).is_none() && !known_engine(&req.engine) {
                    TtsRequest {
                        engine: self.rt.settings.default_tts_engine.clone(),
                        ..req
                    }
                } else {
                    req
                };
                self.rt.tts.playable(&req).map_err(|e| e.to_string())
            }
            PromptSpec::File { url } => self.file_prompt(url).await,
        }
    }

    /// The audio a file prompt names, through the one audio resolver
    /// ([`callsmith_control::audio_ref`]): the account's own audio files and objects, or a
    /// public URL through the guarded client. The fetch stops when the call ends.
    async fn file_prompt(&mut self, url: &str) -> Result<Playable, String> {
        let audio = self.rt.state.audio.clone();
        let account = self.comm.account_sid.clone();
        let reference = url.to_string();
        let fetch = async move { audio.fetch(&account, &reference).await };
        tokio::pin!(fetch);
        let bytes = loop {
            tokio::select! {
                r = &mut fetch => break r.map_err(|e| e.to_string())?,
                h = self.next_happening() => {
                    if let Some(why) = self.wait_interrupted(h) {
                        return Err(format!("fetching {url:?} stopped: {why}"));
                    }
                }
            }
        };
        let ext = url.rsplit_once('.').map(|(_, e)| e.to_string());
        let p = tokio::task::spawn_blocking(move || Prompt::decode(&bytes, ext.as_deref()))
            .await
            .map_err(|e| e.to_string())?
            .map_err(|e| e.to_string())?;
        Ok(Playable::Prompt(Arc::new(p)))
    }

    /// Starts storing a turn's caller audio off the reply's path (the reply must not wait
    /// for object storage) and returns the reference it will have.
    fn save_turn_audio(&mut self, index: usize, pcm: Vec<i16>) -> Option<String> {
        if pcm.is_empty() {
            return None;
        }
        let path = format!(
            "{}/speech/{index}.wav",
            call_prefix(&self.comm.account_sid, &self.comm.sid)
        );
        let reference = format!("{BUCKET}/{path}");
        let objects = self.rt.objects().clone();
        let upload = tokio::spawn(async move {
            let bytes = wav_8k_mono(&pcm);
            match objects
                .put(&path, Bytes::from(bytes), Some("audio/wav"))
                .await
            {
                Ok(()) => true,
                Err(e) => {
                    warn!(error = %e, "saving turn audio failed");
                    false
                }
            }
        });
        self.turn_audio_saves.push((self.turns.len(), upload));
        Some(reference)
    }
}

fn known_engine(e: &str) -> bool {
    matches!(e, "espeak-ng" | "flite")
}

/// A 16-bit PCM mono WAV at 8 kHz.
fn wav_8k_mono(pcm: &[i16]) -> Vec<u8> {
    let data_len = (pcm.len() * 2) as u32;
    let mut out = Vec::with_capacity(44 + data_len as usize);
    out.extend_from_slice(b"RIFF");
    out.extend_from_slice(&(36 + data_len).to_le_bytes());
    out.extend_from_slice(b"WAVEfmt ");
    out.extend_from_slice(&16u32.to_le_bytes());
    out.extend_from_slice(&1u16.to_le_bytes());
    out.extend_from_slice(&1u16.to_le_bytes());
    out.extend_from_slice(&8000u32.to_le_bytes());
    out.extend_from_slice(&16000u32.to_le_bytes());
    out.extend_from_slice(&2u16.to_le_bytes());
    out.extend_from_slice(&16u16.to_le_bytes());
    out.extend_from_slice(b"data");
    out.extend_from_slice(&data_len.to_le_bytes());
    for s in pcm {
        out.extend_from_slice(&s.to_le_bytes());
    }
    out
}

/// Longest a caller may speak in one turn before the turn is cut.
const MAX_UTTERANCE: Duration = Duration::from_secs(20);
/// Time allowed for the final transcript after the audio ended.
const FINAL_GRACE: Duration = Duration::from_secs(8);

#[async_trait]
impl CallPort for LivePort {
    async fn play(&mut self, prompt: &PromptSpec, interruptible: bool) -> PlayOutcome {
        if self.ended.is_some() {
            return PlayOutcome::HungUp;
        }
        let at_ms = self.ms();
        let t0 = Instant::now();
        let playable = match self.playable(prompt).await {
            Ok(p) => p,
            Err(e) => {
                self.errors.push(format!("prompt: {e}"));
                self.prompts.push(PromptLog {
                    at_ms,
                    prompt: prompt.clone(),
                    interruptible,
                    outcome: "failed".into(),
                    played_ms: 0,
                    elapsed_ms: t0.elapsed().as_millis() as u64,
                    error: Some(e.clone()),
                });
                return PlayOutcome::Failed(e);
            }
        };
        let requested_ns = callsmith_media::clock::now_ns();
        let handle = match self.session.play(playable, interruptible) {
            Ok(h) => h,
            Err(e) => return PlayOutcome::Failed(e.to_string()),
        };
        let wait = handle.wait();
        tokio::pin!(wait);
        let mut stopped_by_dtmf = false;
        let first_rtp_ns;
        let outcome = loop {
            tokio::select! {
                o = &mut wait => {
                    first_rtp_ns = o.first_rtp_ns;
                    break match o.end {
                        PlayEnd::Completed => (PlayOutcome::Completed, o.played_ms),
                        PlayEnd::Interrupted => (PlayOutcome::Interrupted, o.played_ms),
                        PlayEnd::Stopped if stopped_by_dtmf => (PlayOutcome::Interrupted, o.played_ms),
                        PlayEnd::Stopped if self.ended.is_some() => (PlayOutcome::HungUp, o.played_ms),
                        PlayEnd::Stopped => (PlayOutcome::Completed, o.played_ms),
                    };
                }
                h = self.next_happening() => match h {
                    Happening::Media(Some(MediaEvent::Dtmf { digit, .. })) => {
                        self.pending_dtmf.push(digit);
                        if interruptible && !stopped_by_dtmf {
                            stopped_by_dtmf = true;
                            let _ = self.session.stop_playout();
                        }
                    }
                    Happening::Media(None) => { self.media_events = None; }
                    Happening::Media(Some(_)) => {}
                    Happening::Signal(s) => {
                        if let Some(d) = self.on_signal(s) {
                            self.pending_dtmf.push(d);
                            if interruptible && !stopped_by_dtmf {
                                stopped_by_dtmf = true;
                                let _ = self.session.stop_playout();
                            }
                        }
                        if self.ended.is_some() {
                            let _ = self.session.stop_playout();
                        }
                    }
                    Happening::Deadline => { self.force_end("maximum call duration reached"); let _ = self.session.stop_playout(); }
                    Happening::Shutdown => { self.force_end("engine shutting down"); let _ = self.session.stop_playout(); }
                }
            }
        };
        if let (Some(answer), Some(first)) = (self.answer_ns.take(), first_rtp_ns) {
            self.record_turn_latency(answer, requested_ns, first);
        }
        let name = match &outcome.0 {
            PlayOutcome::Completed => "completed",
            PlayOutcome::Interrupted => "interrupted",
            PlayOutcome::HungUp => "hung_up",
            PlayOutcome::Failed(_) => "failed",
        };
        self.prompts.push(PromptLog {
            at_ms,
            prompt: prompt.clone(),
            interruptible,
            outcome: name.into(),
            played_ms: outcome.1,
            elapsed_ms: t0.elapsed().as_millis() as u64,
            error: match &outcome.0 {
                PlayOutcome::Failed(e) => Some(e.clone()),
                _ => None,
            },
        });
        outcome.0
    }

    async fn listen(&mut self, spec: &ListenSpec) -> Heard {
        if self.ended.is_some() {
            return Heard::HungUp;
        }
        self.answer_ns = None;
        let mut turn = Turn {
            index: self.turns.len() + 1,
            started_ms: self.ms(),
            ..Default::default()
        };
        let mut stt = None;
        if let Some(speech) = &spec.speech {
            match self.rt.stt_pool(&speech.engine) {
                Some(pool) => {
                    let params = SttParams {
                        language: if speech.language.is_empty() {
                            "en-US".into()
                        } else {
                            speech.language.clone()
                        },
                        model: speech.model.clone(),
                        interim_results: true,
                    };
                    match self.session.start_stt(&pool, params).await {
                        Ok(s) => {
                            turn.stt_node = Some(s.node.name.clone());
                            stt = Some(s);
                        }
                        Err(e) => turn.stt_error = Some(e.to_string()),
                    }
                }
                None => turn.stt_error = Some("no recognition node configured".into()),
            }
        }
        // The caller's audio is kept only to store a speech turn's recording.
        let mut audio = if spec.speech.is_some() {
            self.session.tap_caller_audio(3000).ok()
        } else {
            None
        };
        let mut pcm: Vec<i16> = Vec::new();
        let dtmf = spec.dtmf.clone();
        let mut digits = String::new();
        let no_input = Duration::from_secs_f64(if spec.no_input_timeout_secs > 0.0 {
            spec.no_input_timeout_secs
        } else {
            callsmith_scenarios::interpreter::DEFAULT_NO_INPUT_SECS
        });
        let mut deadline = Instant::now() + no_input;
        let mut finishing = false;
        let mut heard: Option<Heard> = None;
        // Digits typed during the prompt start the entry.
        if dtmf.is_some() {
            for d in std::mem::take(&mut self.pending_dtmf).chars() {
                if let Some(h) = push_digit(&mut digits, d, dtmf.as_ref()) {
                    heard = Some(h);
                    break;
                }
            }
            if !digits.is_empty() {
                deadline = Instant::now() + inter_digit(dtmf.as_ref());
            }
        }
        while heard.is_none() {
            let stt_next = async {
                match stt.as_mut() {
                    Some(s) => s.next().await,
                    None => std::future::pending().await,
                }
            };
            let frame = async {
                match audio.as_mut() {
                    Some(a) => a.recv().await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                ev = stt_next => match ev {
                    Some(SttEvent::Transcript(t)) => {
                        let now = self.ms();
                        if t.is_final {
                            if !t.text.trim().is_empty() {
                                turn.final_ms = Some(now);
                                turn.final_latency_ms = Some(t.at_ms.saturating_sub(t.end_ms));
                                heard = Some(Heard::Speech { transcript: t.text.trim().to_string(), confidence: None });
                            } else if finishing {
                                heard = Some(Heard::NoInput);
                            }
                        } else if !t.text.trim().is_empty() {
                            turn.first_partial_ms.get_or_insert(now);
                            turn.interim.push((now, t.text.clone()));
                            deadline = deadline.max(Instant::now() + Duration::from_secs(3));
                        }
                    }
                    Some(SttEvent::NodeFailed { node, error }) => {
                        turn.stt_error = Some(format!("{node}: {error}"));
                        stt = None;
                    }
                    Some(SttEvent::Ended) | None => {
                        stt = None;
                        if finishing { heard = Some(Heard::NoInput); }
                    }
                },
                f = frame => match f {
                    Some(f) => if pcm.len() < 8000 * 60 { pcm.extend_from_slice(&f.pcm) },
                    None => audio = None,
                },
                h = self.next_happening() => match h {
                    Happening::Media(Some(MediaEvent::Dtmf { digit, .. })) => {
                        if dtmf.is_some() {
                            heard = push_digit(&mut digits, digit, dtmf.as_ref());
                            deadline = Instant::now() + inter_digit(dtmf.as_ref());
                        }
                    }
                    Happening::Media(Some(MediaEvent::SpeechStarted { .. })) => {
                        turn.speech_started_ms.get_or_insert(self.ms());
                        if stt.is_some() {
                            deadline = deadline.max(Instant::now() + MAX_UTTERANCE);
                        }
                    }
                    Happening::Media(Some(_)) => {}
                    Happening::Media(None) => self.media_events = None,
                    Happening::Signal(s) => {
                        if let Some(d) = self.on_signal(s)
                            && dtmf.is_some()
                        {
                            heard = push_digit(&mut digits, d, dtmf.as_ref());
                            deadline = Instant::now() + inter_digit(dtmf.as_ref());
                        }
                        if self.ended.is_some() { heard = Some(Heard::HungUp); }
                    }
                    Happening::Deadline => { self.force_end("maximum call duration reached"); heard = Some(Heard::HungUp); }
                    Happening::Shutdown => { self.force_end("engine shutting down"); heard = Some(Heard::HungUp); }
                },
                _ = tokio::time::sleep_until(deadline) => {
                    let min = dtmf.as_ref().map_or(1, |d| d.min_symbols.max(1) as usize);
                    if !digits.is_empty() && digits.len() >= min {
                        heard = Some(Heard::Dtmf { digits: std::mem::take(&mut digits) });
                    } else if !finishing && stt.is_some() && (turn.speech_started_ms.is_some() || !turn.interim.is_empty()) {
                        // Speech is under way: end the audio and wait for the final result.
                        finishing = true;
                        if let Some(s) = stt.as_mut() { s.finish(); }
                        deadline = Instant::now() + FINAL_GRACE;
                    } else {
                        heard = Some(Heard::NoInput);
                    }
                }
            }
        }
        if matches!(heard, Some(Heard::Speech { .. } | Heard::Dtmf { .. })) {
            self.answer_ns = Some(callsmith_media::clock::now_ns());
        }
        drop(stt);
        drop(audio);
        let heard = heard.unwrap_or(Heard::NoInput);
        turn.ended_ms = self.ms();
        match &heard {
            Heard::Speech { transcript, .. } => {
                turn.heard = "speech".into();
                turn.transcript = Some(transcript.clone());
            }
            Heard::Dtmf { digits } => {
                turn.heard = "dtmf".into();
                turn.dtmf = Some(digits.clone());
            }
            Heard::NoInput => turn.heard = "no_input".into(),
            Heard::HungUp => turn.heard = "hung_up".into(),
        }
        if spec.speech.is_some() {
            turn.speech_recognition_recording = self.save_turn_audio(turn.index, pcm);
        }
        self.turns.push(turn);
        heard
    }

    async fn classify(
        &mut self,
        id: &str,
        version: i64,
        text: &str,
    ) -> Result<Vec<IntentScore>, String> {
        callsmith_control::adapters::classify(
            &self.rt.store,
            &self.comm.account_sid,
            id,
            version,
            text,
        )
        .await
        .map(|v| {
            v.into_iter()
                .map(|(intent, c)| IntentScore {
                    intent,
                    confidence: f64::from(c),
                })
                .collect()
        })
        .map_err(|e| e.to_string())
    }

    async fn llm(&mut self, request: &LlmRequest) -> Result<String, String> {
        let account = self
            .rt
            .store
            .account_get(&self.comm.account_sid)
            .await
            .map_err(|e| e.to_string())?
            .ok_or("the account no longer exists")?;
        let enabled = callsmith_control::adapters::llm::llm_enabled(&self.rt.store, &account)
            .await
            .map_err(|e| e.to_string())?;
        if !enabled {
            return Err("llm_disabled: the global_llm feature flag is off for this account".into());
        }
        let llm = self.rt.state.adapters.llm.clone();
        let answer = llm.complete(
            &account.sid,
            chat_request(request),
            self.rt.settings.llm_call_timeout,
        );
        tokio::pin!(answer);
        // The caller may hang up while the model thinks.
        loop {
            tokio::select! {
                r = &mut answer => return r.map(|a| a.content).map_err(|e| e.to_string()),
                h = self.next_happening() => {
                    if let Some(why) = self.wait_interrupted(h) {
                        return Err(why.into());
                    }
                }
            }
        }
    }

    async fn webhook(
        &mut self,
        request: &CompiledRequest,
        mapping: &[MappingEntry],
    ) -> WebhookOutcome {
        self.rt.state.webhook.execute(request, mapping).await
    }

    async fn send_sms(&mut self, to: &str, text: &str) -> SmsOutcome {
        match send_sms(&self.rt, self.agent.as_ref(), &self.from_number, to, text).await {
            Ok(()) => SmsOutcome::Sent,
            Err(e) => SmsOutcome::Failed(e),
        }
    }

    async fn transfer(&mut self, spec: &TransferSpec) -> TransferOutcome {
        match spec.mode {
            TransferMode::Blind => self.blind_transfer(spec).await,
            TransferMode::Bridged => self.bridged_transfer(spec).await,
        }
    }

    async fn answering_machine(&mut self) -> AmdVerdict {
        if self.ended.is_some() || !amd_enabled(self.agent.as_ref()) {
            return AmdVerdict::Unknown;
        }
        let cfg = amd_config();
        let task = match self.session.spawn_answering_machine_detection(cfg) {
            Ok(t) => t,
            Err(e) => {
                self.errors
                    .push(format!("answering-machine detection: {e}"));
                return AmdVerdict::Unknown;
            }
        };
        tokio::pin!(task);
        // The detector decides within its window (plus the beep wait); bound it anyway.
        let until = Instant::now()
            + Duration::from_millis(u64::from(cfg.window_ms + cfg.beep_wait_ms) + 2000);
        loop {
            tokio::select! {
                v = &mut task => {
                    return match v {
                        Ok(Amd::Human) => AmdVerdict::Human,
                        Ok(Amd::Machine | Amd::Beep) => AmdVerdict::Machine,
                        Ok(Amd::Undecided) | Err(_) => AmdVerdict::Unknown,
                    };
                }
                _ = tokio::time::sleep_until(until) => { task.abort(); return AmdVerdict::Unknown; }
                h = self.next_happening() => {
                    if self.wait_interrupted(h).is_some() {
                        task.abort();
                        return AmdVerdict::Unknown;
                    }
                }
            }
        }
    }

    async fn hangup(&mut self, _signal: &str) {
        self.leg.hangup();
    }

    fn now(&self) -> DateTime<Utc> {
        Utc::now()
    }
}

/// Answering-machine detection runs for an outbound_call brick with `is_voicemail` when the
/// call's agent has `voicemail_enabled` (or the call has no agent: a scenario test call);
/// otherwise the verdict is unknown and the brick takes `human`.
fn amd_enabled(agent: Option<&AgentRecord>) -> bool {
    agent.is_none_or(|a| a.voicemail_enabled)
}

/// The heuristic's settings in live calls (docs/bricks.md, "Answering-machine detection").
fn amd_config() -> AmdConfig {
    AmdConfig {
        beep_wait_ms: 10_000,
        ..AmdConfig::default()
    }
}

/// The chat request of an LLM brick: its messages in order, provider by name (empty: the
/// first provider serving the model), no tools.
fn chat_request(r: &LlmRequest) -> callsmith_control::adapters::llm::ChatRequest {
    callsmith_control::adapters::llm::ChatRequest {
        messages: r
            .messages
            .iter()
            .map(
                |(role, content)| callsmith_control::adapters::llm::ChatMessage {
                    role: role.clone(),
                    content: Some(content.clone()),
                    tool_calls: None,
                    tool_call_id: None,
                    name: None,
                },
            )
            .collect(),
        model: r.model.clone(),
        provider: Some(r.provider.clone()).filter(|p| !p.is_empty()),
        temperature: r.temperature,
        tools: Vec::new(),
        gdpr_required: r.gdpr_required,
    }
}

fn inter_digit(d: Option<&DtmfSpec>) -> Duration {
    Duration::from_secs_f64(
        d.and_then(|d| d.inter_digit_timeout_secs)
            .filter(|s| *s > 0.0)
            .unwrap_or(3.0),
    )
}

/// Adds a digit; Some when entry is complete (finish key or max symbols).
fn push_digit(digits: &mut String, d: char, spec: Option<&DtmfSpec>) -> Option<Heard> {
    let spec = spec?;
    if spec.finish_on_key == Some(d) {
        if digits.len() >= spec.min_symbols as usize {
            return Some(Heard::Dtmf {
                digits: std::mem::take(digits),
            });
        }
        return None;
    }
    digits.push(d);
    if spec.max_symbols > 0 && digits.len() >= spec.max_symbols as usize {
        return Some(Heard::Dtmf {
            digits: std::mem::take(digits),
        });
    }
    None
}

/// Sends an SMS through the agent's provider ([`callsmith_control::sms::send`]).
async fn send_sms(
    rt: &Runtime,
    agent: Option<&AgentRecord>,
    call_from: &str,
    to: &str,
    text: &str,
) -> Result<(), String> {
    let agent = agent.ok_or("a test call has no agent SMS settings")?;
    let sms: Value = agent
        .sms
        .as_deref()
        .and_then(|s| serde_json::from_str(s).ok())
        .ok_or("the agent has no SMS settings")?;
    let provider_sid = sms
        .get("provider_sid")
        .and_then(|v| v.as_str())
        .ok_or("sms.provider_sid missing")?;
    let p = rt
        .store
        .sms_provider_get(provider_sid)
        .await
        .map_err(|e| e.to_string())?
        .filter(|p| p.account_sid == agent.account_sid)
        .ok_or("the SMS provider no longer exists")?;
    let use_alpha = sms
        .get("use_alpha")
        .and_then(|v| v.as_bool())
        .unwrap_or(false);
    let from = if use_alpha {
        sms.get("alpha")
            .and_then(|v| v.as_str())
            .unwrap_or_default()
    } else {
        sms.get("number")
            .and_then(|v| v.as_str())
            .unwrap_or(call_from)
    };
    callsmith_control::sms::send(&rt.state.outbound, &p, from, to, text).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_call_waits_for_its_slot_unless_draining_begins() {
        let draining = CancellationToken::new();
        // A slot that has passed: at once.
        let t = std::time::Instant::now();
        assert!(wait_for_slot(&draining, Utc::now() - chrono::Duration::seconds(1)).await);
        assert!(t.elapsed() < Duration::from_millis(50));
        // A slot ahead: not before it.
        let t = std::time::Instant::now();
        assert!(wait_for_slot(&draining, Utc::now() + chrono::Duration::milliseconds(80)).await);
        assert!(
            t.elapsed() >= Duration::from_millis(70),
            "{:?}",
            t.elapsed()
        );
        // Draining begins while it waits: the call is not placed, and not after the slot.
        let cancel = draining.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(30)).await;
            cancel.cancel();
        });
        let t = std::time::Instant::now();
        assert!(!wait_for_slot(&draining, Utc::now() + chrono::Duration::seconds(30)).await);
        assert!(t.elapsed() < Duration::from_secs(5));
        // Once draining, even a slot that has passed is not taken.
        assert!(!wait_for_slot(&draining, Utc::now() - chrono::Duration::seconds(1)).await);
    }
}
