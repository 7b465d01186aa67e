//! Adaptive receive jitter buffer, sans-IO.
//!
//! Packets are stored by sequence number in the slots of one buffer, sized for
//! 20 ms of G.711 per slot and re-laid out at most a few times if the stream's
//! packets are longer (no allocation per packet). A buffer starts with 8 slots
//! (1.3 KiB), which a clean stream never outgrows, and doubles only when a packet
//! arrives further ahead than they reach, up to a cap that follows the deepest playout
//! allowed: 32 slots, 5 KiB, for the default of 10 packets. Every live call has one,
//! so what a clean call does not use is not allocated. The playout side pulls one packet
//! per tick. Playout
//! starts once `target` packets are buffered; the target follows the measured
//! interarrival jitter (RFC 3550 estimate), between `min_depth` and
//! `max_depth`, so a clean network adds one frame of delay and a jittery one
//! buys itself more. Missing packets are reported as `Lost` (the caller
//! conceals them); packets arriving after their playout slot are dropped.

/// Largest payload a slot holds (60 ms of G.711).
pub const MAX_PAYLOAD: usize = 480;
/// Slots at most (`max_depth` 32).
const MAX_CAPACITY: usize = 64;

/// Slots for a buffer that plays out at most `max_depth` packets behind: it holds up to
/// `max_depth + 2` before it skips ahead, so twice that (a power of two, at least 16)
/// leaves room for packets that arrive early or out of order. Sequence numbers further
/// ahead restart the buffer.
fn capacity_for(max_depth: usize) -> usize {
    (2 * max_depth + 4)
        .next_power_of_two()
        .clamp(16, MAX_CAPACITY)
}

/// Bytes reserved per slot at first: one 20 ms G.711 frame.
const INITIAL_STRIDE: usize = 160;
/// Slots at first (a power of two, like every slot count: sequence numbers wrap at
/// 2^16, so `seq % slots` keeps its place across the wrap).
const INITIAL_SLOTS: usize = 8;

#[derive(Clone, Copy, Default)]
struct Slot {
    seq: u16,
    used: bool,
    len: usize,
}

/// What `insert` did with a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Insert {
    Stored,
    /// Arrived after its playout time; dropped.
    Late,
    Duplicate,
    /// Too large for a slot; dropped.
    TooLarge,
    /// So far ahead that the buffer restarted at this packet.
    Resynced,
}

/// What the playout side gets this tick.
#[derive(Debug, PartialEq, Eq)]
pub enum Pop<'a> {
    Frame(&'a [u8]),
    /// The next packet is missing while later ones are present: conceal one frame.
    Lost,
    /// Nothing to play (buffering or underrun).
    Empty,
}

/// Counters the buffer keeps.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct JitterStats {
    pub late: u64,
    pub duplicate: u64,
    pub lost: u64,
    pub resyncs: u64,
    pub shrunk: u64,
}

pub struct JitterBuffer {
    /// Slots, one packet each (see `capacity_for`).
    slots: Vec<Slot>,
    /// Payload bytes, `stride` per slot.
    data: Vec<u8>,
    stride: usize,
    /// Most slots the buffer may grow to (see `capacity_for`).
    max_slots: usize,
    next_seq: Option<u16>,
    playing: bool,
    buffered: usize,
    target: usize,
    min_depth: usize,
    max_depth: usize,
    stats: JitterStats,
}

impl JitterBuffer {
    /// `min_depth`/`max_depth` in packets (clamped to 1..=32).
    pub fn new(min_depth: usize, max_depth: usize) -> Self {
        let min_depth = min_depth.clamp(1, 32);
        let max_depth = max_depth.clamp(min_depth, 32);
        let max_slots = capacity_for(max_depth);
        let slots = INITIAL_SLOTS.min(max_slots);
        JitterBuffer {
            slots: vec![Slot::default(); slots],
            data: vec![0; slots * INITIAL_STRIDE],
            stride: INITIAL_STRIDE,
            max_slots,
            next_seq: None,
            playing: false,
            buffered: 0,
            target: min_depth,
            min_depth,
            max_depth,
            stats: JitterStats::default(),
        }
    }

    pub fn stats(&self) -> JitterStats {
        self.stats
    }

    /// Packets currently buffered.
    pub fn depth(&self) -> usize {
        self.buffered
    }

    /// Current playout target in packets.
    pub fn target(&self) -> usize {
        self.target
    }

    /// Adapts the target to the interarrival jitter (RTP units) of a `ptime_units` packet stream.
    pub fn set_jitter(&mut self, jitter_units: u32, ptime_units: u32) {
        let ptime = ptime_units.max(1);
        let want = 1 + (2 * jitter_units).div_ceil(ptime) as usize;
        self.target = want.clamp(self.min_depth, self.max_depth);
    }

    /// Forgets the stream: the next packet inserted starts a new sequence (a new source,
    /// after an SSRC change). Counters are kept.
    pub fn restart(&mut self) {
        self.clear();
        self.next_seq = None;
    }

    fn clear(&mut self) {
        for s in &mut self.slots {
            s.used = false;
        }
        self.buffered = 0;
        self.playing = false;
    }

    pub fn insert(&mut self, seq: u16, payload: &[u8]) -> Insert {
        if payload.len() > MAX_PAYLOAD {
            return Insert::TooLarge;
        }
        let mut outcome = Insert::Stored;
        match self.next_seq {
            None => self.next_seq = Some(seq),
            Some(next) => {
                let ahead = seq.wrapping_sub(next) as i16;
                if ahead < 0 {
                    if self.playing {
                        self.stats.late += 1;
                        return Insert::Late;
                    }
                    // Still buffering: an earlier packet moves the start back, if it fits.
                    let span = (self.highest_ahead(next) as i32 - ahead as i32) as usize;
                    if span >= self.max_slots {
                        self.stats.late += 1;
                        return Insert::Late;
                    }
                    self.make_room(span);
                    self.next_seq = Some(seq);
                } else if (ahead as usize) < self.max_slots {
                    self.make_room(ahead as usize);
                } else {
                    self.stats.resyncs += 1;
                    self.clear();
                    self.next_seq = Some(seq);
                    outcome = Insert::Resynced;
                }
            }
        }
        let idx = seq as usize % self.slots.len();
        let slot = &mut self.slots[idx];
        if slot.used && slot.seq == seq {
            self.stats.duplicate += 1;
            return Insert::Duplicate;
        }
        if !slot.used {
            self.buffered += 1;
        }
        slot.used = true;
        slot.seq = seq;
        slot.len = payload.len();
        if payload.len() > self.stride {
            self.grow(payload.len());
        }
        let at = idx * self.stride;
        self.data[at..at + payload.len()].copy_from_slice(payload);
        outcome
    }

    /// Grows the slots (doubling, up to `max_slots`) until `distance` packets apart fit,
    /// keeping what is buffered.
    fn make_room(&mut self, distance: usize) {
        if distance >= self.slots.len() {
            let n = (distance + 1).next_power_of_two().min(self.max_slots);
            self.relayout(n, self.stride);
        }
    }

    /// Re-lays the buffer out with `len` bytes per slot, keeping what is buffered. The
    /// stride only grows (up to `MAX_PAYLOAD`), so a stream pays this once per larger size.
    fn grow(&mut self, len: usize) {
        let stride = len.clamp(self.stride, MAX_PAYLOAD);
        self.relayout(self.slots.len(), stride);
    }

    /// Moves every buffered packet into `slots` slots of `stride` bytes (a packet's slot is
    /// its sequence number modulo the slot count). Only growth calls this, a few times per
    /// stream at most, so the media worker does not allocate per packet.
    fn relayout(&mut self, slots: usize, stride: usize) {
        let mut new_slots = vec![Slot::default(); slots];
        let mut data = vec![0; slots * stride];
        for (i, s) in self.slots.iter().enumerate().filter(|(_, s)| s.used) {
            let j = s.seq as usize % slots;
            let n = s.len.min(self.stride);
            new_slots[j] = *s;
            data[j * stride..j * stride + n]
                .copy_from_slice(&self.data[i * self.stride..i * self.stride + n]);
        }
        self.slots = new_slots;
        self.data = data;
        self.stride = stride;
    }

    fn highest_ahead(&self, next: u16) -> u16 {
        self.slots
            .iter()
            .filter(|s| s.used)
            .map(|s| s.seq.wrapping_sub(next))
            .filter(|d| (*d as i16) >= 0)
            .max()
            .unwrap_or(0)
    }

    /// Pulls the packet for this tick.
    pub fn pop(&mut self) -> Pop<'_> {
        let Some(next) = self.next_seq else {
            return Pop::Empty;
        };
        if !self.playing {
            if self.buffered >= self.target {
                self.playing = true;
            } else {
                return Pop::Empty;
            }
        }
        // Too much buffered for the current target: skip one packet to cut delay.
        if self.buffered > self.target + 2 {
            let idx = next as usize % self.slots.len();
            if self.slots[idx].used && self.slots[idx].seq == next {
                self.slots[idx].used = false;
                self.buffered -= 1;
            }
            self.stats.shrunk += 1;
            self.next_seq = Some(next.wrapping_add(1));
            return self.pop();
        }
        if self.buffered == 0 {
            self.playing = false;
            return Pop::Empty;
        }
        let idx = next as usize % self.slots.len();
        self.next_seq = Some(next.wrapping_add(1));
        if self.slots[idx].used && self.slots[idx].seq == next {
            self.slots[idx].used = false;
            self.buffered -= 1;
            let at = idx * self.stride;
            Pop::Frame(&self.data[at..at + self.slots[idx].len])
        } else {
            self.stats.lost += 1;
            Pop::Lost
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_follow_the_deepest_playout_allowed() {
        assert_eq!(capacity_for(1), 16);
        assert_eq!(capacity_for(10), 32);
        assert_eq!(capacity_for(32), 64);
        let mut jb = JitterBuffer::new(1, 10);
        assert_eq!(jb.insert(100, &[1; 160]), Insert::Stored);
        assert_eq!(jb.slots.len(), 8, "a clean stream starts small");
        // Early by 20 packets still fits (the slots grow to 32, keeping packet 100);
        // 32 ahead of the next to play restarts.
        assert_eq!(jb.insert(120, &[2; 160]), Insert::Stored);
        assert_eq!(jb.slots.len(), 32);
        assert_eq!(jb.insert(132, &[3; 160]), Insert::Resynced);
        assert_eq!(jb.stats().resyncs, 1);
        let mut jb = JitterBuffer::new(1, 10);
        jb.insert(100, &[1; 160]);
        jb.insert(120, &[2; 160]);
        assert_eq!(frame(jb.pop()), Some(1));
    }

    #[test]
    fn a_clean_stream_never_grows_and_growth_keeps_every_packet() {
        let mut jb = JitterBuffer::new(2, 10);
        for seq in 65_000u16..=65_535 {
            jb.insert(seq, &[seq as u8; 160]);
            jb.pop();
        }
        for seq in 0u16..600 {
            jb.insert(seq, &[seq as u8; 160]);
            jb.pop();
        }
        assert_eq!(jb.slots.len(), 8);
        assert_eq!(jb.stats().resyncs + jb.stats().late, 0);

        // A burst arriving out of order across the 16-bit wrap: 10 packets, the last
        // first, so the buffer must grow while holding them.
        let mut jb = JitterBuffer::new(10, 10);
        let seqs: Vec<u16> = (0..10).map(|i| 65_530u16.wrapping_add(i)).collect();
        jb.insert(seqs[0], &[0; 160]);
        for (i, s) in seqs.iter().enumerate().skip(1).rev() {
            assert_eq!(jb.insert(*s, &[i as u8; 160]), Insert::Stored, "seq {s}");
        }
        assert_eq!(jb.slots.len(), 16);
        let got: Vec<_> = (0..10).filter_map(|_| frame(jb.pop())).collect();
        assert_eq!(got, (0..10).collect::<Vec<u8>>());
    }

    fn frame(p: Pop<'_>) -> Option<u8> {
        match p {
            Pop::Frame(b) => Some(b[0]),
            Pop::Lost => Some(255),
            Pop::Empty => None,
        }
    }

    #[test]
    fn reorders_within_target() {
        let mut jb = JitterBuffer::new(4, 10);
        for seq in [10u16, 12, 11, 13, 15, 14] {
            jb.insert(seq, &[seq as u8; 160]);
        }
        let got: Vec<_> = (0..6).filter_map(|_| frame(jb.pop())).collect();
        assert_eq!(got, vec![10, 11, 12, 13, 14, 15]);
        assert_eq!(frame(jb.pop()), None);
    }

    #[test]
    fn early_reorder_before_playout_moves_start_back() {
        let mut jb = JitterBuffer::new(2, 10);
        jb.insert(101, &[101; 160]);
        jb.insert(100, &[100; 160]);
        assert_eq!(frame(jb.pop()), Some(100));
        assert_eq!(frame(jb.pop()), Some(101));
    }

    #[test]
    fn loss_is_reported_and_late_dropped() {
        let mut jb = JitterBuffer::new(1, 10);
        jb.insert(1, &[1; 160]);
        assert_eq!(frame(jb.pop()), Some(1));
        jb.insert(3, &[3; 160]);
        assert_eq!(frame(jb.pop()), Some(255)); // 2 missing
        assert_eq!(frame(jb.pop()), Some(3));
        assert_eq!(jb.insert(2, &[2; 160]), Insert::Late);
        assert_eq!(jb.stats().lost, 1);
        assert_eq!(jb.stats().late, 1);
        jb.insert(4, &[4; 160]);
        assert_eq!(jb.insert(4, &[4; 160]), Insert::Duplicate);
        assert_eq!(jb.insert(5, &[0; 2000]), Insert::TooLarge);
    }

    #[test]
    fn longer_packets_keep_what_is_buffered() {
        let mut jb = JitterBuffer::new(3, 10);
        let pkt = |seq: u16, len: usize| -> Vec<u8> {
            (0..len).map(|i| (seq as usize * 7 + i) as u8).collect()
        };
        // 20 ms, then 40 ms (re-layout with one packet buffered), then 60 ms.
        jb.insert(1, &pkt(1, 160));
        jb.insert(2, &pkt(2, 320));
        jb.insert(3, &pkt(3, 480));
        for (seq, len) in [(1u16, 160), (2, 320), (3, 480)] {
            match jb.pop() {
                Pop::Frame(b) => assert_eq!(b, &pkt(seq, len)[..], "packet {seq}"),
                other => panic!("packet {seq}: {other:?}"),
            }
        }
        // Short packets after the growth still come back whole.
        jb.insert(4, &pkt(4, 80));
        assert_eq!(jb.pop(), Pop::Frame(&pkt(4, 80)[..]));
    }

    #[test]
    fn wraps_and_resyncs() {
        let mut jb = JitterBuffer::new(1, 10);
        let mut seq = 65534u16;
        for _ in 0..5 {
            jb.insert(seq, &[seq as u8; 10]);
            assert!(matches!(jb.pop(), Pop::Frame(_)));
            seq = seq.wrapping_add(1);
        }
        assert_eq!(
            jb.insert(seq.wrapping_add(1000), &[1; 10]),
            Insert::Resynced
        );
        assert!(matches!(jb.pop(), Pop::Frame(_)));
    }

    #[test]
    fn target_adapts_to_jitter_and_shrinks() {
        let mut jb = JitterBuffer::new(1, 8);
        jb.set_jitter(0, 160);
        assert_eq!(jb.target(), 1);
        jb.set_jitter(400, 160);
        assert_eq!(jb.target(), 6);
        jb.set_jitter(100_000, 160);
        assert_eq!(jb.target(), 8);
        jb.set_jitter(0, 160);
        for s in 0..10u16 {
            jb.insert(s, &[s as u8; 160]);
        }
        // 10 buffered for a target of 1: the buffer drops old packets to catch up.
        let first = frame(jb.pop()).unwrap();
        assert!(first > 0, "skipped ahead, got {first}");
        assert!(jb.stats().shrunk > 0);
    }
}
