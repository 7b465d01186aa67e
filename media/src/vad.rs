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
}

impl Default for VadConfig {
    fn default() -> Self {
        VadConfig {
            mode: 3,
            onset_frames: 2,
            hangover_frames: 20,
            energy_floor: 60,
        }
    }
}

pub struct SpeechDetector {
    vad: Vad,
    cfg: VadConfig,
    voiced_run: u32,
    unvoiced_run: u32,
    speaking: bool,
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
        }
    }

    pub fn is_speaking(&self) -> bool {
        self.speaking
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
        if self.is_voiced(frame) {
            self.voiced_run += 1;
            self.unvoiced_run = 0;
            if !self.speaking && self.voiced_run >= self.cfg.onset_frames.max(1) {
                self.speaking = true;
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
}
