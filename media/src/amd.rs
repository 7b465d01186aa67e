//! Answering-machine heuristics on the first seconds of caller audio, sans-IO.
//!
//! Two cues: the greeting length (a person says "hello?" and waits; a machine
//! talks for seconds) and the voicemail beep (a steady ~1 kHz tone, found with
//! Goertzel filters). Feed 20 ms frames with the VAD verdict; read `verdict()`.

/// Goertzel power of `freq` in `frame` at 8 kHz, normalised by frame energy (0..=1).
pub fn tone_ratio(frame: &[i16], freq: f32) -> f32 {
    let n = frame.len();
    if n == 0 {
        return 0.0;
    }
    let k = (n as f32 * freq / 8000.0).round();
    let w = 2.0 * std::f32::consts::PI * k / n as f32;
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
            beep_ms: 160,
            beep_wait_ms: 0,
        }
    }
}

#[derive(Debug, Clone)]
pub struct AmdDetector {
    cfg: AmdConfig,
    elapsed_ms: u32,
    speech_ms: u32,
    greeting_ms: u32,
    silence_after_ms: u32,
    tone_ms: u32,
    verdict: AmdDecision,
    machine: bool,
}

const BEEP_FREQS: [f32; 5] = [850.0, 950.0, 1000.0, 1100.0, 1400.0];

impl AmdDetector {
    pub fn new(cfg: AmdConfig) -> AmdDetector {
        AmdDetector {
            cfg,
            elapsed_ms: 0,
            speech_ms: 0,
            greeting_ms: 0,
            silence_after_ms: 0,
            tone_ms: 0,
            verdict: AmdDecision::Undecided,
            machine: false,
        }
    }

    pub fn verdict(&self) -> AmdDecision {
        self.verdict
    }

    /// Feeds one 20 ms frame and its VAD verdict; returns the verdict when it changes.
    pub fn push(&mut self, frame: &[i16], voiced: bool) -> Option<AmdDecision> {
        let before = self.verdict;
        self.elapsed_ms += 20;
        let tonal = BEEP_FREQS.iter().any(|f| tone_ratio(frame, *f) > 0.6)
            && frame.iter().map(|s| s.unsigned_abs() as u32).sum::<u32>()
                / frame.len().max(1) as u32
                > 500;
        if tonal {
            self.tone_ms += 20;
            if self.tone_ms >= self.cfg.beep_ms {
                self.verdict = AmdDecision::Beep;
            }
        } else {
            self.tone_ms = 0;
        }
        if self.verdict == AmdDecision::Undecided {
            if voiced && !tonal {
                self.speech_ms += 20;
                self.greeting_ms += 20 + self.silence_after_ms.min(300);
                self.silence_after_ms = 0;
                if self.greeting_ms > self.cfg.max_human_greeting_ms {
                    self.machine = true;
                    self.verdict = AmdDecision::Machine;
                }
            } else if self.speech_ms > 0 {
                self.silence_after_ms += 20;
                if self.silence_after_ms >= self.cfg.after_greeting_silence_ms {
                    self.verdict = AmdDecision::Human;
                }
            }
            if self.verdict == AmdDecision::Undecided && self.elapsed_ms >= self.cfg.window_ms {
                self.verdict = AmdDecision::Human;
            }
        }
        (self.verdict != before).then_some(self.verdict)
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
            // Time listened since the Machine verdict, and trailing silence since then.
            let (mut waited_ms, mut silent_ms) = (0u32, 0u32);
            while let Some(f) = rx.blocking_recv() {
                let voiced = vad.is_voiced(&f.pcm);
                det.push(&f.pcm, voiced);
                match det.verdict() {
                    AmdDecision::Undecided => {}
                    AmdDecision::Machine if cfg.beep_wait_ms > 0 => {
                        waited_ms += 20;
                        silent_ms = if voiced { 0 } else { silent_ms + 20 };
                        if waited_ms >= cfg.beep_wait_ms
                            || silent_ms >= 2 * cfg.after_greeting_silence_ms
                        {
                            return AmdDecision::Machine;
                        }
                    }
                    v => return v,
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

    #[test]
    fn short_greeting_is_human_long_is_machine_beep_is_beep() {
        let mut d = AmdDetector::new(AmdConfig::default());
        let mut last = AmdDecision::Undecided;
        for i in 0..100 {
            let voiced = i < 30; // 600 ms "hello", then silence
            if let Some(v) = d.push(&[0; 160], voiced) {
                last = v;
            }
        }
        assert_eq!(last, AmdDecision::Human);

        let mut d = AmdDetector::new(AmdConfig::default());
        for _ in 0..150 {
            d.push(&[0; 160], true);
        }
        assert_eq!(d.verdict(), AmdDecision::Machine);
        // The beep after the machine greeting still gets reported.
        let t = tone(1000.0, 20);
        for f in t.chunks(160) {
            d.push(f, false);
        }
        assert_eq!(d.verdict(), AmdDecision::Beep);
    }
}
