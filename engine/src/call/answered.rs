//! An answered call: its port is built, its scenario run, and its end (history, recording,
//! the final write) stored.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use callsmith_domain::objects::CallObjects;
use callsmith_domain::store::communications::{
    CONSENT_VARIABLE, CallFinish, ScenarioVerdict, consent_granted,
};
use callsmith_domain::store::{AgentRecord, CommunicationRecord};
use callsmith_media::{MediaSession, recording::RecordingTarget};
use callsmith_scenarios::history::EndReason;
use callsmith_scenarios::interpreter::{CallDirection, CallInfo, CallRun, Program};
use callsmith_sip::NegotiatedMedia;
use chrono::{DateTime, Utc};
use tokio::time::Instant;
use tracing::{info, warn};

use super::LivePort;
use super::context::CallContext;
use super::finish;
use super::io::{CallIo, ForcedEnd};
use super::leg::Leg;
use super::live_feed::Live;
use super::media::CallMedia;
use super::prepare::Prepared;
use super::record::{CallFacts, CallRecord};
use crate::runtime::Runtime;

/// An answered call, ready to run its scenario: everything a call holds while it is up,
/// in one heap allocation. The tasks around it hold only a pointer, and nothing is kept
/// twice: an async fn keeps its arguments in its state for its whole life, even after
/// they are moved on, so the call's records are handed over in this box instead.
pub struct AnsweredCall {
    pub(super) port: LivePort,
    pub(super) info: CallInfo,
    pub(super) program: Arc<Program>,
    pub(super) answered_at: DateTime<Utc>,
    /// Where this call's objects go.
    pub(super) objects: CallObjects,
    pub(super) recording_path: String,
    pub(super) call_id: String,
}

impl AnsweredCall {
    /// Points the media at the answer, starts the recording when the call is recorded,
    /// and builds the call's port.
    pub fn new(
        rt: Runtime,
        comm: CommunicationRecord,
        prep: Prepared,
        session: MediaSession,
        leg: Leg,
        media: NegotiatedMedia,
        direction: CallDirection,
    ) -> Box<AnsweredCall> {
        info!(
            communication = %comm.sid,
            codec = media.codec.encoding_name(),
            payload_type = media.payload_type,
            "call media negotiated"
        );
        if let Err(e) = super::point_media(&session, &media) {
            warn!(error = %e, "setting the media peer failed");
        }
        if prep.record {
            let path = CallObjects::new(&comm.account_sid, &comm.sid).recording();
            match recording_target(&rt, &path) {
                Ok(t) => {
                    if let Err(e) = session.start_recording(t) {
                        warn!(error = %e, "recording could not start");
                    }
                }
                Err(e) => warn!(error = %e, "recording target unavailable"),
            }
        }
        AnsweredCall::over(rt, comm, prep, session.into(), leg, direction)
    }

    /// The call answered now on `leg` with `media` (set up for the answer), with its port
    /// built.
    pub(super) fn over(
        rt: Runtime,
        comm: CommunicationRecord,
        prep: Prepared,
        media: CallMedia,
        leg: Leg,
        direction: CallDirection,
    ) -> Box<AnsweredCall> {
        let answered_at = Utc::now();
        let objects = CallObjects::new(&comm.account_sid, &comm.sid);
        let recording_path = objects.recording();
        let Prepared {
            program,
            agent,
            from_number,
            tz,
            data,
            hangup,
            live,
            ..
        } = prep;
        let call_id = leg.call_id().to_string();
        let trunk = leg.trunk().to_string();
        let info = CallInfo {
            direction,
            recipient: comm.recipient.clone(),
            from: from_number.clone(),
            communication_id: comm.sid.clone(),
            timezone: tz,
            data,
        };
        let started = Instant::now();
        let io = CallIo::new(
            media,
            leg,
            started + rt.settings.max_call,
            rt.hangup_all.clone(),
            hangup,
        );
        let port = LivePort {
            ctx: CallContext {
                rt,
                comm,
                agent,
                from_number,
                trunk,
            },
            io,
            record: CallRecord::new(started, live.map(Live::new)),
            eager: None,
        };
        Box::new(AnsweredCall {
            port,
            info,
            program,
            answered_at,
            objects,
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

    /// Ends the call after its scenario ran: hangs up, closes the media, saves the
    /// history, then writes the end.
    pub(super) async fn close(self: Box<Self>, run: CallRun) {
        self.end(run).await.write().await;
    }

    /// Hangs up if the caller has not, closes the media and saves the history: the end
    /// as it will be written.
    pub(super) async fn end(self: Box<Self>, run: CallRun) -> Ended {
        let AnsweredCall {
            mut port,
            answered_at,
            objects,
            recording_path,
            call_id,
            info,
            ..
        } = *self;
        // Hang up if the scenario ended without the caller leaving, and wait for the end
        // (briefly when the peer stopped sending RTP: it is likely gone and will not
        // answer the BYE).
        if !port.io.hung_up() {
            port.io.hangup();
            let within = if port.io.forced() == Some(ForcedEnd::RtpTimeout) {
                Duration::from_secs(2)
            } else {
                Duration::from_secs(10)
            };
            port.io.wait_leg_end(within).await;
        }
        let ended_at = Utc::now();
        let LivePort {
            ctx,
            io,
            mut record,
            eager,
        } = port;
        if let Some(e) = eager {
            e.settle(&mut record);
        }
        let (forced, hangup) = (io.forced(), io.end_info().cloned());
        let (stats, rec_info) = match io.into_session().close().await {
            Ok((s, r)) => (Some(s), r),
            Err(e) => {
                warn!(error = %e, "closing the media session failed");
                (None, None)
            }
        };
        // The engine's own reason wins over what the scenario saw (a hang-up).
        let end_reason = forced.map(|f| f.as_str().to_string()).or_else(|| {
            serde_json::to_value(&run.end)
                .ok()
                .and_then(|v| v.get("reason").and_then(|r| r.as_str()).map(String::from))
        });
        let CallContext {
            rt,
            comm,
            agent,
            from_number,
            ..
        } = ctx;
        let facts = CallFacts {
            communication_id: comm.sid.clone(),
            direction: info.direction,
            recipient: comm.recipient.clone(),
            from_number,
            call_id,
            answered_at,
            ended_at,
            forced,
            hangup: hangup.as_ref(),
            media: stats,
        };
        let amd = record.amd;
        let (history, live) = record.into_history(facts, &run).await;
        let duration = history.duration_ms;
        let history_path = objects.history();
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
        let signal = match &run.end {
            EndReason::EndCall { signal, .. } => Some(signal.as_str()),
            _ => None,
        };
        let verdict = ScenarioVerdict::of(|v| run.variables.get(v).map(String::as_str), signal);
        let f = CallFinish {
            duration: (duration + 500) / 1000,
            goals: run.goals.clone(),
            variables: serde_json::to_string(&run.variables).unwrap_or_else(|_| "{}".into()),
            history_path: saved.ok().map(|_| history_path),
            recording_path: rec_info.map(|_| recording_path),
            end_reason,
            consent_granted: consent_granted(
                run.variables.get(CONSENT_VARIABLE).map(String::as_str),
            ),
            opted_out: verdict.opted_out,
            declined: verdict.declined,
            amd: amd.map(String::from),
            ..CallFinish::answered(answered_at)
        };
        Ended {
            rt,
            comm,
            agent,
            finish: f,
            live,
        }
    }
}

/// An ended call whose end is still to be written.
pub(super) struct Ended {
    rt: Runtime,
    comm: CommunicationRecord,
    agent: Option<Arc<AgentRecord>>,
    /// The communication's end, as it will be written.
    pub(super) finish: CallFinish,
    live: Option<Live>,
}

impl Ended {
    /// Writes the end and queues the result deliveries; a test call's live feed is told.
    pub(super) async fn write(self) {
        let Ended {
            rt,
            comm,
            agent,
            finish: f,
            live,
        } = self;
        finish(&rt, &comm, agent.as_deref(), &f).await;
        if let Some(live) = live {
            live.end(&f);
        }
        info!(communication = %comm.sid, goals = ?f.goals, duration = f.duration, "call ended");
    }
}

pub(super) fn recording_target(rt: &Runtime, path: &str) -> Result<RecordingTarget, String> {
    let uri = rt.objects().uri(path);
    let url = url::Url::parse(&uri).map_err(|e| e.to_string())?;
    let (store, p) = object_store::parse_url(&url).map_err(|e| e.to_string())?;
    Ok(RecordingTarget {
        store: Arc::from(store),
        path: p,
    })
}
