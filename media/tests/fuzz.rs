//! Bounded fuzzing of the media parsers fed with network or uploaded bytes: RTP, RTCP (and the
//! receive statistics the RTP headers drive), SRTP across a re-key, RFC 4733
//! telephone-events, the jitter buffer under arbitrary packet sequences, G.711 decoding and
//! prompt decoding (WAV/MP3/…), and the browser-call ICE candidate filter against the WebRTC
//! stack's own SDP and candidate parsers.
//!
//! Each target replays `tests/fuzz_corpus/<target>/` and then mutations of it for at most
//! ~3 s or its iteration cap, whichever comes first (see `tests/fuzz/harness.rs`).
//! `CALLSMITH_FUZZ_SEED=<u64>|random` sets the seed (printed on every run; the default is
//! fixed per target); `CALLSMITH_FUZZ_SECS=<secs>` sets the time budget and lifts the cap:
//! `CALLSMITH_FUZZ_SECS=600 cargo test -p callsmith-media --test fuzz -- --nocapture`.

#[path = "../../tests/fuzz/harness.rs"]
mod harness;

use std::collections::HashMap;
use std::net::IpAddr;

use callsmith_media::browser::policy::{may_send_checks, parse_sdp};
use callsmith_media::browser::{RemotePolicy, filter_candidates};
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

/// The policies the ICE filter is fuzzed with: a loopback engine's, and a public one's.
fn ice_policies() -> [(&'static str, &'static RemotePolicy); 2] {
    fn loopback(ip: IpAddr) -> bool {
        ip.is_loopback()
    }
    fn public(ip: IpAddr) -> bool {
        match ip {
            IpAddr::V4(v4) => {
                !(v4.is_private()
                    || v4.is_loopback()
                    || v4.is_link_local()
                    || v4.is_unspecified()
                    || v4.is_broadcast()
                    || v4.is_multicast()
                    || v4.octets()[0] == 0
                    || v4.octets()[0] == 100)
            }
            IpAddr::V6(_) => false,
        }
    }
    [("loopback", &loopback), ("public", &public)]
}

/// The candidates the peer connection hands its ICE agent from `sdp`, read as webrtc reads
/// them (`RTCSessionDescription::unmarshal`, then `unmarshal_candidate` on each `candidate`
/// attribute of a media section), and every attribute that merely resembles one. An error
/// for anything the filter's output must never hold.
fn agent_candidates(sdp: &str, allow: &dyn Fn(IpAddr) -> bool) -> Result<Vec<String>, String> {
    use webrtc::ice::candidate::Candidate;
    use webrtc::ice::candidate::CandidateType;
    use webrtc::ice::candidate::candidate_base::unmarshal_candidate;
    use webrtc::peer_connection::sdp::session_description::RTCSessionDescription;

    let desc = RTCSessionDescription::offer(sdp.to_owned())
        .map_err(|e| format!("the peer connection does not read the output: {e}"))?
        .unmarshal()
        .map_err(|e| format!("the output does not parse: {e}"))?;
    if desc.attributes.iter().any(|a| a.is_ice_candidate()) {
        return Err("a session-level candidate in the output".into());
    }
    let mut seen = Vec::new();
    for a in desc.media_descriptions.iter().flat_map(|m| &m.attributes) {
        if !a.is_ice_candidate() {
            continue;
        }
        let value = a
            .value
            .as_deref()
            .ok_or("a bare `a=candidate` in the output")?;
        let c = unmarshal_candidate(value)
            .map_err(|e| format!("the agent cannot read {value:?} in the output: {e}"))?;
        let ip = c.addr().ip();
        if c.candidate_type() != CandidateType::Host || !c.network_type().is_udp() {
            return Err(format!("{value:?}: not a UDP host candidate"));
        }
        if c.address().parse::<IpAddr>().ok() != Some(ip) {
            return Err(format!("{value:?}: the agent pairs with {ip}"));
        }
        if !allow(ip) {
            return Err(format!("{value:?}: {ip} is refused by the policy"));
        }
        seen.push(format!("{ip} {}", c.port()));
    }
    Ok(seen)
}

/// Whether a media-section candidate of the offer (as the peer connection reads it) could
/// be the source of the browser's checks ([`may_send_checks`]).
fn checks_possible(sdp: &str, allow: &dyn Fn(IpAddr) -> bool) -> bool {
    let Ok(desc) = parse_sdp(sdp) else {
        return false;
    };
    desc.media_descriptions
        .iter()
        .flat_map(|m| &m.attributes)
        .filter(|a| a.is_ice_candidate())
        .filter_map(|a| a.value.as_deref())
        .any(|v| may_send_checks(v, allow))
}

/// The candidates of a (possibly unfiltered) offer that the policy allows, as the agent
/// would read them, or `None` when the peer connection would not read the offer.
fn allowed_in_offer(sdp: &str, allow: &dyn Fn(IpAddr) -> bool) -> Option<Vec<String>> {
    use webrtc::ice::candidate::Candidate;
    use webrtc::ice::candidate::CandidateType;
    use webrtc::ice::candidate::candidate_base::unmarshal_candidate;
    use webrtc::peer_connection::sdp::session_description::RTCSessionDescription;

    let desc = RTCSessionDescription::offer(sdp.to_owned()).ok()?;
    let mut out = Vec::new();
    for a in desc
        .unmarshal()
        .ok()?
        .media_descriptions
        .iter()
        .flat_map(|m| &m.attributes)
    {
        let (true, Some(value)) = (a.is_ice_candidate(), a.value.as_deref()) else {
            continue;
        };
        let Ok(c) = unmarshal_candidate(value) else {
            continue;
        };
        let ip = c.addr().ip();
        if c.candidate_type() == CandidateType::Host
            && c.network_type().is_udp()
            && c.address().parse::<IpAddr>().ok() == Some(ip)
            && allow(ip)
        {
            out.push(format!("{ip} {}", c.port()));
        }
    }
    Some(out)
}

/// Addresses a candidate is rewritten to: allowed and refused ones in every spelling the
/// parsers might take.
const ICE_ADDRESSES: &[&str] = &[
    "127.0.0.1",
    "127.9.9.9",
    "93.184.216.34",
    "10.0.0.1",
    "192.168.1.1",
    "172.16.0.1",
    "100.64.0.1",
    "169.254.169.254",
    "0.0.0.0",
    "255.255.255.255",
    "224.0.0.1",
    "::",
    "::1",
    "fe80::1",
    "fe80::1%eth0",
    "::ffff:10.0.0.1",
    "::ffff:127.0.0.1",
    "::127.0.0.1",
    "64:ff9b::a00:1",
    "0x7f.1",
    "0177.0.0.1",
    "127.000.000.001",
    "2130706433",
    "127.1",
    "[::1]",
    "x.local",
    "X.LOCAL",
    "localhost",
    "metadata.google.internal",
];

/// Spellings around a line the SDP lexer might read past.
const ICE_SPACES: &[&str] = &[
    " ", "\t", "\x0b", "\x0c", "\r", "\r\r", "\u{85}", "\u{a0}", "\u{2028}", "\u{3000}",
    "\u{feff}", "\0",
];

/// A structure-aware mutation of an offer: addresses, types, transports and line spellings
/// of its candidates, their place (session level, other sections) and line endings.
fn mutate_offer(rng: &mut harness::Rng, seed: &[u8]) -> Option<Vec<u8>> {
    let text = std::str::from_utf8(seed).ok()?;
    let mut lines: Vec<String> = text.split_inclusive('\n').map(str::to_owned).collect();
    if lines.is_empty() {
        return None;
    }
    let pick = |rng: &mut harness::Rng, from: &[&'static str]| from[rng.below(from.len())];
    for _ in 0..1 + rng.below(4) {
        let candidates: Vec<usize> = (0..lines.len())
            .filter(|i| lines[*i].contains("candidate"))
            .collect();
        let i = if !candidates.is_empty() && !rng.chance(4) {
            candidates[rng.below(candidates.len())]
        } else {
            rng.below(lines.len())
        };
        match rng.below(9) {
            // Another address in the address field.
            0 | 1 => {
                let mut f: Vec<String> = lines[i].split(' ').map(str::to_owned).collect();
                if f.len() > 4 {
                    f[4] = pick(rng, ICE_ADDRESSES).to_owned();
                    lines[i] = f.join(" ");
                }
            }
            // White space or carriage returns around `a=` or at the line's start.
            2 | 3 => {
                let at = if lines[i].starts_with("a=") && rng.chance(2) {
                    2
                } else {
                    0
                };
                lines[i].insert_str(at, pick(rng, ICE_SPACES));
            }
            // Another line ending.
            4 => {
                let body = lines[i].trim_end_matches(['\r', '\n']).to_owned();
                lines[i] = body + pick(rng, &["\r\n", "\n", "\n\r", "\r", "\r\r\n", " \r\n"]);
            }
            // Another type, transport or attribute spelling.
            5 => {
                let (from, to) = [
                    ("typ host", "typ srflx raddr 0.0.0.0 rport 0"),
                    ("typ host", "typ prflx"),
                    ("typ host", "typ relay raddr 10.0.0.1 rport 3478"),
                    ("typ host", "typ HOST"),
                    (" udp ", " tcp "),
                    (" udp ", " UDP "),
                    (" UDP ", " udp "),
                    ("candidate:", "Candidate:"),
                    ("candidate:", "candidate :"),
                    ("candidate:", "candidate: "),
                ][rng.below(10)];
                lines[i] = lines[i].replacen(from, to, 1);
            }
            // The line copied elsewhere: session level, another section, the end.
            6 | 7 => {
                let line = lines[i].clone();
                let to = rng.below(lines.len() + 1);
                lines.insert(to, line);
            }
            // A second audio section with this line in it.
            _ => {
                let line = lines[i].clone();
                lines.push("m=audio 9 UDP/TLS/RTP/SAVPF 0\r\n".to_owned());
                lines.push(line);
            }
        }
    }
    Some(lines.concat().into_bytes())
}

#[test]
fn fuzz_ice_candidates() {
    harness::run_with_mutator(
        "ice_candidates",
        &harness::corpus_dir("ice_candidates"),
        Vec::new(),
        20_000,
        Some(mutate_offer),
        |bytes| {
            let Ok(offer) = std::str::from_utf8(bytes) else {
                return Ok(());
            };
            for (name, allow) in ice_policies() {
                let Ok(out) = filter_candidates(offer, allow) else {
                    continue;
                };
                let kept = agent_candidates(&out, allow).map_err(|e| format!("{name}: {e}"))?;
                // With none left, the browser's checks are what it pairs by: the offer must
                // name a possible source of them (an mDNS name, an allowed UDP address).
                if kept.is_empty() && !checks_possible(offer, allow) {
                    return Err(format!(
                        "{name}: accepted with no candidate left and no source of checks"
                    ));
                }
                // Nothing the policy allows is lost (the filter took the offer, so the peer
                // connection reads it too).
                let allowed = allowed_in_offer(offer, allow)
                    .ok_or_else(|| format!("{name}: accepted an offer webrtc does not read"))?;
                if allowed != kept {
                    return Err(format!(
                        "{name}: kept {kept:?}, the offer allows {allowed:?}"
                    ));
                }
                // Filtering the output again changes nothing.
                match filter_candidates(&out, allow) {
                    Ok(again) if again == out => {}
                    // The names that made it acceptable are gone from the output.
                    Err(_) if kept.is_empty() => {}
                    Ok(again) => return Err(format!("{name}: refiltered into {again:?}")),
                    Err(e) => return Err(format!("{name}: the output is refused: {e}")),
                }
            }
            Ok(())
        },
    );
}

/// SRTP across a re-key (the peer's old key kept for late packets): arbitrary datagrams
/// never authenticate and never end the overlap; an RTP packet (the `rtp` corpus and its
/// mutations) protected under the old key is taken once and keeps the overlap, and one
/// under the new key is taken and ends it. Each input gets fresh contexts.
#[test]
fn fuzz_srtp_across_a_re_key() {
    use callsmith_media::srtp::{MASTER_LEN, SrtpContexts, SrtpParams, SrtpProfile};
    let contexts = |send: u8, recv: u8| {
        SrtpParams {
            profile: SrtpProfile::Aes128CmHmacSha1_80,
            send_key: [send; MASTER_LEN],
            recv_key: [recv; MASTER_LEN],
        }
        .contexts()
        .unwrap()
    };
    let rekeyed = |old_tx: SrtpContexts| {
        let mut new_tx = contexts(3, 4);
        new_tx.continue_from(old_tx);
        let mut rx = contexts(4, 3);
        rx.continue_from(contexts(2, 1));
        (new_tx, rx)
    };
    harness::run(
        "srtp_rekey",
        &harness::corpus_dir("rtp"),
        Vec::new(),
        20_000,
        |input| {
            let mut old_tx = contexts(1, 2);
            let mut out = vec![0u8; input.len() + 64];
            let mut buf = input.to_vec();
            buf.resize(input.len() + 16, 0);
            let protected = old_tx.protect_rtp(&mut buf, input.len()).ok();
            let (mut new_tx, mut rx) = rekeyed(old_tx);
            if rx.unprotect_rtp(input, &mut out).is_ok()
                || rx.unprotect_rtcp(input, &mut out).is_ok()
            {
                return Err("an unprotected datagram authenticated".into());
            }
            if !rx.previous_key_kept() {
                return Err("a forged datagram ended the overlap".into());
            }
            let Some(n) = protected else {
                return Ok(());
            };
            let m = rx
                .unprotect_rtp(&buf[..n], &mut out)
                .map_err(|e| format!("the old key's packet: {e:?}"))?;
            if out[..m] != input[..] {
                return Err("the old key's packet decrypted to something else".into());
            }
            if !rx.previous_key_kept() || rx.unprotect_rtp(&buf[..n], &mut out).is_ok() {
                return Err("an old-key packet ended the overlap or was taken twice".into());
            }
            // The same packet again from the sender, now under the new key: a replay of
            // its index, refused; its successor is taken and ends the overlap.
            let mut next = input.to_vec();
            let seq = u16::from_be_bytes([next[2], next[3]]).wrapping_add(1);
            next[2..4].copy_from_slice(&seq.to_be_bytes());
            next.resize(input.len() + 16, 0);
            let n = new_tx
                .protect_rtp(&mut next, input.len())
                .map_err(|e| format!("protect under the new key: {e:?}"))?;
            rx.unprotect_rtp(&next[..n], &mut out)
                .map_err(|e| format!("the new key's packet: {e:?}"))?;
            if rx.previous_key_kept() {
                return Err("the new key's packet left the old key in place".into());
            }
            Ok(())
        },
    );
}
