//! Bounded fuzzing of the media parsers fed with network or uploaded bytes: RTP, RTCP (and the
//! receive statistics the RTP headers drive), RFC 4733 telephone-events, the jitter buffer
//! under arbitrary packet sequences, G.711 decoding and prompt decoding (WAV/MP3/…).
//!
//! Each target replays `tests/fuzz_corpus/<target>/` and then mutations of it for at most
//! ~3 s or its iteration cap, whichever comes first (see `tests/fuzz/harness.rs`).
//! `CALLSMITH_FUZZ_SEED=<u64>|random` sets the seed (printed on every run; the default is
//! fixed per target); `CALLSMITH_FUZZ_SECS=<secs>` sets the time budget and lifts the cap:
//! `CALLSMITH_FUZZ_SECS=600 cargo test -p callsmith-media --test fuzz -- --nocapture`.

#[path = "../../tests/fuzz/harness.rs"]
mod harness;

use std::collections::HashMap;

use callsmith_media::dtmf::{DtmfDetector, TelephoneEvent};
use callsmith_media::g711::Codec;
use callsmith_media::jitter::{Insert, JitterBuffer, MAX_PAYLOAD, Pop};
use callsmith_media::prompt::{FRAME_SAMPLES, Prompt};
use callsmith_media::rtcp::{ReceiverStats, RtcpReport};
use callsmith_media::rtp::{RTP_HEADER_LEN, RtpPacket, looks_like_rtcp};

fn be16(b: &[u8]) -> u16 {
    u16::from_be_bytes([b[0], b[1]])
}

fn be32(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

#[test]
fn fuzz_rtp() {
    harness::run(
        "rtp",
        &harness::corpus_dir("rtp"),
        Vec::new(),
        100_000,
        |buf| {
            let _ = looks_like_rtcp(buf);
            let Ok(p) = RtpPacket::parse(buf) else {
                return Ok(());
            };
            if p.payload.len() + RTP_HEADER_LEN > buf.len() {
                return Err(format!(
                    "payload of {} bytes from a {}-byte datagram",
                    p.payload.len(),
                    buf.len()
                ));
            }
            // Re-serialised (no CSRCs, extension or padding), it parses to the same fields.
            let mut out = vec![0u8; RTP_HEADER_LEN + p.payload.len()];
            let n = p.write(&mut out).map_err(|e| format!("write: {e}"))?;
            let q = RtpPacket::parse(&out[..n]).map_err(|e| format!("re-parse: {e}"))?;
            if p != q {
                return Err(format!("round trip changed {p:?} into {q:?}"));
            }
            // What the receive path does next with the payload.
            if let Some(codec) = Codec::from_payload_type(p.payload_type) {
                let mut pcm = vec![0i16; p.payload.len()];
                codec.decode_into(p.payload, &mut pcm);
            } else {
                let _ = TelephoneEvent::parse(p.payload);
            }
            Ok(())
        },
    );
}

#[test]
fn fuzz_rtcp() {
    harness::run(
        "rtcp",
        &harness::corpus_dir("rtcp"),
        Vec::new(),
        100_000,
        |buf| {
            let Ok(r) = RtcpReport::parse(buf) else {
                return Ok(());
            };
            if r.block_count > 4 || r.blocks().len() != r.block_count {
                return Err(format!("block_count {}", r.block_count));
            }
            // Re-serialised, it parses to the same report.
            let mut out = [0u8; 8 + 20 + 4 * 24];
            let n = r.write(&mut out).map_err(|e| format!("write: {e}"))?;
            let again = RtcpReport::parse(&out[..n]).map_err(|e| format!("re-parse: {e}"))?;
            if again != r {
                return Err(format!("round trip changed {r:?} into {again:?}"));
            }
            Ok(())
        },
    );
}

/// Receive statistics driven by attacker-chosen RTP headers. Each 11-byte record is
/// `seq step (2) | rtp_ts (4) | arrival step (2) | repeat (2) | flags (1)`: `repeat + 1`
/// packets (modulo 64, or times 32 when the flags are 2 or 3) advance the sequence number by the step,
/// so one small input can cover many sequence-number cycles; flag bit 0 records an SR.
#[test]
fn fuzz_receiver_stats() {
    // Mutations of the RTP corpus are as good as any bytes here.
    let rtp_seeds = harness::load_corpus(&harness::corpus_dir("rtp"))
        .into_iter()
        .map(|(_, b)| b)
        .collect();
    harness::run(
        "receiver_stats",
        &harness::corpus_dir("receiver_stats"),
        rtp_seeds,
        50_000,
        |buf| {
            let mut stats = ReceiverStats::default();
            let mut seq = 0u16;
            let mut arrival = 0u32;
            let mut now_ms = 0u64;
            let mut packets = 0u64;
            for rec in buf.chunks_exact(11) {
                let step = be16(rec);
                let rtp_ts = be32(&rec[2..]);
                let arrival_step = be16(&rec[6..]) as u32;
                // Flags 2 or 3 (exactly) make the repeat count 32 times larger.
                let repeat = if rec[10] & 0xFE == 2 {
                    be16(&rec[8..]) as u32 * 32
                } else {
                    be16(&rec[8..]) as u32 % 64
                };
                // At most ~2 million packets per input keeps one input well under a second.
                if packets > 2_000_000 {
                    break;
                }
                for i in 0..=repeat {
                    seq = seq.wrapping_add(step);
                    arrival = arrival.wrapping_add(arrival_step);
                    stats.on_packet(seq, rtp_ts.wrapping_add(i * 160), arrival);
                    packets += 1;
                }
                now_ms += arrival_step as u64;
                if rec[10] & 1 == 1 {
                    stats.on_sender_report(u64::from(rtp_ts) << 24 | u64::from(step), now_ms);
                }
                let block = stats.report_block(rtp_ts, now_ms);
                if stats.received() != packets {
                    return Err(format!("received {} of {packets}", stats.received()));
                }
                if !(-0x80_0000..=0x7F_FFFF).contains(&block.cumulative_lost) {
                    return Err(format!("cumulative_lost {}", block.cumulative_lost));
                }
            }
            Ok(())
        },
    );
}

/// Telephone-event payloads. The input is a series of 8-byte records, `rtp_ts (4) | payload
/// (4)`, fed to one detector; the first record is also parsed on its own (any length).
#[test]
fn fuzz_telephone_event() {
    harness::run(
        "telephone_event",
        &harness::corpus_dir("telephone_event"),
        Vec::new(),
        100_000,
        |buf| {
            match TelephoneEvent::parse(buf) {
                Ok(ev) => {
                    // Everything but the reserved bit survives a round trip.
                    let want = [buf[0], buf[1] & 0xBF, buf[2], buf[3]];
                    if ev.to_bytes() != want {
                        return Err(format!("to_bytes {:?}, want {want:?}", ev.to_bytes()));
                    }
                }
                Err(_) if buf.len() >= 4 => return Err("rejected a 4-byte payload".into()),
                Err(_) => {}
            }
            let mut det = DtmfDetector::default();
            let mut last_reported: Option<u32> = None;
            for rec in buf.chunks_exact(8) {
                let ts = be32(rec);
                let got = det
                    .on_packet(ts, &rec[4..])
                    .map_err(|e| format!("4-byte payload refused: {e}"))?;
                if got.is_some() {
                    // The redundant end packets of one event report the digit once.
                    if last_reported == Some(ts) {
                        return Err(format!("digit reported twice for timestamp {ts}"));
                    }
                    last_reported = Some(ts);
                }
                if rec[5] & 0x80 != 0 {
                    last_reported = Some(ts);
                }
            }
            Ok(())
        },
    );
}

/// The jitter buffer under arbitrary packet sequences. Input: `min_depth (1) | max_depth (1)`
/// then operations: `0 seq(2) len(2)` insert (payload: the sequence number, then filler),
/// `1` pop, `2 jitter(2) ptime(2)` set_jitter, `3` restart.
#[test]
fn fuzz_jitter_buffer() {
    harness::run(
        "jitter",
        &harness::corpus_dir("jitter"),
        Vec::new(),
        50_000,
        |buf| {
            if buf.len() < 2 {
                return Ok(());
            }
            let mut jb = JitterBuffer::new(buf[0] as usize, buf[1] as usize);
            // Payload last stored for each sequence number.
            let mut stored: HashMap<u16, Vec<u8>> = HashMap::new();
            let mut rest = &buf[2..];
            while let Some((&op, tail)) = rest.split_first() {
                rest = tail;
                match op % 4 {
                    0 if rest.len() >= 4 => {
                        let seq = be16(rest);
                        let len = be16(&rest[2..]) as usize % 600;
                        rest = &rest[4..];
                        let mut payload = vec![(seq as u8) ^ 0x5A; len];
                        if len >= 2 {
                            payload[..2].copy_from_slice(&seq.to_be_bytes());
                        }
                        let outcome = jb.insert(seq, &payload);
                        if (len > MAX_PAYLOAD) != (outcome == Insert::TooLarge) {
                            return Err(format!("{len}-byte payload: {outcome:?}"));
                        }
                        if matches!(outcome, Insert::Stored | Insert::Resynced) {
                            stored.insert(seq, payload);
                        }
                    }
                    1 => {
                        if let Pop::Frame(f) = jb.pop() {
                            if f.len() > MAX_PAYLOAD {
                                return Err(format!("{}-byte frame", f.len()));
                            }
                            if f.len() >= 2 {
                                let seq = be16(f);
                                if stored.get(&seq).map(Vec::as_slice) != Some(f) {
                                    return Err(format!(
                                        "popped a frame for {seq} that is not the payload stored for it"
                                    ));
                                }
                            }
                        }
                    }
                    2 if rest.len() >= 4 => {
                        jb.set_jitter(be16(rest) as u32 * 97, be16(&rest[2..]) as u32);
                        rest = &rest[4..];
                    }
                    3 => jb.restart(),
                    _ => break,
                }
                if jb.depth() > 64 {
                    return Err(format!("depth {}", jb.depth()));
                }
                if jb.target() == 0 || jb.target() > 32 {
                    return Err(format!("target {}", jb.target()));
                }
            }
            Ok(())
        },
    );
}

#[test]
fn fuzz_g711_decode() {
    harness::run(
        "g711",
        &harness::corpus_dir("g711"),
        Vec::new(),
        50_000,
        |buf| {
            for codec in [Codec::Pcmu, Codec::Pcma] {
                // Decoding writes exactly min(input, output) samples.
                let short = buf.len() / 2;
                let mut out = vec![i16::MIN; short + 3];
                codec.decode_into(buf, &mut out[..short]);
                if out[short..].iter().any(|s| *s != i16::MIN) {
                    return Err("decode_into wrote past its output".into());
                }
                let mut full = vec![0i16; buf.len()];
                codec.decode_into(buf, &mut full);
                // Decode is a fixed point after one encode: decode(encode(decode(b))) = decode(b).
                for (b, s) in buf.iter().zip(&full) {
                    let again = codec.decode(codec.encode(*s));
                    if again != *s {
                        return Err(format!(
                            "{codec:?} byte {b:#04x}: {s} re-decodes as {again}"
                        ));
                    }
                }
            }
            Ok(())
        },
    );
}

/// WAV files written with hound, in layouts the committed corpus does not have.
fn generated_wavs() -> Vec<Vec<u8>> {
    let specs = [
        (1u16, 8000u32, 16u16, hound::SampleFormat::Int),
        (2, 44_100, 24, hound::SampleFormat::Int),
        (1, 11_025, 32, hound::SampleFormat::Int),
        (2, 48_000, 32, hound::SampleFormat::Float),
    ];
    specs
        .iter()
        .map(|&(channels, sample_rate, bits_per_sample, sample_format)| {
            let spec = hound::WavSpec {
                channels,
                sample_rate,
                bits_per_sample,
                sample_format,
            };
            let mut cursor = std::io::Cursor::new(Vec::new());
            {
                let mut w = hound::WavWriter::new(&mut cursor, spec).expect("wav writer");
                for i in 0..200i32 {
                    for _ in 0..channels {
                        match sample_format {
                            hound::SampleFormat::Float => {
                                w.write_sample((i as f32 / 50.0).sin() * 0.5).unwrap()
                            }
                            hound::SampleFormat::Int => w
                                .write_sample((i * 97) % (1 << (bits_per_sample - 2)))
                                .unwrap(),
                        }
                    }
                }
                w.finalize().expect("finalize wav");
            }
            cursor.into_inner()
        })
        .collect()
}

#[test]
fn fuzz_prompt_decode() {
    harness::run(
        "prompt",
        &harness::corpus_dir("prompt"),
        generated_wavs(),
        4_000,
        |bytes| {
            // The upload path passes the file's extension, when it has one.
            let hint = [None, Some("wav"), Some("mp3")][bytes.len() % 3];
            let Ok(p) = Prompt::decode(bytes, hint) else {
                return Ok(());
            };
            let n = p.pcm().len();
            if n == 0 || n % FRAME_SAMPLES != 0 {
                return Err(format!("{n} samples: not whole frames"));
            }
            if p.encoded(Codec::Pcmu).len() != n || p.encoded(Codec::Pcma).len() != n {
                return Err("encoded lengths differ from the PCM length".into());
            }
            // No supported format yields more than ~100 samples at 8 kHz per input byte
            // (8-bit PCM at 8 kHz is 1; low-bitrate MP3 a few dozen).
            let bound = 100 * bytes.len() + FRAME_SAMPLES;
            if n > bound {
                return Err(format!("{n} samples from {} bytes", bytes.len()));
            }
            Ok(())
        },
    );
}
