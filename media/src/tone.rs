//! How strong one frequency is in a run of samples: the Goertzel filter, for tests and
//! benches that check what a call carried (a tone above 4 kHz on a wideband leg, a beep in
//! a recording). Answering-machine detection has its own per-frame variant on the media
//! worker's hot path ([`crate::amd::tone_ratio`]: 8 kHz, `f32`, relative to the frame's
//! energy).

/// The power of `samples` at `freq` Hz, at `rate` samples per second (Goertzel),
/// normalised by the length squared: a sine of amplitude `a` at `freq` gives about
/// `a² / 4`, so [`amplitude_at`] reads it back as `a`.
pub fn power_at(samples: &[i16], freq: f64, rate: f64) -> f64 {
    if samples.is_empty() {
        return 0.0;
    }
    let coeff = 2.0 * (2.0 * std::f64::consts::PI * freq / rate).cos();
    let (mut s1, mut s2) = (0f64, 0f64);
    for &x in samples {
        let s0 = f64::from(x) + coeff * s1 - s2;
        s2 = s1;
        s1 = s0;
    }
    (s1 * s1 + s2 * s2 - coeff * s1 * s2) / (samples.len() as f64).powi(2)
}

/// The amplitude of a sine at `freq` Hz in `samples` at `rate` ([`power_at`]).
pub fn amplitude_at(samples: &[i16], freq: f64, rate: f64) -> f64 {
    2.0 * power_at(samples, freq, rate).sqrt()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sine_reads_back_its_amplitude_at_its_frequency_only() {
        let sine: Vec<i16> = (0..3200)
            .map(|i| {
                (3000.0 * (2.0 * std::f64::consts::PI * 6000.0 * i as f64 / 16000.0).sin()) as i16
            })
            .collect();
        let a = amplitude_at(&sine, 6000.0, 16000.0);
        assert!((a - 3000.0).abs() < 30.0, "{a}");
        assert!(amplitude_at(&sine, 5000.0, 16000.0) < 30.0);
        assert_eq!(power_at(&[], 1000.0, 8000.0), 0.0);
    }
}
