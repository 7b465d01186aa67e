//! RFC 4733 telephone-events: payload format, a receive-side detector that
//! reports each digit once (on the first end-bit packet of an event, keyed by
//! the event's RTP timestamp, so the three redundant end packets and
//! retransmissions collapse into one), and a send-side generator.

use thiserror::Error;

/// Why a telephone-event payload or digit was rejected.
#[derive(Debug, Error, Clone, Copy, PartialEq, Eq)]
pub enum DtmfError {
    #[error("telephone-event payload shorter than 4 bytes")]
    TooShort,
    #[error("not a DTMF digit: {0:?}")]
    BadDigit(char),
}

/// One telephone-event payload (RFC 4733 §2.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TelephoneEvent {
    pub event: u8,
    pub end: bool,
    pub volume: u8,
    pub duration: u16,
}

impl TelephoneEvent {
    pub fn parse(payload: &[u8]) -> Result<Self, DtmfError> {
        if payload.len() < 4 {
            return Err(DtmfError::TooShort);
        }
        Ok(TelephoneEvent {
            event: payload[0],
            end: payload[1] & 0x80 != 0,
            volume: payload[1] & 0x3F,
            duration: u16::from_be_bytes([payload[2], payload[3]]),
        })
    }

    pub fn to_bytes(self) -> [u8; 4] {
        let d = self.duration.to_be_bytes();
        [
            self.event,
            (self.volume & 0x3F) | if self.end { 0x80 } else { 0 },
            d[0],
            d[1],
        ]
    }
}

/// Maps a DTMF character (0-9, *, #, A-D) to its event code.
pub fn digit_to_event(d: char) -> Result<u8, DtmfError> {
    Ok(match d {
        '0'..='9' => d as u8 - b'0',
        '*' => 10,
        '#' => 11,
        'A'..='D' => d as u8 - b'A' + 12,
        'a'..='d' => d as u8 - b'a' + 12,
        _ => return Err(DtmfError::BadDigit(d)),
    })
}

/// Maps an event code back to its DTMF character (None for non-DTMF events such as flash).
pub fn event_to_digit(e: u8) -> Option<char> {
    Some(match e {
        0..=9 => (b'0' + e) as char,
        10 => '*',
        11 => '#',
        12..=15 => (b'A' + e - 12) as char,
        _ => return None,
    })
}

/// A digit reported by the detector.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DetectedDigit {
    pub digit: char,
    /// Duration in RTP clock units (8 kHz samples).
    pub duration: u16,
}

/// Receive-side deduplication of telephone-events.
#[derive(Debug, Default, Clone)]
pub struct DtmfDetector {
    /// RTP timestamp of the last event already reported.
    last_reported_ts: Option<u32>,
}

impl DtmfDetector {
    /// Feeds one telephone-event packet; returns a digit the first time an event ends.
    pub fn on_packet(
        &mut self,
        rtp_timestamp: u32,
        payload: &[u8],
    ) -> Result<Option<DetectedDigit>, DtmfError> {
        let ev = TelephoneEvent::parse(payload)?;
        if !ev.end || self.last_reported_ts == Some(rtp_timestamp) {
            return Ok(None);
        }
        self.last_reported_ts = Some(rtp_timestamp);
        Ok(event_to_digit(ev.event).map(|digit| DetectedDigit {
            digit,
            duration: ev.duration,
        }))
    }
}

/// One packet the generator wants sent in the current 20 ms tick.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EventPacket {
    pub marker: bool,
    /// RTP timestamp of the event start (constant over the event).
    pub timestamp: u32,
    pub payload: [u8; 4],
}

/// Send-side generator: one packet per 20 ms tick while the digit lasts, then the
/// end packet three times (RFC 4733 §2.5.1.4), all with the event's start timestamp.
#[derive(Debug, Clone)]
pub struct DtmfGenerator {
    event: u8,
    start_ts: u32,
    total: u16,
    elapsed: u16,
    done: bool,
}

/// Samples per 20 ms packet at 8 kHz.
const STEP: u16 = 160;

impl DtmfGenerator {
    /// A digit lasting `duration_samples` (8 kHz units, e.g. 800 = 100 ms) starting at `start_ts`.
    pub fn new(digit: char, start_ts: u32, duration_samples: u16) -> Result<Self, DtmfError> {
        Ok(DtmfGenerator {
            event: digit_to_event(digit)?,
            start_ts,
            total: duration_samples.max(STEP),
            elapsed: 0,
            done: false,
        })
    }

    /// True once every packet has been produced.
    pub fn is_done(&self) -> bool {
        self.done
    }

    /// Samples the event has covered so far (the voice timestamp resumes after it).
    pub fn elapsed(&self) -> u16 {
        self.elapsed
    }

    /// Produces this tick's packets into `out`; returns how many (1, or 3 for the end).
    pub fn next_tick(&mut self, out: &mut [EventPacket; 3]) -> usize {
        if self.done {
            return 0;
        }
        let first = self.elapsed == 0;
        self.elapsed = self.elapsed.saturating_add(STEP).min(self.total);
        let end = self.elapsed >= self.total;
        let ev = TelephoneEvent {
            event: self.event,
            end,
            volume: 10,
            duration: self.elapsed,
        };
        let p = EventPacket {
            marker: first,
            timestamp: self.start_ts,
            payload: ev.to_bytes(),
        };
        if end {
            self.done = true;
            *out = [
                p,
                EventPacket { marker: false, ..p },
                EventPacket { marker: false, ..p },
            ];
            3
        } else {
            out[0] = p;
            1
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digits_map_both_ways() {
        for d in "0123456789*#ABCD".chars() {
            assert_eq!(event_to_digit(digit_to_event(d).unwrap()), Some(d));
        }
        assert_eq!(digit_to_event('x'), Err(DtmfError::BadDigit('x')));
        assert_eq!(event_to_digit(16), None);
    }

    #[test]
    fn generator_then_detector_reports_once() {
        let mut g = DtmfGenerator::new('7', 16000, 800).unwrap();
        let mut det = DtmfDetector::default();
        let mut out = [EventPacket {
            marker: false,
            timestamp: 0,
            payload: [0; 4],
        }; 3];
        let mut reported = vec![];
        let mut packets = 0;
        while !g.is_done() {
            let n = g.next_tick(&mut out);
            for p in &out[..n] {
                packets += 1;
                assert_eq!(p.timestamp, 16000);
                if let Some(d) = det.on_packet(p.timestamp, &p.payload).unwrap() {
                    reported.push(d);
                }
            }
        }
        assert_eq!(packets, 4 + 3);
        assert_eq!(
            reported,
            vec![DetectedDigit {
                digit: '7',
                duration: 800
            }]
        );
        // A retransmitted end packet of the same event is not reported again.
        let end = TelephoneEvent {
            event: 7,
            end: true,
            volume: 10,
            duration: 800,
        }
        .to_bytes();
        assert_eq!(det.on_packet(16000, &end).unwrap(), None);
        // A new event (new timestamp) is.
        assert!(det.on_packet(17000, &end).unwrap().is_some());
        assert_eq!(det.on_packet(1, &[1, 2]), Err(DtmfError::TooShort));
    }
}
