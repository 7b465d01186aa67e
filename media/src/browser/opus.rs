//! The browser relay's Opus transcoding: the browser speaks Opus (RFC 7587: a 48 kHz RTP
//! clock whatever the audio's bandwidth), the media session speaks G.722, so a browser call
//! is wideband (16 kHz audio) from the browser's microphone to the session and back.
//!
//! libopus resamples itself: the decoder renders a packet at 16 kHz and the encoder takes
//! 16 kHz input, so no resampler of ours sits between them. G.722 codes two 16 kHz samples
//! per byte on an 8000 Hz RTP clock (RFC 3551), so 20 ms is 320 samples, 160 bytes and a
//! timestamp step of 160, as PCMU's. Both directions work in fixed buffers: a packet
//! costs no allocation here. Timestamps are mapped relative to the first packet of each
//! direction (×6 toward the browser, ÷6 toward the session), which keeps gaps and
//! survives the 32-bit wrap.

use audiopus::coder::{Decoder, Encoder};
use audiopus::packet::Packet;
use audiopus::{Application, Bitrate, Channels, MutSignals, SampleRate};

use crate::codec::RtpCodec;
use crate::g722::{G722Decoder, G722Encoder};

/// Opus's RTP clock over G.722's.
const CLOCK_RATIO: u32 = 6;
/// The most samples one Opus packet holds at 16 kHz (120 ms).
const MAX_FRAME_16K: usize = 1920;
/// 16 kHz samples per G.722 byte (and per tick of its 8000 Hz RTP clock).
const SAMPLES_PER_CODE: usize = 2;
/// An RTP header without CSRCs or extensions.
const HEADER: usize = 12;
/// The packet loss the encoder plans its in-band FEC for, in percent.
const EXPECTED_LOSS_PERCENT: u8 = 10;
/// The encoder's bitrate toward the browser, in bit/s: what browsers send voice at. With
/// in-band FEC on, libopus keeps to narrowband below about 24 kbit/s (its automatic
/// choice for 16 kHz mono is below that), which would drop the upper band G.722 carries.
const BITRATE: i32 = 32_000;

/// Maps one direction's RTP timestamps between the two clocks.
#[derive(Default)]
struct Clock {
    /// (first input timestamp, first output timestamp).
    base: Option<(u32, u32)>,
}

impl Clock {
    fn down(&mut self, ts: u32) -> u32 {
        let (i, o) = *self.base.get_or_insert((ts, ts / CLOCK_RATIO));
        // Signed: a packet reordered before the first one maps before it too.
        o.wrapping_add(((ts.wrapping_sub(i) as i32) / CLOCK_RATIO as i32) as u32)
    }

    fn up(&mut self, ts: u32) -> u32 {
        let (i, o) = *self.base.get_or_insert((ts, ts.wrapping_mul(CLOCK_RATIO)));
        o.wrapping_add(ts.wrapping_sub(i).wrapping_mul(CLOCK_RATIO))
    }
}

/// Opus from the browser → G.722 (and telephone-event at 8000) to the session.
pub(crate) struct ToSession {
    decoder: Decoder,
    /// One encoder for the direction: G.722 is adaptive, each code depends on the ones
    /// before it, so recovered and regular frames pass it in their order.
    encoder: G722Encoder,
    clock: Clock,
    pcm: [i16; MAX_FRAME_16K],
    /// The last sequence number decoded and its packet's length at 16 kHz.
    last: Option<(u16, usize)>,
}

/// What [`ToSession::relay`] wrote: up to two packets (a frame recovered from the next
/// packet's FEC data, then the packet itself), each `(start, len)` in the output buffer.
pub(crate) type Written = [Option<(usize, usize)>; 2];

/// The output buffer [`ToSession::relay`] needs: two G.722 packets of the longest frame.
pub(crate) const TO_SESSION_BUF: usize = 2 * (HEADER + MAX_FRAME_16K / SAMPLES_PER_CODE);

impl ToSession {
    pub(crate) fn new() -> Result<ToSession, audiopus::Error> {
        Ok(ToSession {
            decoder: Decoder::new(SampleRate::Hz16000, Channels::Mono)?,
            encoder: G722Encoder::new(),
            clock: Clock::default(),
            pcm: [0; MAX_FRAME_16K],
            last: None,
        })
    }

    /// Transcodes one Opus RTP packet (`seq`, `ts`, `ssrc`, `marker`, `payload`) into G.722
    /// packets in `out`. A single lost packet before this one is recovered from this one's
    /// in-band FEC data. Nothing is written for a packet libopus refuses.
    pub(crate) fn relay(
        &mut self,
        header: Header,
        payload: &[u8],
        out: &mut [u8; TO_SESSION_BUF],
    ) -> Written {
        let mut written: Written = [None, None];
        let mut at = 0;
        if let Some((last_seq, last_len)) = self.last
            && header.seq == last_seq.wrapping_add(2)
            && let Ok(packet) = Packet::try_from(payload)
            && let Ok(signals) = MutSignals::try_from(&mut self.pcm[..last_len])
            && let Ok(n) = self.decoder.decode(Some(packet), signals, true)
        {
            let ticks = (n / SAMPLES_PER_CODE) as u32;
            let ts = self.clock.down(header.ts.wrapping_sub(ticks * CLOCK_RATIO));
            let recovered = Header {
                seq: header.seq.wrapping_sub(1),
                ts,
                marker: false,
                ..header
            };
            let len = write_g722(
                &mut self.encoder,
                &recovered,
                &self.pcm[..n],
                &mut out[at..],
            );
            written[0] = Some((at, len));
            at += len;
        }
        let (Ok(packet), Ok(signals)) = (
            Packet::try_from(payload),
            MutSignals::try_from(&mut self.pcm[..]),
        ) else {
            return written;
        };
        let Ok(n) = self.decoder.decode(Some(packet), signals, false) else {
            return written;
        };
        self.last = Some((header.seq, n));
        let mapped = Header {
            ts: self.clock.down(header.ts),
            ..header
        };
        let len = write_g722(&mut self.encoder, &mapped, &self.pcm[..n], &mut out[at..]);
        written[1] = Some((at, len));
        written
    }

    /// Rewrites a telephone-event/48000 packet in place for the 8 kHz clock: its timestamp
    /// on this direction's clock, each event's duration divided by six (its payload type
    /// stays the one the session was told). False for a packet too short to be one.
    pub(crate) fn telephone_event(&mut self, packet: &mut [u8]) -> bool {
        let Some(start) = payload_start(packet) else {
            return false;
        };
        if packet.len() < start + 4 {
            return false;
        }
        let ts = u32::from_be_bytes([packet[4], packet[5], packet[6], packet[7]]);
        packet[4..8].copy_from_slice(&self.clock.down(ts).to_be_bytes());
        // RFC 4733: a payload may carry redundant events, 4 bytes each.
        for event in packet[start..].chunks_exact_mut(4) {
            let d = u16::from_be_bytes([event[2], event[3]]) / CLOCK_RATIO as u16;
            event[2..4].copy_from_slice(&d.to_be_bytes());
        }
        true
    }
}

/// G.722 from the session → Opus to the browser.
pub(crate) struct ToBrowser {
    encoder: Encoder,
    decoder: G722Decoder,
    clock: Clock,
    pcm: [i16; MAX_FRAME_16K],
}

/// The output buffer [`ToBrowser::relay`] needs (an RTP header and an Opus packet).
pub(crate) const TO_BROWSER_BUF: usize = 1500;

impl ToBrowser {
    pub(crate) fn new() -> Result<ToBrowser, audiopus::Error> {
        let mut encoder = Encoder::new(SampleRate::Hz16000, Channels::Mono, Application::Voip)?;
        encoder.set_inband_fec(true)?;
        encoder.set_packet_loss_perc(EXPECTED_LOSS_PERCENT)?;
        encoder.set_bitrate(Bitrate::BitsPerSecond(BITRATE))?;
        Ok(ToBrowser {
            encoder,
            decoder: G722Decoder::new(),
            clock: Clock::default(),
            pcm: [0; MAX_FRAME_16K],
        })
    }

    /// Transcodes one G.722 RTP packet into an Opus RTP packet in `out` (its length), with
    /// its timestamp on the 48 kHz clock. None for a packet that is not a whole Opus frame
    /// (2.5 to 60 ms) or that libopus refuses.
    pub(crate) fn relay(&mut self, packet: &[u8], out: &mut [u8; TO_BROWSER_BUF]) -> Option<usize> {
        let start = payload_start(packet)?;
        let codes = &packet[start..];
        if !matches!(codes.len(), 20 | 40 | 80 | 160 | 320 | 480) {
            return None;
        }
        let header = Header::parse(packet)?;
        let n = self.decoder.decode(codes, &mut self.pcm);
        let n = self
            .encoder
            .encode(&self.pcm[..n], &mut out[HEADER..])
            .ok()?;
        let mapped = Header {
            ts: self.clock.up(header.ts),
            ..header
        };
        mapped.write(&mut out[..HEADER], 0);
        Some(HEADER + n)
    }
}

/// The RTP header fields the relay keeps.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Header {
    pub(crate) marker: bool,
    pub(crate) seq: u16,
    pub(crate) ts: u32,
    pub(crate) ssrc: u32,
}

impl Header {
    pub(crate) fn parse(packet: &[u8]) -> Option<Header> {
        if packet.len() < HEADER || packet[0] >> 6 != 2 {
            return None;
        }
        Some(Header {
            marker: packet[1] & 0x80 != 0,
            seq: u16::from_be_bytes([packet[2], packet[3]]),
            ts: u32::from_be_bytes([packet[4], packet[5], packet[6], packet[7]]),
            ssrc: u32::from_be_bytes([packet[8], packet[9], packet[10], packet[11]]),
        })
    }

    fn write(&self, out: &mut [u8], pt: u8) {
        out[0] = 0x80;
        out[1] = (u8::from(self.marker) << 7) | (pt & 0x7f);
        out[2..4].copy_from_slice(&self.seq.to_be_bytes());
        out[4..8].copy_from_slice(&self.ts.to_be_bytes());
        out[8..12].copy_from_slice(&self.ssrc.to_be_bytes());
    }
}

/// Where an RTP packet's payload starts (after CSRCs and a header extension), None when
/// the packet is too short for its header. Padding is left in the payload's place: the
/// relay's peers do not pad.
fn payload_start(packet: &[u8]) -> Option<usize> {
    if packet.len() < HEADER {
        return None;
    }
    let mut start = HEADER + 4 * usize::from(packet[0] & 0x0f);
    if packet[0] & 0x10 != 0 {
        let ext = packet.get(start + 2..start + 4)?;
        start += 4 + 4 * usize::from(u16::from_be_bytes([ext[0], ext[1]]));
    }
    (start <= packet.len()).then_some(start)
}

/// Writes a G.722 packet of `pcm` (16 kHz) under `header`; returns its length.
fn write_g722(encoder: &mut G722Encoder, header: &Header, pcm: &[i16], out: &mut [u8]) -> usize {
    header.write(&mut out[..HEADER], RtpCodec::G722.payload_type());
    HEADER + encoder.encode(pcm, &mut out[HEADER..])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tone::amplitude_at;

    /// 20 ms of a tone at 16 kHz starting at sample `at`.
    fn tone(hz: f64, at: usize) -> [i16; 320] {
        std::array::from_fn(|i| {
            let t = (at + i) as f64 / 16000.0;
            (8000.0 * (2.0 * std::f64::consts::PI * hz * t).sin()) as i16
        })
    }

    /// A G.722 packet from the session's side: 20 ms of `pcm` through `encoder`.
    fn g722_packet(encoder: &mut G722Encoder, seq: u16, ts: u32, pcm: &[i16; 320]) -> Vec<u8> {
        let mut p = vec![0x80, 9, 0, 0, 0, 0, 0, 0, 0, 0, 0x12, 0x34];
        p[2..4].copy_from_slice(&seq.to_be_bytes());
        p[4..8].copy_from_slice(&ts.to_be_bytes());
        let mut codes = [0u8; 160];
        assert_eq!(encoder.encode(pcm, &mut codes), 160);
        p.extend_from_slice(&codes);
        p
    }

    /// A 6 kHz tone (above G.711's 4 kHz band) sent by the session as G.722 goes to the
    /// browser as Opus and comes back as G.722: both clocks map, and the tone is still
    /// there after both transcodings, so the browser leg is wideband both ways.
    #[test]
    fn a_6_khz_tone_survives_g722_to_opus_and_back_with_both_clocks_mapped() {
        let mut up = ToBrowser::new().unwrap();
        let mut down = ToSession::new().unwrap();
        let mut session_tx = G722Encoder::new();
        let mut session_rx = G722Decoder::new();
        let mut opus = [0u8; TO_BROWSER_BUF];
        let mut g722 = [0u8; TO_SESSION_BUF];
        let mut heard = Vec::new();
        let mut first = None;
        for k in 0..40u16 {
            let ts8 = 4_294_967_000u32.wrapping_add(u32::from(k) * 160);
            let packet = g722_packet(&mut session_tx, k, ts8, &tone(6000.0, usize::from(k) * 320));
            let n = up.relay(&packet, &mut opus).expect("an Opus packet");
            let h = Header::parse(&opus[..n]).unwrap();
            assert_eq!(h.seq, k);
            assert_eq!(
                h.ts,
                4_294_967_000u32
                    .wrapping_mul(6)
                    .wrapping_add(u32::from(k) * 960),
                "the 48 kHz clock steps 960 a 20 ms frame, across the wrap"
            );
            let w = down.relay(h, &opus[HEADER..n], &mut g722);
            assert!(w[0].is_none(), "nothing lost");
            let (at, len) = w[1].expect("a G.722 packet");
            assert_eq!(len, HEADER + 160, "20 ms of G.722");
            assert_eq!(g722[at + 1] & 0x7f, 9, "payload type 9");
            let back = Header::parse(&g722[at..at + len]).unwrap();
            let first = *first.get_or_insert(back.ts);
            assert_eq!(
                back.ts.wrapping_sub(first),
                u32::from(k) * 160,
                "G.722's 8000 Hz clock"
            );
            let mut pcm = [0i16; 320];
            assert_eq!(
                session_rx.decode(&g722[at + HEADER..at + len], &mut pcm),
                320
            );
            if k >= 10 {
                heard.extend_from_slice(&pcm);
            }
        }
        let at_6k = amplitude_at(&heard, 6000.0, 16000.0);
        let at_1k = amplitude_at(&heard, 1000.0, 16000.0);
        assert!(
            at_6k > 1000.0 && at_6k > 10.0 * at_1k,
            "the 6 kHz tone arrives (level {at_6k:.0} at 6 kHz, {at_1k:.0} at 1 kHz)"
        );
    }

    #[test]
    fn one_lost_packet_is_recovered_from_the_next_ones_fec() {
        let mut up = ToBrowser::new().unwrap();
        let mut down = ToSession::new().unwrap();
        let mut session_tx = G722Encoder::new();
        let mut opus = [0u8; TO_BROWSER_BUF];
        let mut g722 = [0u8; TO_SESSION_BUF];
        let mut recovered = None;
        for k in 0..30u16 {
            let packet = g722_packet(
                &mut session_tx,
                k,
                u32::from(k) * 160,
                &tone(440.0, usize::from(k) * 320),
            );
            let n = up.relay(&packet, &mut opus).unwrap();
            if k == 20 {
                continue;
            }
            let h = Header::parse(&opus[..n]).unwrap();
            let w = down.relay(h, &opus[HEADER..n], &mut g722);
            if let Some((at, len)) = w[0] {
                assert_eq!(len, HEADER + 160, "a whole 20 ms frame recovered");
                recovered = Some(Header::parse(&g722[at..at + len]).unwrap());
            }
        }
        let r = recovered.expect("the lost frame is recovered");
        assert_eq!(r.seq, 20);
        assert_eq!(r.ts.wrapping_sub(down.clock.base.unwrap().1), 20 * 160);
    }

    #[test]
    fn a_packet_that_is_not_a_whole_opus_frame_is_not_relayed() {
        let mut up = ToBrowser::new().unwrap();
        let mut opus = [0u8; TO_BROWSER_BUF];
        let mut p = vec![0x80, 9, 0, 1, 0, 0, 0, 0, 0, 0, 0x12, 0x34];
        p.extend_from_slice(&[0u8; 150]);
        assert_eq!(up.relay(&p, &mut opus), None, "150 codes are 18.75 ms");
        assert_eq!(up.relay(&p[..8], &mut opus), None, "shorter than a header");
    }

    #[test]
    fn telephone_event_moves_to_the_8k_clock() {
        let mut down = ToSession::new().unwrap();
        let mut p = vec![
            0x80, 110, 0, 1, 0, 0, 0x25, 0x80, 0, 0, 0, 1, 5, 0x0a, 0x0f, 0,
        ];
        assert!(down.telephone_event(&mut p));
        assert_eq!(p[1] & 0x7f, 110);
        assert_eq!(u32::from_be_bytes([p[4], p[5], p[6], p[7]]), 9600 / 6);
        assert_eq!(u16::from_be_bytes([p[14], p[15]]), 3840 / 6);
    }
}
