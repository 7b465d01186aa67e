//! RTP packet parsing and building (RFC 3550 §5.1), sans-IO.
//!
//! Parsing borrows the datagram (no allocation); building writes into a
//! caller-owned buffer so the pacing loop never allocates.

use thiserror::Error;

/// Size of the fixed RTP header without CSRCs or extensions.
pub const RTP_HEADER_LEN: usize = 12;

/// Why a datagram is not an RTP packet we accept.
#[derive(Debug, Error, Clone, Copy, PartialEq, Eq)]
pub enum RtpError {
    #[error("datagram shorter than an RTP header")]
    TooShort,
    #[error("RTP version is not 2")]
    BadVersion,
    #[error("CSRC list, extension or padding runs past the datagram")]
    Truncated,
    #[error("output buffer too small")]
    BufferTooSmall,
}

/// A parsed RTP packet borrowing its datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RtpPacket<'a> {
    pub marker: bool,
    pub payload_type: u8,
    pub sequence: u16,
    pub timestamp: u32,
    pub ssrc: u32,
    pub payload: &'a [u8],
}

/// True when the datagram looks like RTCP rather than RTP (RFC 5761 §4: PT 192–223 in the second byte).
pub fn looks_like_rtcp(buf: &[u8]) -> bool {
    buf.len() >= 2 && (192..=223).contains(&buf[1])
}

impl<'a> RtpPacket<'a> {
    /// Parses a datagram; malformed input is an error, never a panic.
    pub fn parse(buf: &'a [u8]) -> Result<Self, RtpError> {
        if buf.len() < RTP_HEADER_LEN {
            return Err(RtpError::TooShort);
        }
        if buf[0] >> 6 != 2 {
            return Err(RtpError::BadVersion);
        }
        let padding = buf[0] & 0x20 != 0;
        let extension = buf[0] & 0x10 != 0;
        let csrc_count = (buf[0] & 0x0F) as usize;
        let mut start = RTP_HEADER_LEN + csrc_count * 4;
        if start > buf.len() {
            return Err(RtpError::Truncated);
        }
        if extension {
            if start + 4 > buf.len() {
                return Err(RtpError::Truncated);
            }
            let words = u16::from_be_bytes([buf[start + 2], buf[start + 3]]) as usize;
            start += 4 + words * 4;
            if start > buf.len() {
                return Err(RtpError::Truncated);
            }
        }
        let mut end = buf.len();
        if padding {
            let pad = buf[end - 1] as usize;
            if pad == 0 || start + pad > end {
                return Err(RtpError::Truncated);
            }
            end -= pad;
        }
        Ok(RtpPacket {
            marker: buf[1] & 0x80 != 0,
            payload_type: buf[1] & 0x7F,
            sequence: u16::from_be_bytes([buf[2], buf[3]]),
            timestamp: u32::from_be_bytes([buf[4], buf[5], buf[6], buf[7]]),
            ssrc: u32::from_be_bytes([buf[8], buf[9], buf[10], buf[11]]),
            payload: &buf[start..end],
        })
    }

    /// Writes the packet (no CSRCs, no extension) into `out`; returns the length written.
    pub fn write(&self, out: &mut [u8]) -> Result<usize, RtpError> {
        write_rtp(
            out,
            self.marker,
            self.payload_type,
            self.sequence,
            self.timestamp,
            self.ssrc,
            self.payload,
        )
    }
}

/// Writes an RTP packet into `out` and returns its length.
pub fn write_rtp(
    out: &mut [u8],
    marker: bool,
    payload_type: u8,
    sequence: u16,
    timestamp: u32,
    ssrc: u32,
    payload: &[u8],
) -> Result<usize, RtpError> {
    let len = RTP_HEADER_LEN + payload.len();
    if out.len() < len {
        return Err(RtpError::BufferTooSmall);
    }
    write_rtp_header(out, marker, payload_type, sequence, timestamp, ssrc)?;
    out[RTP_HEADER_LEN..len].copy_from_slice(payload);
    Ok(len)
}

/// Writes only the 12-byte header (the caller fills the payload in place).
pub fn write_rtp_header(
    out: &mut [u8],
    marker: bool,
    payload_type: u8,
    sequence: u16,
    timestamp: u32,
    ssrc: u32,
) -> Result<(), RtpError> {
    if out.len() < RTP_HEADER_LEN {
        return Err(RtpError::BufferTooSmall);
    }
    out[0] = 0x80;
    out[1] = (payload_type & 0x7F) | if marker { 0x80 } else { 0 };
    out[2..4].copy_from_slice(&sequence.to_be_bytes());
    out[4..8].copy_from_slice(&timestamp.to_be_bytes());
    out[8..12].copy_from_slice(&ssrc.to_be_bytes());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn build_then_parse() {
        let mut buf = [0u8; 200];
        let payload = [7u8; 160];
        let n = write_rtp(&mut buf, true, 0, 65535, 0xDEADBEEF, 42, &payload).unwrap();
        assert_eq!(n, 172);
        let p = RtpPacket::parse(&buf[..n]).unwrap();
        assert!(p.marker);
        assert_eq!(p.payload_type, 0);
        assert_eq!(p.sequence, 65535);
        assert_eq!(p.timestamp, 0xDEADBEEF);
        assert_eq!(p.ssrc, 42);
        assert_eq!(p.payload, &payload[..]);
        assert!(!looks_like_rtcp(&buf[..n]));
    }

    #[test]
    fn csrc_extension_and_padding_are_skipped() {
        let mut buf = vec![0x80 | 0x20 | 0x10 | 1, 8, 0, 1, 0, 0, 0, 160, 0, 0, 0, 9];
        buf.extend_from_slice(&[1, 2, 3, 4]); // CSRC
        buf.extend_from_slice(&[0xBE, 0xDE, 0, 1, 9, 9, 9, 9]); // extension, 1 word
        buf.extend_from_slice(&[5, 6, 7]); // payload
        buf.extend_from_slice(&[0, 0, 3]); // 3 bytes of padding
        let p = RtpPacket::parse(&buf).unwrap();
        assert_eq!(p.payload, &[5, 6, 7]);
        assert_eq!(p.payload_type, 8);
    }

    #[test]
    fn malformed_is_an_error() {
        assert_eq!(RtpPacket::parse(&[0x80; 5]), Err(RtpError::TooShort));
        assert_eq!(RtpPacket::parse(&[0x40; 20]), Err(RtpError::BadVersion));
        let mut b = [0u8; 12];
        b[0] = 0x8F; // 15 CSRCs, none present
        assert_eq!(RtpPacket::parse(&b), Err(RtpError::Truncated));
        let mut b = [0u8; 13];
        b[0] = 0xA0; // padding
        b[12] = 200;
        assert_eq!(RtpPacket::parse(&b), Err(RtpError::Truncated));
        let mut b = [0u8; 13];
        b[0] = 0xA0;
        b[12] = 0;
        assert_eq!(RtpPacket::parse(&b), Err(RtpError::Truncated));
    }

    #[test]
    fn fuzz_never_panics() {
        let mut x: u32 = 12345;
        for len in 0..64 {
            for _ in 0..200 {
                let buf: Vec<u8> = (0..len)
                    .map(|_| {
                        x = x.wrapping_mul(1664525).wrapping_add(1013904223);
                        (x >> 24) as u8
                    })
                    .collect();
                let _ = RtpPacket::parse(&buf);
            }
        }
    }
}
