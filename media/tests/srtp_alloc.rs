//! SRTP's per-packet path allocates nothing: a counting global allocator watches this
//! test's thread while 1000 RTP packets (and some RTCP) are protected and unprotected.

use std::cell::Cell;
use std::sync::atomic::Ordering;

use callsmith_media::rtp::write_rtp_header;
use callsmith_media::srtp::{MASTER_LEN, SrtpParams, SrtpProfile};

#[path = "common/counting_alloc.rs"]
mod counting_alloc;
use counting_alloc::{ALLOCATIONS, Counting};

thread_local! {
    static WATCHED: Cell<bool> = const { Cell::new(false) };
}

fn watched() -> bool {
    WATCHED.try_with(Cell::get).unwrap_or(false)
}

#[global_allocator]
static GLOBAL: Counting = Counting(watched);

/// Allocations made on this thread while `f` runs.
fn allocations_in(f: impl FnOnce()) -> usize {
    let before = ALLOCATIONS.load(Ordering::Relaxed);
    WATCHED.with(|w| w.set(true));
    f();
    WATCHED.with(|w| w.set(false));
    ALLOCATIONS.load(Ordering::Relaxed) - before
}

#[test]
fn protect_and_unprotect_of_1000_packets_allocate_nothing() {
    // The counter sees an allocation when there is one.
    assert!(allocations_in(|| drop(std::hint::black_box(vec![1u8; 64]))) >= 1);

    for profile in [
        SrtpProfile::Aes128CmHmacSha1_80,
        SrtpProfile::Aes128CmHmacSha1_32,
    ] {
        let (a, b) = ([7u8; MASTER_LEN], [9u8; MASTER_LEN]);
        let mut tx = SrtpParams {
            profile,
            send_key: a,
            recv_key: b,
        }
        .contexts()
        .unwrap();
        let mut rx = SrtpParams {
            profile,
            send_key: b,
            recv_key: a,
        }
        .contexts()
        .unwrap();
        let mut buf = [0u8; 1500];
        let mut out = [0u8; 1500];
        let mut received = 0;
        let n = allocations_in(|| {
            for i in 0..1000u32 {
                // Starts near the wrap so the rollover counter moves too.
                let seq = (65_000 + i) as u16;
                write_rtp_header(&mut buf, false, 0, seq, i * 160, 0xabcd).unwrap();
                buf[12..172].fill(i as u8);
                let len = tx.protect_rtp(&mut buf, 172).unwrap();
                let m = rx.unprotect_rtp(&buf[..len], &mut out).unwrap();
                received += (out[12..m] == [i as u8; 160]) as usize;
                if i % 50 == 0 {
                    buf[..8].copy_from_slice(&[0x80, 201, 0, 1, 0, 0, 0xab, 0xcd]);
                    let len = tx.protect_rtcp(&mut buf, 8).unwrap();
                    rx.unprotect_rtcp(&buf[..len], &mut out).unwrap();
                }
            }
        });
        assert_eq!(received, 1000, "{profile:?}");
        assert_eq!(
            n, 0,
            "{profile:?}: allocations while protecting and unprotecting"
        );
    }
}

/// A re-key's overlap (late packets under the peer's old key, then the first under its new
/// one, which lets the old key go) allocates nothing on the packet path either.
#[test]
fn packets_across_a_re_key_allocate_nothing() {
    let profile = SrtpProfile::Aes128CmHmacSha1_80;
    let params = |send: u8, recv: u8| SrtpParams {
        profile,
        send_key: [send; MASTER_LEN],
        recv_key: [recv; MASTER_LEN],
    };
    let mut old_tx = params(1, 2).contexts().unwrap();
    let mut rx = params(2, 1).contexts().unwrap();
    let mut new_rx = params(4, 3).contexts().unwrap();
    let mut new_tx = params(3, 4).contexts().unwrap();
    let mut buf = [0u8; 1500];
    let mut out = [0u8; 1500];
    let mut seal = |tx: &mut callsmith_media::srtp::SrtpContexts, seq: u16| {
        write_rtp_header(&mut buf, false, 0, seq, seq as u32 * 160, 0xabcd).unwrap();
        let len = tx.protect_rtp(&mut buf, 172).unwrap();
        buf[..len].to_vec()
    };
    let first = seal(&mut old_tx, 1);
    let late: Vec<Vec<u8>> = (2..50).map(|s| seal(&mut old_tx, s)).collect();
    rx.unprotect_rtp(&first, &mut out).unwrap();
    new_tx.continue_from(old_tx);
    let fresh: Vec<Vec<u8>> = (50..100).map(|s| seal(&mut new_tx, s)).collect();
    new_rx.continue_from(rx);
    let mut received = 0;
    let n = allocations_in(|| {
        for p in late.iter().chain(&fresh) {
            received += new_rx.unprotect_rtp(p, &mut out).is_ok() as usize;
        }
    });
    assert_eq!(received, 98);
    assert!(!new_rx.previous_key_kept());
    assert_eq!(n, 0, "allocations across a re-key");
}
