//! The payload codec of a leg's RTP stream and the per-stream state that encodes and decodes
//! it against the media pipeline's 20 ms frames.
//!
//! G.711 is stateless (a table lookup per sample, prompts pre-encoded once); G.722 is
//! adaptive, so a session keeps one encoder and one decoder for its stream. All three carry
//! 160 payload bytes per 20 ms frame on an 8000 Hz RTP clock (G.722's clock rate is 8000 by
//! RFC 3551 although it codes 16 kHz audio), so jitter buffering, timestamps and
//! telephone-event timing are the same for each. The codec chooses the session's
//! [`AudioRate`]: G.711 sessions run at 8 kHz (160 samples a frame), G.722 sessions at
//! 16 kHz (320 samples a frame, the full codec with its band-splitting filters), so a
//! wideband call's prompts, recognition and recording carry the upper band too.

use crate::g711;
use crate::g722::{G722Decoder, G722Encoder};
use crate::prompt::FRAME_SAMPLES;
pub use crate::rate::AudioRate;
use crate::rate::MAX_FRAME_SAMPLES;

/// The payload codec of an RTP audio stream (static payload types of RFC 3551).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum RtpCodec {
    /// G.711 µ-law, payload type 0.
    Pcmu,
    /// G.711 A-law, payload type 8.
    Pcma,
    /// G.722 at 64 kbit/s, payload type 9.
    G722,
}

impl RtpCodec {
    /// The static RTP payload type.
    pub fn payload_type(self) -> u8 {
        match self {
            RtpCodec::Pcmu => 0,
            RtpCodec::Pcma => 8,
            RtpCodec::G722 => 9,
        }
    }

    /// The codec of a static payload type, if it is one of ours.
    pub fn from_payload_type(pt: u8) -> Option<RtpCodec> {
        match pt {
            0 => Some(RtpCodec::Pcmu),
            8 => Some(RtpCodec::Pcma),
            9 => Some(RtpCodec::G722),
            _ => None,
        }
    }

    /// The rate of a session's audio with this codec: 16 kHz for G.722, 8 kHz for G.711.
    pub fn audio_rate(self) -> AudioRate {
        match self {
            RtpCodec::G722 => AudioRate::Wide,
            RtpCodec::Pcmu | RtpCodec::Pcma => AudioRate::Narrow,
        }
    }

    /// The G.711 law, for the G.711 codecs.
    pub fn g711(self) -> Option<g711::Codec> {
        match self {
            RtpCodec::Pcmu => Some(g711::Codec::Pcmu),
            RtpCodec::Pcma => Some(g711::Codec::Pcma),
            RtpCodec::G722 => None,
        }
    }
}

impl From<g711::Codec> for RtpCodec {
    fn from(c: g711::Codec) -> RtpCodec {
        match c {
            g711::Codec::Pcmu => RtpCodec::Pcmu,
            g711::Codec::Pcma => RtpCodec::Pcma,
        }
    }
}

/// Encoder and decoder state of one stream.
#[derive(Debug)]
pub(crate) enum StreamCodec {
    G711(g711::Codec),
    /// G.722's adaptive state, boxed (about 1 KiB) so G.711 sessions do not carry it.
    G722(Box<(G722Encoder, G722Decoder)>),
}

impl StreamCodec {
    /// A stream of `codec` from fresh state. Allocates for G.722 (a command, not the
    /// per-tick path).
    pub fn new(codec: RtpCodec) -> StreamCodec {
        match codec.g711() {
            Some(law) => StreamCodec::G711(law),
            None => StreamCodec::G722(Box::new((G722Encoder::new(), G722Decoder::new()))),
        }
    }

    pub fn codec(&self) -> RtpCodec {
        match self {
            StreamCodec::G711(law) => (*law).into(),
            StreamCodec::G722(_) => RtpCodec::G722,
        }
    }

    /// The rate of the linear audio this stream encodes and decodes.
    pub fn rate(&self) -> AudioRate {
        self.codec().audio_rate()
    }

    /// Whether decoding carries state, so every received payload must pass the decoder
    /// even when nothing wants the audio.
    pub fn decodes_with_state(&self) -> bool {
        matches!(self, StreamCodec::G722(_))
    }

    /// Encodes samples at the stream's [`rate`](Self::rate) into `out` (one byte per 8 kHz
    /// sample, per two 16 kHz samples).
    pub fn encode(&mut self, pcm: &[i16], out: &mut [u8]) {
        match self {
            StreamCodec::G711(law) => law.encode_into(pcm, out),
            StreamCodec::G722(g) => {
                g.0.encode(pcm, out);
            }
        }
    }

    /// Encodes a prompt's frame starting at its 8 kHz sample `from`, whose samples at the
    /// stream's rate are `pcm`: G.711 from the prompt's pre-encoded bytes, G.722 through the
    /// stream's encoder.
    pub fn encode_prompt(
        &mut self,
        prompt: &crate::prompt::Prompt,
        from: usize,
        pcm: &[i16],
        out: &mut [u8],
    ) {
        match self {
            StreamCodec::G711(law) => {
                out.copy_from_slice(&prompt.encoded(*law)[from..from + out.len()])
            }
            StreamCodec::G722(_) => self.encode(pcm, out),
        }
    }

    /// Encodes a frame of silence into `out`.
    pub fn encode_silence(&mut self, out: &mut [u8]) {
        match self {
            StreamCodec::G711(law) => out.fill(law.silence_byte()),
            StreamCodec::G722(_) => {
                const ZEROS: [i16; MAX_FRAME_SAMPLES] = [0; MAX_FRAME_SAMPLES];
                for chunk in out.chunks_mut(FRAME_SAMPLES) {
                    let n = chunk.len() * 2;
                    self.encode(&ZEROS[..n], chunk);
                }
            }
        }
    }

    /// Decodes `payload` into `out` at the stream's rate (one 8 kHz sample or two 16 kHz
    /// samples per byte; `out` at least that long).
    pub fn decode(&mut self, payload: &[u8], out: &mut [i16]) {
        match self {
            StreamCodec::G711(law) => law.decode_into(payload, out),
            StreamCodec::G722(g) => {
                g.1.decode(payload, out);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payload_types_round_trip() {
        for c in [RtpCodec::Pcmu, RtpCodec::Pcma, RtpCodec::G722] {
            assert_eq!(RtpCodec::from_payload_type(c.payload_type()), Some(c));
        }
        assert_eq!(RtpCodec::G722.payload_type(), 9);
        assert_eq!(RtpCodec::from_payload_type(18), None);
    }

    use crate::prompt::Prompt;
    use crate::tone::power_at;

    #[test]
    fn a_g722_stream_is_wideband_and_carries_a_16k_prompts_upper_band() {
        assert_eq!(RtpCodec::G722.audio_rate(), AudioRate::Wide);
        assert_eq!(RtpCodec::Pcmu.audio_rate(), AudioRate::Narrow);
        // 1 kHz and 6 kHz at 16 kHz: the 6 kHz tone exists only in the upper band.
        let wide: Vec<i16> = (0..3200)
            .map(|i| {
                let t = i as f64 / 16000.0;
                (5000.0 * (2.0 * std::f64::consts::PI * 1000.0 * t).sin()
                    + 5000.0 * (2.0 * std::f64::consts::PI * 6000.0 * t).sin())
                    as i16
            })
            .collect();
        let prompt = Prompt::from_pcm_at(wide, AudioRate::Wide);
        let mut tx = StreamCodec::new(RtpCodec::G722);
        let mut rx = StreamCodec::new(RtpCodec::G722);
        assert_eq!(tx.rate(), AudioRate::Wide);
        assert!(rx.decodes_with_state());
        let mut payload = [0u8; 160];
        let mut frame = [0i16; 320];
        let mut decoded = Vec::new();
        for f in 0..10 {
            prompt.frame_into(f * 160, AudioRate::Wide, &mut frame);
            tx.encode_prompt(&prompt, f * 160, &frame, &mut payload);
            let mut out = [0i16; 320];
            rx.decode(&payload, &mut out);
            decoded.extend_from_slice(&out);
        }
        let voiced = &decoded[640..];
        let (upper, lower) = (
            power_at(voiced, 6000.0, 16000.0),
            power_at(voiced, 1000.0, 16000.0),
        );
        assert!(upper > 0.3 * lower, "6 kHz {upper} vs 1 kHz {lower}");
        assert!(upper > 100.0 * power_at(voiced, 3500.0, 16000.0));
        tx.encode_silence(&mut payload);
        let mut out = [0i16; 320];
        for _ in 0..5 {
            rx.decode(&payload, &mut out);
        }
        tx.encode_silence(&mut payload);
        rx.decode(&payload, &mut out);
        assert!(out.iter().all(|s| s.abs() < 200), "silence decodes quiet");
    }

    #[test]
    fn g711_uses_the_prompts_pre_encoded_bytes() {
        let prompt = Prompt::from_pcm(vec![1000; 320]);
        let mut tx = StreamCodec::new(RtpCodec::Pcma);
        assert!(!tx.decodes_with_state());
        assert_eq!(tx.rate(), AudioRate::Narrow);
        let mut payload = [0u8; 160];
        let mut frame = [0i16; 160];
        prompt.frame_into(160, AudioRate::Narrow, &mut frame);
        assert_eq!(frame, [1000; 160]);
        tx.encode_prompt(&prompt, 160, &frame, &mut payload);
        assert_eq!(payload[0], g711::Codec::Pcma.encode(1000));
        tx.encode_silence(&mut payload);
        assert_eq!(payload[0], 0xD5);
    }
}
