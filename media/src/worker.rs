//! The media worker: one OS thread, one absolute-deadline timing loop, many
//! sessions. The 20 ms period is split into `SLOTS` 1 ms slots and each
//! session lives in one slot, so a worker with 1000 sessions serves ~50 per
//! wake instead of 1000 at once (keeps send lateness flat as load grows).
//! Sessions are packed `SLOT_BATCH` to a slot before another slot is opened and
//! the loop only wakes for slots that hold sessions, so a lightly loaded worker
//! wakes a few times per period instead of every millisecond (the fixed cost
//! that dominated CPU per stream at 100 calls).
//!
//! Per session and tick: drain the sockets (non-blocking), play one caller
//! frame out of the jitter buffer (decoded only for VAD, taps and recording),
//! then send one packet: DTMF event, prompt audio or silence. Frames are at the
//! session's audio rate (its codec's, [`crate::rate::AudioRate`]): 160 samples for a
//! G.711 session, 320 for a G.722 one, whose caller audio is halved to 8 kHz for the
//! speech detector only. The RTP clock is 8000 Hz for every codec. Nothing on this
//! path allocates, except a session's decode buffer the first tick its
//! caller's audio is wanted: prompts are pre-encoded, other buffers are
//! preallocated, and every hand-off to async code is a `try_send` on a bounded
//! channel. With SRTP on (`MediaSession::set_srtp`) packets are protected in place in
//! the send buffer and unprotected into the scratch buffer (`crate::srtp`), with no
//! allocation either. Measured against plain RTP (`srtp_cost`, bench/reports/call_rate.md):
//! 1.15–1.19× the engine's CPU per call and 5–7 KiB more RSS per live call, at 300 calls/s
//! and with 1,000 live calls.

use std::collections::VecDeque;
use std::net::{SocketAddr, UdpSocket};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, TryRecvError};

use tokio::sync::oneshot;

use crate::clock::{now_ns, sleep_until_ns};
use crate::codec::{RtpCodec, StreamCodec};
use crate::dtmf::{DtmfDetector, DtmfGenerator, EventPacket};
use crate::events::{AudioFrame, BargeIn, MediaEvent, PlayEnd, Playout, SessionStats};
use crate::jitter::{JitterBuffer, Pop};
use crate::prompt::{FRAME_SAMPLES, Playable, StreamFrame};
use crate::rate::{AudioRate, MAX_FRAME_SAMPLES};
use crate::recording::RecorderTap;
use crate::rtcp::{ReceiverStats, ReportBlock, RtcpReport, SenderInfo, ntp_timestamp};
use crate::rtp::{RtpPacket, looks_like_rtcp, write_rtp_header};
use crate::srtp::SrtpContexts;
use crate::vad::{SpeechDetector, SpeechTransition, VadConfig};

/// Slots per 20 ms period.
pub(crate) const SLOTS: usize = 20;
const PERIOD_NS: u64 = 20_000_000;
const SLOT_NS: u64 = PERIOD_NS / SLOTS as u64;
/// Sessions a slot takes before the next slot is opened.
const SLOT_BATCH: usize = 16;
/// Max datagrams drained per socket per tick (bounds work under a flood).
const MAX_RX_PER_TICK: usize = 64;
/// Decoded caller samples a session at `rate` holds between ticks: `caller_frame` tops
/// them up only while below one frame, one packet (at most `MAX_PAYLOAD` codes, one or two
/// samples each) at a time.
const fn rx_pcm_capacity(rate: AudioRate) -> usize {
    (FRAME_SAMPLES + crate::jitter::MAX_PAYLOAD) * rate.factor()
}

/// Receive totals of the sources a peer used before its current one: the call's figures
/// are these plus the current source's.
#[derive(Debug, Default, Clone, Copy)]
struct PriorRx {
    received: u64,
    expected: u64,
    lost: i64,
}

impl PriorRx {
    fn fold(&mut self, rx: &ReceiverStats) {
        self.received += rx.received();
        self.expected += rx.expected();
        self.lost += rx.cumulative_lost();
    }
}

/// Session settings fixed at creation.
#[derive(Debug, Clone)]
pub(crate) struct SessionSettings {
    pub vad: Option<VadConfig>,
    pub jitter_min: usize,
    pub jitter_max: usize,
    pub rtp_timeout_ms: u64,
    pub rtcp_interval_ms: u64,
    pub dtmf_duration_ms: u32,
}

pub(crate) struct SessionInit {
    pub id: u64,
    pub rtp: UdpSocket,
    pub rtcp: UdpSocket,
    pub remote: Option<SocketAddr>,
    pub events: futures::channel::mpsc::Sender<MediaEvent>,
    pub settings: SessionSettings,
}

/// Where caller audio goes besides VAD and recording.
pub(crate) enum Tap {
    Channel(tokio::sync::mpsc::Sender<AudioFrame>),
    Stream(Arc<crate::prompt::StreamingAudio>),
}

pub(crate) enum Command {
    Add(Box<SessionInit>),
    Remove(u64, Option<oneshot::Sender<SessionStats>>),
    SetRemote {
        id: u64,
        addr: SocketAddr,
        codec: RtpCodec,
        te_pt: Option<u8>,
    },
    /// Hold media until `SetSrtp` (see `MediaSession::await_srtp`).
    AwaitSrtp(u64),
    /// SRTP on (or off) for the session's RTP and RTCP; ends an `AwaitSrtp` hold.
    SetSrtp {
        id: u64,
        contexts: Option<Box<SrtpContexts>>,
    },
    Play {
        id: u64,
        source: Playable,
        barge_in: BargeIn,
        done: oneshot::Sender<Playout>,
    },
    StopPlayout(u64),
    /// Run speech detection (see `MediaSession::watch_speech`).
    WatchSpeech {
        id: u64,
        on: bool,
    },
    SendDtmf {
        id: u64,
        digits: Vec<char>,
    },
    AddTap {
        id: u64,
        tap: Tap,
    },
    StartRecording {
        id: u64,
        tap: RecorderTap,
    },
    StopRecording {
        id: u64,
        done: oneshot::Sender<()>,
    },
    Stats(u64, oneshot::Sender<SessionStats>),
}

/// Send-lateness histogram shared with the engine (10 µs buckets up to 50 ms).
pub(crate) struct PacingStats {
    pub buckets: Vec<AtomicU64>,
    pub max_ns: AtomicU64,
    pub count: AtomicU64,
    pub cpu_ns: AtomicU64,
}

pub(crate) const BUCKET_NS: u64 = 10_000;
const BUCKETS: usize = 5000;

impl PacingStats {
    pub fn new() -> PacingStats {
        PacingStats {
            buckets: (0..BUCKETS).map(|_| AtomicU64::new(0)).collect(),
            max_ns: AtomicU64::new(0),
            count: AtomicU64::new(0),
            cpu_ns: AtomicU64::new(0),
        }
    }

    fn record(&self, lateness_ns: u64) {
        let b = ((lateness_ns / BUCKET_NS) as usize).min(BUCKETS - 1);
        self.buckets[b].fetch_add(1, Ordering::Relaxed);
        self.count.fetch_add(1, Ordering::Relaxed);
        self.max_ns.fetch_max(lateness_ns, Ordering::Relaxed);
    }
}

struct ActivePlay {
    source: Playable,
    pos: usize,
    barge_in: BargeIn,
    done: Option<oneshot::Sender<Playout>>,
    frames_played: u64,
    first_rtp_ns: Option<u64>,
}

impl ActivePlay {
    /// Whether caller speech may stop the prompt now (its [`BargeIn`] window is open).
    fn barge_in_open(&self) -> bool {
        let left_ms = match (self.barge_in, &self.source) {
            (BargeIn::Last(_), Playable::Prompt(p)) => {
                Some((p.pcm().len().saturating_sub(self.pos) / 8) as u64)
            }
            (BargeIn::Last(_), Playable::Stream(st)) => st
                .is_finished()
                .then(|| (st.buffered() / st.rate().samples_per_ms()) as u64),
            _ => None,
        };
        self.barge_in.open(self.frames_played * 20, left_ms)
    }

    fn end(&mut self, end: PlayEnd) {
        if let Some(d) = self.done.take() {
            let _ = d.send(Playout {
                end,
                played_ms: self.frames_played * 20,
                first_rtp_ns: self.first_rtp_ns,
            });
        }
    }
}

struct Session {
    id: u64,
    rtp: UdpSocket,
    rtcp: UdpSocket,
    events: futures::channel::mpsc::Sender<MediaEvent>,
    settings: SessionSettings,
    // Addressing
    remote_rtp: Option<SocketAddr>,
    remote_rtcp: Option<SocketAddr>,
    /// The address the peer's SDP named (see `on_rtp_datagram`: it always wins the latch).
    signalled_rtp: Option<SocketAddr>,
    latched: bool,
    /// The peer the RTP socket is `connect`ed to (see [`connect_final_latch`]).
    connected: Option<SocketAddr>,
    rtcp_latched: bool,
    /// The stream's codec with its encoder and decoder state.
    codec: StreamCodec,
    te_pt: Option<u8>,
    /// SRTP contexts while the call's media is protected (see `MediaSession::set_srtp`).
    srtp: Option<Box<SrtpContexts>>,
    /// Waiting for the SRTP keys: nothing is sent, nothing received counts.
    srtp_pending: bool,
    // Send state
    ssrc: u32,
    seq: u16,
    ts: u32,
    talkspurt: bool,
    packets_sent: u64,
    octets_sent: u64,
    // Receive state
    rx_stats: ReceiverStats,
    remote_ssrc: Option<u32>,
    /// Receive totals of the peer's earlier sources (see [`PriorRx`]).
    prior_rx: PriorRx,
    jb: JitterBuffer,
    /// Decoded caller samples not yet played (empty, with no buffer, until anything wants
    /// the caller's audio).
    rx_pcm: VecDeque<i16>,
    /// Caller samples popped but not decoded, not yet played (see `caller_frame`).
    rx_skipped: usize,
    last_payload_len: usize,
    dtmf_rx: DtmfDetector,
    last_rx_ns: u64,
    timeout_reported: bool,
    counters: SessionStats,
    // Playout
    current: Option<ActivePlay>,
    queue: VecDeque<ActivePlay>,
    dtmf_queue: VecDeque<char>,
    dtmf_gen: Option<DtmfGenerator>,
    dtmf_gap: u32,
    // Caller-side processing
    vad: Option<SpeechDetector>,
    /// Someone listens for speech: the detector runs (it also runs while an interruptible
    /// prompt plays, for barge-in). It is the costliest work per caller frame.
    speech_watched: bool,
    taps: Vec<Tap>,
    recorder: Option<RecorderTap>,
    // Timing
    epoch_ns: u64,
    tick: u64,
    next_rtcp_tick: u64,
}

impl Session {
    fn new(init: SessionInit, now: u64) -> Session {
        let settings = init.settings;
        let jb = JitterBuffer::new(settings.jitter_min, settings.jitter_max);
        let vad = settings.vad.map(SpeechDetector::new);
        let rtcp_ticks = (settings.rtcp_interval_ms / 20).max(1);
        Session {
            id: init.id,
            rtp: init.rtp,
            rtcp: init.rtcp,
            events: init.events,
            remote_rtp: init.remote,
            remote_rtcp: init
                .remote
                .map(|a| SocketAddr::new(a.ip(), a.port().wrapping_add(1))),
            signalled_rtp: None,
            latched: false,
            connected: None,
            rtcp_latched: false,
            codec: StreamCodec::new(RtpCodec::Pcmu),
            te_pt: Some(101),
            srtp: None,
            srtp_pending: false,
            ssrc: rand::random(),
            seq: rand::random(),
            ts: rand::random(),
            talkspurt: true,
            packets_sent: 0,
            octets_sent: 0,
            rx_stats: ReceiverStats::default(),
            remote_ssrc: None,
            prior_rx: PriorRx::default(),
            jb,
            rx_pcm: VecDeque::new(),
            rx_skipped: 0,
            last_payload_len: FRAME_SAMPLES,
            dtmf_rx: DtmfDetector::default(),
            last_rx_ns: now,
            timeout_reported: false,
            counters: SessionStats::default(),
            current: None,
            queue: VecDeque::new(),
            dtmf_queue: VecDeque::new(),
            dtmf_gen: None,
            dtmf_gap: 0,
            vad,
            speech_watched: false,
            taps: Vec::new(),
            recorder: None,
            epoch_ns: now,
            tick: 0,
            next_rtcp_tick: rtcp_ticks / 2 + 1,
            settings,
        }
    }

    fn emit(&mut self, ev: MediaEvent) {
        if self.events.try_send(ev).is_err() {
            self.counters.events_dropped += 1;
        }
    }

    fn at_ms(&self) -> u64 {
        self.tick * 20
    }

    fn stats(&self) -> SessionStats {
        let mut s = self.counters.clone();
        s.packets_sent = self.packets_sent;
        s.octets_sent = self.octets_sent;
        s.packets_received = self.prior_rx.received + self.rx_stats.received();
        s.packets_expected = self.prior_rx.expected + self.rx_stats.expected();
        s.packets_lost = self.prior_rx.lost + self.rx_stats.cumulative_lost();
        s.jitter_ms = self.rx_stats.jitter() as f64 / 8.0;
        let j = self.jb.stats();
        s.late = j.late;
        s.duplicate = j.duplicate;
        s.concealed = j.lost;
        s.jitter_target_packets = self.jb.target() as u32;
        s.remote = self.remote_rtp;
        s
    }

    fn finish_all(&mut self, end: PlayEnd) {
        if let Some(mut p) = self.current.take() {
            p.end(end);
        }
        for mut p in self.queue.drain(..) {
            p.end(end);
        }
    }
}

/// Scratch buffers owned by the worker (no per-tick allocation).
struct Scratch {
    rx: [u8; 2048],
    /// An unprotected SRTP or SRTCP packet.
    plain: [u8; 1500],
    rx_batch: RxBatch,
    tx: [[u8; 1500]; 3],
    /// This tick's caller and bot frames at the session's rate (the first 160 or 320).
    caller: [i16; MAX_FRAME_SAMPLES],
    bot: [i16; MAX_FRAME_SAMPLES],
    /// A wideband caller frame halved to 8 kHz, for the speech detector.
    narrow: [i16; FRAME_SAMPLES],
    /// One received payload, decoded (two samples per code at 16 kHz).
    decode: [i16; 2 * crate::jitter::MAX_PAYLOAD],
}

/// The sessions of one slot. Boxed (a session is about 1 KiB) so a slot's spare capacity,
/// which stays after a busy spell, costs a pointer per place instead of a session.
#[allow(clippy::vec_box)]
type Slot = Vec<Box<Session>>;

pub(crate) fn run_worker(
    rx: Receiver<Command>,
    pacing: Arc<PacingStats>,
    realtime_priority: Option<i32>,
) {
    if let Some(prio) = realtime_priority
        && let Err(rc) = crate::clock::set_realtime_priority(prio)
    {
        tracing::warn!(
            rc,
            "media worker: SCHED_FIFO refused; using normal scheduling"
        );
    }
    let mut slots: Vec<Slot> = (0..SLOTS).map(|_| Vec::new()).collect();
    let mut scratch = Box::new(Scratch {
        rx: [0; 2048],
        plain: [0; 1500],
        rx_batch: RxBatch {
            bufs: [[0; 1500]; RX_BATCH],
            meta: [(0, SocketAddr::from(([0, 0, 0, 0], 0))); RX_BATCH],
        },
        tx: [[0; 1500]; 3],
        caller: [0; MAX_FRAME_SAMPLES],
        bot: [0; MAX_FRAME_SAMPLES],
        narrow: [0; FRAME_SAMPLES],
        decode: [0; 2 * crate::jitter::MAX_PAYLOAD],
    });
    let start = now_ns();
    let mut step: u64 = 0;
    let mut cpu_last = crate::clock::thread_cpu_ns();
    loop {
        step = next_step(step, &slots);
        let mut deadline = start + step * SLOT_NS;
        sleep_until_ns(deadline);
        let woke = now_ns();
        // Fell far behind (machine stalled): skip missed slots instead of bursting.
        if woke > deadline + 5 * PERIOD_NS {
            step = (woke - start) / SLOT_NS;
            deadline = start + step * SLOT_NS;
        }
        let mut disconnected = false;
        loop {
            match rx.try_recv() {
                Ok(cmd) => handle_command(cmd, &mut slots, woke),
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => {
                    disconnected = true;
                    break;
                }
            }
        }
        if disconnected && slots.iter().all(|s| s.is_empty()) {
            break;
        }
        let slot = (step % SLOTS as u64) as usize;
        for s in slots[slot].iter_mut() {
            tick_session(s, &mut scratch, deadline, &pacing);
        }
        if step.is_multiple_of(50) {
            let cpu = crate::clock::thread_cpu_ns();
            pacing
                .cpu_ns
                .fetch_add(cpu.saturating_sub(cpu_last), Ordering::Relaxed);
            cpu_last = cpu;
        }
    }
}

/// The next step whose slot holds sessions (an idle worker wakes once per period,
/// which is also when it picks up commands such as a new session).
fn next_step<T>(step: u64, slots: &[Vec<T>]) -> u64 {
    (step + 1..=step + SLOTS as u64)
        .find(|k| !slots[(*k % SLOTS as u64) as usize].is_empty())
        .unwrap_or_else(|| (step + 1).next_multiple_of(SLOTS as u64))
}

/// Where a new session goes: the fullest slot that still has room, else an empty slot,
/// else the least loaded one.
fn slot_for_new<T>(slots: &[Vec<T>]) -> usize {
    let open = (0..SLOTS)
        .filter(|i| !slots[*i].is_empty() && slots[*i].len() < SLOT_BATCH)
        .max_by_key(|i| slots[*i].len());
    open.or_else(|| (0..SLOTS).find(|i| slots[*i].is_empty()))
        .or_else(|| (0..SLOTS).min_by_key(|i| slots[*i].len()))
        .unwrap_or(0)
}

fn find(slots: &mut [Slot], id: u64) -> Option<&mut Session> {
    slots
        .iter_mut()
        .flat_map(|s| s.iter_mut())
        .find(|s| s.id == id)
        .map(|s| &mut **s)
}

fn handle_command(cmd: Command, slots: &mut [Slot], now: u64) {
    match cmd {
        Command::Add(init) => {
            let slot = slot_for_new(slots);
            slots[slot].push(Box::new(Session::new(*init, now)));
        }
        Command::Remove(id, done) => {
            for slot in slots.iter_mut() {
                if let Some(i) = slot.iter().position(|s| s.id == id) {
                    let mut s = slot.swap_remove(i);
                    s.finish_all(PlayEnd::Stopped);
                    if let Some(d) = done {
                        let _ = d.send(s.stats());
                    }
                    return;
                }
            }
        }
        Command::SetRemote {
            id,
            addr,
            codec,
            te_pt,
        } => {
            if let Some(s) = find(slots, id) {
                if s.codec.codec() != codec {
                    // Decoded samples of the old codec may be at another rate.
                    if s.codec.rate() != codec.audio_rate() {
                        s.rx_pcm.clear();
                        s.rx_skipped = 0;
                    }
                    s.codec = StreamCodec::new(codec);
                }
                s.te_pt = te_pt;
                s.signalled_rtp = Some(addr);
                // A latch made before the peer's address was known may be a stale stream
                // aimed at this recycled port: start over from the signalled address. A
                // socket connected to the old peer would not hear the new one.
                if s.latched && s.remote_rtp != Some(addr) {
                    s.latched = false;
                    disconnect(s);
                }
                if !s.latched {
                    s.remote_rtp = Some(addr);
                }
                if !s.rtcp_latched {
                    s.remote_rtcp = Some(SocketAddr::new(addr.ip(), addr.port().wrapping_add(1)));
                }
                // The peer may have latched first, from where it now says it sends.
                connect_final_latch(s);
            }
        }
        Command::AwaitSrtp(id) => {
            if let Some(s) = find(slots, id) {
                s.srtp_pending = true;
            }
        }
        Command::SetSrtp { id, contexts } => {
            if let Some(s) = find(slots, id) {
                s.srtp = match (contexts, s.srtp.take()) {
                    // A re-key: the counters run on, the peer's old key serves late packets.
                    (Some(mut new), Some(old)) => {
                        new.continue_from(*old);
                        Some(new)
                    }
                    (contexts, _) => contexts,
                };
                s.srtp_pending = false;
            }
        }
        Command::Play {
            id,
            source,
            barge_in,
            done,
        } => {
            let play = ActivePlay {
                source,
                pos: 0,
                barge_in,
                done: Some(done),
                frames_played: 0,
                first_rtp_ns: None,
            };
            match find(slots, id) {
                Some(s) if s.current.is_none() => s.current = Some(play),
                Some(s) => s.queue.push_back(play),
                None => {
                    let mut play = play;
                    play.end(PlayEnd::Stopped);
                }
            }
        }
        Command::WatchSpeech { id, on } => {
            if let Some(s) = find(slots, id) {
                s.speech_watched = on;
                // Unless a prompt's barge-in keeps it running, detection stops here: speech
                // it was hearing ends now, with the silence it had counted.
                let barge_in = s.current.as_ref().is_some_and(|p| p.barge_in.is_on());
                if !on && !barge_in {
                    let ended = s.vad.as_mut().and_then(SpeechDetector::end_speech);
                    if let Some(silence_ms) = ended {
                        let at_ms = s.at_ms();
                        s.emit(MediaEvent::SpeechUnwatched { at_ms, silence_ms });
                    }
                }
            }
        }
        Command::StopPlayout(id) => {
            if let Some(s) = find(slots, id) {
                s.finish_all(PlayEnd::Stopped);
            }
        }
        Command::SendDtmf { id, digits } => {
            if let Some(s) = find(slots, id) {
                s.dtmf_queue.extend(digits);
            }
        }
        Command::AddTap { id, tap } => {
            if let Some(s) = find(slots, id) {
                s.taps.push(tap);
            }
        }
        Command::StartRecording { id, tap } => {
            if let Some(s) = find(slots, id) {
                s.recorder = Some(tap);
            }
        }
        Command::StopRecording { id, done } => {
            if let Some(s) = find(slots, id) {
                s.recorder = None;
            }
            let _ = done.send(());
        }
        Command::Stats(id, done) => {
            if let Some(s) = find(slots, id) {
                let _ = done.send(s.stats());
            }
        }
    }
}

fn tick_session(s: &mut Session, sc: &mut Scratch, deadline: u64, pacing: &PacingStats) {
    let now = now_ns();
    receive(s, sc, now);
    // VAD and barge-in, while anything depends on them.
    // Detection runs through a prompt speech may stop, its window open or not yet: speech
    // that starts before the window opens interrupts once it is long enough inside it.
    let may_barge_in = s.current.as_ref().is_some_and(|p| p.barge_in.is_on());
    let barge_in = s.current.as_ref().is_some_and(ActivePlay::barge_in_open);
    let detect = s.vad.is_some() && (s.speech_watched || may_barge_in);
    caller_frame(s, sc, detect || !s.taps.is_empty() || s.recorder.is_some());
    let at_ms = s.at_ms();
    let rate = s.codec.rate();
    let frame = rate.frame_samples();

    if let Some(vad) = s.vad.as_mut().filter(|_| detect) {
        // The detector is tuned for 8 kHz frames.
        let narrow = match rate {
            AudioRate::Narrow => &sc.caller[..FRAME_SAMPLES],
            AudioRate::Wide => {
                crate::rate::decimate_2x(&sc.caller[..frame], &mut sc.narrow);
                &sc.narrow[..]
            }
        };
        let transition = vad.push(narrow);
        let hangover_ms = vad.hangover_ms();
        // Speech interrupts once it has lasted `barge_in_min_ms`; shorter speech that ends
        // while an interruptible prompt plays is a backchannel.
        let interrupts = barge_in && vad.barges_in();
        match transition {
            Some(SpeechTransition::Started) => s.emit(MediaEvent::SpeechStarted { at_ms }),
            Some(SpeechTransition::Stopped) => {
                if barge_in {
                    s.counters.backchannels += 1;
                }
                s.emit(MediaEvent::SpeechStopped { at_ms, hangover_ms });
            }
            None => {}
        }
        if interrupts {
            if let Some(mut p) = s.current.take() {
                p.end(PlayEnd::Interrupted);
            }
            // Queued prompts after an interrupted one are dropped too (the caller took the turn).
            for mut p in s.queue.drain(..) {
                p.end(PlayEnd::Interrupted);
            }
        }
    }

    // Caller audio taps, in 160-sample frames (two a tick at 16 kHz); closed receivers
    // are removed.
    if !s.taps.is_empty() {
        let mut dropped = 0;
        let caller = &sc.caller[..frame];
        s.taps.retain(|t| match t {
            Tap::Channel(tx) => {
                for (i, chunk) in caller.chunks_exact(FRAME_SAMPLES).enumerate() {
                    let mut f = AudioFrame {
                        pcm: [0; FRAME_SAMPLES],
                        at_ms: at_ms + (i * 20 / rate.factor()) as u64,
                        rate,
                    };
                    f.pcm.copy_from_slice(chunk);
                    match tx.try_send(f) {
                        Ok(()) => {}
                        Err(tokio::sync::mpsc::error::TrySendError::Full(_)) => dropped += 1,
                        Err(tokio::sync::mpsc::error::TrySendError::Closed(_)) => return false,
                    }
                }
                true
            }
            Tap::Stream(st) => {
                st.push_from(caller, rate);
                Arc::strong_count(st) > 1 && !st.is_finished()
            }
        });
        s.counters.tap_frames_dropped += dropped;
    }

    send_tick(s, sc, deadline, pacing);

    if let Some(r) = &s.recorder {
        r.push(rate, &sc.caller, &sc.bot);
    }

    if s.tick >= s.next_rtcp_tick {
        send_rtcp(s, sc);
        s.next_rtcp_tick = s.tick + (s.settings.rtcp_interval_ms / 20).max(1);
    }

    if !s.timeout_reported
        && s.settings.rtp_timeout_ms > 0
        && now.saturating_sub(s.last_rx_ns) > s.settings.rtp_timeout_ms * 1_000_000
    {
        s.timeout_reported = true;
        s.emit(MediaEvent::RtpTimeout { at_ms });
    }
    s.tick += 1;
    s.ts = s.ts.wrapping_add(FRAME_SAMPLES as u32);
}

fn receive(s: &mut Session, sc: &mut Scratch, now: u64) {
    let mut got = 0;
    while got < MAX_RX_PER_TICK {
        // One recvmmsg drains up to RX_BATCH datagrams (one syscall when the socket is empty).
        let n = recv_batch(&s.rtp, &mut sc.rx_batch);
        for i in 0..n {
            let (len, from) = sc.rx_batch.meta[i];
            on_rtp_datagram(s, &sc.rx_batch.bufs[i][..len], from, now, &mut sc.plain);
        }
        got += n;
        if n < RX_BATCH {
            break;
        }
    }
    // RTCP is rare: poll its socket every 10th tick.
    if s.tick.is_multiple_of(10) {
        for _ in 0..8 {
            let (n, from) = match s.rtcp.recv_from(&mut sc.rx) {
                Ok(v) => v,
                Err(_) => break,
            };
            if !s.rtcp_latched {
                s.rtcp_latched = true;
                s.remote_rtcp = Some(from);
            }
            on_rtcp(s, &sc.rx[..n], now, &mut sc.plain);
        }
    }
}

fn on_rtp_datagram(
    s: &mut Session,
    buf: &[u8],
    from: SocketAddr,
    now: u64,
    plain: &mut [u8; 1500],
) {
    if s.srtp_pending {
        s.counters.srtp_dropped += 1;
        return;
    }
    {
        // Symmetric RTP latches to the first source, but the address the SDP signalled
        // always wins: a stale stream still aimed at a recycled port can hold the latch
        // only until the real peer's first packet arrives from where it said it would.
        if s.latched && s.remote_rtp != Some(from) {
            if s.signalled_rtp == Some(from) && RtpPacket::parse(buf).is_ok() {
                s.latched = false;
            } else {
                s.counters.foreign_packets += 1;
                return;
            }
        }
        if looks_like_rtcp(buf) {
            on_rtcp(s, buf, now, plain);
            return;
        }
        // With SRTP, only an authenticated packet counts (and may take the latch).
        let buf = match s.srtp.as_mut() {
            Some(ctx) => match ctx.unprotect_rtp(buf, plain) {
                Ok(n) => &plain[..n],
                Err(_) => {
                    s.counters.srtp_dropped += 1;
                    return;
                }
            },
            None => buf,
        };
        let pkt = match RtpPacket::parse(buf) {
            Ok(p) => p,
            Err(_) => {
                s.counters.malformed_rtp += 1;
                return;
            }
        };
        // Symmetric RTP: the first valid packet's source becomes the send target.
        if !s.latched {
            s.latched = true;
            if s.remote_rtp != Some(from) {
                s.remote_rtp = Some(from);
                if !s.rtcp_latched {
                    s.remote_rtcp = Some(SocketAddr::new(from.ip(), from.port().wrapping_add(1)));
                }
            }
            connect_final_latch(s);
            let at_ms = s.at_ms();
            if s.events
                .try_send(MediaEvent::RemoteLatched { addr: from, at_ms })
                .is_err()
            {
                s.counters.events_dropped += 1;
            }
        }
        s.last_rx_ns = now;
        s.timeout_reported = false;
        let arrival = ((now - s.epoch_ns) / 125_000) as u32; // 8 kHz units
        if s.remote_ssrc != Some(pkt.ssrc) {
            if s.remote_ssrc.is_some() {
                // A new source: its sequence and timing start afresh (a jump of sequence
                // numbers is no loss), while the call's totals keep what came before.
                s.prior_rx.fold(&s.rx_stats);
                s.rx_stats = ReceiverStats::default();
                s.jb.restart();
                s.counters.ssrc_changes += 1;
            }
            s.remote_ssrc = Some(pkt.ssrc);
        }
        if Some(pkt.payload_type) == s.te_pt {
            s.rx_stats.on_packet(pkt.sequence, pkt.timestamp, arrival);
            match s.dtmf_rx.on_packet(pkt.timestamp, pkt.payload) {
                Ok(Some(d)) => {
                    let at_ms = s.at_ms();
                    s.emit(MediaEvent::Dtmf {
                        digit: d.digit,
                        duration_ms: d.duration as u32 / 8,
                        at_ms,
                    });
                }
                Ok(None) => {}
                Err(_) => s.counters.malformed_rtp += 1,
            }
        } else if RtpCodec::from_payload_type(pkt.payload_type) == Some(s.codec.codec()) {
            s.rx_stats.on_packet(pkt.sequence, pkt.timestamp, arrival);
            s.jb.insert(pkt.sequence, pkt.payload);
            s.jb.set_jitter(s.rx_stats.jitter(), FRAME_SAMPLES as u32);
        } else if pkt.payload_type == 13 {
            // Comfort noise: keep the stream alive, play silence.
            s.rx_stats.on_packet(pkt.sequence, pkt.timestamp, arrival);
        } else {
            s.counters.unknown_payload_type += 1;
        }
    }
}

fn on_rtcp(s: &mut Session, buf: &[u8], now: u64, plain: &mut [u8; 1500]) {
    if s.srtp_pending {
        s.counters.srtp_dropped += 1;
        return;
    }
    let buf = match s.srtp.as_mut() {
        Some(ctx) => match ctx.unprotect_rtcp(buf, plain) {
            Ok(n) => &plain[..n],
            Err(_) => {
                s.counters.srtp_dropped += 1;
                return;
            }
        },
        None => buf,
    };
    match RtcpReport::parse(buf) {
        Ok(r) => {
            s.counters.rtcp_received += 1;
            if let Some(si) = r.sender_info {
                s.rx_stats
                    .on_sender_report(si.ntp_timestamp, now / 1_000_000);
            }
            if let Some(b) = r.blocks().iter().find(|b| b.ssrc == s.ssrc) {
                s.counters.remote_fraction_lost = b.fraction_lost as f64 / 256.0;
                s.counters.remote_cumulative_lost = b.cumulative_lost as i64;
                s.counters.remote_jitter_ms = b.jitter as f64 / 8.0;
            }
        }
        Err(_) => s.counters.malformed_rtcp += 1,
    }
}

/// Fills `sc.caller` with this tick's caller audio (silence when none). The jitter buffer
/// gives up one frame's worth of packets every tick either way, but they are decoded only
/// while something takes the audio (`wanted`: speech detection, a tap, the recorder): a
/// DTMF-only bot neither decodes nor holds the decode buffer, which is allocated the first
/// tick anything wants the audio. Undecoded samples are counted in `rx_skipped`, so
/// playout keeps its place.
fn caller_frame(s: &mut Session, sc: &mut Scratch, wanted: bool) {
    let rate = s.codec.rate();
    let k = rate.factor();
    let frame = rate.frame_samples();
    if wanted {
        let capacity = rx_pcm_capacity(rate);
        if s.rx_pcm.capacity() < capacity {
            s.rx_pcm.reserve_exact(capacity - s.rx_pcm.len());
        }
        // Samples skipped while nothing wanted them: their remainder plays as silence.
        if s.rx_skipped > 0 {
            s.rx_pcm.extend(std::iter::repeat_n(0i16, s.rx_skipped));
            s.rx_skipped = 0;
        }
    }
    let mut guard = 0;
    while s.rx_pcm.len() + s.rx_skipped < frame && guard < 8 {
        guard += 1;
        // `n`: the samples the payload stands for at the session's rate.
        let (payload, n) = match s.jb.pop() {
            Pop::Frame(p) => {
                s.last_payload_len = p.len().max(1);
                (Some(p), p.len() * k)
            }
            Pop::Lost => (None, s.last_payload_len * k),
            Pop::Empty => break,
        };
        if !wanted {
            // An adaptive decoder must see every payload to stay in step with the sender.
            if let Some(p) = payload.filter(|_| s.codec.decodes_with_state()) {
                s.codec.decode(p, &mut sc.decode[..n]);
            }
            s.rx_skipped += n;
        } else if s.rx_pcm.len() + n <= s.rx_pcm.capacity() {
            match payload {
                Some(p) => {
                    let out = &mut sc.decode[..n];
                    s.codec.decode(p, out);
                    s.rx_pcm.extend(out.iter().copied());
                }
                None => s.rx_pcm.extend(std::iter::repeat_n(0i16, n)),
            }
        }
    }
    let caller = &mut sc.caller[..frame];
    if !wanted {
        caller.fill(0);
        if s.rx_pcm.len() + s.rx_skipped >= frame {
            let from_pcm = s.rx_pcm.len().min(frame);
            s.rx_pcm.drain(..from_pcm);
            s.rx_skipped -= frame - from_pcm;
        }
    } else if s.rx_pcm.len() >= frame {
        for (o, v) in caller.iter_mut().zip(s.rx_pcm.drain(..frame)) {
            *o = v;
        }
    } else {
        caller.fill(0);
    }
}

fn send_tick(s: &mut Session, sc: &mut Scratch, deadline: u64, pacing: &PacingStats) {
    sc.bot.fill(0);
    let Some(remote) = s.remote_rtp.filter(|_| !s.srtp_pending) else {
        advance_playout_without_sending(s, sc);
        return;
    };
    // DTMF takes the stream while a digit lasts (prompt playout pauses).
    if s.dtmf_gen.is_none()
        && s.dtmf_gap == 0
        && let (Some(d), Some(_)) = (s.dtmf_queue.front().copied(), s.te_pt)
    {
        s.dtmf_queue.pop_front();
        let dur = (s.settings.dtmf_duration_ms * 8).min(u16::MAX as u32) as u16;
        s.dtmf_gen = DtmfGenerator::new(d, s.ts, dur).ok();
    }
    if let (Some(g), Some(te)) = (s.dtmf_gen.as_mut(), s.te_pt) {
        let mut evs = [EventPacket {
            marker: false,
            timestamp: 0,
            payload: [0; 4],
        }; 3];
        let n = g.next_tick(&mut evs);
        let done = g.is_done();
        let mut lens = [0usize; 3];
        for (i, ev) in evs[..n].iter().enumerate() {
            let seq = s.seq;
            s.seq = s.seq.wrapping_add(1);
            let buf = &mut sc.tx[i];
            if write_rtp_header(buf, ev.marker, te, seq, ev.timestamp, s.ssrc).is_ok() {
                buf[12..16].copy_from_slice(&ev.payload);
                lens[i] = protect_rtp(&mut s.srtp, buf, 16);
            }
        }
        let sent = send_batch(&s.rtp, &sc.tx, &lens[..n], remote);
        pacing.record(now_ns().saturating_sub(deadline));
        s.packets_sent += sent as u64;
        s.octets_sent += 4 * sent as u64;
        if done {
            s.dtmf_gen = None;
            s.dtmf_gap = 3; // 60 ms between digits
            s.talkspurt = true;
        }
        return;
    }
    if s.dtmf_gap > 0 {
        s.dtmf_gap -= 1;
    }

    let pt = s.codec.codec().payload_type();
    let payload = &mut sc.tx[0][12..12 + FRAME_SAMPLES];
    let first_of_play = fill_bot_frame(s, payload, &mut sc.bot);
    // Marker: first packet of the stream, after a DTMF event, and the first frame of each prompt.
    let marker = s.talkspurt || first_of_play;
    s.talkspurt = false;
    let buf = &mut sc.tx[0];
    if write_rtp_header(buf, marker, pt, s.seq, s.ts, s.ssrc).is_err() {
        return;
    }
    s.seq = s.seq.wrapping_add(1);
    let len = protect_rtp(&mut s.srtp, buf, 12 + FRAME_SAMPLES);
    pacing.record(now_ns().saturating_sub(deadline));
    if len > 0 && send_rtp(s, &buf[..len], remote) {
        s.packets_sent += 1;
        s.octets_sent += FRAME_SAMPLES as u64;
        if first_of_play && let Some(p) = s.current.as_mut() {
            p.first_rtp_ns.get_or_insert_with(now_ns);
        }
    } else {
        s.counters.send_errors += 1;
    }
}

/// The length of the RTP packet in `buf[..len]` as it goes out: protected in place with
/// SRTP on, as it is otherwise; 0 when protection failed (the packet is not sent).
fn protect_rtp(srtp: &mut Option<Box<SrtpContexts>>, buf: &mut [u8], len: usize) -> usize {
    match srtp {
        Some(ctx) => ctx.protect_rtp(buf, len).unwrap_or(0),
        None => len,
    }
}

/// Sends one RTP datagram to `remote`, through the connected socket when it is connected to
/// it. A connected socket reports the peer's ICMP port-unreachable as `ECONNREFUSED` on its
/// next send or receive, which then moves no datagram. Each tick reads before it sends, so
/// the receive usually meets it (`recv_batch`); one that arrives between the two fails the
/// send, and reporting it cleared it, so the datagram is sent once more, as an unconnected
/// socket would have sent it.
fn send_rtp(s: &Session, datagram: &[u8], remote: SocketAddr) -> bool {
    if s.connected != Some(remote) {
        return s.rtp.send_to(datagram, remote).is_ok();
    }
    match s.rtp.send(datagram) {
        Ok(_) => true,
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => s.rtp.send(datagram).is_ok(),
        Err(_) => false,
    }
}

/// Connects the RTP socket to its peer once the latch is final: held by the address the
/// peer's SDP signalled, which no other source can take from it (`on_rtp_datagram`). The
/// kernel then routes the session's sends once instead of per datagram, and drops datagrams
/// from other sources before they are queued (they are no longer counted as
/// `foreign_packets`). A latch on any other source stays unconnected: the signalled peer
/// may still take it over.
///
/// A socket bound to the unspecified address stays unconnected too: connecting it would
/// also pin the local address it receives on to the route's source address towards the
/// peer, and on a host with several addresses the peer's datagrams may arrive on another.
fn connect_final_latch(s: &mut Session) {
    if s.connected.is_some() || !s.latched || s.remote_rtp != s.signalled_rtp {
        return;
    }
    if s.rtp.local_addr().is_ok_and(|a| a.ip().is_unspecified()) {
        return;
    }
    if let Some(peer) = s.remote_rtp
        && s.rtp.connect(peer).is_ok()
    {
        s.connected = Some(peer);
    }
}

/// Undoes [`connect_final_latch`] (a new signalled address): the socket hears every source
/// again and keeps its local port, which `bind` fixed.
fn disconnect(s: &mut Session) {
    if s.connected.is_none() {
        return;
    }
    use std::os::fd::AsRawFd;
    // SAFETY: a zeroed sockaddr with family AF_UNSPEC is what connect(2) takes to dissolve
    // a datagram socket's association; the pointer and length describe that local value.
    let rc = unsafe {
        let mut unspec: libc::sockaddr = std::mem::zeroed();
        unspec.sa_family = libc::AF_UNSPEC as libc::sa_family_t;
        libc::connect(
            s.rtp.as_raw_fd(),
            &unspec,
            std::mem::size_of::<libc::sockaddr>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        s.connected = None;
    } else {
        tracing::warn!(
            session = s.id,
            error = %std::io::Error::last_os_error(),
            "media: could not disconnect an RTP socket from its old peer"
        );
    }
}

/// Without a remote the playout clock still runs (prompts advance, handles complete).
fn advance_playout_without_sending(s: &mut Session, sc: &mut Scratch) {
    let mut scratch = [0u8; FRAME_SAMPLES];
    let _ = fill_bot_frame(s, &mut scratch, &mut sc.bot);
}

/// Produces the bot's next frame: encoded into `payload`, linear into `bot` (its first
/// 160 or 320 samples, at the session's rate).
/// Returns true when the frame is the first one of a playback (a talkspurt start).
fn fill_bot_frame(s: &mut Session, payload: &mut [u8], bot: &mut [i16; MAX_FRAME_SAMPLES]) -> bool {
    let rate = s.codec.rate();
    let bot = &mut bot[..rate.frame_samples()];
    loop {
        let Some(play) = s.current.as_mut() else {
            s.codec.encode_silence(payload);
            bot.fill(0);
            return false;
        };
        let first = play.frames_played == 0;
        match &play.source {
            Playable::Prompt(p) => {
                // `pos` counts the prompt's 8 kHz samples.
                if play.pos + FRAME_SAMPLES <= p.pcm().len() {
                    p.frame_into(play.pos, rate, bot);
                    s.codec.encode_prompt(p, play.pos, bot, payload);
                    play.pos += FRAME_SAMPLES;
                    play.frames_played += 1;
                    return first;
                }
            }
            Playable::Stream(st) => match st.take_frame_as(rate, bot) {
                StreamFrame::Frame => {
                    s.codec.encode(bot, payload);
                    play.frames_played += 1;
                    return first;
                }
                StreamFrame::Starved => {
                    s.codec.encode_silence(payload);
                    bot.fill(0);
                    return false;
                }
                StreamFrame::Finished => {}
            },
        }
        // Current source is exhausted: complete it and start the next one.
        if let Some(mut done) = s.current.take() {
            done.end(PlayEnd::Completed);
        }
        s.current = s.queue.pop_front();
    }
}

/// Sends several datagrams to one peer; sendmmsg when more than one.
fn send_batch(sock: &UdpSocket, bufs: &[[u8; 1500]; 3], lens: &[usize], to: SocketAddr) -> usize {
    if lens.len() == 1 {
        return usize::from(sock.send_to(&bufs[0][..lens[0]], to).is_ok());
    }
    use std::os::fd::AsRawFd;
    let addr = socket2::SockAddr::from(to);
    let mut iov: [libc::iovec; 3] = [libc::iovec {
        iov_base: std::ptr::null_mut(),
        iov_len: 0,
    }; 3];
    // SAFETY: zeroed mmsghdr is a valid "empty" value (null pointers, zero lengths).
    let mut msgs: [libc::mmsghdr; 3] = unsafe { std::mem::zeroed() };
    let n = lens.len().min(3);
    for i in 0..n {
        iov[i] = libc::iovec {
            iov_base: bufs[i].as_ptr() as *mut libc::c_void,
            iov_len: lens[i],
        };
    }
    for i in 0..n {
        msgs[i].msg_hdr.msg_name = addr.as_ptr() as *mut libc::c_void;
        msgs[i].msg_hdr.msg_namelen = addr.len();
        msgs[i].msg_hdr.msg_iov = &mut iov[i];
        msgs[i].msg_hdr.msg_iovlen = 1;
    }
    // SAFETY: msgs/iov/addr outlive the call; each msg points at one valid iovec and a valid sockaddr.
    let rc = unsafe { libc::sendmmsg(sock.as_raw_fd(), msgs.as_mut_ptr(), n as libc::c_uint, 0) };
    if rc < 0 { 0 } else { rc as usize }
}

fn send_rtcp(s: &mut Session, sc: &mut Scratch) {
    let Some(to) = s.remote_rtcp.filter(|_| !s.srtp_pending) else {
        return;
    };
    let now_ms = now_ns() / 1_000_000;
    let mut blocks = [ReportBlock::default(); 4];
    let mut count = 0;
    if let Some(remote_ssrc) = s.remote_ssrc {
        blocks[0] = s.rx_stats.report_block(remote_ssrc, now_ms);
        count = 1;
    }
    let report = RtcpReport {
        ssrc: s.ssrc,
        sender_info: (s.packets_sent > 0).then(|| SenderInfo {
            ntp_timestamp: ntp_timestamp(std::time::SystemTime::now()),
            rtp_timestamp: s.ts,
            packet_count: s.packets_sent as u32,
            octet_count: s.octets_sent as u32,
        }),
        blocks,
        block_count: count,
    };
    if let Ok(n) = report.write(&mut sc.tx[0])
        && let Ok(n) = match s.srtp.as_mut() {
            Some(ctx) => ctx.protect_rtcp(&mut sc.tx[0], n),
            None => Ok(n),
        }
        && s.rtcp.send_to(&sc.tx[0][..n], to).is_ok()
    {
        s.counters.rtcp_sent += 1;
    }
}

const RX_BATCH: usize = 8;

/// Receive buffers for one recvmmsg call.
struct RxBatch {
    bufs: [[u8; 1500]; RX_BATCH],
    /// Length and source of each datagram received.
    meta: [(usize, SocketAddr); RX_BATCH],
}

/// Non-blocking recvmmsg into `b`; returns how many datagrams arrived (0 on WouldBlock or error).
fn recv_batch(sock: &UdpSocket, b: &mut RxBatch) -> usize {
    use std::os::fd::AsRawFd;
    // SAFETY: all-zero is a valid value for these plain C structs.
    let mut names: [libc::sockaddr_storage; RX_BATCH] = unsafe { std::mem::zeroed() };
    let mut iov: [libc::iovec; RX_BATCH] = [libc::iovec {
        iov_base: std::ptr::null_mut(),
        iov_len: 0,
    }; RX_BATCH];
    // SAFETY: as above.
    let mut msgs: [libc::mmsghdr; RX_BATCH] = unsafe { std::mem::zeroed() };
    for i in 0..RX_BATCH {
        iov[i] = libc::iovec {
            iov_base: b.bufs[i].as_mut_ptr() as *mut libc::c_void,
            iov_len: b.bufs[i].len(),
        };
        msgs[i].msg_hdr.msg_name = &mut names[i] as *mut _ as *mut libc::c_void;
        msgs[i].msg_hdr.msg_namelen =
            std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
        msgs[i].msg_hdr.msg_iov = &mut iov[i];
        msgs[i].msg_hdr.msg_iovlen = 1;
    }
    let mut receive = || {
        // SAFETY: every mmsghdr points at a live iovec/buffer and sockaddr_storage owned by
        // this frame.
        unsafe {
            libc::recvmmsg(
                sock.as_raw_fd(),
                msgs.as_mut_ptr(),
                RX_BATCH as libc::c_uint,
                libc::MSG_DONTWAIT,
                std::ptr::null_mut(),
            )
        }
    };
    let mut rc = receive();
    // A connected socket reports the peer's ICMP port-unreachable here instead of the
    // datagrams; reporting clears it, so read again rather than leave them for a tick.
    if rc < 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ECONNREFUSED) {
        rc = receive();
    }
    if rc <= 0 {
        return 0;
    }
    let n = rc as usize;
    for i in 0..n {
        let from = sockaddr_to_std(&names[i]).unwrap_or(SocketAddr::from(([0, 0, 0, 0], 0)));
        b.meta[i] = ((msgs[i].msg_len as usize).min(b.bufs[i].len()), from);
    }
    n
}

fn sockaddr_to_std(ss: &libc::sockaddr_storage) -> Option<SocketAddr> {
    match ss.ss_family as libc::c_int {
        libc::AF_INET => {
            // SAFETY: the family says this storage holds a sockaddr_in.
            let a: &libc::sockaddr_in = unsafe { &*(ss as *const _ as *const libc::sockaddr_in) };
            Some(SocketAddr::from((
                u32::from_be(a.sin_addr.s_addr).to_be_bytes(),
                u16::from_be(a.sin_port),
            )))
        }
        libc::AF_INET6 => {
            // SAFETY: the family says this storage holds a sockaddr_in6.
            let a: &libc::sockaddr_in6 = unsafe { &*(ss as *const _ as *const libc::sockaddr_in6) };
            Some(SocketAddr::from((
                a.sin6_addr.s6_addr,
                u16::from_be(a.sin6_port),
            )))
        }
        _ => None,
    }
}

#[cfg(test)]
mod slot_tests {
    use super::*;

    fn slots_with(lens: &[(usize, usize)]) -> Vec<Vec<u8>> {
        let mut s: Vec<Vec<u8>> = (0..SLOTS).map(|_| Vec::new()).collect();
        for (slot, n) in lens {
            s[*slot] = vec![0; *n];
        }
        s
    }

    #[test]
    fn new_sessions_fill_one_slot_before_opening_another() {
        let mut s = slots_with(&[]);
        for _ in 0..SLOT_BATCH {
            let k = slot_for_new(&s);
            s[k].push(0);
        }
        assert_eq!(s.iter().filter(|v| !v.is_empty()).count(), 1);
        let k = slot_for_new(&s);
        assert!(s[k].is_empty(), "a full slot opens the next one");
        // Every slot full: the least loaded takes it (balanced as before).
        let full = slots_with(&(0..SLOTS).map(|i| (i, SLOT_BATCH + i)).collect::<Vec<_>>());
        assert_eq!(slot_for_new(&full), 0);
    }

    #[test]
    fn the_loop_wakes_only_for_slots_with_sessions() {
        let s = slots_with(&[(3, 1), (7, 2)]);
        assert_eq!(next_step(0, &s), 3);
        assert_eq!(next_step(3, &s), 7);
        assert_eq!(next_step(7, &s), 23, "wraps into the next period");
        let idle = slots_with(&[]);
        assert_eq!(next_step(5, &idle), 20, "idle: once per period");
        assert_eq!(next_step(20, &idle), 40);
    }
}
