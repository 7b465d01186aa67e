//! ITU-T G.722 at 64 kbit/s: sub-band ADPCM (SB-ADPCM), 16 kHz audio in 8-bit codes, one
//! code per pair of 16 kHz samples (6 bits for the 0-4 kHz band, 2 for 4-8 kHz).
//!
//! Written after the public-domain spandsp implementation (Steve Underwood, itself based on
//! the CMU 1993 codec). Unlike G.711 the codec has state: an encoder or decoder belongs to
//! one stream, and each code depends on every one before it.
//!
//! Two sample rates on the linear side:
//! - 16 kHz ([`G722Encoder::new`]): the full codec, the quadrature mirror filters splitting
//!   and joining the two bands (what a G.722 session uses, see [`crate::codec`]);
//! - 8 kHz ([`G722Encoder::new_8k`]): the lower band alone, the filters bypassed, for a
//!   caller that has 8 kHz audio only: encoding sends the upper band as the code of least
//!   magnitude, decoding keeps only the lower band, and one code stands for one 8 kHz
//!   sample, so 20 ms is 160 codes either way.
//!
//! Nothing here allocates.

/// The state of one band's adaptive predictor and quantiser scale.
#[derive(Debug, Clone, Default)]
struct Band {
    s: i32,
    sp: i32,
    sz: i32,
    r: [i32; 3],
    a: [i32; 3],
    ap: [i32; 3],
    p: [i32; 3],
    d: [i32; 7],
    b: [i32; 7],
    bp: [i32; 7],
    sg: [i32; 7],
    nb: i32,
    det: i32,
}

impl Band {
    fn new(det: i32) -> Band {
        Band {
            det,
            ..Band::default()
        }
    }
}

const QMF_COEFFS: [i32; 12] = [3, -11, 12, 32, -210, 951, 3876, -805, 362, -156, 53, -11];
const WL: [i32; 8] = [-60, -30, 58, 172, 334, 538, 1198, 3042];
const RL42: [i32; 16] = [0, 7, 6, 5, 4, 3, 2, 1, 7, 6, 5, 4, 3, 2, 1, 0];
const ILB: [i32; 32] = [
    2048, 2093, 2139, 2186, 2233, 2282, 2332, 2383, 2435, 2489, 2543, 2599, 2656, 2714, 2774, 2834,
    2896, 2960, 3025, 3091, 3158, 3228, 3298, 3371, 3444, 3520, 3597, 3676, 3756, 3838, 3922, 4008,
];
const QM4: [i32; 16] = [
    0, -20456, -12896, -8968, -6288, -4240, -2584, -1200, 20456, 12896, 8968, 6288, 4240, 2584,
    1200, 0,
];
const QM2: [i32; 4] = [-7408, -1616, 7408, 1616];
const WH: [i32; 3] = [0, -214, 798];
const RH2: [i32; 4] = [2, 1, 2, 1];
const QM6: [i32; 64] = [
    -136, -136, -136, -136, -24808, -21904, -19008, -16704, -14984, -13512, -12280, -11192, -10232,
    -9360, -8576, -7856, -7192, -6576, -6000, -5456, -4944, -4464, -4008, -3576, -3168, -2776,
    -2400, -2032, -1688, -1360, -1040, -728, 24808, 21904, 19008, 16704, 14984, 13512, 12280,
    11192, 10232, 9360, 8576, 7856, 7192, 6576, 6000, 5456, 4944, 4464, 4008, 3576, 3168, 2776,
    2400, 2032, 1688, 1360, 1040, 728, 432, 136, -432, -136,
];
// Encoder quantiser (lower band): decision levels and the codes for negative and positive
// differences.
const Q6: [i32; 32] = [
    0, 35, 72, 110, 150, 190, 233, 276, 323, 370, 422, 473, 530, 587, 650, 714, 786, 858, 940,
    1023, 1121, 1219, 1339, 1458, 1612, 1765, 1980, 2195, 2557, 2919, 0, 0,
];
const ILN: [i32; 32] = [
    0, 63, 62, 31, 30, 29, 28, 27, 26, 25, 24, 23, 22, 21, 20, 19, 18, 17, 16, 15, 14, 13, 12, 11,
    10, 9, 8, 7, 6, 5, 4, 0,
];
const ILP: [i32; 32] = [
    0, 61, 60, 59, 58, 57, 56, 55, 54, 53, 52, 51, 50, 49, 48, 47, 46, 45, 44, 43, 42, 41, 40, 39,
    38, 37, 36, 35, 34, 33, 32, 0,
];
const IHN: [i32; 3] = [0, 1, 0];
const IHP: [i32; 3] = [0, 3, 2];

#[inline]
fn saturate(v: i32) -> i32 {
    v.clamp(i16::MIN as i32, i16::MAX as i32)
}

/// Block 4 of the standard: reconstruction, predictor adaptation and prediction, shared by
/// both bands of encoder and decoder.
fn block4(band: &mut Band, d: i32) {
    // RECONS
    band.d[0] = d;
    band.r[0] = saturate(band.s + d);
    // PARREC
    band.p[0] = saturate(band.sz + d);
    // UPPOL2
    for i in 0..3 {
        band.sg[i] = band.p[i] >> 15;
    }
    let wd1 = saturate(band.a[1] << 2);
    let wd2 = if band.sg[0] == band.sg[1] { -wd1 } else { wd1 }.min(32767);
    let mut wd3 = (wd2 >> 7) + if band.sg[0] == band.sg[2] { 128 } else { -128 };
    wd3 += (band.a[2] * 32512) >> 15;
    band.ap[2] = wd3.clamp(-12288, 12288);
    // UPPOL1
    band.sg[0] = band.p[0] >> 15;
    band.sg[1] = band.p[1] >> 15;
    let wd1 = if band.sg[0] == band.sg[1] { 192 } else { -192 };
    let wd2 = (band.a[1] * 32640) >> 15;
    band.ap[1] = saturate(wd1 + wd2);
    let wd3 = saturate(15360 - band.ap[2]);
    band.ap[1] = band.ap[1].clamp(-wd3, wd3);
    // UPZERO
    let wd1 = if d == 0 { 0 } else { 128 };
    band.sg[0] = d >> 15;
    for i in 1..7 {
        band.sg[i] = band.d[i] >> 15;
        let wd2 = if band.sg[i] == band.sg[0] { wd1 } else { -wd1 };
        let wd3 = (band.b[i] * 32640) >> 15;
        band.bp[i] = saturate(wd2 + wd3);
    }
    // DELAYA
    for i in (1..7).rev() {
        band.d[i] = band.d[i - 1];
        band.b[i] = band.bp[i];
    }
    for i in (1..3).rev() {
        band.r[i] = band.r[i - 1];
        band.p[i] = band.p[i - 1];
        band.a[i] = band.ap[i];
    }
    // FILTEP
    let wd1 = (band.a[1] * saturate(band.r[1] + band.r[1])) >> 15;
    let wd2 = (band.a[2] * saturate(band.r[2] + band.r[2])) >> 15;
    band.sp = saturate(wd1 + wd2);
    // FILTEZ
    band.sz = 0;
    for i in (1..7).rev() {
        band.sz += (band.b[i] * saturate(band.d[i] + band.d[i])) >> 15;
    }
    band.sz = saturate(band.sz);
    // PREDIC
    band.s = saturate(band.sp + band.sz);
}

/// LOGSCL + SCALEL: the lower band's scale factor after code `il4`.
fn adapt_low(band: &mut Band, il4: i32) {
    let nb = ((band.nb * 127) >> 7) + WL[il4 as usize];
    band.nb = nb.clamp(0, 18432);
    band.det = scale(band.nb, 8);
}

/// LOGSCH + SCALEH: the upper band's scale factor after code `ih2`.
fn adapt_high(band: &mut Band, ih2: i32) {
    let nb = ((band.nb * 127) >> 7) + WH[ih2 as usize];
    band.nb = nb.clamp(0, 22528);
    band.det = scale(band.nb, 10);
}

fn scale(nb: i32, shift: i32) -> i32 {
    let wd1 = (nb >> 6) & 31;
    let wd2 = shift - (nb >> 11);
    let wd3 = if wd2 < 0 {
        ILB[wd1 as usize] << -wd2
    } else {
        ILB[wd1 as usize] >> wd2
    };
    wd3 << 2
}

/// A G.722 encoder (64 kbit/s) for one stream.
#[derive(Debug, Clone)]
pub struct G722Encoder {
    eight_k: bool,
    x: [i32; 24],
    band: [Band; 2],
}

impl Default for G722Encoder {
    fn default() -> Self {
        G722Encoder::new()
    }
}

impl G722Encoder {
    /// Encodes 16 kHz audio: two samples per code.
    pub fn new() -> G722Encoder {
        G722Encoder {
            eight_k: false,
            x: [0; 24],
            band: [Band::new(32), Band::new(8)],
        }
    }

    /// Encodes 8 kHz audio into the lower band: one sample per code (see the module notes).
    pub fn new_8k() -> G722Encoder {
        G722Encoder {
            eight_k: true,
            ..G722Encoder::new()
        }
    }

    /// Samples per code on the linear side: 2 at 16 kHz, 1 at 8 kHz.
    pub fn samples_per_code(&self) -> usize {
        if self.eight_k { 1 } else { 2 }
    }

    /// Encodes `pcm` into `out`, one code per [`samples_per_code`](Self::samples_per_code)
    /// samples; returns the codes written (bounded by `out.len()`; an odd last 16 kHz
    /// sample is left unencoded).
    pub fn encode(&mut self, pcm: &[i16], out: &mut [u8]) -> usize {
        let step = self.samples_per_code();
        let mut n = 0;
        for (chunk, o) in pcm.chunks_exact(step).zip(out.iter_mut()) {
            *o = self.encode_one(chunk);
            n += 1;
        }
        n
    }

    fn encode_one(&mut self, chunk: &[i16]) -> u8 {
        let (xlow, xhigh) = if self.eight_k {
            (chunk[0] as i32 >> 1, 0)
        } else {
            // Transmit QMF: shift two samples in, keep every other output.
            self.x.copy_within(2.., 0);
            self.x[22] = chunk[0] as i32;
            self.x[23] = chunk[1] as i32;
            let (mut sumodd, mut sumeven) = (0, 0);
            for i in 0..12 {
                sumodd += self.x[2 * i] * QMF_COEFFS[i];
                sumeven += self.x[2 * i + 1] * QMF_COEFFS[11 - i];
            }
            ((sumeven + sumodd) >> 14, (sumeven - sumodd) >> 14)
        };

        // Lower band: SUBTRA, QUANTL, INVQAL, adaptation, block 4.
        let low = &mut self.band[0];
        let el = saturate(xlow - low.s);
        let wd = if el >= 0 { el } else { -(el + 1) };
        let mut i = 1;
        while i < 30 && wd >= (Q6[i] * low.det) >> 12 {
            i += 1;
        }
        let ilow = if el < 0 { ILN[i] } else { ILP[i] };
        let ril = ilow >> 2;
        let dlow = (low.det * QM4[ril as usize]) >> 15;
        adapt_low(low, RL42[ril as usize]);
        block4(low, dlow);

        if self.eight_k {
            // The upper band's code of least magnitude.
            return (0xC0 | ilow) as u8;
        }

        // Upper band: SUBTRA, QUANTH, INVQAH, adaptation, block 4.
        let high = &mut self.band[1];
        let eh = saturate(xhigh - high.s);
        let wd = if eh >= 0 { eh } else { -(eh + 1) };
        let mih = if wd >= (564 * high.det) >> 12 { 2 } else { 1 };
        let ihigh = if eh < 0 { IHN[mih] } else { IHP[mih] };
        let dhigh = (high.det * QM2[ihigh as usize]) >> 15;
        adapt_high(high, RH2[ihigh as usize]);
        block4(high, dhigh);
        ((ihigh << 6) | ilow) as u8
    }
}

/// A G.722 decoder (64 kbit/s) for one stream.
#[derive(Debug, Clone)]
pub struct G722Decoder {
    eight_k: bool,
    x: [i32; 24],
    band: [Band; 2],
}

impl Default for G722Decoder {
    fn default() -> Self {
        G722Decoder::new()
    }
}

impl G722Decoder {
    /// Decodes to 16 kHz audio: two samples per code.
    pub fn new() -> G722Decoder {
        G722Decoder {
            eight_k: false,
            x: [0; 24],
            band: [Band::new(32), Band::new(8)],
        }
    }

    /// Decodes the lower band alone to 8 kHz audio: one sample per code.
    pub fn new_8k() -> G722Decoder {
        G722Decoder {
            eight_k: true,
            ..G722Decoder::new()
        }
    }

    /// Samples per code on the linear side: 2 at 16 kHz, 1 at 8 kHz.
    pub fn samples_per_code(&self) -> usize {
        if self.eight_k { 1 } else { 2 }
    }

    /// Decodes `codes` into `out`; returns the samples written (whole codes only, bounded
    /// by `out.len()`).
    pub fn decode(&mut self, codes: &[u8], out: &mut [i16]) -> usize {
        let step = self.samples_per_code();
        let mut n = 0;
        for (code, o) in codes.iter().zip(out.chunks_exact_mut(step)) {
            self.decode_one(*code, o);
            n += step;
        }
        n
    }

    fn decode_one(&mut self, code: u8, out: &mut [i16]) {
        let code = code as i32;
        let wd1 = code & 0x3F;
        let ihigh = (code >> 6) & 0x03;
        // Lower band: INVQBL, RECONS, LIMIT with the 6-bit code.
        let low = &mut self.band[0];
        let rlow = (low.s + ((low.det * QM6[wd1 as usize]) >> 15)).clamp(-16384, 16383);
        // INVQAL with the 4-bit code drives the adaptation, as in the encoder.
        let ril = wd1 >> 2;
        let dlow = (low.det * QM4[ril as usize]) >> 15;
        adapt_low(low, RL42[ril as usize]);
        block4(low, dlow);

        if self.eight_k {
            out[0] = saturate(rlow << 1) as i16;
            return;
        }

        let high = &mut self.band[1];
        let dhigh = (high.det * QM2[ihigh as usize]) >> 15;
        let rhigh = (dhigh + high.s).clamp(-16384, 16383);
        adapt_high(high, RH2[ihigh as usize]);
        block4(high, dhigh);

        // Receive QMF.
        self.x.copy_within(2.., 0);
        self.x[22] = rlow + rhigh;
        self.x[23] = rlow - rhigh;
        let (mut xout1, mut xout2) = (0, 0);
        for i in 0..12 {
            xout2 += self.x[2 * i] * QMF_COEFFS[i];
            xout1 += self.x[2 * i + 1] * QMF_COEFFS[11 - i];
        }
        out[0] = saturate(xout1 >> 11) as i16;
        out[1] = saturate(xout2 >> 11) as i16;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tone(rate: f64, hz: f64, amp: f64, n: usize) -> Vec<i16> {
        (0..n)
            .map(|i| (amp * (2.0 * std::f64::consts::PI * hz * i as f64 / rate).sin()) as i16)
            .collect()
    }

    /// Signal-to-noise ratio of `out` against `reference` delayed by `delay` samples, over
    /// the part after the codec has settled.
    fn snr_db(reference: &[i16], out: &[i16], delay: usize) -> f64 {
        let (mut sig, mut noise) = (0f64, 0f64);
        for i in 800..reference.len() - delay {
            let r = reference[i] as f64;
            let e = out[i + delay] as f64 - r;
            sig += r * r;
            noise += e * e;
        }
        10.0 * (sig / noise.max(1.0)).log10()
    }

    /// The delay that best aligns `out` with `reference` (the QMF pair adds a fixed delay).
    fn best_delay(reference: &[i16], out: &[i16]) -> usize {
        (0..64)
            .max_by(|a, b| {
                snr_db(reference, out, *a)
                    .partial_cmp(&snr_db(reference, out, *b))
                    .unwrap()
            })
            .unwrap()
    }

    #[test]
    fn wideband_round_trip_keeps_a_tone_in_each_band() {
        // 1 kHz lives in the lower band, 6 kHz in the upper one (beyond G.711's reach).
        for hz in [1000.0, 6000.0] {
            let input = tone(16000.0, hz, 8000.0, 16000);
            let mut codes = vec![0u8; input.len() / 2];
            assert_eq!(G722Encoder::new().encode(&input, &mut codes), 8000);
            let mut out = vec![0i16; input.len()];
            assert_eq!(G722Decoder::new().decode(&codes, &mut out), 16000);
            let delay = best_delay(&input, &out);
            let snr = snr_db(&input, &out, delay);
            assert!(snr > 20.0, "{hz} Hz: SNR {snr:.1} dB");
        }
    }

    #[test]
    fn the_8k_lower_band_round_trip_is_as_good_as_g711() {
        let input = tone(8000.0, 440.0, 10000.0, 8000);
        let mut codes = vec![0u8; input.len()];
        assert_eq!(G722Encoder::new_8k().encode(&input, &mut codes), 8000);
        let mut out = vec![0i16; input.len()];
        assert_eq!(G722Decoder::new_8k().decode(&codes, &mut out), 8000);
        let snr = snr_db(&input, &out, 0);
        assert!(snr > 25.0, "SNR {snr:.1} dB");
        // The upper band carries the code of least magnitude.
        assert!(codes.iter().all(|c| c & 0xC0 == 0xC0));
    }

    #[test]
    fn a_wideband_decoder_hears_the_8k_encoder() {
        // A peer decoding the full codec gets the 8 kHz stream back at 16 kHz: every other
        // sample tracks the tone, the upper band adds (almost) nothing.
        let input = tone(8000.0, 500.0, 10000.0, 8000);
        let mut codes = vec![0u8; input.len()];
        G722Encoder::new_8k().encode(&input, &mut codes);
        let mut wide = vec![0i16; input.len() * 2];
        G722Decoder::new().decode(&codes, &mut wide);
        let upsampled: Vec<i16> = input.iter().flat_map(|s| [*s, *s]).collect();
        let delay = best_delay(&upsampled, &wide);
        let snr = snr_db(&upsampled, &wide, delay);
        assert!(snr > 10.0, "SNR {snr:.1} dB");
    }

    #[test]
    fn silence_encodes_to_steady_codes_and_decodes_to_near_silence() {
        let input = vec![0i16; 3200];
        let mut codes = vec![0u8; 1600];
        G722Encoder::new().encode(&input, &mut codes);
        let mut out = vec![0i16; 3200];
        G722Decoder::new().decode(&codes, &mut out);
        assert!(
            out[200..].iter().all(|s| s.abs() < 16),
            "{:?}",
            &out[200..220]
        );
        // Silence settles on the upper band's code of least magnitude (0b11).
        let settled: std::collections::BTreeSet<u8> = codes[100..].iter().copied().collect();
        assert!(settled.iter().all(|c| c & 0xC0 == 0xC0), "{settled:x?}");
    }

    #[test]
    fn encoders_and_decoders_stay_in_step_across_calls() {
        // State carries over: encoding in 20 ms frames gives the codes of one whole call.
        let input = tone(16000.0, 1500.0, 6000.0, 3200);
        let mut whole = vec![0u8; 1600];
        G722Encoder::new().encode(&input, &mut whole);
        let mut framed = vec![0u8; 1600];
        let mut enc = G722Encoder::new();
        for (pcm, out) in input.chunks(320).zip(framed.chunks_mut(160)) {
            assert_eq!(enc.encode(pcm, out), 160);
        }
        assert_eq!(whole, framed);
    }

    #[test]
    fn full_scale_input_neither_panics_nor_overflows() {
        let mut input: Vec<i16> = (0..4000)
            .map(|i| if i % 2 == 0 { i16::MAX } else { i16::MIN })
            .collect();
        input.extend((0..4000).map(|i| if (i / 7) % 2 == 0 { i16::MAX } else { i16::MIN }));
        let mut codes = vec![0u8; input.len() / 2];
        G722Encoder::new().encode(&input, &mut codes);
        let mut out = vec![0i16; input.len()];
        G722Decoder::new().decode(&codes, &mut out);
        let mut all = [0u8; 256];
        for (i, c) in all.iter_mut().enumerate() {
            *c = i as u8;
        }
        let mut out = vec![0i16; 512];
        assert_eq!(G722Decoder::new().decode(&all, &mut out), 512);
        assert_eq!(G722Decoder::new_8k().decode(&all, &mut out), 256);
    }
}
