//! SRTP and SRTCP for a session (RFC 3711), with keys agreed by SDES in the SIP layer.
//!
//! The cipher is `webrtc::srtp` (the workspace already builds it for browser legs): one
//! context protects what the session sends (its own key), another unprotects what the
//! peer sends (the peer's key), with replay protection. Contexts are built with
//! [`SrtpParams::contexts`] off the worker thread (key derivation costs a few AES
//! blocks), and handed to the worker ready.
//!
//! Per packet, `webrtc::srtp` returns the protected or unprotected packet in a new buffer
//! (one allocation each way); the worker copies it back into its scratch buffer.

use std::fmt;

use webrtc::srtp::context::Context;
use webrtc::srtp::option::{srtcp_replay_protection, srtp_replay_protection};
use webrtc::srtp::protection_profile::ProtectionProfile;

use crate::MediaError;

/// Bytes of an AES_CM_128 master key and salt together.
pub const MASTER_LEN: usize = 30;

/// Packets the replay window remembers (RFC 3711 §3.3.2 asks at least 64).
const REPLAY_WINDOW: usize = 128;

/// The SRTP protection suites a SIP leg may agree on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SrtpProfile {
    /// AES_CM_128_HMAC_SHA1_80: 10-byte tags.
    Aes128CmHmacSha1_80,
    /// AES_CM_128_HMAC_SHA1_32: 4-byte tags on RTP, 10 on RTCP.
    Aes128CmHmacSha1_32,
}

/// What a session needs for SRTP: the suite, the key it sends with and the peer's key.
/// Debug prints the suite only.
#[derive(Clone, Copy, PartialEq, Eq)]
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

/// A session's two SRTP contexts, ready for the worker.
pub struct SrtpContexts {
    send: Context,
    recv: Context,
}

impl fmt::Debug for SrtpContexts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SrtpContexts(<redacted>)")
    }
}

impl SrtpParams {
    /// Derives the session keys: a context for each direction.
    pub fn contexts(&self) -> Result<SrtpContexts, MediaError> {
        let profile = match self.profile {
            SrtpProfile::Aes128CmHmacSha1_80 => ProtectionProfile::Aes128CmHmacSha1_80,
            SrtpProfile::Aes128CmHmacSha1_32 => ProtectionProfile::Aes128CmHmacSha1_32,
        };
        let context = |k: &[u8; MASTER_LEN], replay: bool| {
            let (rtp, rtcp) = if replay {
                (
                    Some(srtp_replay_protection(REPLAY_WINDOW)),
                    Some(srtcp_replay_protection(REPLAY_WINDOW)),
                )
            } else {
                (None, None)
            };
            Context::new(&k[..16], &k[16..], profile, rtp, rtcp)
                .map_err(|e| MediaError::InvalidInput(format!("srtp: {e}")))
        };
        Ok(SrtpContexts {
            send: context(&self.send_key, false)?,
            recv: context(&self.recv_key, true)?,
        })
    }
}

/// Why a packet was not protected or unprotected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SrtpDrop {
    /// Authentication failed, a replay, or a packet too short to carry a tag.
    Unauthenticated,
    /// The protected packet does not fit the buffer.
    TooLong,
}

impl SrtpContexts {
    /// Protects the RTP packet in `buf[..len]` in place; returns the protected length.
    pub fn protect_rtp(&mut self, buf: &mut [u8], len: usize) -> Result<usize, SrtpDrop> {
        let out = self
            .send
            .encrypt_rtp(&buf[..len])
            .map_err(|_| SrtpDrop::Unauthenticated)?;
        copy_back(buf, &out)
    }

    /// Protects the RTCP packet in `buf[..len]` in place; returns the protected length.
    pub fn protect_rtcp(&mut self, buf: &mut [u8], len: usize) -> Result<usize, SrtpDrop> {
        let out = self
            .send
            .encrypt_rtcp(&buf[..len])
            .map_err(|_| SrtpDrop::Unauthenticated)?;
        copy_back(buf, &out)
    }

    /// Unprotects an SRTP packet into `out`; returns the plain packet's length.
    pub fn unprotect_rtp(&mut self, packet: &[u8], out: &mut [u8]) -> Result<usize, SrtpDrop> {
        let plain = self
            .recv
            .decrypt_rtp(packet)
            .map_err(|_| SrtpDrop::Unauthenticated)?;
        copy_back(out, &plain)
    }

    /// Unprotects an SRTCP packet into `out`; returns the plain packet's length.
    pub fn unprotect_rtcp(&mut self, packet: &[u8], out: &mut [u8]) -> Result<usize, SrtpDrop> {
        let plain = self
            .recv
            .decrypt_rtcp(packet)
            .map_err(|_| SrtpDrop::Unauthenticated)?;
        copy_back(out, &plain)
    }
}

fn copy_back(buf: &mut [u8], data: &[u8]) -> Result<usize, SrtpDrop> {
    let dst = buf.get_mut(..data.len()).ok_or(SrtpDrop::TooLong)?;
    dst.copy_from_slice(data);
    Ok(data.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rtp::write_rtp_header;

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
            assert!(n > 8 + 4);
            let m = theirs.unprotect_rtcp(&buf[..n], &mut out).unwrap();
            assert_eq!(&out[..m], &rr);
        }
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
