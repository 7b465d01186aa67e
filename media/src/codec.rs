//! The payload codec of a leg's RTP stream and the per-stream state that encodes and decodes
//! it against the media pipeline's 8 kHz, 20 ms frames.
//!
//! G.711 is stateless (a table lookup per sample, prompts pre-encoded once); G.722 is
//! adaptive, so a session keeps one encoder and one decoder for its stream. All three carry
//! 160 payload bytes per 20 ms frame on an 8000 Hz RTP clock (G.722's clock rate is 8000 by
//! RFC 3551 although it codes 16 kHz audio), so jitter buffering, timestamps and
//! telephone-event timing are the same for each. G.722 runs in its lower-band mode here
//! (see [`crate::g722`]): the pipeline's prompts, speech detection, recognition and
//! recording are 8 kHz.

use crate::g711;
use crate::g722::{G722Decoder, G722Encoder};
use crate::prompt::{FRAME_SAMPLES, Prompt};

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
            None => StreamCodec::G722(Box::new((G722Encoder::new_8k(), G722Decoder::new_8k()))),
        }
    }

    pub fn codec(&self) -> RtpCodec {
        match self {
            StreamCodec::G711(law) => (*law).into(),
            StreamCodec::G722(_) => RtpCodec::G722,
        }
    }

    /// Whether decoding carries state, so every received payload must pass the decoder
    /// even when nothing wants the audio.
    pub fn decodes_with_state(&self) -> bool {
        matches!(self, StreamCodec::G722(_))
    }

    /// Encodes 8 kHz samples into `out` (one byte per sample).
    pub fn encode(&mut self, pcm: &[i16], out: &mut [u8]) {
        match self {
            StreamCodec::G711(law) => law.encode_into(pcm, out),
            StreamCodec::G722(g) => {
                g.0.encode(pcm, out);
            }
        }
    }

    /// Encodes `prompt`'s samples `from..from + out.len()`: G.711 from the prompt's
    /// pre-encoded bytes, G.722 through the stream's encoder.
    pub fn encode_prompt(&mut self, prompt: &Prompt, from: usize, out: &mut [u8]) {
        let range = from..from + out.len();
        match self {
            StreamCodec::G711(law) => out.copy_from_slice(&prompt.encoded(*law)[range]),
            StreamCodec::G722(_) => self.encode(&prompt.pcm()[range], out),
        }
    }

    /// Encodes a frame of silence into `out`.
    pub fn encode_silence(&mut self, out: &mut [u8]) {
        match self {
            StreamCodec::G711(law) => out.fill(law.silence_byte()),
            StreamCodec::G722(_) => {
                const ZEROS: [i16; FRAME_SAMPLES] = [0; FRAME_SAMPLES];
                for chunk in out.chunks_mut(FRAME_SAMPLES) {
                    let n = chunk.len();
                    self.encode(&ZEROS[..n], chunk);
                }
            }
        }
    }

    /// Decodes `payload` into `out` (one 8 kHz sample per byte; `out` at least as long).
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

    #[test]
    fn g722_stream_carries_a_prompt_and_silence() {
        let pcm: Vec<i16> = (0..1600)
            .map(|i| (8000.0 * (i as f64 * 0.3).sin()) as i16)
            .collect();
        let prompt = Prompt::from_pcm(pcm.clone());
        let mut tx = StreamCodec::new(RtpCodec::G722);
        let mut rx = StreamCodec::new(RtpCodec::G722);
        assert!(rx.decodes_with_state());
        let mut payload = [0u8; 160];
        let mut decoded = Vec::new();
        for f in 0..10 {
            tx.encode_prompt(&prompt, f * 160, &mut payload);
            let mut out = [0i16; 160];
            rx.decode(&payload, &mut out);
            decoded.extend_from_slice(&out);
        }
        let err: f64 = pcm[400..]
            .iter()
            .zip(&decoded[400..])
            .map(|(a, b)| (*a as f64 - *b as f64).powi(2))
            .sum();
        let sig: f64 = pcm[400..].iter().map(|a| (*a as f64).powi(2)).sum();
        assert!(10.0 * (sig / err).log10() > 20.0);
        tx.encode_silence(&mut payload);
        assert!(payload.iter().all(|b| b & 0xC0 == 0xC0));
    }

    #[test]
    fn g711_uses_the_prompts_pre_encoded_bytes() {
        let prompt = Prompt::from_pcm(vec![1000; 320]);
        let mut tx = StreamCodec::new(RtpCodec::Pcma);
        assert!(!tx.decodes_with_state());
        let mut payload = [0u8; 160];
        tx.encode_prompt(&prompt, 160, &mut payload);
        assert_eq!(payload[0], g711::Codec::Pcma.encode(1000));
        tx.encode_silence(&mut payload);
        assert_eq!(payload[0], 0xD5);
    }
}
