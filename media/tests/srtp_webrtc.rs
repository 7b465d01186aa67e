//! Our SRTP against `webrtc::srtp` (an independent RFC 3711 implementation) in both
//! directions and with both suites: the bytes on the wire are the same, each side
//! unprotects what the other protects across a sequence-number wrap (65535 to 0), late
//! packets within the replay window are taken once, and replays and a tampered tag are
//! refused.

use callsmith_media::rtp::write_rtp_header;
use callsmith_media::srtp::{MASTER_LEN, SrtpContexts, SrtpDrop, SrtpParams, SrtpProfile};
use webrtc::srtp::context::Context;
use webrtc::srtp::option::{srtcp_replay_protection, srtp_replay_protection};
use webrtc::srtp::protection_profile::ProtectionProfile;

const OURS: [u8; MASTER_LEN] = *b"0123456789abcdefghijklmnopqrst";
const THEIRS: [u8; MASTER_LEN] = *b"ABCDEFGHIJKLMNOPQRSTUVWXYZ!?%&";
const SSRC: u32 = 0x5eed_1234;

const PROFILES: [(SrtpProfile, ProtectionProfile); 2] = [
    (
        SrtpProfile::Aes128CmHmacSha1_80,
        ProtectionProfile::Aes128CmHmacSha1_80,
    ),
    (
        SrtpProfile::Aes128CmHmacSha1_32,
        ProtectionProfile::Aes128CmHmacSha1_32,
    ),
];

fn ours(profile: SrtpProfile) -> SrtpContexts {
    SrtpParams {
        profile,
        send_key: OURS,
        recv_key: THEIRS,
    }
    .contexts()
    .unwrap()
}

fn webrtc(key: &[u8; MASTER_LEN], profile: ProtectionProfile) -> Context {
    Context::new(
        &key[..16],
        &key[16..],
        profile,
        Some(srtp_replay_protection(128)),
        Some(srtcp_replay_protection(128)),
    )
    .unwrap()
}

/// A plain RTP packet: header and 160 bytes of payload derived from `seq`.
fn rtp(seq: u16) -> Vec<u8> {
    let mut p = vec![0u8; 172];
    write_rtp_header(&mut p, seq == 65_530, 0, seq, seq as u32 * 160, SSRC).unwrap();
    for (i, b) in p[12..].iter_mut().enumerate() {
        *b = (seq as usize + i) as u8;
    }
    p
}

/// Sequence numbers across the wrap.
fn wrap() -> Vec<u16> {
    (65_530..=65_535).chain(0..=6).collect()
}

#[test]
fn ours_to_webrtc_matches_byte_for_byte_across_the_wrap() {
    for (profile, theirs) in PROFILES {
        let mut tx = ours(profile);
        let mut reference = webrtc(&OURS, theirs);
        let mut rx = webrtc(&OURS, theirs);
        for seq in wrap() {
            let plain = rtp(seq);
            let mut buf = [0u8; 1500];
            buf[..plain.len()].copy_from_slice(&plain);
            let n = tx.protect_rtp(&mut buf, plain.len()).unwrap();
            assert_eq!(n, plain.len() + profile.rtp_tag_len());
            assert_eq!(
                &buf[..n],
                &reference.encrypt_rtp(&plain).unwrap()[..],
                "{profile:?} seq {seq}"
            );
            assert_eq!(&rx.decrypt_rtp(&buf[..n]).unwrap()[..], &plain[..]);
        }
        // SRTCP: a receiver report, then a sender report.
        for rtcp in [
            vec![0x80u8, 201, 0, 1, 0x5e, 0xed, 0x12, 0x34],
            sender_report(),
        ] {
            let mut buf = [0u8; 1500];
            buf[..rtcp.len()].copy_from_slice(&rtcp);
            let n = tx.protect_rtcp(&mut buf, rtcp.len()).unwrap();
            assert_eq!(n, rtcp.len() + 4 + 10);
            assert_eq!(&buf[..n], &reference.encrypt_rtcp(&rtcp).unwrap()[..]);
            assert_eq!(&rx.decrypt_rtcp(&buf[..n]).unwrap()[..], &rtcp[..]);
        }
    }
}

fn sender_report() -> Vec<u8> {
    let mut sr = vec![0x80u8, 200, 0, 6];
    sr.extend_from_slice(&SSRC.to_be_bytes());
    sr.extend((0..20).map(|i| i as u8 * 7));
    sr
}

#[test]
fn webrtc_to_ours_across_the_wrap_out_of_order_replayed_and_tampered() {
    for (profile, theirs) in PROFILES {
        let mut tx = webrtc(&THEIRS, theirs);
        let mut rx = ours(profile);
        let seqs = wrap();
        let packets: Vec<Vec<u8>> = seqs
            .iter()
            .map(|&s| tx.encrypt_rtp(&rtp(s)).unwrap().to_vec())
            .collect();
        // Delivery order: 65531 before 65530, and 0 (after the wrap) before 65535 (before
        // it), so one packet needs the next rollover counter and a later one the previous.
        let order = [1usize, 0, 2, 3, 4, 6, 5, 7, 9, 8, 10, 11, 12];
        let mut out = [0u8; 1500];
        for &i in &order {
            let n = rx
                .unprotect_rtp(&packets[i], &mut out)
                .unwrap_or_else(|e| panic!("{profile:?} seq {}: {e:?}", seqs[i]));
            assert_eq!(&out[..n], &rtp(seqs[i])[..], "{profile:?} seq {}", seqs[i]);
        }
        // Each of them again is a replay, before the wrap and after it.
        for p in &packets {
            assert_eq!(
                rx.unprotect_rtp(p, &mut out),
                Err(SrtpDrop::Unauthenticated),
                "{profile:?}: a replay"
            );
        }
        // A tampered tag, then a tampered payload, is refused; the genuine packet still
        // passes afterwards (a refused packet does not move the window).
        let genuine = tx.encrypt_rtp(&rtp(7)).unwrap().to_vec();
        for at in [genuine.len() - 1, 20] {
            let mut bad = genuine.clone();
            bad[at] ^= 0x01;
            assert_eq!(
                rx.unprotect_rtp(&bad, &mut out),
                Err(SrtpDrop::Unauthenticated),
                "{profile:?}: tampered at {at}"
            );
        }
        let n = rx.unprotect_rtp(&genuine, &mut out).unwrap();
        assert_eq!(&out[..n], &rtp(7)[..]);
        // A packet older than the window is refused even though it authenticates.
        let mut late_tx = webrtc(&THEIRS, theirs);
        let mut late_rx = ours(profile);
        let first = late_tx.encrypt_rtp(&rtp(1000)).unwrap().to_vec();
        for seq in 1001..=1200 {
            let p = late_tx.encrypt_rtp(&rtp(seq)).unwrap();
            late_rx.unprotect_rtp(&p, &mut out).unwrap();
        }
        assert_eq!(
            late_rx.unprotect_rtp(&first, &mut out),
            Err(SrtpDrop::Unauthenticated),
            "older than the window"
        );

        // SRTCP: out of order, replayed, tampered.
        let reports: Vec<Vec<u8>> = (0..3)
            .map(|_| tx.encrypt_rtcp(&sender_report()).unwrap().to_vec())
            .collect();
        for i in [1, 0, 2] {
            let n = rx.unprotect_rtcp(&reports[i], &mut out).unwrap();
            assert_eq!(&out[..n], &sender_report()[..]);
        }
        assert_eq!(
            rx.unprotect_rtcp(&reports[2], &mut out),
            Err(SrtpDrop::Unauthenticated)
        );
        let mut bad = tx.encrypt_rtcp(&sender_report()).unwrap().to_vec();
        let last = bad.len() - 1;
        bad[last] ^= 0x80;
        assert_eq!(
            rx.unprotect_rtcp(&bad, &mut out),
            Err(SrtpDrop::Unauthenticated)
        );
    }
}

#[test]
fn our_own_pair_runs_long_past_several_wraps() {
    for (profile, _) in PROFILES {
        let mut a = ours(profile);
        let mut b = SrtpParams {
            profile,
            send_key: THEIRS,
            recv_key: OURS,
        }
        .contexts()
        .unwrap();
        let mut buf = [0u8; 1500];
        let mut out = [0u8; 1500];
        let mut seq = 60_000u16;
        for _ in 0..75_000 {
            let plain = rtp(seq);
            buf[..172].copy_from_slice(&plain);
            let n = a.protect_rtp(&mut buf, 172).unwrap();
            let m = b.unprotect_rtp(&buf[..n], &mut out).unwrap();
            assert_eq!(&out[..m], &plain[..], "{profile:?} seq {seq}");
            seq = seq.wrapping_add(1);
        }
    }
}
