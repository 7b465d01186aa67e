//! A browser stand-in for tests: a WebRTC offerer with a PCMU "microphone" track (or, like
//! a real browser, an Opus one offering Opus first and PCMU too), gathering host candidates
//! on loopback only, that keeps what it hears.

use std::sync::Arc;

use parking_lot::Mutex;
use webrtc::api::APIBuilder;
use webrtc::api::media_engine::{MIME_TYPE_OPUS, MIME_TYPE_PCMU, MediaEngine};
use webrtc::api::setting_engine::SettingEngine;
use webrtc::ice::mdns::MulticastDnsMode;
use webrtc::peer_connection::RTCPeerConnection;
use webrtc::peer_connection::configuration::RTCConfiguration;
use webrtc::peer_connection::sdp::session_description::RTCSessionDescription;
use webrtc::rtp_transceiver::rtp_codec::{
    RTCRtpCodecCapability, RTCRtpCodecParameters, RTPCodecType,
};
use webrtc::track::track_local::TrackLocalWriter;
use webrtc::track::track_local::track_local_static_rtp::TrackLocalStaticRTP;

/// The stand-in browser.
pub struct TestBrowser {
    pub pc: Arc<RTCPeerConnection>,
    mic: Arc<TrackLocalStaticRTP>,
    /// RTP payloads received, in arrival order.
    heard: Arc<Mutex<Vec<Vec<u8>>>>,
}

fn pcmu() -> RTCRtpCodecCapability {
    RTCRtpCodecCapability {
        mime_type: MIME_TYPE_PCMU.to_owned(),
        clock_rate: 8000,
        channels: 1,
        ..Default::default()
    }
}

fn opus_capability() -> RTCRtpCodecCapability {
    RTCRtpCodecCapability {
        mime_type: MIME_TYPE_OPUS.to_owned(),
        clock_rate: 48000,
        channels: 2,
        sdp_fmtp_line: "minptime=10;useinbandfec=1".to_owned(),
        ..Default::default()
    }
}

impl TestBrowser {
    /// A PCMU-only browser.
    pub async fn new() -> TestBrowser {
        TestBrowser::build(false).await
    }

    /// A browser offering Opus/48000/2 (`minptime=10;useinbandfec=1`, as browsers do) first
    /// and PCMU after it; its microphone speaks Opus.
    pub async fn with_opus() -> TestBrowser {
        TestBrowser::build(true).await
    }

    async fn build(opus: bool) -> TestBrowser {
        let mut m = MediaEngine::default();
        if opus {
            m.register_codec(
                RTCRtpCodecParameters {
                    capability: opus_capability(),
                    payload_type: 111,
                    ..Default::default()
                },
                RTPCodecType::Audio,
            )
            .expect("register Opus");
        }
        m.register_codec(
            RTCRtpCodecParameters {
                capability: pcmu(),
                payload_type: 0,
                ..Default::default()
            },
            RTPCodecType::Audio,
        )
        .expect("register PCMU");
        let mut s = SettingEngine::default();
        s.set_include_loopback_candidate(true);
        s.set_ip_filter(Box::new(|ip| ip.is_loopback()));
        s.set_ice_multicast_dns_mode(MulticastDnsMode::Disabled);
        let api = APIBuilder::new()
            .with_media_engine(m)
            .with_setting_engine(s)
            .build();
        let pc = Arc::new(
            api.new_peer_connection(RTCConfiguration::default())
                .await
                .expect("peer connection"),
        );
        let mic = Arc::new(TrackLocalStaticRTP::new(
            if opus { opus_capability() } else { pcmu() },
            "mic".into(),
            "browser".into(),
        ));
        pc.add_track(mic.clone()).await.expect("add track");
        let heard: Arc<Mutex<Vec<Vec<u8>>>> = Arc::default();
        let sink = heard.clone();
        pc.on_track(Box::new(move |remote, _, _| {
            let sink = sink.clone();
            tokio::spawn(async move {
                let mut buf = vec![0u8; 1500];
                while let Ok((pkt, _)) = remote.read(&mut buf).await {
                    sink.lock().push(pkt.payload.to_vec());
                }
            });
            Box::pin(async {})
        }));
        TestBrowser { pc, mic, heard }
    }

    /// The complete offer (ICE gathering finished).
    pub async fn offer(&self) -> String {
        let offer = self.pc.create_offer(None).await.expect("offer");
        let mut gathered = self.pc.gathering_complete_promise().await;
        self.pc
            .set_local_description(offer)
            .await
            .expect("local description");
        let _ = gathered.recv().await;
        self.pc
            .local_description()
            .await
            .expect("local description")
            .sdp
    }

    /// Sets the peer's answer.
    pub async fn accept(&self, answer: &str) {
        self.pc
            .set_remote_description(
                RTCSessionDescription::answer(answer.to_string()).expect("answer SDP"),
            )
            .await
            .expect("remote description");
    }

    /// Speaks raw µ-law into the microphone, paced at 20 ms a packet.
    pub async fn speak(&self, ulaw: &[u8]) {
        self.speak_frames(ulaw.chunks(160), 160).await;
    }

    /// Sends each payload (a 20 ms frame of the microphone's codec) in its own packet, paced
    /// at 20 ms a packet, the timestamp stepping `ts_step` (160 for PCMU, 960 for Opus).
    pub async fn speak_frames<'a>(&self, frames: impl Iterator<Item = &'a [u8]>, ts_step: u32) {
        let mut next = tokio::time::Instant::now();
        for (i, chunk) in frames.enumerate() {
            let packet = rtp::packet::Packet {
                header: rtp::header::Header {
                    version: 2,
                    marker: i == 0,
                    payload_type: 0,
                    sequence_number: i as u16,
                    timestamp: (i as u32) * ts_step,
                    ssrc: 0x1234,
                    ..Default::default()
                },
                payload: bytes::Bytes::copy_from_slice(chunk),
            };
            let _ = self.mic.write_rtp(&packet).await;
            next += std::time::Duration::from_millis(20);
            tokio::time::sleep_until(next).await;
        }
    }

    /// RTP payloads received so far.
    pub fn heard(&self) -> Vec<Vec<u8>> {
        self.heard.lock().clone()
    }

    /// Packets received so far whose audio is not silence (a µ-law byte far from 0xff/0x7f).
    pub fn voiced_packets(&self) -> usize {
        self.heard
            .lock()
            .iter()
            .filter(|p| p.iter().filter(|b| (**b & 0x7f) < 0x70).count() > p.len() / 4)
            .count()
    }

    pub async fn close(&self) {
        let _ = self.pc.close().await;
    }
}
