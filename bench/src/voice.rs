//! The speech turn of the `voice_turn` bench: the phrases the callee speaks (flite, a voice
//! other than the bot's Piper), the scenario that asks for them, and the callee itself, a
//! SIP UAS on the workspace's own stack that measures the bot's response on the wire.
//!
//! Per call the callee answers, lets the bot ask its question (audio, then
//! [`QUESTION_DONE_SILENCE_MS`] of silence), speaks its phrase (chosen by the called number)
//! and timestamps the RTP packet carrying the phrase's last voiced frame (its end of speech)
//! and the first voiced packet of the bot's reply after it. Silence is sent otherwise, until
//! the bot hangs up.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use callsmith_media::g711::Codec;
use callsmith_sip::{LegEvent, LocalMedia, SdpCodec, SipConfig, SipStack, TrunkConfig};
use serde_json::{Value, json};

/// The caller's answers: text, and the branch of the question it should take.
pub const PHRASES: &[(&str, &str)] = &[
    ("yes please", "yes"),
    ("no thanks", "no"),
    ("sure, call me back", "yes"),
    ("not today", "no"),
    ("yeah that works", "yes"),
    ("no, too busy", "no"),
    ("maybe tomorrow", "other"),
    ("what is this about", "other"),
    ("yes, in the afternoon", "yes"),
    ("never call again", "no"),
    ("I already paid", "other"),
    ("sure thing", "yes"),
];

/// The caller's answers with a pause inside (the paused set): first words, the pause in
/// ms (300–800, a person thinking mid-sentence), the rest, and the branch the whole answer
/// takes. A bot that replies in the pause talks over the caller: a false cut-off.
pub const PAUSED_PHRASES: &[(&str, u64, &str, &str)] = &[
    ("I'd like to", 500, "maybe next week", "other"),
    ("my number is", 700, "five five five, one two", "other"),
    ("yes", 400, "but only in the afternoon", "yes"),
    ("well", 600, "not today thanks", "no"),
    ("sure", 300, "call me back tomorrow", "yes"),
    ("hmm", 800, "what is this about", "other"),
    ("no", 450, "I am not interested", "no"),
    ("yeah", 650, "that would be fine", "yes"),
];

/// Silence after the bot's question that tells the callee the question is over.
pub const QUESTION_DONE_SILENCE_MS: u64 = 700;

/// A 20 ms frame whose RMS is at least this carries voice (about -47 dBFS).
const VOICED_RMS: f64 = 150.0;

/// The scenario: "Would you like a callback?" by speech (Whisper through the default
/// recognition engine, Piper through the default synthesizer); yes, no and anything else
/// each get a spoken reply (the reply whose first packet ends the turn), then a goal and
/// the end of the call. No input: goal `silent`, no reply.
pub fn scenario() -> Value {
    let goal = |id: &str, g: &str| {
        json!({"id": id, "description": "", "properties": {"goal": g},
        "outputs": [{"type": "next", "description": "", "next": "bye"}]})
    };
    let reply = |id: &str, text: &str, next: &str| {
        json!({"id": id, "description": "", "properties": {"text": text, "language": "", "voice": "", "engine": "", "model": ""},
        "outputs": [{"type": "next", "description": "", "next": next}]})
    };
    json!({"name": "voice turn", "constructor": {"bricks": {
        "start_call": {"v1": [{"id": "s", "description": "", "properties": {
            "tts_general": {"engine": "", "voice": "", "language": "en-US", "speed": 1, "model": ""},
            "stt_general": {"language": "en-US", "engine": "whisper", "model": "", "primary_language": "", "fallback_languages": []}},
            "outputs": [{"type": "next", "description": "", "next": "ask"}]}]},
        "question": {"v1": [{"id": "ask", "description": "", "properties": {
            "stt_properties": {"no_input_timeout": 10, "speech_timeout": 1},
            "statement": {"audio": {"mode": "tts", "tts": {"text": "Would you like a callback?"}}, "is_interruptible": false},
            "type": "standard",
            "input_mode": "speech",
            "answer": {"answers": [
                {"answer_id": "yes", "description": "", "speech_input": {"tokens": ["yes", "yeah", "sure"], "mode": "contains"}},
                {"answer_id": "no", "description": "", "speech_input": {"tokens": ["no", "not", "never"], "mode": "contains"}}
            ]}},
            "outputs": [
                {"type": "yes", "description": "", "next": "r_yes"},
                {"type": "no", "description": "", "next": "r_no"},
                {"type": "invalid", "description": "", "next": "r_other"},
                {"type": "empty", "description": "", "next": "g_silent"}
            ]}]},
        "audio_tts": {"v1": [
            reply("r_yes", "Great, we will call you back tomorrow.", "g_yes"),
            reply("r_no", "All right, we will not call you again.", "g_no"),
            reply("r_other", "Sorry, I did not catch that.", "g_other")
        ]},
        "goal": {"v1": [goal("g_yes", "yes"), goal("g_no", "no"), goal("g_other", "other"), goal("g_silent", "silent")]},
        "end_call": {"v1": [{"id": "bye", "description": "", "properties": {"signal": ""}, "outputs": []}]}
    }}})
}

/// One phrase as the callee sends it: µ-law frames (voice trimmed of leading silence,
/// 400 ms of silence after it) and the index of the last voiced frame.
#[derive(Debug, Clone)]
pub struct Phrase {
    pub text: String,
    pub branch: String,
    pub frames: Vec<[u8; 160]>,
    pub last_voiced: usize,
    /// The pause inside the phrase (the paused set), ms.
    pub pause_ms: Option<u64>,
}

fn rms(pcm: &[i16]) -> f64 {
    (pcm.iter().map(|&x| f64::from(x).powi(2)).sum::<f64>() / pcm.len().max(1) as f64).sqrt()
}

fn voiced_ulaw(payload: &[u8], codec: Codec) -> bool {
    let mut pcm = vec![0i16; payload.len()];
    codec.decode_into(payload, &mut pcm);
    rms(&pcm) >= VOICED_RMS
}

/// Speaks every phrase of the plain set with flite into `dir`, as 8 kHz µ-law frames.
pub fn make_phrases(dir: &Path) -> Result<Vec<Phrase>> {
    PHRASES
        .iter()
        .enumerate()
        .map(|(i, (text, branch))| {
            let voiced = speak(dir, &format!("phrase{i}"), text)?;
            Ok(phrase_of_parts(text, branch, vec![voiced], None))
        })
        .collect()
}

/// Speaks every phrase of the paused set: its two parts with the pause between them.
pub fn make_paused_phrases(dir: &Path) -> Result<Vec<Phrase>> {
    PAUSED_PHRASES
        .iter()
        .enumerate()
        .map(|(i, (first, pause_ms, rest, branch))| {
            let a = speak(dir, &format!("paused{i}a"), first)?;
            let b = speak(dir, &format!("paused{i}b"), rest)?;
            let silence = vec![[0xFFu8; 160]; (*pause_ms / 20) as usize];
            let text = format!("{first} {rest}");
            Ok(phrase_of_parts(
                &text,
                branch,
                vec![a, silence, b],
                Some(*pause_ms),
            ))
        })
        .collect()
}

/// A phrase of voiced parts sent one after the other, then 400 ms of silence.
fn phrase_of_parts(
    text: &str,
    branch: &str,
    parts: Vec<Vec<[u8; 160]>>,
    pause_ms: Option<u64>,
) -> Phrase {
    let mut frames: Vec<[u8; 160]> = parts.into_iter().flatten().collect();
    let last_voiced = frames.len() - 1;
    frames.extend(std::iter::repeat_n([0xFFu8; 160], 20));
    Phrase {
        text: text.to_string(),
        branch: branch.to_string(),
        frames,
        last_voiced,
        pause_ms,
    }
}

/// `text` spoken by flite, as 8 kHz µ-law frames trimmed of leading and trailing silence.
fn speak(dir: &Path, name: &str, text: &str) -> Result<Vec<[u8; 160]>> {
    let wav = dir.join(format!("{name}.wav"));
    let raw = dir.join(format!("{name}.raw"));
    let st = std::process::Command::new("flite")
        .args(["-t", text, "-o"])
        .arg(&wav)
        .status()
        .context("run flite (apt-get install flite)")?;
    if !st.success() {
        bail!("flite failed for {text:?}");
    }
    let st = std::process::Command::new("sox")
        .arg(&wav)
        .args([
            "-r",
            "8000",
            "-c",
            "1",
            "-b",
            "16",
            "-e",
            "signed-integer",
            "-t",
            "raw",
        ])
        .arg(&raw)
        .status()
        .context("run sox")?;
    if !st.success() {
        bail!("sox failed for {text:?}");
    }
    let bytes = std::fs::read(&raw)?;
    let pcm: Vec<i16> = bytes
        .chunks_exact(2)
        .map(|b| i16::from_le_bytes([b[0], b[1]]))
        .collect();
    let frames: Vec<&[i16]> = pcm.chunks(160).collect();
    let first = frames
        .iter()
        .position(|f| rms(f) >= VOICED_RMS)
        .context("a phrase with no voice")?;
    let last = frames
        .iter()
        .rposition(|f| rms(f) >= VOICED_RMS)
        .unwrap_or(first);
    Ok(frames[first..=last]
        .iter()
        .map(|f| {
            let mut p = [0i16; 160];
            p[..f.len()].copy_from_slice(f);
            let mut e = [0u8; 160];
            Codec::Pcmu.encode_into(&p, &mut e);
            e
        })
        .collect())
}

/// What the callee measured on one call.
#[derive(Debug, Clone, Default)]
pub struct CallRecord {
    /// The called number (the engine's recipient).
    pub to: String,
    pub phrase: usize,
    pub answered_at: Option<Instant>,
    /// The first voiced packet of the question, and the moment its end was decided.
    pub question_started: Option<Instant>,
    pub question_done: Option<Instant>,
    /// Sending the packet that carried the phrase's last voiced frame.
    pub speech_end: Option<Instant>,
    /// The first voiced packet received after `speech_end`.
    pub reply_first_audio: Option<Instant>,
    /// The first voiced packet of the bot received while the caller was still speaking
    /// (its phrase, pauses included, not finished): the bot talked over the caller.
    pub talked_over: Option<Instant>,
    /// Calls of this callee between speech end and reply (its own live count).
    pub live_at_speech_end: usize,
    pub ended_at: Option<Instant>,
    pub error: Option<String>,
}

impl CallRecord {
    /// On-wire response: end of speech → first voiced reply packet, ms.
    pub fn response_ms(&self) -> Option<f64> {
        Some(
            self.reply_first_audio?
                .duration_since(self.speech_end?)
                .as_secs_f64()
                * 1000.0,
        )
    }
}

/// The callee: answers every call the engine places, plays its script, records.
pub struct Callee {
    _stack: Arc<SipStack>,
    pub addr: SocketAddr,
    records: Arc<Mutex<BTreeMap<String, CallRecord>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Callee {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The phrase of a called number: its digits as a call index, modulo the phrases.
pub fn phrase_of(to: &str, phrases: usize) -> usize {
    let digits: String = to.chars().filter(char::is_ascii_digit).collect();
    let tail = &digits[digits.len().saturating_sub(7)..];
    tail.parse::<usize>().unwrap_or(0) % phrases.max(1)
}

impl Callee {
    pub async fn start(phrases: Vec<Phrase>) -> Result<Callee> {
        let cfg = SipConfig {
            udp: Some(SocketAddr::from(([127, 0, 0, 1], 0))),
            tcp: None,
            // Only the trunk's IP matters to an inbound INVITE: the engine's 127.0.0.1.
            trunks: vec![TrunkConfig::new(
                "engine",
                SocketAddr::from(([127, 0, 0, 1], 5999)),
            )],
            default_trunk: None,
            codecs: vec![SdpCodec::Pcmu, SdpCodec::Pcma],
            user_agent: "voice_turn-callee".into(),
            ..Default::default()
        };
        let stack = Arc::new(
            SipStack::start(cfg, |_: &str, _: &str| true)
                .await
                .context("callee SIP stack")?,
        );
        let addr = stack.udp_addr().context("callee SIP address")?;
        let mut incoming = stack.take_incoming().context("incoming calls")?;
        let records: Arc<Mutex<BTreeMap<String, CallRecord>>> = Arc::default();
        let live = Arc::new(AtomicUsize::new(0));
        let phrases = Arc::new(phrases);
        let r2 = records.clone();
        let task = tokio::spawn(async move {
            while let Some(call) = incoming.recv().await {
                let (records, live, phrases) = (r2.clone(), live.clone(), phrases.clone());
                tokio::spawn(async move {
                    let to = call.to.clone();
                    let mut rec = CallRecord {
                        to: to.clone(),
                        phrase: phrase_of(&to, phrases.len()),
                        ..Default::default()
                    };
                    live.fetch_add(1, Ordering::SeqCst);
                    if let Err(e) = run_call(call, &phrases, &live, &mut rec).await {
                        rec.error = Some(format!("{e:#}"));
                    }
                    live.fetch_sub(1, Ordering::SeqCst);
                    rec.ended_at = Some(Instant::now());
                    records.lock().expect("records").insert(to, rec);
                });
            }
        });
        Ok(Callee {
            _stack: stack,
            addr,
            records,
            task,
        })
    }

    /// The records of the calls that ended, by called number.
    pub fn records(&self) -> BTreeMap<String, CallRecord> {
        self.records.lock().expect("records").clone()
    }
}

#[derive(PartialEq)]
enum Phase {
    Question,
    Speaking(usize),
    Reply,
    Done,
}

/// Answers `call` with PCMU on a fresh loopback RTP socket and waits (5 s at most) for the
/// leg's `Answered`: the socket, the leg and the negotiated media.
pub async fn answer_pcmu(
    call: callsmith_sip::IncomingCall,
) -> Result<(
    tokio::net::UdpSocket,
    callsmith_sip::CallLeg,
    callsmith_sip::NegotiatedMedia,
)> {
    let sock = tokio::net::UdpSocket::bind("127.0.0.1:0").await?;
    let port = sock.local_addr()?.port();
    let mut leg = call
        .answer(LocalMedia {
            codecs: vec![SdpCodec::Pcmu],
            ..LocalMedia::g711([127, 0, 0, 1].into(), port)
        })
        .await
        .map_err(|e| anyhow::anyhow!("answer: {e}"))?;
    let media = loop {
        match tokio::time::timeout(Duration::from_secs(5), leg.next_event()).await {
            Ok(Some(LegEvent::Answered(m))) => break m,
            Ok(Some(LegEvent::Ended(_))) | Ok(None) => bail!("ended before answer"),
            Ok(Some(_)) => continue,
            Err(_) => bail!("no Answered event"),
        }
    };
    Ok((sock, leg, media))
}

/// One call: answer, wait for the question's end, speak, time the reply, until BYE.
async fn run_call(
    call: callsmith_sip::IncomingCall,
    phrases: &[Phrase],
    live: &AtomicUsize,
    rec: &mut CallRecord,
) -> Result<()> {
    let (sock, mut leg, media) = answer_pcmu(call).await?;
    rec.answered_at = Some(Instant::now());
    let codec = Codec::from_payload_type(media.payload_type).unwrap_or(Codec::Pcmu);
    let phrase = &phrases[rec.phrase];
    let mut phase = Phase::Question;
    let mut last_voiced_rx: Option<Instant> = None;
    let mut tick = tokio::time::interval(Duration::from_millis(20));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    let (mut seq, mut ts) = (0u16, 0u32);
    let mut buf = [0u8; 2048];
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        tokio::select! {
            ev = leg.next_event() => match ev {
                Some(LegEvent::Ended(_)) | None => break,
                Some(_) => {}
            },
            r = sock.recv_from(&mut buf) => {
                let Ok((n, _)) = r else { continue };
                // RTP version 2, audio payload of the negotiated codec.
                if n <= 12 || buf[0] >> 6 != 2 || buf[1] & 0x7f != media.payload_type {
                    continue;
                }
                let cc = usize::from(buf[0] & 0x0f);
                let Some(payload) = buf.get(12 + 4 * cc..n) else { continue };
                if !voiced_ulaw(payload, codec) {
                    continue;
                }
                let now = Instant::now();
                last_voiced_rx = Some(now);
                match phase {
                    Phase::Question => {
                        rec.question_started.get_or_insert(now);
                    }
                    Phase::Speaking(_) => {
                        rec.talked_over.get_or_insert(now);
                    }
                    Phase::Reply => {
                        rec.reply_first_audio = Some(now);
                        phase = Phase::Done;
                    }
                    Phase::Done => {}
                }
            }
            _ = tick.tick() => {
                if Instant::now() > deadline {
                    leg.hangup();
                    bail!("the call lasted 60 s");
                }
                let mut payload = [0xFFu8; 160];
                if let Phase::Speaking(i) = phase {
                    payload = phrase.frames[i];
                }
                let mut pkt = Vec::with_capacity(172);
                pkt.extend_from_slice(&[0x80, 0]);
                pkt.extend_from_slice(&seq.to_be_bytes());
                pkt.extend_from_slice(&ts.to_be_bytes());
                pkt.extend_from_slice(&0x0b07_7e57u32.to_be_bytes());
                pkt.extend_from_slice(&payload);
                let _ = sock.send_to(&pkt, media.remote_rtp).await;
                seq = seq.wrapping_add(1);
                ts = ts.wrapping_add(160);
                let now = Instant::now();
                phase = match phase {
                    Phase::Question => match (rec.question_started, last_voiced_rx) {
                        (Some(_), Some(l)) if now.duration_since(l) >= Duration::from_millis(QUESTION_DONE_SILENCE_MS) => {
                            rec.question_done = Some(now);
                            Phase::Speaking(0)
                        }
                        _ => Phase::Question,
                    },
                    Phase::Speaking(i) => {
                        if i == phrase.last_voiced {
                            rec.speech_end = Some(now);
                            rec.live_at_speech_end = live.load(Ordering::SeqCst);
                        }
                        if i + 1 < phrase.frames.len() && i < phrase.last_voiced {
                            Phase::Speaking(i + 1)
                        } else {
                            // After the last voiced frame, silence (the bot may answer at once).
                            Phase::Reply
                        }
                    }
                    p => p,
                };
            }
        }
    }
    if rec.question_started.is_none() {
        bail!("no question heard");
    }
    Ok(())
}

/// Word error rate of `got` against `want` (both normalised), by edit distance over words.
pub fn word_errors(want: &str, got: &str) -> (usize, usize) {
    let w: Vec<&str> = want.split_whitespace().collect();
    let g: Vec<&str> = got.split_whitespace().collect();
    let mut prev: Vec<usize> = (0..=g.len()).collect();
    for (i, wi) in w.iter().enumerate() {
        let mut cur = vec![i + 1; g.len() + 1];
        for (j, gj) in g.iter().enumerate() {
            let sub = prev[j] + usize::from(wi != gj);
            cur[j + 1] = sub.min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    (prev[g.len()], w.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phrases_follow_the_called_number() {
        assert_eq!(phrase_of("+15550000013", 12), 1);
        assert_eq!(phrase_of("+15550000000", 12), 0);
    }

    #[test]
    fn word_errors_count_edits() {
        assert_eq!(word_errors("yes please", "yes please"), (0, 2));
        assert_eq!(word_errors("no thanks", "no thank you"), (2, 2));
        assert_eq!(word_errors("sure thing", ""), (2, 2));
    }

    #[test]
    fn the_paused_set_pauses_like_a_person_thinking() {
        assert!(PAUSED_PHRASES.len() >= 6);
        assert!(
            PAUSED_PHRASES
                .iter()
                .all(|(_, ms, _, _)| (300..=800).contains(ms))
        );
        let branches: std::collections::BTreeSet<&str> =
            PAUSED_PHRASES.iter().map(|p| p.3).collect();
        assert_eq!(branches.len(), 3, "yes, no and other answers");
    }

    #[test]
    fn the_phrase_set_is_wide_enough() {
        assert!(PHRASES.len() >= 10);
        let words: std::collections::BTreeSet<&str> = PHRASES
            .iter()
            .flat_map(|p| p.0.split_whitespace())
            .collect();
        assert!(words.len() >= 20, "{words:?}");
    }
}
