//! SRTP and SRTCP for a session (RFC 3711), with keys agreed by SDES in the SIP layer.
//!
//! The suites are AES_CM_128_HMAC_SHA1_80 and AES_CM_128_HMAC_SHA1_32 (RFC 4568 §6.2):
//! AES-128 in counter mode over the payload, HMAC-SHA1 over the packet and its rollover
//! counter, the tag truncated to 10 bytes (or 4 on RTP with `_32`; SRTCP always carries 10).
//! One direction protects what the session sends (its own key), the other unprotects what
//! the peer sends (the peer's key), with replay protection over the last
//! [`REPLAY_WINDOW`] packets. Contexts are built with [`SrtpParams::contexts`] off the
//! worker thread (key derivation costs a few AES blocks and two HMAC key schedules), and
//! handed to the worker ready.
//!
//! Per packet nothing allocates: RTP and RTCP are protected in place in the caller's
//! buffer, and unprotected into the caller's output buffer; the cipher and the keyed MAC
//! state live in the context and are used by reference or copied on the stack. The
//! session keys (AES round keys, salts, MAC state) are overwritten when a context drops,
//! and so are the master keys of an [`SrtpParams`] (it is not `Copy`, so no stray copy
//! outlives it).
//!
//! Re-keying (RFC 4568 §7.1.4: a re-INVITE brings new keys) builds new contexts off the
//! worker as for a first key, and [`SrtpContexts::continue_from`] carries the old ones'
//! state over on the worker: the rollover counters, highest sequence numbers, SRTCP index
//! and replay windows continue (RFC 3711 §3.3.1: the ROC is never reset by a re-key),
//! and the peer's previous key stays usable for what arrives until the first packet under
//! its new key authenticates (packets sent before the peer switched may arrive after our
//! answer).

use std::fmt;

use aes::Aes128Enc;
use aes::cipher::{InnerIvInit, KeyInit, StreamCipher, StreamCipherCoreWrapper};
use hmac::{Hmac, Mac};
use sha1::Sha1;
use zeroize::Zeroize;

use crate::MediaError;

/// Bytes of an AES_CM_128 master key and salt together.
pub const MASTER_LEN: usize = 30;

const KEY_LEN: usize = 16;
const SALT_LEN: usize = 14;
const AUTH_KEY_LEN: usize = 20;
/// SRTCP's tag: 80 bits with either suite (RFC 4568 §6.2.1).
const RTCP_TAG_LEN: usize = 10;
/// The E flag and 31-bit SRTCP index after an SRTCP packet's payload.
const RTCP_INDEX_LEN: usize = 4;
const RTCP_HEADER_LEN: usize = 8;

/// Packets the replay window remembers (RFC 3711 §3.3.2 asks at least 64).
pub const REPLAY_WINDOW: u64 = 128;

type HmacSha1 = Hmac<Sha1>;
type AesCtrCore<'a> = ctr::CtrCore<&'a Aes128Enc, ctr::flavors::Ctr128BE>;

/// AES-CM keystream of `cipher` from the counter block `iv`, XORed into `data`.
fn aes_cm(cipher: &Aes128Enc, iv: &[u8; 16], data: &mut [u8]) {
    let core = AesCtrCore::inner_iv_init(cipher, iv.into());
    StreamCipherCoreWrapper::from_core(core).apply_keystream(data);
}

/// The SRTP protection suites a SIP leg may agree on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SrtpProfile {
    /// AES_CM_128_HMAC_SHA1_80: 10-byte tags.
    Aes128CmHmacSha1_80,
    /// AES_CM_128_HMAC_SHA1_32: 4-byte tags on RTP, 10 on RTCP.
    Aes128CmHmacSha1_32,
}

impl SrtpProfile {
    /// Bytes of the authentication tag on an SRTP (not SRTCP) packet.
    pub fn rtp_tag_len(self) -> usize {
        match self {
            SrtpProfile::Aes128CmHmacSha1_80 => 10,
            SrtpProfile::Aes128CmHmacSha1_32 => 4,
        }
    }
}

/// What a session needs for SRTP: the suite, the key it sends with and the peer's key.
/// Debug prints the suite only; both keys are overwritten when it drops (it is `Clone`,
/// not `Copy`: each clone is wiped in turn).
#[derive(Clone, PartialEq, Eq)]
pub struct SrtpParams {
    pub profile: SrtpProfile,
    /// Master key (16 bytes) and salt (14 bytes) this side protects with.
    pub send_key: [u8; MASTER_LEN],
    /// The peer's master key and salt, to unprotect what it sends.
    pub recv_key: [u8; MASTER_LEN],
}

impl fmt::Debug for SrtpParams {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SrtpParams")
            .field("profile", &self.profile)
            .field("send_key", &"<redacted>")
            .field("recv_key", &"<redacted>")
            .finish()
    }
}

impl Drop for SrtpParams {
    fn drop(&mut self) {
        self.send_key.zeroize();
        self.recv_key.zeroize();
    }
}

/// A session's two SRTP directions, ready for the worker.
pub struct SrtpContexts {
    send: Direction,
    recv: Direction,
    /// After a re-key: the receiving direction under the peer's previous key, used for
    /// what fails under the new one until a packet authenticates under the new one.
    recv_before: Option<Direction>,
}

impl fmt::Debug for SrtpContexts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SrtpContexts(<redacted>)")
    }
}

impl SrtpParams {
    /// Derives the session keys: a context for each direction.
    pub fn contexts(&self) -> Result<SrtpContexts, MediaError> {
        Ok(SrtpContexts {
            send: Direction::new(self.profile, &self.send_key),
            recv: Direction::new(self.profile, &self.recv_key),
            recv_before: None,
        })
    }
}

/// Why a packet was not protected or unprotected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SrtpDrop {
    /// Authentication failed, a replay, or a packet too short to carry a header and tag.
    Unauthenticated,
    /// The protected packet does not fit the buffer.
    TooLong,
}

impl SrtpContexts {
    /// Takes over from `old`, the contexts these new keys replace (a re-key): both
    /// directions keep their rollover counter, highest sequence number, SRTCP index and
    /// replay windows, so the packet index runs on (RFC 3711 §3.3.1) and nothing replayed
    /// from before the re-key is accepted again; `old`'s receiving direction stays usable
    /// until a packet authenticates under the new key (one previous key is kept: a re-key
    /// before that drops the oldest). With the same keys as `old` nothing changes for the
    /// packets. Not per packet: it runs when the worker takes the new contexts.
    pub fn continue_from(&mut self, old: SrtpContexts) {
        self.send.continue_counters(&old.send);
        self.recv.continue_counters(&old.recv);
        self.recv_before = Some(old.recv);
    }

    /// Protects the RTP packet in `buf[..len]` in place; returns the protected length.
    pub fn protect_rtp(&mut self, buf: &mut [u8], len: usize) -> Result<usize, SrtpDrop> {
        self.send.protect_rtp(buf, len)
    }

    /// Protects the RTCP packet in `buf[..len]` in place; returns the protected length.
    pub fn protect_rtcp(&mut self, buf: &mut [u8], len: usize) -> Result<usize, SrtpDrop> {
        self.send.protect_rtcp(buf, len)
    }

    /// Unprotects an SRTP packet into `out`; returns the plain packet's length.
    pub fn unprotect_rtp(&mut self, packet: &[u8], out: &mut [u8]) -> Result<usize, SrtpDrop> {
        match self.recv.unprotect_rtp(packet, out) {
            Err(SrtpDrop::Unauthenticated) if self.recv_before.is_some() => {
                self.with_previous_key(|d| d.unprotect_rtp(packet, out))
            }
            done => self.settled(done),
        }
    }

    /// Unprotects an SRTCP packet into `out`; returns the plain packet's length.
    pub fn unprotect_rtcp(&mut self, packet: &[u8], out: &mut [u8]) -> Result<usize, SrtpDrop> {
        match self.recv.unprotect_rtcp(packet, out) {
            Err(SrtpDrop::Unauthenticated) if self.recv_before.is_some() => {
                self.with_previous_key(|d| d.unprotect_rtcp(packet, out))
            }
            done => self.settled(done),
        }
    }

    /// Whether the peer's previous key is still kept for late packets (after a re-key, until
    /// a packet authenticates under the new one).
    pub fn previous_key_kept(&self) -> bool {
        self.recv_before.is_some()
    }

    /// Unprotects with the peer's previous key; a packet taken so also moves the new key's
    /// rollover counter, highest sequence number and replay windows on (nothing was
    /// taken under the new key yet, so the previous key's are the exact state): a wrap of
    /// the sequence during the overlap leaves the new key's index right.
    fn with_previous_key(
        &mut self,
        unprotect: impl FnOnce(&mut Direction) -> Result<usize, SrtpDrop>,
    ) -> Result<usize, SrtpDrop> {
        let before = self.recv_before.as_mut().ok_or(SrtpDrop::Unauthenticated)?;
        let done = unprotect(before)?;
        self.recv.continue_counters(before);
        Ok(done)
    }

    /// Drops the peer's previous key once a packet authenticated under the new one (its
    /// keys are overwritten in place: nothing is freed on the packet path).
    fn settled(&mut self, done: Result<usize, SrtpDrop>) -> Result<usize, SrtpDrop> {
        if done.is_ok() {
            self.recv_before = None;
        }
        done
    }
}

/// Session keys of one stream kind (RTP or RTCP) in one direction.
struct SessionKeys {
    cipher: Aes128Enc,
    salt: [u8; SALT_LEN],
    /// HMAC-SHA1 keyed with the session authentication key; copied per packet.
    mac: HmacSha1,
}

impl SessionKeys {
    /// Derives the keys of labels `label`, `label + 1` and `label + 2` (encryption,
    /// authentication, salt: RFC 3711 §4.3.1 with a key derivation rate of 0).
    fn derive(master: &Aes128Enc, master_salt: &[u8; SALT_LEN], label: u8) -> Self {
        let mut key = [0u8; KEY_LEN];
        let mut auth = [0u8; AUTH_KEY_LEN];
        let mut salt = [0u8; SALT_LEN];
        prf(master, master_salt, label, &mut key);
        prf(master, master_salt, label + 1, &mut auth);
        prf(master, master_salt, label + 2, &mut salt);
        let keys = SessionKeys {
            cipher: Aes128Enc::new(&key.into()),
            salt,
            mac: <HmacSha1 as Mac>::new_from_slice(&auth).expect("HMAC takes any key length"),
        };
        key.zeroize();
        auth.zeroize();
        salt.zeroize();
        keys
    }

    /// XORs AES-CM keystream for `ssrc` and `index` into `data` (RFC 3711 §4.1.1).
    fn crypt(&self, ssrc: [u8; 4], index: u64, data: &mut [u8]) {
        let mut iv = [0u8; 16];
        iv[..SALT_LEN].copy_from_slice(&self.salt);
        for (b, s) in iv[4..8].iter_mut().zip(ssrc) {
            *b ^= s;
        }
        for (b, i) in iv[8..14].iter_mut().zip(&index.to_be_bytes()[2..]) {
            *b ^= i;
        }
        aes_cm(&self.cipher, &iv, data);
        iv.zeroize();
    }

    /// The full HMAC-SHA1 of `parts` in turn.
    fn mac(&self, parts: &[&[u8]]) -> [u8; 20] {
        let mut m = self.mac.clone();
        for p in parts {
            m.update(p);
        }
        m.finalize().into_bytes().into()
    }
}

impl Drop for SessionKeys {
    fn drop(&mut self) {
        // The AES round keys are zeroized by `aes` itself (its `zeroize` feature).
        self.salt.zeroize();
        let blank = <HmacSha1 as Mac>::new_from_slice(&[]).expect("HMAC takes any key length");
        // SAFETY: `self.mac` is a valid, aligned place; the keyed state it holds owns no
        // heap memory, so overwriting it without dropping leaks nothing.
        unsafe { std::ptr::write_volatile(&mut self.mac, blank) };
        std::sync::atomic::compiler_fence(std::sync::atomic::Ordering::SeqCst);
    }
}

/// The AES-CM key derivation function: `out` = keystream of the master key with IV
/// (master salt XOR label at bit 48) * 2^16, index 0.
fn prf(master: &Aes128Enc, master_salt: &[u8; SALT_LEN], label: u8, out: &mut [u8]) {
    let mut iv = [0u8; 16];
    iv[..SALT_LEN].copy_from_slice(master_salt);
    iv[7] ^= label;
    out.fill(0);
    aes_cm(master, &iv, out);
    iv.zeroize();
}

/// Indices seen below the highest one, for replay protection (RFC 3711 §3.3.2).
#[derive(Default, Clone, Copy)]
struct ReplayWindow {
    /// The highest index accepted; meaningful once `started`.
    top: u64,
    /// Bit n: index `top - n` was accepted.
    seen: u128,
    started: bool,
}

impl ReplayWindow {
    /// Whether `index` is new and not too old to tell.
    fn fresh(&self, index: u64) -> bool {
        if !self.started || index > self.top {
            return true;
        }
        let age = self.top - index;
        age < REPLAY_WINDOW && self.seen & (1u128 << age) == 0
    }

    /// Records `index` as accepted (after it authenticated).
    fn accept(&mut self, index: u64) {
        if !self.started {
            *self = ReplayWindow {
                top: index,
                seen: 1,
                started: true,
            };
        } else if index > self.top {
            let shift = index - self.top;
            self.seen = if shift >= 128 { 0 } else { self.seen << shift };
            self.seen |= 1;
            self.top = index;
        } else {
            self.seen |= 1u128 << (self.top - index);
        }
    }
}

/// One direction of a session: the keys, the RTP rollover counter and highest sequence
/// number, the SRTCP index, and (on the receiving side) the replay windows.
struct Direction {
    rtp_tag: usize,
    rtp: SessionKeys,
    rtcp: SessionKeys,
    /// Rollover counter and the highest sequence number (`s_l`) of RFC 3711 §3.3.1.
    roc: u32,
    s_l: u16,
    rtp_started: bool,
    /// The last SRTCP index sent.
    rtcp_index: u32,
    rtp_replay: ReplayWindow,
    rtcp_replay: ReplayWindow,
}

impl Direction {
    fn new(profile: SrtpProfile, master: &[u8; MASTER_LEN]) -> Self {
        let cipher = Aes128Enc::new(master[..KEY_LEN].into());
        let mut salt: [u8; SALT_LEN] = master[KEY_LEN..].try_into().expect("14 bytes");
        let d = Direction {
            rtp_tag: profile.rtp_tag_len(),
            rtp: SessionKeys::derive(&cipher, &salt, 0),
            rtcp: SessionKeys::derive(&cipher, &salt, 3),
            roc: 0,
            s_l: 0,
            rtp_started: false,
            rtcp_index: 0,
            rtp_replay: ReplayWindow::default(),
            rtcp_replay: ReplayWindow::default(),
        };
        salt.zeroize();
        d
    }

    /// Takes over `old`'s counters and replay windows (a re-key of this direction).
    fn continue_counters(&mut self, old: &Direction) {
        self.roc = old.roc;
        self.s_l = old.s_l;
        self.rtp_started = old.rtp_started;
        self.rtcp_index = old.rtcp_index;
        self.rtp_replay = old.rtp_replay;
        self.rtcp_replay = old.rtcp_replay;
    }

    /// The rollover counter `seq` belongs to (RFC 3711 §3.3.1): the current one, the one
    /// before (a late packet from before a wrap) or the next (the first after a wrap).
    fn guess_roc(&self, seq: u16) -> u32 {
        if !self.rtp_started {
            return self.roc;
        }
        let (s_l, seq) = (self.s_l as i32, seq as i32);
        if s_l < 32_768 {
            if seq - s_l > 32_768 {
                self.roc.wrapping_sub(1)
            } else {
                self.roc
            }
        } else if s_l - 32_768 > seq {
            self.roc.wrapping_add(1)
        } else {
            self.roc
        }
    }

    /// Moves the rollover counter and `s_l` on past a packet of `seq` under `roc`.
    fn advance(&mut self, seq: u16, roc: u32) {
        if !self.rtp_started {
            self.rtp_started = true;
            self.roc = roc;
            self.s_l = seq;
        } else if roc == self.roc.wrapping_add(1) {
            self.roc = roc;
            self.s_l = seq;
        } else if roc == self.roc && seq > self.s_l {
            self.s_l = seq;
        }
    }

    fn protect_rtp(&mut self, buf: &mut [u8], len: usize) -> Result<usize, SrtpDrop> {
        let out_len = len + self.rtp_tag;
        if out_len > buf.len() {
            return Err(SrtpDrop::TooLong);
        }
        let header = rtp_header_len(&buf[..len]).ok_or(SrtpDrop::Unauthenticated)?;
        let seq = u16::from_be_bytes([buf[2], buf[3]]);
        let ssrc = [buf[8], buf[9], buf[10], buf[11]];
        let roc = self.guess_roc(seq);
        self.advance(seq, roc);
        self.rtp
            .crypt(ssrc, rtp_index(roc, seq), &mut buf[header..len]);
        let tag = self.rtp.mac(&[&buf[..len], &roc.to_be_bytes()]);
        buf[len..out_len].copy_from_slice(&tag[..self.rtp_tag]);
        Ok(out_len)
    }

    fn unprotect_rtp(&mut self, packet: &[u8], out: &mut [u8]) -> Result<usize, SrtpDrop> {
        let plain_len = packet
            .len()
            .checked_sub(self.rtp_tag)
            .ok_or(SrtpDrop::Unauthenticated)?;
        let (authed, tag) = packet.split_at(plain_len);
        let header = rtp_header_len(authed).ok_or(SrtpDrop::Unauthenticated)?;
        let seq = u16::from_be_bytes([packet[2], packet[3]]);
        let ssrc = [packet[8], packet[9], packet[10], packet[11]];
        let roc = self.guess_roc(seq);
        let index = rtp_index(roc, seq);
        if !self.rtp_replay.fresh(index) {
            return Err(SrtpDrop::Unauthenticated);
        }
        let expected = self.rtp.mac(&[authed, &roc.to_be_bytes()]);
        if !constant_time_eq(&expected[..self.rtp_tag], tag) {
            return Err(SrtpDrop::Unauthenticated);
        }
        let dst = out.get_mut(..plain_len).ok_or(SrtpDrop::TooLong)?;
        dst.copy_from_slice(authed);
        self.rtp.crypt(ssrc, index, &mut dst[header..]);
        self.advance(seq, roc);
        self.rtp_replay.accept(index);
        Ok(plain_len)
    }

    fn protect_rtcp(&mut self, buf: &mut [u8], len: usize) -> Result<usize, SrtpDrop> {
        if len < RTCP_HEADER_LEN {
            return Err(SrtpDrop::Unauthenticated);
        }
        let out_len = len + RTCP_INDEX_LEN + RTCP_TAG_LEN;
        if out_len > buf.len() {
            return Err(SrtpDrop::TooLong);
        }
        self.rtcp_index = (self.rtcp_index + 1) & 0x7fff_ffff;
        let ssrc = [buf[4], buf[5], buf[6], buf[7]];
        self.rtcp
            .crypt(ssrc, self.rtcp_index as u64, &mut buf[RTCP_HEADER_LEN..len]);
        let e_index = (0x8000_0000 | self.rtcp_index).to_be_bytes();
        buf[len..len + RTCP_INDEX_LEN].copy_from_slice(&e_index);
        let tag = self.rtcp.mac(&[&buf[..len + RTCP_INDEX_LEN]]);
        buf[len + RTCP_INDEX_LEN..out_len].copy_from_slice(&tag[..RTCP_TAG_LEN]);
        Ok(out_len)
    }

    fn unprotect_rtcp(&mut self, packet: &[u8], out: &mut [u8]) -> Result<usize, SrtpDrop> {
        let authed_len = packet
            .len()
            .checked_sub(RTCP_TAG_LEN)
            .filter(|&n| n >= RTCP_HEADER_LEN + RTCP_INDEX_LEN)
            .ok_or(SrtpDrop::Unauthenticated)?;
        let (authed, tag) = packet.split_at(authed_len);
        let plain_len = authed_len - RTCP_INDEX_LEN;
        let e_index = u32::from_be_bytes(authed[plain_len..].try_into().expect("4 bytes"));
        let index = (e_index & 0x7fff_ffff) as u64;
        if !self.rtcp_replay.fresh(index) {
            return Err(SrtpDrop::Unauthenticated);
        }
        let expected = self.rtcp.mac(&[authed]);
        if !constant_time_eq(&expected[..RTCP_TAG_LEN], tag) {
            return Err(SrtpDrop::Unauthenticated);
        }
        let dst = out.get_mut(..plain_len).ok_or(SrtpDrop::TooLong)?;
        dst.copy_from_slice(&authed[..plain_len]);
        if e_index & 0x8000_0000 != 0 {
            let ssrc = [packet[4], packet[5], packet[6], packet[7]];
            self.rtcp.crypt(ssrc, index, &mut dst[RTCP_HEADER_LEN..]);
        }
        self.rtcp_replay.accept(index);
        Ok(plain_len)
    }
}

/// The 48-bit packet index of RFC 3711 §3.3.1.
fn rtp_index(roc: u32, seq: u16) -> u64 {
    ((roc as u64) << 16) | seq as u64
}

/// Bytes of the RTP header (fixed part, CSRCs and extension) of `packet`, when the packet
/// holds all of it.
fn rtp_header_len(packet: &[u8]) -> Option<usize> {
    if packet.len() < 12 || packet[0] >> 6 != 2 {
        return None;
    }
    let mut len = 12 + 4 * (packet[0] & 0x0f) as usize;
    if packet[0] & 0x10 != 0 {
        let ext = packet.get(len + 2..len + 4)?;
        len += 4 + 4 * u16::from_be_bytes([ext[0], ext[1]]) as usize;
    }
    (len <= packet.len()).then_some(len)
}

/// Compares tags without a data-dependent early exit.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rtp::write_rtp_header;

    fn hex(s: &str) -> Vec<u8> {
        let s: String = s.split_whitespace().collect();
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    /// RFC 3711 Appendix B.2: the AES-CM keystream for a session key, salt, SSRC and index.
    #[test]
    fn rfc3711_b2_keystream() {
        let key = hex("2B7E151628AED2A6ABF7158809CF4F3C");
        let salt: [u8; SALT_LEN] = hex("F0F1F2F3F4F5F6F7F8F9FAFBFCFD").try_into().unwrap();
        let keys = SessionKeys {
            cipher: Aes128Enc::new(key[..].into()),
            salt,
            mac: <HmacSha1 as Mac>::new_from_slice(&[]).unwrap(),
        };
        // The B.2 IV is the salt * 2^16 with SSRC and index zero.
        let mut stream = [0u8; 48];
        keys.crypt([0; 4], 0, &mut stream);
        assert_eq!(
            stream.to_vec(),
            hex(
                "E03EAD0935C95E80E166B16DD92B4EB4 D23513162B02D0F72A43A2FE4A5F97AB \
                 41E95B3BB0A2E8DD477901E4FCA894C0"
            )
        );
        // Blocks 0xFEFF..0xFF01 of the same stream.
        let mut far = vec![0u8; 0xff02 * 16];
        keys.crypt([0; 4], 0, &mut far);
        assert_eq!(
            far[0xfeff * 16..].to_vec(),
            hex(
                "EC8CDF7398607CB0F2D21675EA9EA1E4 362B7C3C6773516318A077D7FC5073AE \
                 6A2CC3787889374FBEB4C81B17BA6C44"
            )
        );
    }

    /// RFC 3711 Appendix B.3: the session encryption, salt and authentication keys.
    #[test]
    fn rfc3711_b3_key_derivation() {
        let master = Aes128Enc::new(hex("E1F97A0D3E018BE0D64FA32C06DE4139")[..].into());
        let master_salt: [u8; SALT_LEN] = hex("0EC675AD498AFEEBB6960B3AABE6").try_into().unwrap();
        let mut enc = [0u8; 16];
        prf(&master, &master_salt, 0, &mut enc);
        assert_eq!(enc.to_vec(), hex("C61E7A93744F39EE10734AFE3FF7A087"));
        let mut salt = [0u8; 14];
        prf(&master, &master_salt, 2, &mut salt);
        assert_eq!(salt.to_vec(), hex("30CBBC08863D8C85D49DB34A9AE1"));
        let mut auth = [0u8; 94];
        prf(&master, &master_salt, 1, &mut auth);
        assert_eq!(
            auth.to_vec(),
            hex(
                "CEBE321F6FF7716B6FD4AB49AF256A15 6D38BAA48F0A0ACF3C34E2359E6CDBCE \
                 E049646C43D9327AD175578EF7227098 6371C10C9A369AC2F94A8C5FBCDDDC25 \
                 6D6E919A48B610EF17C2041E47403576 6B68642C59BBFC2F34DB60DBDFB2"
            )
        );
    }

    #[test]
    fn replay_window_takes_late_packets_once_and_refuses_the_too_old() {
        let mut w = ReplayWindow::default();
        for i in [10, 12, 11, 200] {
            assert!(w.fresh(i), "{i}");
            w.accept(i);
        }
        assert!(!w.fresh(200) && !w.fresh(12), "replays");
        assert!(!w.fresh(200 - REPLAY_WINDOW), "too old");
        assert!(w.fresh(200 - REPLAY_WINDOW + 1) && w.fresh(199));
    }

    fn pair(profile: SrtpProfile) -> (SrtpContexts, SrtpContexts) {
        let a = [1u8; MASTER_LEN];
        let b = [2u8; MASTER_LEN];
        let ours = SrtpParams {
            profile,
            send_key: a,
            recv_key: b,
        };
        let theirs = SrtpParams {
            profile,
            send_key: b,
            recv_key: a,
        };
        (ours.contexts().unwrap(), theirs.contexts().unwrap())
    }

    #[test]
    fn rtp_and_rtcp_round_trip_and_tampering_is_refused() {
        for (profile, tag) in [
            (SrtpProfile::Aes128CmHmacSha1_80, 10),
            (SrtpProfile::Aes128CmHmacSha1_32, 4),
        ] {
            let (mut ours, mut theirs) = pair(profile);
            let mut buf = [0u8; 1500];
            write_rtp_header(&mut buf, true, 0, 7, 160, 0x1234).unwrap();
            buf[12..172].fill(0x55);
            let plain = buf[..172].to_vec();
            let n = ours.protect_rtp(&mut buf, 172).unwrap();
            assert_eq!(n, 172 + tag);
            assert_ne!(&buf[12..172], &plain[12..], "the payload is encrypted");
            let mut out = [0u8; 1500];
            let m = theirs.unprotect_rtp(&buf[..n], &mut out).unwrap();
            assert_eq!(&out[..m], &plain[..]);
            // A replay and a flipped bit are refused.
            assert_eq!(
                theirs.unprotect_rtp(&buf[..n], &mut out),
                Err(SrtpDrop::Unauthenticated)
            );
            write_rtp_header(&mut buf, false, 0, 8, 320, 0x1234).unwrap();
            buf[12..172].fill(0x55);
            let n = ours.protect_rtp(&mut buf, 172).unwrap();
            buf[20] ^= 1;
            assert_eq!(
                theirs.unprotect_rtp(&buf[..n], &mut out),
                Err(SrtpDrop::Unauthenticated)
            );
            // RTCP: a receiver report.
            let rr = [0x80u8, 201, 0, 1, 0, 0, 0x12, 0x34];
            buf[..8].copy_from_slice(&rr);
            let n = ours.protect_rtcp(&mut buf, 8).unwrap();
            assert_eq!(n, 8 + 4 + 10);
            let m = theirs.unprotect_rtcp(&buf[..n], &mut out).unwrap();
            assert_eq!(&out[..m], &rr);
            assert_eq!(
                theirs.unprotect_rtcp(&buf[..n], &mut out),
                Err(SrtpDrop::Unauthenticated),
                "an SRTCP replay"
            );
        }
    }

    #[test]
    fn too_short_or_too_long_is_refused_without_panicking() {
        let (mut ours, mut theirs) = pair(SrtpProfile::Aes128CmHmacSha1_80);
        let mut out = [0u8; 1500];
        for len in 0..40 {
            let junk = vec![0x80u8; len];
            assert!(theirs.unprotect_rtp(&junk, &mut out).is_err());
            assert!(theirs.unprotect_rtcp(&junk, &mut out).is_err());
        }
        // Random packets with RTP's version bits (any CSRC count, extension flag and
        // length), to both directions.
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut junk = [0u8; 200];
        for _ in 0..5000 {
            for b in junk.iter_mut() {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                *b = seed as u8;
            }
            junk[0] = 0x80 | (junk[0] & 0x3f);
            let len = (seed >> 32) as usize % junk.len();
            assert!(theirs.unprotect_rtp(&junk[..len], &mut out).is_err());
            assert!(theirs.unprotect_rtcp(&junk[..len], &mut out).is_err());
            let mut copy = junk;
            let _ = ours.protect_rtp(&mut copy, len);
            let _ = ours.protect_rtcp(&mut copy, len);
        }
        let (mut ours, mut theirs) = pair(SrtpProfile::Aes128CmHmacSha1_80);
        let mut buf = [0u8; 180];
        write_rtp_header(&mut buf, false, 0, 1, 160, 9).unwrap();
        assert_eq!(ours.protect_rtp(&mut buf, 172), Err(SrtpDrop::TooLong));
        let n = ours.protect_rtp(&mut buf, 160).unwrap();
        assert_eq!(
            theirs.unprotect_rtp(&buf[..n], &mut out[..100]),
            Err(SrtpDrop::TooLong)
        );
    }

    /// Protects RTP packet `seq` (payload `seq` as bytes) with `tx`, returning its bytes.
    fn sealed(tx: &mut SrtpContexts, seq: u16) -> Vec<u8> {
        let mut buf = [0u8; 200];
        write_rtp_header(&mut buf, false, 0, seq, seq as u32 * 160, 0x77).unwrap();
        buf[12..172].fill(seq as u8);
        let n = tx.protect_rtp(&mut buf, 172).unwrap();
        buf[..n].to_vec()
    }

    fn opened(rx: &mut SrtpContexts, packet: &[u8]) -> Result<u16, SrtpDrop> {
        let mut out = [0u8; 200];
        let n = rx.unprotect_rtp(packet, &mut out)?;
        assert_eq!(n, 172);
        assert!(out[12..n].iter().all(|&b| b == out[3]), "decrypted");
        Ok(u16::from_be_bytes([out[2], out[3]]))
    }

    fn params(send: u8, recv: u8) -> SrtpParams {
        SrtpParams {
            profile: SrtpProfile::Aes128CmHmacSha1_80,
            send_key: [send; MASTER_LEN],
            recv_key: [recv; MASTER_LEN],
        }
    }

    /// Both sides re-key across a sequence number wrap while packets under the old key are
    /// in flight: every packet is taken once, the rollover counter runs on, and the old key
    /// is let go after the first packet under the new one.
    #[test]
    fn a_re_key_mid_stream_loses_no_packet_and_keeps_the_rollover_counter() {
        let (mut tx, mut rx) = (
            params(1, 2).contexts().unwrap(),
            params(2, 1).contexts().unwrap(),
        );
        for seq in 65_530..=65_535 {
            assert_eq!(opened(&mut rx, &sealed(&mut tx, seq)), Ok(seq));
        }
        // Sent under the old key (seq 0 starts ROC 1), received after the re-key.
        let late = [sealed(&mut tx, 0), sealed(&mut tx, 1)];
        let mut rx_new = params(4, 3).contexts().unwrap();
        rx_new.continue_from(rx);
        let mut rx = rx_new;
        let mut tx_new = params(3, 4).contexts().unwrap();
        tx_new.continue_from(tx);
        let mut tx = tx_new;
        assert!(rx.previous_key_kept());
        assert_eq!(
            opened(&mut rx, &late[0]),
            Ok(0),
            "old key, after the re-key"
        );
        assert_eq!(
            opened(&mut rx, &sealed(&mut tx, 2)),
            Ok(2),
            "new key, ROC 1"
        );
        assert!(
            !rx.previous_key_kept(),
            "the old key goes with the first new packet"
        );
        assert_eq!(
            opened(&mut rx, &late[1]),
            Err(SrtpDrop::Unauthenticated),
            "the old key is gone"
        );
        for seq in 3..100 {
            assert_eq!(opened(&mut rx, &sealed(&mut tx, seq)), Ok(seq));
        }
        // RTCP under the new keys.
        let mut buf = [0u8; 64];
        buf[..8].copy_from_slice(&[0x80u8, 201, 0, 1, 0, 0, 0, 0x77]);
        let n = tx.protect_rtcp(&mut buf, 8).unwrap();
        let mut out = [0u8; 64];
        assert_eq!(rx.unprotect_rtcp(&buf[..n], &mut out), Ok(8));
    }

    /// A re-key before anything arrived, then the peer's sequence wraps while its packets
    /// are still under the old key: the new key's first packet (ROC 1) authenticates.
    #[test]
    fn a_wrap_during_the_overlap_moves_the_new_keys_rollover_counter() {
        let mut tx = params(1, 2).contexts().unwrap();
        let mut rx = params(4, 3).contexts().unwrap();
        rx.continue_from(params(2, 1).contexts().unwrap());
        for seq in [65_534, 65_535, 0] {
            assert_eq!(opened(&mut rx, &sealed(&mut tx, seq)), Ok(seq), "old key");
        }
        let mut tx_new = params(3, 4).contexts().unwrap();
        tx_new.continue_from(tx);
        assert_eq!(
            opened(&mut rx, &sealed(&mut tx_new, 1)),
            Ok(1),
            "new key, ROC 1"
        );
        assert!(!rx.previous_key_kept());
    }

    /// What was taken before a re-key is a replay after it; taking over the same keys
    /// changes nothing for the packets.
    #[test]
    fn replays_stay_refused_across_a_re_key_and_the_same_keys_change_nothing() {
        let (mut tx, mut rx) = (
            params(1, 2).contexts().unwrap(),
            params(2, 1).contexts().unwrap(),
        );
        let first = sealed(&mut tx, 10);
        assert_eq!(opened(&mut rx, &first), Ok(10));
        let mut same = params(2, 1).contexts().unwrap();
        same.continue_from(rx);
        let mut rx = same;
        assert_eq!(opened(&mut rx, &first), Err(SrtpDrop::Unauthenticated));
        assert_eq!(opened(&mut rx, &sealed(&mut tx, 11)), Ok(11));
        let mut tx_same = params(1, 2).contexts().unwrap();
        tx_same.continue_from(tx);
        let eleven_again = sealed(&mut tx_same, 11);
        assert_eq!(
            opened(&mut rx, &eleven_again),
            Err(SrtpDrop::Unauthenticated)
        );
        assert_eq!(opened(&mut rx, &sealed(&mut tx_same, 12)), Ok(12));
        let mut rx_new = params(4, 3).contexts().unwrap();
        rx_new.continue_from(rx);
        assert_eq!(opened(&mut rx_new, &first), Err(SrtpDrop::Unauthenticated));
    }

    #[test]
    fn params_are_wiped_when_dropped() {
        let mut p = std::mem::ManuallyDrop::new(params(0xab, 0xcd));
        // SAFETY: dropped once in place; its fields are plain arrays, read after the drop.
        unsafe { std::mem::ManuallyDrop::drop(&mut p) };
        assert_eq!(p.send_key, [0; MASTER_LEN]);
        assert_eq!(p.recv_key, [0; MASTER_LEN]);
    }

    #[test]
    fn keys_are_not_in_debug() {
        let p = SrtpParams {
            profile: SrtpProfile::Aes128CmHmacSha1_80,
            send_key: [0xab; MASTER_LEN],
            recv_key: [0xcd; MASTER_LEN],
        };
        let text = format!("{p:?} {:?}", p.contexts().unwrap());
        assert!(text.contains("<redacted>"), "{text}");
        assert!(!text.contains("171") && !text.contains("205"), "{text}");
    }
}
