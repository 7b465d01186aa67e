//! Speech onset/offset detection on 20 ms caller frames: webrtc-vad decides
//! voiced/unvoiced per frame; a small hysteresis turns that into start/stop
//! events. A cheap energy gate skips the VAD on near-silent frames.
//!
//! `webrtc_vad::Vad` is not `Send`; a `SpeechDetector` is built inside the
//! media worker thread that owns the session.

use webrtc_vad::{SampleRate, Vad, VadMode};

/// Speech transitions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpeechTransition {
    Started,
    Stopped,
}

/// Tuning for the detector.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct VadConfig {
    /// webrtc-vad aggressiveness 0 (quality) ..= 3 (very aggressive).
    pub mode: u8,
    /// Consecutive voiced frames that make an onset.
    pub onset_frames: u32,
    /// Consecutive unvoiced frames that end speech.
    pub hangover_frames: u32,
    /// Mean absolute amplitude below which a frame is unvoiced without asking the VAD.
    pub energy_floor: u32,
    /// Voiced speech (ms, counted from the onset) that interrupts an interruptible prompt.
    /// Shorter speech ("mm-hm", "yeah", a cough) is a backchannel: the prompt plays on.
    /// 0 interrupts at the onset.
    #[serde(default = "default_barge_in_min_ms")]
    pub barge_in_min_ms: u32,
}

/// The default [`VadConfig::barge_in_min_ms`].
pub const BARGE_IN_MIN_MS: u32 = 300;

fn default_barge_in_min_ms() -> u32 {
    BARGE_IN_MIN_MS
}

impl Default for VadConfig {
    fn default() -> Self {
        VadConfig {
            mode: 3,
            onset_frames: 2,
            hangover_frames: 20,
            energy_floor: 60,
            barge_in_min_ms: BARGE_IN_MIN_MS,
        }
    }
}

pub struct SpeechDetector {
    vad: Vad,
    cfg: VadConfig,
    voiced_run: u32,
    unvoiced_run: u32,
    speaking: bool,
    /// Voiced frames since the onset of the current speech.
    voiced_frames: u32,
    /// The last frame made the current speech long enough to interrupt.
    barge_now: bool,
}

impl SpeechDetector {
    pub fn new(cfg: VadConfig) -> SpeechDetector {
        let mode = match cfg.mode {
            0 => VadMode::Quality,
            1 => VadMode::LowBitrate,
            2 => VadMode::Aggressive,
            _ => VadMode::VeryAggressive,
        };
        SpeechDetector {
            vad: Vad::new_with_rate_and_mode(SampleRate::Rate8kHz, mode),
            cfg,
            voiced_run: 0,
            unvoiced_run: 0,
            speaking: false,
            voiced_frames: 0,
            barge_now: false,
        }
    }

    pub fn is_speaking(&self) -> bool {
        self.speaking
    }

    /// The silence that ends speech, ms ([`VadConfig::hangover_frames`] of 20 ms).
    pub fn hangover_ms(&self) -> u32 {
        self.cfg.hangover_frames.max(1) * 20
    }

    /// Voiced milliseconds (20 ms frames) since the onset of the current speech; 0 when
    /// nobody speaks.
    pub fn voiced_ms(&self) -> u32 {
        if self.speaking {
            self.voiced_frames * 20
        } else {
            0
        }
    }

    /// Whether the last frame made the current speech long enough to interrupt a prompt
    /// ([`VadConfig::barge_in_min_ms`]): true on that one frame of each speech, so a prompt
    /// started later (the bot's reply during the hangover of the caller's answer) is not
    /// cut by speech that already ended.
    pub fn barges_in(&self) -> bool {
        self.barge_now
    }

    /// Ends the current speech without waiting for the hangover (the detection is turned
    /// off while the caller is heard speaking): the milliseconds since its last voiced frame
    /// (0 while voice is still coming), or `None` when nobody was speaking.
    pub fn end_speech(&mut self) -> Option<u32> {
        if !self.speaking {
            return None;
        }
        let silence_ms = self.unvoiced_run * 20;
        self.speaking = false;
        self.voiced_run = 0;
        self.unvoiced_run = 0;
        self.voiced_frames = 0;
        self.barge_now = false;
        Some(silence_ms)
    }

    /// Classifies one 10/20/30 ms frame at 8 kHz.
    pub fn is_voiced(&mut self, frame: &[i16]) -> bool {
        if frame.is_empty() {
            return false;
        }
        let energy =
            frame.iter().map(|s| s.unsigned_abs() as u64).sum::<u64>() / frame.len() as u64;
        if energy < self.cfg.energy_floor as u64 {
            return false;
        }
        self.vad.is_voice_segment(frame).unwrap_or(false)
    }

    /// Feeds one frame; returns a transition when speech starts or stops.
    pub fn push(&mut self, frame: &[i16]) -> Option<SpeechTransition> {
        let before = self.voiced_ms();
        let transition = self.step(frame);
        let min = self.cfg.barge_in_min_ms;
        self.barge_now =
            self.speaking && self.voiced_ms() >= min && (before < min || transition.is_some());
        transition
    }

    fn step(&mut self, frame: &[i16]) -> Option<SpeechTransition> {
        if self.is_voiced(frame) {
            self.voiced_run += 1;
            self.unvoiced_run = 0;
            if self.speaking {
                self.voiced_frames += 1;
            } else if self.voiced_run >= self.cfg.onset_frames.max(1) {
                self.speaking = true;
                self.voiced_frames = self.voiced_run;
                return Some(SpeechTransition::Started);
            }
        } else {
            self.unvoiced_run += 1;
            self.voiced_run = 0;
            if self.speaking && self.unvoiced_run >= self.cfg.hangover_frames.max(1) {
                self.speaking = false;
                return Some(SpeechTransition::Stopped);
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A crude voiced signal: a 150 Hz pulse train through decaying resonances (vowel-like).
    pub(crate) fn vowel(frames: usize) -> Vec<i16> {
        let n = frames * 160;
        (0..n)
            .map(|i| {
                let t = i as f32 / 8000.0;
                let f0 = 2.0 * std::f32::consts::PI * 150.0 * t;
                let v = f0.sin() * 0.5 + (f0 * 5.0).sin() * 0.3 + (f0 * 14.0).sin() * 0.2;
                (v * 9000.0) as i16
            })
            .collect()
    }

    /// Ending the speech early gives the silence counted since its last voiced frame and
    /// leaves the detector ready for a new onset.
    #[test]
    fn speech_ended_early_reports_its_silence_and_awaits_a_new_onset() {
        let mut d = SpeechDetector::new(VadConfig::default());
        assert_eq!(d.end_speech(), None, "nobody speaking");
        let v = vowel(20);
        for f in v.chunks(160).take(10) {
            d.push(f);
        }
        assert!(d.is_speaking());
        for _ in 0..6 {
            assert_eq!(d.push(&[0; 160]), None, "within the hangover");
        }
        assert_eq!(d.end_speech(), Some(120));
        assert!(!d.is_speaking());
        let mut again = v.chunks(160).skip(10);
        assert_eq!(d.push(again.next().unwrap()), None);
        assert_eq!(
            d.push(again.next().unwrap()),
            Some(SpeechTransition::Started)
        );
    }

    #[test]
    fn silence_never_starts_speech() {
        let mut d = SpeechDetector::new(VadConfig::default());
        for _ in 0..100 {
            assert_eq!(d.push(&[0; 160]), None);
        }
    }

    #[test]
    fn voiced_then_silence_starts_and_stops() {
        let mut d = SpeechDetector::new(VadConfig::default());
        let v = vowel(50);
        let mut events = vec![];
        for f in v.chunks(160) {
            if let Some(e) = d.push(f) {
                events.push(e);
            }
        }
        for _ in 0..40 {
            if let Some(e) = d.push(&[0; 160]) {
                events.push(e);
            }
        }
        assert_eq!(
            events,
            vec![SpeechTransition::Started, SpeechTransition::Stopped]
        );
    }

    /// Frames (of `voiced` vowel frames, then 40 silent ones) on which the speech would
    /// interrupt a prompt.
    fn barge_frames(cfg: VadConfig, voiced: usize) -> Vec<usize> {
        let mut d = SpeechDetector::new(cfg);
        let mut at = vec![];
        let v = vowel(voiced);
        let frames = v
            .chunks(160)
            .map(<[i16]>::to_vec)
            .chain((0..40).map(|_| vec![0; 160]));
        for (i, f) in frames.enumerate() {
            d.push(&f);
            if d.barges_in() {
                at.push(i);
            }
        }
        at
    }

    #[test]
    fn a_backchannel_does_not_barge_in_and_real_speech_does_once() {
        let cfg = VadConfig::default();
        assert_eq!(cfg.barge_in_min_ms, 300);
        // 200 ms ("mm-hm"): never long enough, including through the hangover.
        assert!(barge_frames(cfg, 10).is_empty());
        // 1 s of speech: once, when 300 ms are voiced (frame 14, the 15th voiced frame).
        assert_eq!(barge_frames(cfg, 50), vec![14]);
        // 0: at the onset, as soon as speech starts.
        let at_onset = VadConfig {
            barge_in_min_ms: 0,
            ..cfg
        };
        assert_eq!(barge_frames(at_onset, 50), vec![1]);
        assert_eq!(barge_frames(at_onset, 10), vec![1]);
    }
}
