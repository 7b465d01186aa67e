//! RTCP sender/receiver reports (RFC 3550 §6.4) and the receive statistics they
//! carry: extended sequence numbers, cumulative and fractional loss (§A.3) and
//! interarrival jitter (§A.8). Sans-IO: callers pass arrival times in RTP clock
//! units.

use thiserror::Error;

/// Why an RTCP datagram was rejected.
#[derive(Debug, Error, Clone, Copy, PartialEq, Eq)]
pub enum RtcpError {
    #[error("datagram shorter than an RTCP header")]
    TooShort,
    #[error("RTCP version is not 2")]
    BadVersion,
    #[error("RTCP length field runs past the datagram")]
    Truncated,
    #[error("first packet of a compound is not SR or RR")]
    NotReport,
    #[error("output buffer too small")]
    BufferTooSmall,
}

/// One report block (RFC 3550 §6.4.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ReportBlock {
    pub ssrc: u32,
    pub fraction_lost: u8,
    /// Cumulative packets lost (24-bit signed on the wire).
    pub cumulative_lost: i32,
    pub highest_seq: u32,
    pub jitter: u32,
    pub last_sr: u32,
    pub delay_since_last_sr: u32,
}

/// The sender-info part of an SR.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SenderInfo {
    pub ntp_timestamp: u64,
    pub rtp_timestamp: u32,
    pub packet_count: u32,
    pub octet_count: u32,
}

/// A parsed SR or RR (the first packet of a compound; other packets are skipped after validation).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RtcpReport {
    pub ssrc: u32,
    pub sender_info: Option<SenderInfo>,
    /// Up to 31 blocks; a fixed array keeps parsing allocation-free.
    pub blocks: [ReportBlock; 4],
    pub block_count: usize,
}

impl RtcpReport {
    /// The report blocks carried (at most the first four are kept).
    pub fn blocks(&self) -> &[ReportBlock] {
        &self.blocks[..self.block_count]
    }

    /// Parses a compound RTCP datagram; every packet's header and length are checked.
    pub fn parse(buf: &[u8]) -> Result<Self, RtcpError> {
        if buf.len() < 8 {
            return Err(RtcpError::TooShort);
        }
        // Validate the compound: every packet v=2, lengths add up to the datagram.
        let mut off = 0;
        while off < buf.len() {
            if buf.len() - off < 4 {
                return Err(RtcpError::Truncated);
            }
            if buf[off] >> 6 != 2 {
                return Err(RtcpError::BadVersion);
            }
            let words = u16::from_be_bytes([buf[off + 2], buf[off + 3]]) as usize;
            off += (words + 1) * 4;
            if off > buf.len() {
                return Err(RtcpError::Truncated);
            }
        }
        let count = (buf[0] & 0x1F) as usize;
        let pt = buf[1];
        let len = (u16::from_be_bytes([buf[2], buf[3]]) as usize + 1) * 4;
        let ssrc = u32::from_be_bytes([buf[4], buf[5], buf[6], buf[7]]);
        let (sender_info, mut p) = match pt {
            200 => {
                if len < 28 {
                    return Err(RtcpError::Truncated);
                }
                let b = &buf[8..28];
                (
                    Some(SenderInfo {
                        ntp_timestamp: u64::from_be_bytes([
                            b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7],
                        ]),
                        rtp_timestamp: u32::from_be_bytes([b[8], b[9], b[10], b[11]]),
                        packet_count: u32::from_be_bytes([b[12], b[13], b[14], b[15]]),
                        octet_count: u32::from_be_bytes([b[16], b[17], b[18], b[19]]),
                    }),
                    28,
                )
            }
            201 => (None, 8),
            _ => return Err(RtcpError::NotReport),
        };
        if p + count * 24 > len {
            return Err(RtcpError::Truncated);
        }
        let mut report = RtcpReport {
            ssrc,
            sender_info,
            blocks: [ReportBlock::default(); 4],
            block_count: 0,
        };
        for i in 0..count {
            let b = &buf[p..p + 24];
            if i < report.blocks.len() {
                let lost = i32::from_be_bytes([b[5], b[6], b[7], 0]) >> 8; // sign-extend 24 bits
                report.blocks[i] = ReportBlock {
                    ssrc: u32::from_be_bytes([b[0], b[1], b[2], b[3]]),
                    fraction_lost: b[4],
                    cumulative_lost: lost,
                    highest_seq: u32::from_be_bytes([b[8], b[9], b[10], b[11]]),
                    jitter: u32::from_be_bytes([b[12], b[13], b[14], b[15]]),
                    last_sr: u32::from_be_bytes([b[16], b[17], b[18], b[19]]),
                    delay_since_last_sr: u32::from_be_bytes([b[20], b[21], b[22], b[23]]),
                };
                report.block_count = i + 1;
            }
            p += 24;
        }
        Ok(report)
    }

    /// Writes the report as an SR (with sender info) or RR into `out`; returns the length.
    pub fn write(&self, out: &mut [u8]) -> Result<usize, RtcpError> {
        let blocks = self.blocks();
        let len = 8 + if self.sender_info.is_some() { 20 } else { 0 } + blocks.len() * 24;
        if out.len() < len {
            return Err(RtcpError::BufferTooSmall);
        }
        out[0] = 0x80 | blocks.len() as u8;
        out[1] = if self.sender_info.is_some() { 200 } else { 201 };
        out[2..4].copy_from_slice(&((len / 4 - 1) as u16).to_be_bytes());
        out[4..8].copy_from_slice(&self.ssrc.to_be_bytes());
        let mut p = 8;
        if let Some(si) = &self.sender_info {
            out[8..16].copy_from_slice(&si.ntp_timestamp.to_be_bytes());
            out[16..20].copy_from_slice(&si.rtp_timestamp.to_be_bytes());
            out[20..24].copy_from_slice(&si.packet_count.to_be_bytes());
            out[24..28].copy_from_slice(&si.octet_count.to_be_bytes());
            p = 28;
        }
        for b in blocks {
            out[p..p + 4].copy_from_slice(&b.ssrc.to_be_bytes());
            out[p + 4] = b.fraction_lost;
            let lost = b.cumulative_lost.clamp(-0x80_0000, 0x7F_FFFF).to_be_bytes();
            out[p + 5..p + 8].copy_from_slice(&lost[1..4]);
            out[p + 8..p + 12].copy_from_slice(&b.highest_seq.to_be_bytes());
            out[p + 12..p + 16].copy_from_slice(&b.jitter.to_be_bytes());
            out[p + 16..p + 20].copy_from_slice(&b.last_sr.to_be_bytes());
            out[p + 20..p + 24].copy_from_slice(&b.delay_since_last_sr.to_be_bytes());
            p += 24;
        }
        Ok(len)
    }
}

/// Per-source receive statistics (RFC 3550 A.1, A.3, A.8).
#[derive(Debug, Clone, Default)]
pub struct ReceiverStats {
    started: bool,
    base_seq: u32,
    max_seq: u16,
    /// Sequence-number wraps seen, times 2^16. 64-bit: a sender jumping its sequence number
    /// by just under `MAX_DROPOUT` wraps it every 22 packets, so 32 bits overflow after about
    /// 1.4 million packets.
    cycles: u64,
    received: u64,
    expected_prior: u64,
    received_prior: u64,
    /// Interarrival jitter in RTP clock units, scaled by 16 as in A.8.
    jitter_q4: u32,
    last_transit: Option<i64>,
    /// Middle 32 bits of the NTP timestamp of the last SR received, and when it arrived (ms).
    last_sr: u32,
    last_sr_at_ms: Option<u64>,
}

const RTP_SEQ_MOD: u32 = 1 << 16;
const MAX_DROPOUT: u16 = 3000;

impl ReceiverStats {
    /// Records one packet. `arrival_ts` is the arrival time in RTP clock units (8 kHz).
    pub fn on_packet(&mut self, seq: u16, rtp_ts: u32, arrival_ts: u32) {
        if !self.started {
            self.started = true;
            self.base_seq = seq as u32;
            self.max_seq = seq;
        } else {
            let delta = seq.wrapping_sub(self.max_seq);
            if delta < MAX_DROPOUT {
                if seq < self.max_seq {
                    self.cycles += u64::from(RTP_SEQ_MOD);
                }
                self.max_seq = seq;
            }
            // Late or duplicate packets still count as received (as A.3 does).
        }
        self.received += 1;
        let transit = arrival_ts.wrapping_sub(rtp_ts) as i32 as i64;
        if let Some(last) = self.last_transit {
            let d = (transit - last).unsigned_abs() as u32;
            // J += (|D| - J) / 16, kept scaled by 16.
            let j = self.jitter_q4 as i64;
            self.jitter_q4 = (j + d as i64 - ((j + 8) >> 4)) as u32;
        }
        self.last_transit = Some(transit);
    }

    /// Records a received SR so the next report block carries LSR/DLSR.
    pub fn on_sender_report(&mut self, ntp_timestamp: u64, now_ms: u64) {
        self.last_sr = (ntp_timestamp >> 16) as u32;
        self.last_sr_at_ms = Some(now_ms);
    }

    /// Extended highest sequence number received, modulo 2^32 as it is on the wire.
    pub fn extended_max(&self) -> u32 {
        self.extended_max_u64() as u32
    }

    fn extended_max_u64(&self) -> u64 {
        self.cycles + u64::from(self.max_seq)
    }

    /// Packets expected so far.
    pub fn expected(&self) -> u64 {
        if !self.started {
            return 0;
        }
        (self.extended_max_u64() + 1).saturating_sub(self.base_seq as u64)
    }

    /// Packets received (including duplicates).
    pub fn received(&self) -> u64 {
        self.received
    }

    /// Cumulative lost packets (may be negative with duplicates, as in RFC 3550).
    pub fn cumulative_lost(&self) -> i64 {
        self.expected() as i64 - self.received as i64
    }

    /// Interarrival jitter in RTP clock units.
    pub fn jitter(&self) -> u32 {
        self.jitter_q4 >> 4
    }

    /// Builds a report block for `ssrc` and resets the fractional-loss interval.
    pub fn report_block(&mut self, ssrc: u32, now_ms: u64) -> ReportBlock {
        let expected = self.expected();
        let expected_interval = expected - self.expected_prior.min(expected);
        let received_interval = self.received.saturating_sub(self.received_prior);
        self.expected_prior = expected;
        self.received_prior = self.received;
        let lost_interval = expected_interval as i64 - received_interval as i64;
        let fraction_lost = if expected_interval == 0 || lost_interval <= 0 {
            0
        } else {
            ((lost_interval << 8) / expected_interval as i64).min(255) as u8
        };
        let dlsr = match self.last_sr_at_ms {
            Some(at) => ((now_ms.saturating_sub(at)) * 65536 / 1000) as u32,
            None => 0,
        };
        ReportBlock {
            ssrc,
            fraction_lost,
            cumulative_lost: self.cumulative_lost().clamp(-0x80_0000, 0x7F_FFFF) as i32,
            highest_seq: self.extended_max(),
            jitter: self.jitter(),
            last_sr: if self.last_sr_at_ms.is_some() {
                self.last_sr
            } else {
                0
            },
            delay_since_last_sr: dlsr,
        }
    }
}

/// Converts a wall-clock time to a 64-bit NTP timestamp.
pub fn ntp_timestamp(now: std::time::SystemTime) -> u64 {
    let d = now
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let secs = d.as_secs() + 2_208_988_800;
    let frac = ((d.subsec_nanos() as u64) << 32) / 1_000_000_000;
    (secs << 32) | frac
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sr_round_trip() {
        let mut blocks = [ReportBlock::default(); 4];
        blocks[0] = ReportBlock {
            ssrc: 7,
            fraction_lost: 25,
            cumulative_lost: -3,
            highest_seq: 70000,
            jitter: 12,
            last_sr: 0xABCD,
            delay_since_last_sr: 65536,
        };
        let r = RtcpReport {
            ssrc: 99,
            sender_info: Some(SenderInfo {
                ntp_timestamp: 1 << 40,
                rtp_timestamp: 160,
                packet_count: 5,
                octet_count: 800,
            }),
            blocks,
            block_count: 1,
        };
        let mut buf = [0u8; 128];
        let n = r.write(&mut buf).unwrap();
        assert_eq!(n, 52);
        assert_eq!(RtcpReport::parse(&buf[..n]).unwrap(), r);
        assert!(crate::rtp::looks_like_rtcp(&buf[..n]));
    }

    #[test]
    fn rr_round_trip_and_malformed() {
        let r = RtcpReport {
            ssrc: 1,
            sender_info: None,
            blocks: [ReportBlock::default(); 4],
            block_count: 0,
        };
        let mut buf = [0u8; 64];
        let n = r.write(&mut buf).unwrap();
        assert_eq!(RtcpReport::parse(&buf[..n]).unwrap(), r);
        assert_eq!(RtcpReport::parse(&buf[..4]), Err(RtcpError::TooShort));
        let mut bad = buf;
        bad[3] = 40; // length beyond datagram
        assert_eq!(RtcpReport::parse(&bad[..n]), Err(RtcpError::Truncated));
        let mut bad = buf;
        bad[0] = 0x40;
        assert_eq!(RtcpReport::parse(&bad[..n]), Err(RtcpError::BadVersion));
        let mut bye = buf;
        bye[1] = 203;
        assert_eq!(RtcpReport::parse(&bye[..n]), Err(RtcpError::NotReport));
        // Claims 3 blocks but carries none.
        let mut bad = buf;
        bad[0] = 0x83;
        assert_eq!(RtcpReport::parse(&bad[..n]), Err(RtcpError::Truncated));
    }

    #[test]
    fn loss_and_wrap_are_counted() {
        let mut s = ReceiverStats::default();
        let mut seq: u16 = 65530;
        for i in 0..20u32 {
            if i != 5 && i != 6 {
                s.on_packet(seq, i * 160, i * 160 + 1000);
            }
            seq = seq.wrapping_add(1);
        }
        assert_eq!(s.expected(), 20);
        assert_eq!(s.received(), 18);
        assert_eq!(s.cumulative_lost(), 2);
        assert_eq!(s.extended_max(), 65536 + 13);
        assert_eq!(s.jitter(), 0);
        let b = s.report_block(1, 0);
        assert_eq!(b.fraction_lost, (2 * 256 / 20) as u8);
        assert_eq!(b.cumulative_lost, 2);
        // Next interval without loss reports zero fraction.
        for i in 20..30u32 {
            s.on_packet(seq, i * 160, i * 160 + 1000);
            seq = seq.wrapping_add(1);
        }
        assert_eq!(s.report_block(1, 0).fraction_lost, 0);
    }

    #[test]
    fn jitter_follows_a8() {
        let mut s = ReceiverStats::default();
        // Arrivals alternate 0 and +80 units late: |D| = 80 every packet after the first.
        for i in 0..400u32 {
            let late = if i % 2 == 0 { 0 } else { 80 };
            s.on_packet(i as u16, i * 160, i * 160 + late);
        }
        let j = s.jitter();
        assert!((75..=80).contains(&j), "jitter {j}");
    }

    #[test]
    fn many_sequence_cycles_do_not_overflow() {
        // Jumps of 2999 wrap the sequence number every 22 packets: 65 536 wraps overflowed a
        // 32-bit cycle count.
        let mut s = ReceiverStats::default();
        let mut seq = 0u16;
        for i in 0..1_500_000u32 {
            s.on_packet(seq, i.wrapping_mul(160), i.wrapping_mul(160));
            seq = seq.wrapping_add(2999);
        }
        assert_eq!(s.received(), 1_500_000);
        assert!(s.expected() > u64::from(u32::MAX));
        let _ = s.report_block(1, 0);
    }
}
