//! A scripted caller in process: its leg ([`FakeLeg`]) and its media ([`FakeMedia`]) share
//! one [`Peer`], which plays the bot's prompts 20 ms a frame on the runtime's clock, and
//! acts out a [`Script`] at its times since the answer: keys (RFC 4733 or SIP INFO),
//! speech (the detector's edges and the recogniser's transcripts), a hang-up. No socket and
//! no thread: under paused time a call of minutes runs in milliseconds, deterministically.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use callsmith_media::amd::AmdDecision;
use callsmith_media::prompt::{FRAME_SAMPLES, Playable, StreamFrame};
use callsmith_media::recording::RecordingInfo;
use callsmith_media::stt::{
    SttEvent, SttNodeConfig, SttParams, SttPool, SttProtocol, SttStream, Transcript,
};
use callsmith_media::{
    AudioFrame, AudioReceiver, BargeIn, MediaEvent, MediaEvents, PlayEnd, PlayHandle, Playout,
    SessionStats,
};
use callsmith_sip::{CallStatus, EndInfo, LegEvent, Party, ReferOutcome};
use parking_lot::Mutex;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

/// One frame of audio.
const FRAME: Duration = Duration::from_millis(20);
/// How long after the caller goes on the recogniser takes its eager end of turn back.
const RESUMED_LAG: Duration = Duration::from_millis(100);
/// The gap between two keys the caller presses.
const KEY_GAP: Duration = Duration::from_millis(150);

/// What the scripted caller does.
#[derive(Debug, Clone, PartialEq)]
pub enum Act {
    /// Presses keys as RFC 4733 events through the media, one every 150 ms.
    Keys(String),
    /// Presses keys as SIP INFO through the leg, one every 150 ms.
    InfoKeys(String),
    /// Says `text`: speech starts (cutting an interruptible prompt: barge-in), the
    /// recogniser reports its first word as an interim result half-way and the whole text
    /// as the final one when the speech ends, 60 ms a character (at least 400 ms) later.
    Say(String),
    /// Says `text` as [`Act::Say`] does, but the recogniser first reports its end of turn
    /// with the interim transcript `interim` (the local speech node's `EndOfTurn`) and
    /// sends the final 300 ms later.
    SayWithEndOfTurn { interim: String, text: String },
    /// Re-keys SRTP (a re-INVITE with new keys, as the leg reports it).
    Rekey(callsmith_sip::SrtpKeys),
    /// Says `text` as [`Act::Say`] does, but when the speech ends the recogniser reports
    /// its eager end of turn with `text`. With `more` = (ms, words) the caller goes on that
    /// long after it (the speech detector's onset, when watched), the recogniser takes the
    /// eager end of turn back (`TurnResumed`) 100 ms later, and when `words` are said
    /// reports its end of turn and final with the whole. Without, its end of turn and final
    /// (`text`) follow 300 ms after the eager one.
    SayEager {
        text: String,
        more: Option<(u64, String)>,
    },
    /// Hangs up (a BYE).
    HangUp,
}

/// How long after a recogniser starts the caller says a [`Script::answers`] answer.
pub const ANSWER_DELAY: Duration = Duration::from_millis(300);

/// What the caller does and when (since the answer), how a REFER to it ends and what an
/// answering-machine detector decides about it.
#[derive(Debug, Clone)]
pub struct Script {
    acts: Vec<(Duration, Act)>,
    /// Said one each time a recogniser starts listening (see [`Script::answers`]).
    answers: Vec<String>,
    refer: ReferOutcome,
    amd: AmdDecision,
}

impl Default for Script {
    fn default() -> Script {
        Script {
            acts: Vec::new(),
            answers: Vec::new(),
            refer: ReferOutcome::Failed {
                sip_code: Some(403),
                reason: "Forbidden".into(),
            },
            amd: AmdDecision::Human,
        }
    }
}

impl Script {
    /// A caller who does nothing but listen.
    pub fn new() -> Script {
        Script::default()
    }

    /// Does `act` `ms` milliseconds after the answer (acts run in the order of their times).
    pub fn at(mut self, ms: u64, act: Act) -> Script {
        self.acts.push((Duration::from_millis(ms), act));
        self.acts.sort_by_key(|(t, _)| *t);
        self
    }

    /// Says `text` [`ANSWER_DELAY`] after the next recogniser starts listening (each call
    /// queues one more answer): a caller who answers when asked, whatever the call did
    /// before in real time (a store lookup, say) while the test's clock stood still.
    pub fn answers(mut self, text: &str) -> Script {
        self.answers.push(text.to_string());
        self
    }

    /// A REFER to the caller ends as `outcome` (a refusal, 403, unless told).
    pub fn refer(mut self, outcome: ReferOutcome) -> Script {
        self.refer = outcome;
        self
    }

    /// What an answering-machine detector decides (a human, unless told).
    pub fn amd(mut self, verdict: AmdDecision) -> Script {
        self.amd = verdict;
        self
    }
}

/// One prompt as the caller heard it.
#[derive(Debug, Clone, PartialEq)]
pub struct Played {
    /// When it started, ms since the answer.
    pub at_ms: u64,
    /// How much of it was heard.
    pub played_ms: u64,
    pub end: PlayEnd,
    /// Caller speech could stop it (at some point).
    pub interruptible: bool,
}

/// A prompt queued or playing.
struct Queued {
    source: Playable,
    barge_in: BargeIn,
    done: oneshot::Sender<Playout>,
}

struct Current {
    generation: u64,
    barge_in: BargeIn,
    /// What plays (for how much of it is left).
    source: Playable,
    at_ms: u64,
    frames: u64,
    done: oneshot::Sender<Playout>,
}

impl Current {
    /// Whether the caller's speech stops the prompt now, as the media worker decides it.
    fn barge_in_open(&self) -> bool {
        let played_ms = self.frames * FRAME.as_millis() as u64;
        let left_ms = match &self.source {
            Playable::Prompt(p) => Some(p.duration_ms().saturating_sub(played_ms)),
            Playable::Stream(s) => s.is_finished().then(|| s.buffered() as u64 / 8),
        };
        self.barge_in.open(played_ms, left_ms)
    }
}

/// What the leg and the media of the scripted caller share.
struct State {
    answered: Instant,
    media_events: futures::channel::mpsc::Sender<MediaEvent>,
    leg_events: mpsc::UnboundedSender<LegEvent>,
    queue: VecDeque<Queued>,
    current: Option<Current>,
    generation: u64,
    watching: bool,
    /// The caller is speaking by the fake detector (an onset reported, no stop yet).
    speaking: bool,
    recognizer: Option<mpsc::Sender<SttEvent>>,
    /// What the caller says when the next recogniser starts.
    answers: VecDeque<String>,
    taps: Vec<mpsc::Sender<AudioFrame>>,
    played: Vec<Played>,
    referred: Vec<String>,
    /// The SRTP parameters the media was re-keyed with.
    rekeyed: Vec<callsmith_media::srtp::SrtpParams>,
    /// The leg ended (either side hung up).
    ended: bool,
}

/// The scripted caller: what its leg and media share.
#[derive(Clone)]
pub struct Peer(Arc<Mutex<State>>);

/// What the caller heard and did, read after the call.
#[derive(Debug, Clone, Default)]
pub struct Heard {
    pub played: Vec<Played>,
    /// The targets of the REFERs it got.
    pub referred: Vec<String>,
    /// The SRTP parameters its media was re-keyed with, in order.
    pub rekeyed: Vec<callsmith_media::srtp::SrtpParams>,
}

impl Peer {
    /// A caller answering now, its leg and its media. Its script runs from now on.
    pub fn answer(script: Script) -> (Peer, FakeLeg, FakeMedia) {
        let (media_tx, media_rx) = futures::channel::mpsc::channel(64);
        let (leg_tx, leg_rx) = mpsc::unbounded_channel();
        let peer = Peer(Arc::new(Mutex::new(State {
            answered: Instant::now(),
            media_events: media_tx,
            leg_events: leg_tx,
            queue: VecDeque::new(),
            current: None,
            generation: 0,
            watching: false,
            speaking: false,
            recognizer: None,
            answers: script.answers.iter().cloned().collect(),
            taps: Vec::new(),
            played: Vec::new(),
            referred: Vec::new(),
            rekeyed: Vec::new(),
            ended: false,
        })));
        let acts = script.acts.clone();
        tokio::spawn(peer.clone().act(acts));
        let leg = FakeLeg {
            peer: peer.clone(),
            events: leg_rx,
            refer: script.refer.clone(),
            ended: false,
        };
        let media = FakeMedia {
            peer: peer.clone(),
            events: Some(media_rx),
            amd: script.amd,
        };
        (peer, leg, media)
    }

    /// What the caller heard and did so far.
    pub fn heard(&self) -> Heard {
        let s = self.0.lock();
        Heard {
            played: s.played.clone(),
            referred: s.referred.clone(),
            rekeyed: s.rekeyed.clone(),
        }
    }

    fn ms(s: &State) -> u64 {
        s.answered.elapsed().as_millis() as u64
    }

    /// Runs the script until it is done or the leg ended.
    async fn act(self, acts: Vec<(Duration, Act)>) {
        let answered = self.0.lock().answered;
        for (at, act) in acts {
            tokio::time::sleep_until(answered + at).await;
            if self.0.lock().ended {
                return;
            }
            match act {
                Act::Keys(keys) => self.keys(&keys, true).await,
                Act::InfoKeys(keys) => self.keys(&keys, false).await,
                Act::Say(text) => self.say(&text, None).await,
                Act::SayWithEndOfTurn { interim, text } => self.say(&text, Some(&interim)).await,
                Act::Rekey(keys) => {
                    let _ = self.0.lock().leg_events.send(LegEvent::SrtpRekeyed(keys));
                }
                Act::SayEager { text, more } => self.say_eager(&text, more).await,
                Act::HangUp => self.end(EndInfo {
                    call_status: CallStatus::Answered,
                    sip_code: None,
                    reason: "BYE".into(),
                    by: Party::Remote,
                }),
            }
        }
    }

    async fn keys(&self, keys: &str, rfc4733: bool) {
        for (i, digit) in keys.chars().enumerate() {
            if i > 0 {
                tokio::time::sleep(KEY_GAP).await;
            }
            let mut s = self.0.lock();
            let at_ms = Peer::ms(&s);
            if rfc4733 {
                let ev = MediaEvent::Dtmf {
                    digit,
                    duration_ms: 100,
                    at_ms,
                };
                let _ = s.media_events.try_send(ev);
            } else {
                let _ = s.leg_events.send(LegEvent::Dtmf(digit));
            }
        }
    }

    async fn say(&self, text: &str, end_of_turn: Option<&str>) {
        let long = Duration::from_millis((text.chars().count() as u64 * 60).max(400));
        {
            let mut s = self.0.lock();
            let at_ms = Peer::ms(&s);
            if s.watching {
                s.speaking = true;
                let _ = s.media_events.try_send(MediaEvent::SpeechStarted { at_ms });
            }
            if s.current.as_ref().is_some_and(Current::barge_in_open) {
                end_current(&mut s, PlayEnd::Interrupted);
                start_next(&self.0, &mut s);
            }
        }
        tokio::time::sleep(long / 2).await;
        let first = text.split_whitespace().next().unwrap_or_default();
        self.transcript(first, false, false).await;
        tokio::time::sleep(long - long / 2).await;
        if let Some(interim) = end_of_turn {
            self.transcript(interim, false, true).await;
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
        self.transcript(text, true, false).await;
        let mut s = self.0.lock();
        if s.watching {
            s.speaking = false;
            let at_ms = Peer::ms(&s);
            let ev = MediaEvent::SpeechStopped {
                at_ms,
                hangover_ms: 0,
            };
            let _ = s.media_events.try_send(ev);
        }
    }

    async fn say_eager(&self, text: &str, more: Option<(u64, String)>) {
        let long = |t: &str| Duration::from_millis((t.chars().count() as u64 * 60).max(400));
        {
            let mut s = self.0.lock();
            let at_ms = Peer::ms(&s);
            if s.watching {
                s.speaking = true;
                let _ = s.media_events.try_send(MediaEvent::SpeechStarted { at_ms });
            }
        }
        tokio::time::sleep(long(text)).await;
        self.event(SttEvent::EagerEndOfTurn { text: text.into() })
            .await;
        let whole = match more {
            Some((after_ms, words)) => {
                tokio::time::sleep(Duration::from_millis(after_ms)).await;
                {
                    let mut s = self.0.lock();
                    let at_ms = Peer::ms(&s);
                    if s.watching {
                        s.speaking = true;
                        let _ = s.media_events.try_send(MediaEvent::SpeechStarted { at_ms });
                    }
                }
                tokio::time::sleep(RESUMED_LAG).await;
                self.event(SttEvent::TurnResumed).await;
                tokio::time::sleep(long(&words).saturating_sub(RESUMED_LAG)).await;
                format!("{text} {words}")
            }
            None => {
                tokio::time::sleep(Duration::from_millis(300)).await;
                text.to_string()
            }
        };
        self.transcript(&whole, false, true).await;
        self.transcript(&whole, true, false).await;
    }

    /// Tells the recogniser listening now, if any, `ev`.
    async fn event(&self, ev: SttEvent) {
        let tx = self.0.lock().recognizer.clone();
        if let Some(tx) = tx {
            let _ = tx.send(ev).await;
        }
    }

    /// Tells the recogniser listening now, if any, what it heard.
    async fn transcript(&self, text: &str, is_final: bool, end_of_turn: bool) {
        let at_ms = Peer::ms(&self.0.lock());
        let t = Transcript {
            text: text.to_string(),
            is_final,
            at_ms,
            end_ms: at_ms,
            node: NODE.into(),
            decision_to_final_ms: None,
            language: None,
            end_of_turn,
        };
        self.event(SttEvent::Transcript(t)).await;
    }

    /// The leg ends as `info` says (once).
    fn end(&self, info: EndInfo) {
        let mut s = self.0.lock();
        if !s.ended {
            s.ended = true;
            let _ = s.leg_events.send(LegEvent::Ended(info));
        }
    }
}

/// Ends the playing prompt as `end`.
fn end_current(s: &mut State, end: PlayEnd) {
    if let Some(c) = s.current.take() {
        let played_ms = c.frames * FRAME.as_millis() as u64;
        s.played.push(Played {
            at_ms: c.at_ms,
            played_ms,
            end,
            interruptible: c.barge_in.is_on(),
        });
        let _ = c.done.send(Playout {
            end,
            played_ms,
            first_rtp_ns: Some(callsmith_media::clock::now_ns()),
        });
    }
}

/// Starts the next queued prompt when none plays: a task sends it frame by frame.
fn start_next(shared: &Arc<Mutex<State>>, s: &mut State) {
    if s.current.is_some() {
        return;
    }
    let Some(q) = s.queue.pop_front() else {
        return;
    };
    s.generation += 1;
    let generation = s.generation;
    s.current = Some(Current {
        generation,
        barge_in: q.barge_in,
        source: q.source.clone(),
        at_ms: Peer::ms(s),
        frames: 0,
        done: q.done,
    });
    tokio::spawn(play(shared.clone(), generation, q.source));
}

/// Sends `source` a frame each 20 ms while it is the prompt playing.
async fn play(shared: Arc<Mutex<State>>, generation: u64, source: Playable) {
    let mut buf = [0i16; FRAME_SAMPLES];
    let mut frame = 0usize;
    loop {
        let sent = match &source {
            Playable::Prompt(p) if frame < p.frames() => true,
            Playable::Prompt(_) => break,
            Playable::Stream(s) => match s.take_frame(&mut buf) {
                StreamFrame::Frame => true,
                StreamFrame::Starved => false,
                StreamFrame::Finished => break,
            },
        };
        frame += 1;
        tokio::time::sleep(FRAME).await;
        let mut s = shared.lock();
        match s.current.as_mut() {
            Some(c) if c.generation == generation => c.frames += u64::from(sent),
            _ => return,
        }
    }
    let mut s = shared.lock();
    if s.current
        .as_ref()
        .is_some_and(|c| c.generation == generation)
    {
        end_current(&mut s, PlayEnd::Completed);
        start_next(&shared, &mut s);
    }
}

/// The recognition node the scripted caller's transcripts come from.
const NODE: &str = "scripted";

/// The scripted caller's leg.
pub struct FakeLeg {
    peer: Peer,
    events: mpsc::UnboundedReceiver<LegEvent>,
    refer: ReferOutcome,
    ended: bool,
}

impl FakeLeg {
    pub fn call_id(&self) -> &str {
        "scripted-call"
    }

    pub fn trunk(&self) -> &str {
        "scripted"
    }

    /// The next event; `None` after `Ended` was delivered.
    pub async fn next_event(&mut self) -> Option<LegEvent> {
        if self.ended {
            return None;
        }
        let ev = self.events.recv().await;
        self.ended = matches!(ev, Some(LegEvent::Ended(_)) | None);
        ev
    }

    /// The bot hangs up: the caller's leg ends as ours.
    pub fn hangup(&self) {
        self.peer.end(EndInfo {
            call_status: CallStatus::Answered,
            sip_code: None,
            reason: "hung up".into(),
            by: Party::Local,
        });
    }

    /// A blind transfer: as scripted.
    pub async fn refer(&self, target: &str, _headers: &[(String, String)]) -> ReferOutcome {
        self.peer.0.lock().referred.push(target.to_string());
        self.refer.clone()
    }
}

/// The scripted caller's media.
pub struct FakeMedia {
    peer: Peer,
    events: Option<MediaEvents>,
    amd: AmdDecision,
}

impl FakeMedia {
    pub fn take_events(&mut self) -> Option<MediaEvents> {
        self.events.take()
    }

    /// Queues a prompt.
    pub fn play(&self, source: Playable, barge_in: BargeIn) -> PlayHandle {
        let (done, rx) = oneshot::channel();
        let mut s = self.peer.0.lock();
        s.queue.push_back(Queued {
            source,
            barge_in,
            done,
        });
        start_next(&self.peer.0, &mut s);
        PlayHandle::new(rx)
    }

    /// Records a re-key (see [`Heard::rekeyed`]).
    pub fn rekey(&self, params: &callsmith_media::srtp::SrtpParams) {
        self.peer.0.lock().rekeyed.push(params.clone());
    }

    pub fn watch_speech(&self, on: bool) {
        let mut s = self.peer.0.lock();
        // As the media worker does: detection turned off mid-speech ends it there.
        if s.watching && !on && s.speaking {
            s.speaking = false;
            let at_ms = Peer::ms(&s);
            let _ = s.media_events.try_send(MediaEvent::SpeechUnwatched {
                at_ms,
                silence_ms: 0,
            });
        }
        s.watching = on;
    }

    /// Stops the prompt playing and the queued ones.
    pub fn stop_playout(&self) {
        let mut s = self.peer.0.lock();
        end_current(&mut s, PlayEnd::Stopped);
        for q in s.queue.drain(..) {
            let _ = q.done.send(Playout {
                end: PlayEnd::Stopped,
                played_ms: 0,
                first_rtp_ns: None,
            });
        }
    }

    /// The caller's audio: the scripted caller sends none (its speech is its transcripts).
    pub fn tap_caller_audio(&self, capacity: usize) -> AudioReceiver {
        let (tx, rx) = mpsc::channel(capacity.max(1));
        self.peer.0.lock().taps.push(tx);
        rx
    }

    /// A recognition stream of the caller's speech: the script's transcripts.
    pub fn start_stt(&self, _pool: &SttPool, _params: SttParams) -> SttStream {
        let (tx, rx) = mpsc::channel(64);
        let (finish, finished) = oneshot::channel::<()>();
        let answer = {
            let mut s = self.peer.0.lock();
            s.recognizer = Some(tx.clone());
            s.answers.pop_front()
        };
        if let Some(text) = answer {
            let peer = self.peer.clone();
            tokio::spawn(async move {
                tokio::time::sleep(ANSWER_DELAY).await;
                peer.say(&text, None).await;
            });
        }
        tokio::spawn(async move {
            if finished.await.is_ok() {
                let _ = tx.send(SttEvent::Ended).await;
            }
        });
        let node = SttNodeConfig::new(NODE, "ws://127.0.0.1:9/scripted", SttProtocol::Vosk);
        SttStream::new(node, rx, finish)
    }

    /// The script's verdict, at once.
    pub fn answering_machine(&self) -> tokio::task::JoinHandle<AmdDecision> {
        let verdict = self.amd;
        tokio::spawn(async move { verdict })
    }

    /// The media ends: the caller hears nothing more.
    pub fn close(self) -> (SessionStats, Option<RecordingInfo>) {
        self.stop_playout();
        let mut s = self.peer.0.lock();
        s.taps.clear();
        s.recognizer = None;
        (SessionStats::default(), None)
    }
}
