//! The audio rate of a session: 8 kHz (narrowband, G.711) or 16 kHz (wideband, G.722),
//! chosen by the stream's codec ([`crate::codec::RtpCodec::audio_rate`]), and the two
//! conversions between the rates that the pipeline needs where a source and a session
//! differ.
//!
//! A narrowband session's frames stay 160 samples: only wideband sessions hold 320-sample
//! frames. Both conversions are stateless and allocate nothing (they run on the media
//! worker's tick): doubling interpolates linearly between neighbours; halving keeps every
//! other sample of a 7-tap half-band low-pass (about 25 dB down at 6 kHz, so the upper
//! band barely folds into the lower one), the slice's edge samples repeated beyond it.
//! They serve speech detection and a listener of the other rate (a bridge between a
//! wideband and a narrowband call); decoded files and synthesis are resampled properly to
//! each rate instead (see [`crate::prompt`]).

/// The sample rate of a session's audio pipeline.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Serialize, serde::Deserialize,
)]
pub enum AudioRate {
    /// 8 kHz, G.711's.
    #[default]
    Narrow,
    /// 16 kHz, G.722's.
    Wide,
}

/// Samples in one 20 ms frame at 16 kHz, the largest frame of any session.
pub const MAX_FRAME_SAMPLES: usize = 320;

impl AudioRate {
    /// Samples per second.
    pub const fn hz(self) -> u32 {
        match self {
            AudioRate::Narrow => 8000,
            AudioRate::Wide => 16000,
        }
    }

    /// The rate of `hz` when it is one of ours.
    pub fn from_hz(hz: u32) -> Option<AudioRate> {
        match hz {
            8000 => Some(AudioRate::Narrow),
            16000 => Some(AudioRate::Wide),
            _ => None,
        }
    }

    /// Samples per 8 kHz sample: 1 or 2.
    pub const fn factor(self) -> usize {
        match self {
            AudioRate::Narrow => 1,
            AudioRate::Wide => 2,
        }
    }

    /// Samples in one 20 ms frame: 160 or 320.
    pub const fn frame_samples(self) -> usize {
        crate::prompt::FRAME_SAMPLES * self.factor()
    }

    /// Samples per millisecond: 8 or 16.
    pub const fn samples_per_ms(self) -> usize {
        8 * self.factor()
    }

    /// The best rate for audio whose source is `hz`: wide from 16 kHz on.
    pub fn for_source(hz: u32) -> AudioRate {
        if hz >= 16000 {
            AudioRate::Wide
        } else {
            AudioRate::Narrow
        }
    }
}

/// Writes `src` (at `from`) into `dst` at `to`: copied, doubled or halved. `dst` takes
/// `src.len() * to.factor() / from.factor()` samples; the rest of `dst` is left alone.
pub fn convert(src: &[i16], from: AudioRate, dst: &mut [i16], to: AudioRate) {
    match (from, to) {
        (AudioRate::Narrow, AudioRate::Wide) => upsample_2x(src, dst),
        (AudioRate::Wide, AudioRate::Narrow) => decimate_2x(src, dst),
        _ => {
            let n = src.len().min(dst.len());
            dst[..n].copy_from_slice(&src[..n]);
        }
    }
}

/// 8 kHz to 16 kHz: each sample, then the mean of it and the next (the last is repeated).
pub fn upsample_2x(src: &[i16], dst: &mut [i16]) {
    for (j, o) in dst.iter_mut().take(2 * src.len()).enumerate() {
        *o = doubled(src, j);
    }
}

/// Sample `j` of `src` doubled: `src[j / 2]` at even `j`, the mean of it and the next
/// sample at odd `j` (the last repeated).
fn doubled(src: &[i16], j: usize) -> i16 {
    let a = src[j / 2];
    if j.is_multiple_of(2) {
        return a;
    }
    let b = *src.get(j / 2 + 1).unwrap_or(&a);
    ((a as i32 + b as i32) / 2) as i16
}

/// 16 kHz to 8 kHz: the half-band low-pass at every even sample.
pub fn decimate_2x(src: &[i16], dst: &mut [i16]) {
    for (i, o) in dst.iter_mut().take(src.len() / 2).enumerate() {
        *o = half_band(src, 2 * i);
    }
}

/// The half-band filter `[-1, 0, 9, 16, 9, 0, -1] / 32` at `src[c]`, edges repeated.
fn half_band(src: &[i16], c: usize) -> i16 {
    let at = |k: isize| src[(c as isize + k).clamp(0, src.len() as isize - 1) as usize] as i32;
    let v = 16 * at(0) + 9 * (at(-1) + at(1)) - (at(-3) + at(3));
    (v / 32).clamp(i16::MIN as i32, i16::MAX as i32) as i16
}

/// `src` at `from` as samples at `to`, one by one (nothing allocated): for appending to a
/// buffer of another rate. Halving keeps a last odd sample.
pub fn samples_at(src: &[i16], from: AudioRate, to: AudioRate) -> impl Iterator<Item = i16> + '_ {
    let n = match (from, to) {
        (AudioRate::Wide, AudioRate::Narrow) => src.len().div_ceil(2),
        (AudioRate::Narrow, AudioRate::Wide) => 2 * src.len(),
        _ => src.len(),
    };
    (0..n).map(move |j| match (from, to) {
        (AudioRate::Wide, AudioRate::Narrow) => half_band(src, 2 * j),
        (AudioRate::Narrow, AudioRate::Wide) => doubled(src, j),
        _ => src[j],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_and_frames() {
        assert_eq!(AudioRate::default(), AudioRate::Narrow);
        assert_eq!(AudioRate::Wide.frame_samples(), MAX_FRAME_SAMPLES);
        assert_eq!(AudioRate::Narrow.frame_samples(), 160);
        assert_eq!(AudioRate::from_hz(16000), Some(AudioRate::Wide));
        assert_eq!(AudioRate::from_hz(44100), None);
        assert_eq!(AudioRate::for_source(22050), AudioRate::Wide);
        assert_eq!(AudioRate::for_source(11025), AudioRate::Narrow);
    }

    #[test]
    fn conversions_keep_the_signal() {
        let narrow = [0i16, 100, 200, 300];
        let mut wide = [0i16; 8];
        convert(&narrow, AudioRate::Narrow, &mut wide, AudioRate::Wide);
        assert_eq!(wide, [0, 50, 100, 150, 200, 250, 300, 300]);
        let mut back = [0i16; 4];
        convert(&wide, AudioRate::Wide, &mut back, AudioRate::Narrow);
        assert_eq!(back, [9, 98, 201, 290]);
        let it: Vec<i16> = samples_at(&narrow, AudioRate::Narrow, AudioRate::Wide).collect();
        assert_eq!(it, wide);
        let it: Vec<i16> = samples_at(&wide, AudioRate::Wide, AudioRate::Narrow).collect();
        assert_eq!(it, back);
        let it: Vec<i16> = samples_at(&narrow, AudioRate::Narrow, AudioRate::Narrow).collect();
        assert_eq!(it, narrow);
    }

    #[test]
    fn halving_keeps_the_lower_band_and_folds_little_of_the_upper() {
        let tone = |f: f64| -> Vec<i16> {
            (0..3200)
                .map(|i| {
                    ((i as f64 * 2.0 * std::f64::consts::PI * f / 16000.0).sin() * 8000.0) as i16
                })
                .collect()
        };
        let rms = |x: &[i16]| {
            (x.iter().map(|v| (*v as f64).powi(2)).sum::<f64>() / x.len() as f64).sqrt()
        };
        let mut out = [0i16; 1600];
        decimate_2x(&tone(1000.0), &mut out);
        assert!(rms(&out[10..1590]) > 5500.0, "1 kHz passes");
        decimate_2x(&tone(6000.0), &mut out);
        assert!(
            rms(&out[10..1590]) < 600.0,
            "6 kHz folds 20 dB down or more"
        );
    }
}
