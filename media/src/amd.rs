//! Answering-machine heuristics on the first seconds of caller audio, sans-IO.
//!
//! Cues, in the order they decide:
//! - the voicemail beep: a steady pure tone anywhere from 300 to 2,500 Hz (real systems
//!   use 440 Hz to 1.4 kHz; the special-information tones of a carrier message count too),
//!   found by its zero-crossing rate and confirmed with a Goertzel filter;
//! - the greeting length: a person says "hello?" and waits, a machine talks for seconds;
//! - the silence after a short greeting: a person waiting for an answer.
//!
//! Speech is a frame the VAD calls voiced **and** that stands out of the line's noise floor
//! (tracked here), so room noise that the VAD takes for voice does not lengthen a greeting.
//! Feed 20 ms frames with the VAD verdict; read `verdict()`, and `finished()` to know when
//! listening is over (after a machine verdict the detector keeps listening for the beep).

/// Goertzel power of `freq` in `frame` at 8 kHz, normalised by frame energy (0..=1): about
/// 1 for a pure tone of that frequency, near 0 for other tones and silence.
pub fn tone_ratio(frame: &[i16], freq: f32) -> f32 {
    let n = frame.len();
    if n == 0 {
        return 0.0;
    }
    let w = 2.0 * std::f32::consts::PI * freq / 8000.0;
    let coeff = 2.0 * w.cos();
    let (mut s1, mut s2) = (0f32, 0f32);
    let mut energy = 0f32;
    for &x in frame {
        let x = x as f32;
        energy += x * x;
        let s0 = x + coeff * s1 - s2;
        s2 = s1;
        s1 = s0;
    }
    if energy <= 0.0 {
        return 0.0;
    }
    let power = s1 * s1 + s2 * s2 - coeff * s1 * s2;
    (2.0 * power / (n as f32 * energy)).min(1.0)
}

/// Mean absolute amplitude of a frame.
fn level(frame: &[i16]) -> f32 {
    frame.iter().map(|s| f32::from(*s).abs()).sum::<f32>() / frame.len().max(1) as f32
}

/// Lowest and highest beep frequency, Hz.
const TONE_MIN_HZ: f32 = 300.0;
const TONE_MAX_HZ: f32 = 2500.0;
/// A frame is tonal when a pure tone holds at least this share of its energy.
const TONE_RATIO: f32 = 0.7;
/// A tone quieter than this (mean absolute amplitude, about -36 dBFS) is not a beep.
const TONE_MIN_LEVEL: f32 = 400.0;
/// Frames of one beep stay within this many Hz of the beep's first frame.
const TONE_DRIFT_HZ: f32 = 40.0;

/// The frequency of the pure tone that carries the frame, if one does (300–2,500 Hz).
/// The zero-crossing rate estimates it; three Goertzel filters around the estimate confirm.
pub fn tone_frequency(frame: &[i16]) -> Option<f32> {
    if frame.len() < 80 || level(frame) < TONE_MIN_LEVEL {
        return None;
    }
    let crossings = frame
        .windows(2)
        .filter(|w| (w[0] < 0) != (w[1] < 0))
        .count();
    let estimate = crossings as f32 * 8000.0 / (2.0 * (frame.len() - 1) as f32);
    if !(TONE_MIN_HZ - 50.0..=TONE_MAX_HZ + 50.0).contains(&estimate) {
        return None;
    }
    let (freq, ratio) = [-25.0, 0.0, 25.0]
        .iter()
        .map(|d| (estimate + d, tone_ratio(frame, estimate + d)))
        .fold((0.0, 0.0), |best, c| if c.1 > best.1 { c } else { best });
    (ratio > TONE_RATIO && (TONE_MIN_HZ..=TONE_MAX_HZ).contains(&freq)).then_some(freq)
}

/// The heuristic's conclusion.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum AmdDecision {
    /// Not enough audio yet.
    Undecided,
    Human,
    Machine,
    /// A voicemail beep was heard: start talking now.
    Beep,
}

/// Thresholds, in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct AmdConfig {
    /// A greeting longer than this is a machine.
    pub max_human_greeting_ms: u32,
    /// Silence after a short greeting that settles "human".
    pub after_greeting_silence_ms: u32,
    /// Total analysis window; undecided at the end means human.
    pub window_ms: u32,
    /// Tone duration that counts as a beep.
    pub beep_ms: u32,
    /// After a `Machine` verdict, keep listening up to this long for the beep, so a message
    /// starts after it; listening also stops when the greeting ended without one (silence
    /// of twice `after_greeting_silence_ms`). The result is then `Beep` or `Machine`. 0:
    /// report `Machine` at once.
    pub beep_wait_ms: u32,
}

impl Default for AmdConfig {
    fn default() -> Self {
        AmdConfig {
            max_human_greeting_ms: 2000,
            after_greeting_silence_ms: 800,
            window_ms: 5000,
            beep_ms: 120,
            beep_wait_ms: 0,
        }
    }
}

/// A pause inside a greeting counts towards its length up to this long.
const PAUSE_BRIDGE_MS: u32 = 300;
/// A frame is speech when its level is at least this many times the noise floor (~8 dB).
const SPEECH_OVER_FLOOR: f32 = 2.5;
/// The noise floor is the 5th percentile of the frame levels of the last 1.5 s (minimum
/// statistics): it follows quieter frames at once and forgets a quiet spell 1.5 s later, and
/// speech, whose pauses and stops are quieter than its vowels, does not raise it. Stationary
/// noise, even swelling slowly, stays within a few dB of its own low levels. A percentile
/// rather than the minimum, and frames of digital silence left out, so one gap the jitter
/// buffer filled does not drop the floor and turn the noise into "speech" for 1.5 s.
const FLOOR_FRAMES: usize = 75;
/// The floor never drops below this level (digital silence).
const FLOOR_MIN: f32 = 8.0;

#[derive(Debug, Clone)]
pub struct AmdDetector {
    cfg: AmdConfig,
    elapsed_ms: u32,
    speech_ms: u32,
    greeting_ms: u32,
    silence_after_ms: u32,
    /// The current tone run: its length and first frame's frequency.
    tone_ms: u32,
    tone_hz: f32,
    /// Levels of the last [`FLOOR_FRAMES`] frames.
    levels: std::collections::VecDeque<f32>,
    verdict: AmdDecision,
    decided_at_ms: Option<u32>,
    /// Since the machine verdict: time listened for the beep and trailing silence.
    waited_ms: u32,
    quiet_ms: u32,
    finished: bool,
}

impl AmdDetector {
    pub fn new(cfg: AmdConfig) -> AmdDetector {
        AmdDetector {
            cfg,
            elapsed_ms: 0,
            speech_ms: 0,
            greeting_ms: 0,
            silence_after_ms: 0,
            tone_ms: 0,
            tone_hz: 0.0,
            levels: std::collections::VecDeque::with_capacity(FLOOR_FRAMES),
            verdict: AmdDecision::Undecided,
            decided_at_ms: None,
            waited_ms: 0,
            quiet_ms: 0,
            finished: false,
        }
    }

    pub fn verdict(&self) -> AmdDecision {
        self.verdict
    }

    /// Audio time (ms since the first frame) at which the first verdict other than
    /// `Undecided` was reached.
    pub fn decided_at_ms(&self) -> Option<u32> {
        self.decided_at_ms
    }

    /// Whether listening is over: a human or beep verdict, or a machine verdict whose beep
    /// wait has ended (`beep_wait_ms`, or the greeting ended in silence).
    pub fn finished(&self) -> bool {
        self.finished
    }

    /// The silence after a short greeting that settles "human": `after_greeting_silence_ms`,
    /// plus half of what the greeting lasted beyond half of `max_human_greeting_ms`. A
    /// greeting near the limit may be a short voicemail greeting ("Hey, it's Tom, leave a
    /// message"), whose beep often comes a second later; a person who said that much
    /// waits a little longer for the answer.
    fn settling_silence_ms(&self) -> u32 {
        let knee = self.cfg.max_human_greeting_ms / 2;
        self.cfg.after_greeting_silence_ms + self.greeting_ms.saturating_sub(knee) / 2
    }

    /// Whether the frame stands out of the noise floor (and updates the floor). Levels are
    /// taken after pre-emphasis (`x[n] - 0.9 x[n-1]`, -20 dB at 100 Hz, +5 dB at 3 kHz):
    /// rumble below the telephone band swings from frame to frame and is not speech.
    fn loud(&mut self, frame: &[i16]) -> bool {
        let l = frame
            .windows(2)
            .map(|w| (f32::from(w[1]) - 0.9 * f32::from(w[0])).abs())
            .sum::<f32>()
            / frame.len().saturating_sub(1).max(1) as f32;
        if l >= FLOOR_MIN {
            if self.levels.len() == FLOOR_FRAMES {
                self.levels.pop_front();
            }
            self.levels.push_back(l);
        }
        let mut sorted: Vec<f32> = self.levels.iter().copied().collect();
        sorted.sort_by(f32::total_cmp);
        let floor = sorted.get(sorted.len() / 20).copied().unwrap_or(FLOOR_MIN);
        l >= floor.max(FLOOR_MIN) * SPEECH_OVER_FLOOR
    }

    /// Feeds one 20 ms frame and its VAD verdict; returns the verdict when it changes.
    pub fn push(&mut self, frame: &[i16], voiced: bool) -> Option<AmdDecision> {
        let before = self.verdict;
        self.elapsed_ms += 20;
        let loud = self.loud(frame);
        let tone = tone_frequency(frame);
        match tone {
            Some(f) if self.tone_ms > 0 && (f - self.tone_hz).abs() <= TONE_DRIFT_HZ => {
                self.tone_ms += 20;
            }
            Some(f) => {
                self.tone_ms = 20;
                self.tone_hz = f;
            }
            None => self.tone_ms = 0,
        }
        if self.tone_ms >= self.cfg.beep_ms && !self.finished {
            self.verdict = AmdDecision::Beep;
        }
        let speech = voiced && loud && tone.is_none();
        match self.verdict {
            AmdDecision::Undecided => {
                if speech {
                    self.speech_ms += 20;
                    self.greeting_ms += 20 + self.silence_after_ms.min(PAUSE_BRIDGE_MS);
                    self.silence_after_ms = 0;
                    if self.greeting_ms > self.cfg.max_human_greeting_ms {
                        self.verdict = AmdDecision::Machine;
                    }
                } else if self.speech_ms > 0 {
                    self.silence_after_ms += 20;
                    if self.silence_after_ms >= self.settling_silence_ms() {
                        self.verdict = AmdDecision::Human;
                    }
                }
                if self.verdict == AmdDecision::Undecided && self.elapsed_ms >= self.cfg.window_ms {
                    self.verdict = AmdDecision::Human;
                }
            }
            AmdDecision::Machine if before == AmdDecision::Machine => {
                self.waited_ms += 20;
                self.quiet_ms = if speech { 0 } else { self.quiet_ms + 20 };
            }
            _ => {}
        }
        if self.verdict != AmdDecision::Undecided {
            self.decided_at_ms.get_or_insert(self.elapsed_ms);
        }
        self.finished = match self.verdict {
            AmdDecision::Undecided => false,
            AmdDecision::Human | AmdDecision::Beep => true,
            AmdDecision::Machine => {
                self.waited_ms >= self.cfg.beep_wait_ms
                    || self.quiet_ms >= 2 * self.cfg.after_greeting_silence_ms
            }
        };
        (self.verdict != before).then_some(self.verdict)
    }
}

/// What the detector concluded on recorded audio ([`detect_recorded`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordedDetection {
    /// The verdict when listening ended (as the live detection returns it).
    pub verdict: AmdDecision,
    /// The first verdict and when it came (ms of audio from the start).
    pub first: AmdDecision,
    pub decided_at_ms: Option<u32>,
    /// When listening ended (ms of audio).
    pub finished_at_ms: u32,
}

/// Runs the detection over recorded caller audio (8 kHz PCM from the moment detection
/// starts) exactly as a live call does: 20 ms frames, the default VAD, the same detector;
/// after the recording, silence (what a callee sends once its clip is over) until listening
/// ends, for at most the window, the beep wait and 2 s (the engine's own bound).
pub fn detect_recorded(pcm: &[i16], cfg: AmdConfig) -> RecordedDetection {
    let mut vad = crate::vad::SpeechDetector::new(crate::vad::VadConfig::default());
    let mut det = AmdDetector::new(cfg);
    let silence = [0i16; 160];
    let limit = (cfg.window_ms + cfg.beep_wait_ms + 2000) / 20;
    let mut frames = pcm.chunks_exact(160).chain(std::iter::repeat(&silence[..]));
    let mut first = AmdDecision::Undecided;
    let mut n = 0;
    while !det.finished() && n < limit {
        let f = frames.next().unwrap_or(&silence);
        let voiced = vad.is_voiced(f);
        if let Some(v) = det.push(f, voiced)
            && first == AmdDecision::Undecided
        {
            first = v;
        }
        n += 1;
    }
    RecordedDetection {
        verdict: det.verdict(),
        first,
        decided_at_ms: det.decided_at_ms(),
        finished_at_ms: n * 20,
    }
}

impl crate::MediaSession {
    /// Listens to the first seconds of caller audio and returns the first
    /// decided verdict (Human, Machine or Beep; Human when the window ends silent).
    pub async fn detect_answering_machine(
        &self,
        cfg: AmdConfig,
    ) -> Result<AmdDecision, crate::MediaError> {
        self.spawn_answering_machine_detection(cfg)?
            .await
            .map_err(|e| crate::MediaError::Io(e.to_string()))
    }

    /// Starts the detection on caller audio from now on and returns its task, which does not
    /// borrow the session (a call can keep handling its events while it runs). The task ends
    /// with the first decided verdict (after `beep_wait_ms` for a machine), or `Undecided`
    /// when the session closed first.
    pub fn spawn_answering_machine_detection(
        &self,
        cfg: AmdConfig,
    ) -> Result<tokio::task::JoinHandle<AmdDecision>, crate::MediaError> {
        let mut rx = self.tap_caller_audio(500)?;
        // The VAD is not Send: it lives on a blocking thread with the detector.
        Ok(tokio::task::spawn_blocking(move || {
            let mut vad = crate::vad::SpeechDetector::new(crate::vad::VadConfig::default());
            let mut det = AmdDetector::new(cfg);
            // The detector takes 8 kHz frames: a wideband session's two 16 kHz frames per
            // tick are halved into one.
            let mut narrow = [0i16; crate::prompt::FRAME_SAMPLES];
            let mut filled = 0;
            while let Some(f) = rx.blocking_recv() {
                let n = crate::prompt::FRAME_SAMPLES / f.rate.factor();
                crate::rate::convert(
                    &f.pcm,
                    f.rate,
                    &mut narrow[filled..filled + n],
                    crate::rate::AudioRate::Narrow,
                );
                filled += n;
                if filled < narrow.len() {
                    continue;
                }
                filled = 0;
                let voiced = vad.is_voiced(&narrow);
                det.push(&narrow, voiced);
                if det.finished() {
                    return det.verdict();
                }
            }
            det.verdict()
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tone(freq: f32, frames: usize) -> Vec<i16> {
        (0..frames * 160)
            .map(|i| {
                ((i as f32 * 2.0 * std::f32::consts::PI * freq / 8000.0).sin() * 8000.0) as i16
            })
            .collect()
    }

    #[test]
    fn goertzel_finds_the_tone() {
        let t = tone(1000.0, 1);
        assert!(tone_ratio(&t, 1000.0) > 0.9);
        assert!(tone_ratio(&t, 1400.0) < 0.1);
        assert_eq!(tone_ratio(&[0; 160], 1000.0), 0.0);
    }

    /// Voice-like frames: harmonics 2 to 6 of 150 Hz (no single tone carries them), in
    /// syllables: every 12th frame, the first included, dips to a tenth (a stop, a pause).
    fn voice(frames: usize, amp: f32) -> Vec<i16> {
        (0..frames * 160)
            .map(|i| {
                let dip = if (i / 160) % 12 == 0 { 0.1 } else { 1.0 };
                (2..=6)
                    .map(|h| {
                        (i as f32 * 2.0 * std::f32::consts::PI * 150.0 * h as f32 / 8000.0).sin()
                    })
                    .sum::<f32>()
                    * amp
                    * dip
                    / 3.0
            })
            .map(|v| v as i16)
            .collect()
    }

    /// Seeded noise at a mean absolute amplitude of about `level`.
    fn noise(frames: usize, level: f32, seed: u32) -> Vec<i16> {
        let mut x = seed.max(1);
        (0..frames * 160)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                ((x as f32 / u32::MAX as f32) - 0.5) * 4.0 * level
            })
            .map(|v| v as i16)
            .collect()
    }

    /// Feeds `pcm` with one VAD verdict for every frame; returns the verdict.
    fn feed(d: &mut AmdDetector, pcm: &[i16], voiced: bool) -> AmdDecision {
        for f in pcm.chunks(160) {
            d.push(f, voiced);
        }
        d.verdict()
    }

    #[test]
    fn short_greeting_is_human_long_is_machine_beep_is_beep() {
        let mut d = AmdDetector::new(AmdConfig::default());
        feed(&mut d, &voice(30, 3000.0), true); // 600 ms "hello"
        assert_eq!(feed(&mut d, &[0; 160 * 70], false), AmdDecision::Human);
        assert_eq!(d.decided_at_ms(), Some(600 + 800));
        assert!(d.finished());

        let mut d = AmdDetector::new(AmdConfig::default());
        assert_eq!(
            feed(&mut d, &voice(150, 3000.0), true),
            AmdDecision::Machine
        );
        assert_eq!(d.decided_at_ms(), Some(2040));
        assert!(d.finished(), "no beep wait: done at the machine verdict");
    }

    #[test]
    fn beeps_from_440_to_2000_hz_are_found_speech_and_noise_are_not() {
        for hz in [440.0, 500.0, 600.0, 850.0, 1000.0, 1400.0, 2000.0] {
            let f = tone(hz, 1);
            let got = tone_frequency(&f).unwrap_or_else(|| panic!("{hz} Hz not found"));
            assert!((got - hz).abs() <= 30.0, "{hz} Hz read as {got}");
        }
        assert_eq!(tone_frequency(&voice(1, 3000.0)), None);
        assert_eq!(tone_frequency(&noise(1, 2000.0, 7)), None);
        assert_eq!(tone_frequency(&[0; 160]), None);
        // A tone too quiet to be a beep.
        let quiet: Vec<i16> = tone(1000.0, 1).iter().map(|s| s / 40).collect();
        assert_eq!(tone_frequency(&quiet), None);

        // 440 Hz for 120 ms after a short greeting is a beep; 100 ms is not.
        let mut d = AmdDetector::new(AmdConfig::default());
        feed(&mut d, &voice(50, 3000.0), true);
        feed(&mut d, &[0; 160 * 10], false);
        assert_eq!(feed(&mut d, &tone(440.0, 5), false), AmdDecision::Undecided);
        assert_eq!(feed(&mut d, &tone(440.0, 1), false), AmdDecision::Beep);
    }

    #[test]
    fn noise_the_vad_calls_voice_does_not_lengthen_a_greeting() {
        // Room noise (the VAD says voiced) around a 600 ms "hello": still a person.
        let mut d = AmdDetector::new(AmdConfig::default());
        feed(&mut d, &noise(25, 150.0, 1), true);
        let mut hello = voice(30, 3000.0);
        for (s, n) in hello.iter_mut().zip(noise(30, 150.0, 2)) {
            *s = s.saturating_add(n);
        }
        feed(&mut d, &hello, true);
        assert_eq!(
            feed(&mut d, &noise(150, 150.0, 3), true),
            AmdDecision::Human
        );
        assert_eq!(d.decided_at_ms(), Some(500 + 600 + 800));
    }

    #[test]
    fn a_greeting_near_the_limit_waits_longer_for_its_beep() {
        // 1.8 s of greeting, then a beep 1 s later: a machine (a person who said that much
        // gets 800 + 400 ms of silence before the verdict).
        let mut d = AmdDetector::new(AmdConfig::default());
        feed(&mut d, &voice(90, 3000.0), true);
        feed(&mut d, &[0; 160 * 50], false);
        assert_eq!(d.verdict(), AmdDecision::Undecided);
        assert_eq!(feed(&mut d, &tone(1000.0, 10), false), AmdDecision::Beep);
        let mut d = AmdDetector::new(AmdConfig::default());
        feed(&mut d, &voice(90, 3000.0), true);
        assert_eq!(feed(&mut d, &[0; 160 * 60], false), AmdDecision::Human);
        assert_eq!(d.decided_at_ms(), Some(1800 + 1200));
    }

    #[test]
    fn after_a_machine_verdict_the_detector_listens_for_the_beep() {
        let cfg = AmdConfig {
            beep_wait_ms: 10_000,
            ..AmdConfig::default()
        };
        // The beep ends the wait.
        let mut d = AmdDetector::new(cfg);
        assert_eq!(
            feed(&mut d, &voice(150, 6000.0), true),
            AmdDecision::Machine
        );
        assert!(!d.finished());
        assert_eq!(feed(&mut d, &tone(500.0, 20), false), AmdDecision::Beep);
        assert!(d.finished());
        assert_eq!(d.decided_at_ms(), Some(2040), "the first verdict's time");
        // No beep: the wait ends after twice the settling silence.
        let mut d = AmdDetector::new(cfg);
        feed(&mut d, &voice(150, 6000.0), true);
        feed(&mut d, &[0; 160 * 79], false);
        assert!(!d.finished());
        feed(&mut d, &[0; 160], false);
        assert!(d.finished());
        assert_eq!(d.verdict(), AmdDecision::Machine);
    }

    /// flite's speech of `text` (voice kal, 8 kHz), leading and trailing silence trimmed.
    fn flite(text: &str) -> Vec<i16> {
        let dir = tempfile::tempdir().expect("tempdir");
        let wav = dir.path().join("s.wav");
        let st = std::process::Command::new("flite")
            .args(["-voice", "kal", "-t", text, "-o"])
            .arg(&wav)
            .status()
            .expect("flite (apt-get install flite)");
        assert!(st.success());
        let b = std::fs::read(&wav).expect("wav");
        let data = b.windows(4).position(|w| w == b"data").expect("data chunk") + 8;
        let pcm: Vec<i16> = b[data..]
            .chunks_exact(2)
            .map(|c| i16::from_le_bytes([c[0], c[1]]))
            .collect();
        let first = pcm.iter().position(|s| s.abs() > 300).unwrap_or(0);
        let last = pcm.iter().rposition(|s| s.abs() > 300).unwrap_or(pcm.len());
        pcm[first..last].to_vec()
    }

    fn silence(ms: usize) -> Vec<i16> {
        vec![0; ms * 8]
    }

    /// Through G.711 µ-law and back, as a callee's RTP reaches the detector.
    fn ulaw(pcm: &[i16]) -> Vec<i16> {
        let mut enc = vec![0u8; pcm.len()];
        crate::g711::Codec::Pcmu.encode_into(pcm, &mut enc);
        let mut out = vec![0i16; pcm.len()];
        crate::g711::Codec::Pcmu.decode_into(&enc, &mut out);
        out
    }

    /// A fixed subset of the bench's clip set (bench/src/amd_set.rs, reports/amd.md):
    /// people after 0–2.5 s, in quiet and in room noise, and voicemail greetings of 1.5–6 s
    /// with 440–1,000 Hz beeps, one without, and a carrier message after its
    /// special-information tones. The detector gets every one right, calls no person a
    /// machine, and decides in 2.5 s at the median.
    #[test]
    fn meets_the_targets_on_a_generated_subset() {
        let mix = |parts: Vec<Vec<i16>>, noise_level: f32, seed: u32| -> Vec<i16> {
            let mut pcm: Vec<i16> = parts.concat();
            if noise_level > 0.0 {
                let n = noise(pcm.len().div_ceil(160), noise_level, seed);
                for (s, n) in pcm.iter_mut().zip(n) {
                    *s = s.saturating_add(n);
                }
            }
            ulaw(&pcm)
        };
        let beep = |hz: f32, ms: usize| -> Vec<i16> {
            let mut t = tone(hz, ms / 20);
            t.iter_mut().for_each(|s| *s /= 2);
            t
        };
        let sit = [tone(913.8, 14), tone(1370.6, 14), tone(1776.7, 19)].concat();
        let people = [
            ("Hello?", 0, 0.0),
            ("Yes, speaking.", 1200, 200.0),
            ("Hi, this is Sam.", 400, 20.0),
            ("Hello?", 2500, 100.0),
            ("Hello, who is this?", 0, 100.0),
        ];
        let mut clips: Vec<(bool, Vec<i16>)> = Vec::new();
        for (i, (text, lead, noise_level)) in people.iter().enumerate() {
            let pcm = mix(
                vec![silence(*lead), flite(text), silence(6000)],
                *noise_level,
                i as u32 + 1,
            );
            clips.push((false, pcm));
        }
        let vm = "Hello, you have reached the voicemail of John Smith. Please leave a message after the tone.";
        clips.push((
            true,
            mix(vec![flite(vm), silence(500), beep(440.0, 500)], 0.0, 0),
        ));
        clips.push((
            true,
            mix(
                vec![
                    flite("Hi, you've reached Sam. Leave a message."),
                    silence(800),
                    beep(1000.0, 250),
                ],
                20.0,
                11,
            ),
        ));
        clips.push((
            true,
            mix(
                vec![flite(
                    "The person you are calling is not available. Please try again later.",
                )],
                0.0,
                0,
            ),
        ));
        clips.push((
            true,
            mix(
                vec![
                    silence(300),
                    flite("Please leave a message after the tone."),
                    silence(1000),
                    beep(600.0, 300),
                ],
                100.0,
                12,
            ),
        ));
        clips.push((
            true,
            mix(
                vec![
                    sit,
                    silence(300),
                    flite("The number you have dialed is not in service."),
                ],
                0.0,
                0,
            ),
        ));
        let cfg = AmdConfig {
            beep_wait_ms: 10_000,
            ..AmdConfig::default()
        };
        let mut times = Vec::new();
        for (i, (machine, pcm)) in clips.iter().enumerate() {
            let d = detect_recorded(pcm, cfg);
            let called_machine = matches!(d.verdict, AmdDecision::Machine | AmdDecision::Beep);
            assert_eq!(called_machine, *machine, "clip {i}: {d:?}");
            times.push(d.decided_at_ms.expect("decided"));
        }
        times.sort_unstable();
        let median = times[times.len() / 2];
        assert!(median <= 2500, "median decision {median} ms: {times:?}");
    }
}
