//! The browser relay's Opus transcoding: the browser speaks Opus (RFC 7587: a 48 kHz RTP
//! clock whatever the audio's bandwidth), the media session speaks PCMU at 8 kHz.
//!
//! libopus resamples itself: the decoder renders a packet at 8 kHz and the encoder takes
//! 8 kHz input, so no resampler of ours sits between them. Both directions work in fixed
//! buffers: a packet costs no allocation here. Timestamps are mapped relative to the
//! first packet of each direction (×6 toward the browser, ÷6 toward the session), which
//! keeps gaps and survives the 32-bit wrap.

use audiopus::coder::{Decoder, Encoder};
use audiopus::packet::Packet;
use audiopus::{Application, Bitrate, Channels, MutSignals, SampleRate};

use crate::g711::{ulaw_decode, ulaw_encode};

/// Opus's RTP clock over PCMU's.
const CLOCK_RATIO: u32 = 6;
/// The most samples one Opus packet holds at 8 kHz (120 ms).
const MAX_FRAME_8K: usize = 960;
/// An RTP header without CSRCs or extensions.
const HEADER: usize = 12;
/// The packet loss the encoder plans its in-band FEC for, in percent.
const EXPECTED_LOSS_PERCENT: u8 = 10;

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

/// Opus from the browser → PCMU (and telephone-event at 8000) to the session.
pub(crate) struct ToSession {
    decoder: Decoder,
    clock: Clock,
    pcm: [i16; MAX_FRAME_8K],
    /// The last sequence number decoded and its packet's length at 8 kHz.
    last: Option<(u16, usize)>,
}

/// What [`ToSession::relay`] wrote: up to two packets (a frame recovered from the next
/// packet's FEC data, then the packet itself), each `(start, len)` in the output buffer.
pub(crate) type Written = [Option<(usize, usize)>; 2];

/// The output buffer [`ToSession::relay`] needs: two PCMU packets of the longest frame.
pub(crate) const TO_SESSION_BUF: usize = 2 * (HEADER + MAX_FRAME_8K);

impl ToSession {
    pub(crate) fn new() -> Result<ToSession, audiopus::Error> {
        Ok(ToSession {
            decoder: Decoder::new(SampleRate::Hz8000, Channels::Mono)?,
            clock: Clock::default(),
            pcm: [0; MAX_FRAME_8K],
            last: None,
        })
    }

    /// Transcodes one Opus RTP packet (`seq`, `ts`, `ssrc`, `marker`, `payload`) into PCMU
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
            let ts = self
                .clock
                .down(header.ts.wrapping_sub(n as u32 * CLOCK_RATIO));
            let recovered = Header {
                seq: header.seq.wrapping_sub(1),
                ts,
                marker: false,
                ..header
            };
            let len = write_pcmu(&recovered, &self.pcm[..n], &mut out[at..]);
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
        let len = write_pcmu(&mapped, &self.pcm[..n], &mut out[at..]);
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

/// PCMU from the session → Opus to the browser.
pub(crate) struct ToBrowser {
    encoder: Encoder,
    clock: Clock,
    pcm: [i16; MAX_FRAME_8K],
}

/// The output buffer [`ToBrowser::relay`] needs (an RTP header and an Opus packet).
pub(crate) const TO_BROWSER_BUF: usize = 1500;

impl ToBrowser {
    pub(crate) fn new() -> Result<ToBrowser, audiopus::Error> {
        let mut encoder = Encoder::new(SampleRate::Hz8000, Channels::Mono, Application::Voip)?;
        encoder.set_inband_fec(true)?;
        encoder.set_packet_loss_perc(EXPECTED_LOSS_PERCENT)?;
        encoder.set_bitrate(Bitrate::Auto)?;
        Ok(ToBrowser {
            encoder,
            clock: Clock::default(),
            pcm: [0; MAX_FRAME_8K],
        })
    }

    /// Transcodes one PCMU RTP packet into an Opus RTP packet in `out` (its length), with
    /// its timestamp on the 48 kHz clock. None for a packet that is not a whole Opus frame
    /// (2.5 to 60 ms) or that libopus refuses.
    pub(crate) fn relay(&mut self, packet: &[u8], out: &mut [u8; TO_BROWSER_BUF]) -> Option<usize> {
        let start = payload_start(packet)?;
        let ulaw = &packet[start..];
        if !matches!(ulaw.len(), 20 | 40 | 80 | 160 | 320 | 480) {
            return None;
        }
        for (s, b) in self.pcm.iter_mut().zip(ulaw) {
            *s = ulaw_decode(*b);
        }
        let header = Header::parse(packet)?;
        let n = self
            .encoder
            .encode(&self.pcm[..ulaw.len()], &mut out[HEADER..])
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

fn write_pcmu(header: &Header, pcm: &[i16], out: &mut [u8]) -> usize {
    header.write(&mut out[..HEADER], super::PCMU_PT);
    for (o, s) in out[HEADER..].iter_mut().zip(pcm) {
        *o = ulaw_encode(*s);
    }
    HEADER + pcm.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pcmu_packet(seq: u16, ts: u32, tone_at: usize) -> Vec<u8> {
        let mut p = vec![0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x12, 0x34];
        p[2..4].copy_from_slice(&seq.to_be_bytes());
        p[4..8].copy_from_slice(&ts.to_be_bytes());
        p.extend((0..160).map(|i| {
            let t = (tone_at + i) as f64 / 8000.0;
            ulaw_encode((8000.0 * (2.0 * std::f64::consts::PI * 440.0 * t).sin()) as i16)
        }));
        p
    }

    #[test]
    fn a_tone_survives_pcmu_to_opus_and_back_with_both_clocks_mapped() {
        let mut up = ToBrowser::new().unwrap();
        let mut down = ToSession::new().unwrap();
        let mut opus = [0u8; TO_BROWSER_BUF];
        let mut pcmu = [0u8; TO_SESSION_BUF];
        let mut energy = 0.0;
        let mut samples = 0;
        let mut first = None;
        for k in 0..25u16 {
            let ts8 = 4_294_967_000u32.wrapping_add(u32::from(k) * 160);
            let n = up
                .relay(&pcmu_packet(k, ts8, usize::from(k) * 160), &mut opus)
                .expect("an Opus packet");
            let h = Header::parse(&opus[..n]).unwrap();
            assert_eq!(h.seq, k);
            assert_eq!(
                h.ts,
                4_294_967_000u32
                    .wrapping_mul(6)
                    .wrapping_add(u32::from(k) * 960),
                "the 48 kHz clock steps 960 a 20 ms frame, across the wrap"
            );
            let w = down.relay(h, &opus[HEADER..n], &mut pcmu);
            assert!(w[0].is_none(), "nothing lost");
            let (at, len) = w[1].expect("a PCMU packet");
            assert_eq!(len, HEADER + 160, "20 ms at 8 kHz");
            let back = Header::parse(&pcmu[at..at + len]).unwrap();
            assert_eq!(pcmu[at + 1] & 0x7f, 0, "PCMU");
            let first = *first.get_or_insert(back.ts);
            assert_eq!(
                back.ts.wrapping_sub(first),
                u32::from(k) * 160,
                "8 kHz steps"
            );
            if k >= 5 {
                for b in &pcmu[at + HEADER..at + len] {
                    energy += f64::from(ulaw_decode(*b)).powi(2);
                    samples += 1;
                }
            }
        }
        let rms = (energy / f64::from(samples)).sqrt();
        assert!(rms > 2000.0, "the tone arrives (RMS {rms})");
    }

    #[test]
    fn one_lost_packet_is_recovered_from_the_next_ones_fec() {
        let mut up = ToBrowser::new().unwrap();
        let mut down = ToSession::new().unwrap();
        let mut opus = [0u8; TO_BROWSER_BUF];
        let mut pcmu = [0u8; TO_SESSION_BUF];
        let mut recovered = None;
        for k in 0..30u16 {
            let n = up
                .relay(
                    &pcmu_packet(k, u32::from(k) * 160, usize::from(k) * 160),
                    &mut opus,
                )
                .unwrap();
            if k == 20 {
                continue;
            }
            let h = Header::parse(&opus[..n]).unwrap();
            let w = down.relay(h, &opus[HEADER..n], &mut pcmu);
            if let Some((at, len)) = w[0] {
                recovered = Some(Header::parse(&pcmu[at..at + len]).unwrap());
            }
        }
        let r = recovered.expect("the lost frame is recovered");
        assert_eq!(r.seq, 20);
        assert_eq!(r.ts.wrapping_sub(down.clock.base.unwrap().1), 20 * 160);
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
