//! G.711 µ-law (PCMU) and A-law (PCMA) codecs.
//!
//! Decoding uses 256-entry tables; encoding uses a 16 KiB table indexed by the
//! top 14 bits of the sample, both built at compile time, so the per-sample
//! cost on the hot path is one table lookup and no branch.

/// The payload codec of an audio stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum Codec {
    /// G.711 µ-law, static payload type 0.
    Pcmu,
    /// G.711 A-law, static payload type 8.
    Pcma,
}

impl Codec {
    /// The static RTP payload type of the codec (RFC 3551).
    pub fn payload_type(self) -> u8 {
        match self {
            Codec::Pcmu => 0,
            Codec::Pcma => 8,
        }
    }

    /// The codec of a static payload type, if it is one of ours.
    pub fn from_payload_type(pt: u8) -> Option<Codec> {
        match pt {
            0 => Some(Codec::Pcmu),
            8 => Some(Codec::Pcma),
            _ => None,
        }
    }

    /// The encoded byte of digital silence.
    pub fn silence_byte(self) -> u8 {
        match self {
            Codec::Pcmu => 0xFF,
            Codec::Pcma => 0xD5,
        }
    }

    /// Encodes one linear sample.
    #[inline]
    pub fn encode(self, s: i16) -> u8 {
        match self {
            Codec::Pcmu => ulaw_encode(s),
            Codec::Pcma => alaw_encode(s),
        }
    }

    /// Decodes one byte.
    #[inline]
    pub fn decode(self, b: u8) -> i16 {
        match self {
            Codec::Pcmu => ULAW_DECODE[b as usize],
            Codec::Pcma => ALAW_DECODE[b as usize],
        }
    }

    /// Encodes `pcm` into `out` (same length; extra elements of the longer slice are untouched).
    pub fn encode_into(self, pcm: &[i16], out: &mut [u8]) {
        for (o, s) in out.iter_mut().zip(pcm) {
            *o = self.encode(*s);
        }
    }

    /// Decodes `enc` into `out` (same length; extra elements of the longer slice are untouched).
    pub fn decode_into(self, enc: &[u8], out: &mut [i16]) {
        for (o, b) in out.iter_mut().zip(enc) {
            *o = self.decode(*b);
        }
    }
}

const fn ulaw_decode_one(b: u8) -> i16 {
    let u = !b;
    let sign = u & 0x80;
    let exponent = ((u >> 4) & 0x07) as i32;
    let mantissa = (u & 0x0F) as i32;
    let magnitude = (((mantissa << 3) + 0x84) << exponent) - 0x84;
    if sign != 0 {
        -magnitude as i16
    } else {
        magnitude as i16
    }
}

const fn alaw_decode_one(b: u8) -> i16 {
    let a = b ^ 0x55;
    let sign = a & 0x80;
    let exponent = ((a >> 4) & 0x07) as i32;
    let mantissa = (a & 0x0F) as i32;
    let magnitude = if exponent == 0 {
        (mantissa << 4) + 8
    } else {
        ((mantissa << 4) + 0x108) << (exponent - 1)
    };
    if sign != 0 {
        magnitude as i16
    } else {
        -magnitude as i16
    }
}

const fn ulaw_encode_slow(sample: i16) -> u8 {
    const BIAS: i32 = 0x84;
    const CLIP: i32 = 32635;
    let mut s = sample as i32;
    let sign = if s < 0 {
        s = -s;
        0x80
    } else {
        0
    };
    if s > CLIP {
        s = CLIP;
    }
    s += BIAS;
    let mut exponent = 7;
    let mut mask = 0x4000;
    while exponent > 0 && (s & mask) == 0 {
        exponent -= 1;
        mask >>= 1;
    }
    let mantissa = (s >> (exponent + 3)) & 0x0F;
    !((sign | (exponent << 4) | mantissa) as u8)
}

const fn alaw_encode_slow(sample: i16) -> u8 {
    let mut s = sample as i32;
    let sign = if s >= 0 {
        0x80
    } else {
        s = -s - 1;
        0
    };
    if s > 32767 {
        s = 32767;
    }
    let code = if s < 256 {
        s >> 4
    } else {
        let mut exponent = 7;
        let mut mask = 0x4000;
        while exponent > 1 && (s & mask) == 0 {
            exponent -= 1;
            mask >>= 1;
        }
        (exponent << 4) | ((s >> (exponent + 3)) & 0x0F)
    };
    ((sign | code) as u8) ^ 0x55
}

const fn build_decode(alaw: bool) -> [i16; 256] {
    let mut t = [0i16; 256];
    let mut i = 0;
    while i < 256 {
        t[i] = if alaw {
            alaw_decode_one(i as u8)
        } else {
            ulaw_decode_one(i as u8)
        };
        i += 1;
    }
    t
}

/// Encoding tables indexed by `sample >> 2` (14 significant bits; G.711 ignores the low two).
const fn build_encode(alaw: bool) -> [u8; 16384] {
    let mut t = [0u8; 16384];
    let mut i = 0;
    while i < 16384 {
        let s = ((i << 2) as u16) as i16; // reinterpret as signed 16-bit
        t[i] = if alaw {
            alaw_encode_slow(s)
        } else {
            ulaw_encode_slow(s)
        };
        i += 1;
    }
    t
}

static ULAW_DECODE: [i16; 256] = build_decode(false);
static ALAW_DECODE: [i16; 256] = build_decode(true);
static ULAW_ENCODE: [u8; 16384] = build_encode(false);
static ALAW_ENCODE: [u8; 16384] = build_encode(true);

/// Encodes a linear sample to µ-law.
#[inline]
pub fn ulaw_encode(s: i16) -> u8 {
    ULAW_ENCODE[((s as u16) >> 2) as usize]
}

/// Encodes a linear sample to A-law.
#[inline]
pub fn alaw_encode(s: i16) -> u8 {
    ALAW_ENCODE[((s as u16) >> 2) as usize]
}

/// Decodes a µ-law byte.
#[inline]
pub fn ulaw_decode(b: u8) -> i16 {
    ULAW_DECODE[b as usize]
}

/// Decodes an A-law byte.
#[inline]
pub fn alaw_decode(b: u8) -> i16 {
    ALAW_DECODE[b as usize]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_round_trips() {
        for b in 0..=255u8 {
            // µ-law has two zeros (0x7F and 0xFF); both decode to 0 and re-encode to 0xFF.
            let s = ulaw_decode(b);
            let back = ulaw_encode(s);
            assert_eq!(ulaw_decode(back), s, "ulaw code {b:#x}");
            let s = alaw_decode(b);
            assert_eq!(alaw_encode(s), b, "alaw code {b:#x}");
        }
    }

    #[test]
    fn table_encoder_matches_reference() {
        for s in (i16::MIN..=i16::MAX).step_by(7) {
            // The tables quantise to 14 bits first (as the ITU reference code does).
            let t = ((s as u16) & !3) as i16;
            assert_eq!(ulaw_encode(s), ulaw_encode_slow(t));
            assert_eq!(alaw_encode(s), alaw_encode_slow(t));
        }
    }

    #[test]
    fn quantisation_error_is_bounded() {
        for s in (i16::MIN..=i16::MAX).step_by(13) {
            let tol = (s as i32).abs() / 16 + 16;
            let u = ulaw_decode(ulaw_encode(s)) as i32;
            let a = alaw_decode(alaw_encode(s)) as i32;
            assert!((u - s as i32).abs() <= tol.max(140), "ulaw {s} -> {u}");
            assert!((a - s as i32).abs() <= tol.max(140), "alaw {s} -> {a}");
        }
    }

    #[test]
    fn silence_bytes_decode_to_near_zero() {
        assert_eq!(Codec::Pcmu.decode(Codec::Pcmu.silence_byte()), 0);
        assert!(Codec::Pcma.decode(Codec::Pcma.silence_byte()).abs() <= 8);
        assert_eq!(ulaw_encode(0), 0xFF);
        assert_eq!(alaw_encode(0), 0xD5);
    }
}
