//! Streamed synthesis bodies: a WAV header parser and an incremental 16-bit PCM to 8 or
//! 16 kHz mono converter.

use super::TtsError;
use crate::rate::AudioRate;

/// What the start of a WAV body says: more bytes needed, 16-bit PCM and where its
/// samples start, or anything else.
pub(super) enum WavHeader {
    NeedMore,
    Pcm16 {
        rate: u32,
        channels: u16,
        data_offset: usize,
    },
    Other,
}

/// Parses a WAV header from the start of a body.
pub(super) fn parse_wav_header(b: &[u8]) -> WavHeader {
    if b.len() < 12 {
        return WavHeader::NeedMore;
    }
    if &b[..4] != b"RIFF" || &b[8..12] != b"WAVE" {
        return WavHeader::Other;
    }
    let mut off = 12;
    let mut fmt: Option<(u16, u16, u32, u16)> = None;
    loop {
        if b.len() < off + 8 {
            return WavHeader::NeedMore;
        }
        let id = &b[off..off + 4];
        let size = u32::from_le_bytes([b[off + 4], b[off + 5], b[off + 6], b[off + 7]]) as usize;
        if id == b"data" {
            return match fmt {
                Some((1, ch, rate, 16)) if ch > 0 && rate > 0 => WavHeader::Pcm16 {
                    rate,
                    channels: ch,
                    data_offset: off + 8,
                },
                _ => WavHeader::Other,
            };
        }
        if id == b"fmt " {
            if b.len() < off + 8 + 16 {
                return WavHeader::NeedMore;
            }
            let f = &b[off + 8..];
            fmt = Some((
                u16::from_le_bytes([f[0], f[1]]),
                u16::from_le_bytes([f[2], f[3]]),
                u32::from_le_bytes([f[4], f[5], f[6], f[7]]),
                u16::from_le_bytes([f[14], f[15]]),
            ));
        }
        off = match off.checked_add(8 + size + (size & 1)) {
            Some(o) => o,
            None => return WavHeader::Other,
        };
        if off > 1 << 20 {
            return WavHeader::Other;
        }
    }
}

/// Incremental 16-bit PCM → mono converter at a session's rate.
pub(super) struct WavStreamDecoder {
    channels: usize,
    carry: Vec<u8>,
    resampler: Option<rubato::FftFixedInOut<f32>>,
    pending: Vec<f32>,
    delay_left: usize,
    rate: u32,
    /// The output rate.
    target: u32,
    in_total: u64,
    out_total: u64,
}

impl WavStreamDecoder {
    /// A converter of `channels` at `rate` to mono at `target`.
    pub(super) fn new(
        rate: u32,
        channels: u16,
        target: AudioRate,
    ) -> Result<WavStreamDecoder, TtsError> {
        use rubato::Resampler;
        let target = target.hz();
        let resampler = if rate == target {
            None
        } else {
            Some(
                rubato::FftFixedInOut::<f32>::new(rate as usize, target as usize, 1024, 1)
                    .map_err(|e| TtsError::Synth(e.to_string()))?,
            )
        };
        let delay_left = resampler.as_ref().map(|r| r.output_delay()).unwrap_or(0);
        Ok(WavStreamDecoder {
            channels: channels as usize,
            carry: Vec::new(),
            resampler,
            pending: Vec::new(),
            delay_left,
            rate,
            target,
            in_total: 0,
            out_total: 0,
        })
    }

    pub(super) fn feed(&mut self, data: &[u8]) -> Result<Vec<i16>, TtsError> {
        self.carry.extend_from_slice(data);
        let frame_bytes = 2 * self.channels;
        let whole = self.carry.len() / frame_bytes * frame_bytes;
        let mono: Vec<f32> = self.carry[..whole]
            .chunks_exact(frame_bytes)
            .map(|f| {
                f.chunks_exact(2)
                    .map(|s| i16::from_le_bytes([s[0], s[1]]) as f32 / 32768.0)
                    .sum::<f32>()
                    / self.channels as f32
            })
            .collect();
        self.carry.drain(..whole);
        self.convert(&mono, false)
    }

    pub(super) fn flush(&mut self) -> Result<Vec<i16>, TtsError> {
        self.convert(&[], true)
    }

    fn convert(&mut self, mono: &[f32], last: bool) -> Result<Vec<i16>, TtsError> {
        use rubato::Resampler;
        let to_i16 = |v: f32| (v * 32768.0).round().clamp(-32768.0, 32767.0) as i16;
        let Some(rs) = self.resampler.as_mut() else {
            return Ok(mono.iter().map(|v| to_i16(*v)).collect());
        };
        self.in_total += mono.len() as u64;
        self.pending.extend_from_slice(mono);
        let mut out = Vec::new();
        let err = |e: rubato::ResampleError| TtsError::Synth(e.to_string());
        while self.pending.len() >= rs.input_frames_next() {
            let n = rs.input_frames_next();
            let r = rs.process(&[&self.pending[..n]], None).map_err(err)?;
            out.extend_from_slice(&r[0]);
            self.pending.drain(..n);
        }
        if last {
            if !self.pending.is_empty() {
                let r = rs
                    .process_partial(Some(&[&self.pending[..]]), None)
                    .map_err(err)?;
                out.extend_from_slice(&r[0]);
                self.pending.clear();
            }
            let r = rs.process_partial::<&[f32]>(None, None).map_err(err)?;
            out.extend_from_slice(&r[0]);
        }
        let skip = self.delay_left.min(out.len());
        self.delay_left -= skip;
        // Never emit more than the input's duration (the final partial chunk is zero-padded).
        let allowed =
            (self.in_total * self.target as u64 / self.rate as u64).saturating_sub(self.out_total);
        let n = ((out.len() - skip) as u64).min(allowed) as usize;
        self.out_total += n as u64;
        Ok(out[skip..skip + n].iter().map(|v| to_i16(*v)).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wav_header_parsing() {
        let mut h = b"RIFF\0\0\0\0WAVEfmt ".to_vec();
        h.extend_from_slice(&16u32.to_le_bytes());
        h.extend_from_slice(&1u16.to_le_bytes());
        h.extend_from_slice(&1u16.to_le_bytes());
        h.extend_from_slice(&16000u32.to_le_bytes());
        h.extend_from_slice(&32000u32.to_le_bytes());
        h.extend_from_slice(&2u16.to_le_bytes());
        h.extend_from_slice(&16u16.to_le_bytes());
        assert!(matches!(parse_wav_header(&h), WavHeader::NeedMore));
        h.extend_from_slice(b"data\xff\xff\xff\xff");
        assert!(matches!(
            parse_wav_header(&h),
            WavHeader::Pcm16 {
                rate: 16000,
                channels: 1,
                data_offset: 44
            }
        ));
        assert!(matches!(
            parse_wav_header(b"ID3\x03\0\0\0\0\0\0\0\0\0"),
            WavHeader::Other
        ));
    }

    #[test]
    fn streaming_decoder_resamples_16k() {
        let bytes: Vec<u8> = (0..16000i32)
            .flat_map(|i| (((i % 40) as i16 - 20) * 500).to_le_bytes())
            .collect();
        let mut d = WavStreamDecoder::new(16000, 1, AudioRate::Narrow).unwrap();
        let mut total = 0;
        for c in bytes.chunks(777) {
            total += d.feed(c).unwrap().len();
        }
        total += d.flush().unwrap().len();
        assert!((7800..=8300).contains(&total), "got {total} samples");
        // A wideband session's synthesis keeps the 16 kHz samples as they are.
        let mut d = WavStreamDecoder::new(16000, 1, AudioRate::Wide).unwrap();
        let mut wide = Vec::new();
        for c in bytes.chunks(777) {
            wide.extend(d.feed(c).unwrap());
        }
        wide.extend(d.flush().unwrap());
        assert_eq!(wide.len(), 16000);
        assert_eq!(wide[..40], bytes_as_i16(&bytes[..80]));
        // 24 kHz to 16 kHz.
        let mut d = WavStreamDecoder::new(24000, 1, AudioRate::Wide).unwrap();
        let mut n = d.feed(&bytes).unwrap().len();
        n += d.flush().unwrap().len();
        assert!((10_400..=10_700).contains(&n), "got {n} samples");
    }

    fn bytes_as_i16(b: &[u8]) -> Vec<i16> {
        b.chunks_exact(2)
            .map(|s| i16::from_le_bytes([s[0], s[1]]))
            .collect()
    }
}
