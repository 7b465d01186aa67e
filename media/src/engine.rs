//! `MediaEngine`: owns the worker threads and the RTP port range, and opens sessions.

use std::net::{IpAddr, Ipv4Addr, SocketAddr, UdpSocket};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Sender, channel};

use parking_lot::Mutex;

use crate::MediaError;
use crate::session::MediaSession;
use crate::vad::VadConfig;
use crate::worker::{BUCKET_NS, Command, PacingStats, SessionInit, SessionSettings, run_worker};

/// Engine configuration (all fields have defaults; see `Default`).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct MediaConfig {
    /// Pacing worker threads (each runs one timing loop for many sessions).
    pub workers: usize,
    /// Address RTP sockets bind to.
    pub bind_ip: IpAddr,
    /// Inclusive RTP port range; RTP takes even ports, RTCP the next odd one.
    pub rtp_port_min: u16,
    pub rtp_port_max: u16,
    /// Report `RtpTimeout` after this long without RTP (0 disables).
    pub rtp_timeout_ms: u64,
    pub rtcp_interval_ms: u64,
    /// Jitter buffer depth bounds, in 20 ms packets.
    pub jitter_min_packets: usize,
    pub jitter_max_packets: usize,
    /// Voice activity detection on caller audio (None disables events and barge-in).
    pub vad: Option<VadConfig>,
    /// Duration of each sent DTMF digit.
    pub dtmf_duration_ms: u32,
    /// Recording hand-off queue, in 160-sample stereo frames (each 20 ms at 8 kHz, 10 ms on
    /// a G.722 call: the queue, allocated when a recording starts, is the same size for
    /// either and holds half as long of a wideband call).
    pub recording_queue_frames: usize,
    /// Event channel capacity per session.
    pub event_capacity: usize,
    /// Run the pacing threads under SCHED_FIFO with this priority (1..=99) so a busy
    /// machine cannot delay packets; needs CAP_SYS_NICE (else a warning, normal scheduling).
    pub realtime_priority: Option<i32>,
}

impl Default for MediaConfig {
    fn default() -> Self {
        MediaConfig {
            workers: 1,
            bind_ip: IpAddr::V4(Ipv4Addr::LOCALHOST),
            rtp_port_min: 20000,
            rtp_port_max: 29999,
            rtp_timeout_ms: 30_000,
            rtcp_interval_ms: 5000,
            jitter_min_packets: 1,
            jitter_max_packets: 10,
            vad: Some(VadConfig::default()),
            dtmf_duration_ms: 100,
            recording_queue_frames: 500,
            event_capacity: 256,
            realtime_priority: None,
        }
    }
}

/// Send-lateness summary over all packets sent so far.
///
/// It keeps the histogram's counts, so [`PacingSnapshot::since`] can summarise a window
/// (a benchmark's measured seconds without its setup, say).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct PacingSnapshot {
    pub packets: u64,
    pub p50_us: f64,
    pub p99_us: f64,
    /// The largest lateness since the engine started (the histogram does not keep it per window).
    pub max_us: f64,
    /// CPU time of all worker threads (updated every second).
    pub worker_cpu_ms: f64,
    #[serde(skip)]
    counts: Vec<u64>,
}

impl PacingSnapshot {
    fn from_counts(counts: Vec<u64>, max_us: f64, worker_cpu_ms: f64) -> PacingSnapshot {
        let packets: u64 = counts.iter().sum();
        let pct = |q: f64| {
            let want = ((packets as f64 * q).ceil() as u64).max(1);
            let mut acc = 0;
            for (i, c) in counts.iter().enumerate() {
                acc += c;
                if acc >= want {
                    return ((i as u64 + 1) * BUCKET_NS) as f64 / 1000.0;
                }
            }
            0.0
        };
        PacingSnapshot {
            packets,
            p50_us: pct(0.5),
            p99_us: pct(0.99),
            max_us,
            worker_cpu_ms,
            counts,
        }
    }

    /// The packets sent between `earlier` and this snapshot: their lateness percentiles
    /// and the worker CPU spent. `max_us` stays the all-time maximum.
    pub fn since(&self, earlier: &PacingSnapshot) -> PacingSnapshot {
        let counts = self
            .counts
            .iter()
            .zip(earlier.counts.iter().chain(std::iter::repeat(&0)))
            .map(|(now, then)| now.saturating_sub(*then))
            .collect();
        PacingSnapshot::from_counts(
            counts,
            self.max_us,
            self.worker_cpu_ms - earlier.worker_cpu_ms,
        )
    }
}

struct Worker {
    tx: Mutex<Sender<Command>>,
    sessions: Arc<AtomicU64>,
}

/// The media engine. Cheap to clone.
#[derive(Clone)]
pub struct MediaEngine {
    inner: Arc<Inner>,
}

struct Inner {
    cfg: MediaConfig,
    workers: Vec<Worker>,
    next_port: Mutex<u16>,
    next_id: AtomicU64,
    pacing: Arc<PacingStats>,
}

impl MediaEngine {
    /// Starts the worker threads.
    pub fn new(cfg: MediaConfig) -> Result<MediaEngine, MediaError> {
        if cfg.rtp_port_min >= cfg.rtp_port_max || cfg.rtp_port_min < 1024 {
            return Err(MediaError::InvalidInput(
                "rtp port range must be min < max, min >= 1024".into(),
            ));
        }
        let pacing = Arc::new(PacingStats::new());
        let mut workers = Vec::new();
        for i in 0..cfg.workers.max(1) {
            let (tx, rx) = channel();
            let p = pacing.clone();
            let prio = cfg.realtime_priority;
            std::thread::Builder::new()
                .name(format!("media-worker-{i}"))
                .spawn(move || run_worker(rx, p, prio))
                .map_err(|e| MediaError::Io(e.to_string()))?;
            workers.push(Worker {
                tx: Mutex::new(tx),
                sessions: Arc::new(AtomicU64::new(0)),
            });
        }
        let first = cfg.rtp_port_min + (cfg.rtp_port_min % 2);
        Ok(MediaEngine {
            inner: Arc::new(Inner {
                next_port: Mutex::new(first),
                cfg,
                workers,
                next_id: AtomicU64::new(1),
                pacing,
            }),
        })
    }

    pub fn config(&self) -> &MediaConfig {
        &self.inner.cfg
    }

    /// Opens a session on the least-loaded worker with a fresh port pair.
    /// `remote_hint`: where to send before the peer is known (usually from the SDP offer).
    pub fn open_session(
        &self,
        remote_hint: Option<SocketAddr>,
    ) -> Result<MediaSession, MediaError> {
        let (rtp, rtcp) = self.bind_pair()?;
        let local_rtp = rtp
            .local_addr()
            .map_err(|e| MediaError::Io(e.to_string()))?;
        let id = self.inner.next_id.fetch_add(1, Ordering::Relaxed);
        let worker = self
            .inner
            .workers
            .iter()
            .min_by_key(|w| w.sessions.load(Ordering::Relaxed))
            .ok_or(MediaError::EngineStopped)?;
        worker.sessions.fetch_add(1, Ordering::Relaxed);
        // A futures queue holds its buffer plus one event per sender: the one sender here
        // makes `event_capacity` in all.
        let (etx, erx) = futures::channel::mpsc::channel(self.inner.cfg.event_capacity.max(1) - 1);
        let cfg = &self.inner.cfg;
        let init = SessionInit {
            id,
            rtp,
            rtcp,
            remote: remote_hint,
            events: etx,
            settings: SessionSettings {
                vad: cfg.vad,
                jitter_min: cfg.jitter_min_packets,
                jitter_max: cfg.jitter_max_packets,
                rtp_timeout_ms: cfg.rtp_timeout_ms,
                rtcp_interval_ms: cfg.rtcp_interval_ms,
                dtmf_duration_ms: cfg.dtmf_duration_ms,
            },
        };
        let tx = worker.tx.lock().clone();
        tx.send(Command::Add(Box::new(init)))
            .map_err(|_| MediaError::EngineStopped)?;
        Ok(MediaSession {
            id,
            local_rtp,
            cmd: tx,
            events: Some(erx),
            recorder: Mutex::new(None),
            recording_queue_frames: cfg.recording_queue_frames,
            wide: std::sync::atomic::AtomicBool::new(false),
            load: worker.sessions.clone(),
        })
    }

    fn bind_pair(&self) -> Result<(UdpSocket, UdpSocket), MediaError> {
        let cfg = &self.inner.cfg;
        let first = cfg.rtp_port_min + (cfg.rtp_port_min % 2);
        let pairs = ((cfg.rtp_port_max - first) / 2).max(1) as usize;
        let mut next = self.inner.next_port.lock();
        for _ in 0..pairs {
            let port = *next;
            *next = if port + 3 > cfg.rtp_port_max {
                first
            } else {
                port + 2
            };
            let Ok(rtp) = UdpSocket::bind(SocketAddr::new(cfg.bind_ip, port)) else {
                continue;
            };
            let Ok(rtcp) = UdpSocket::bind(SocketAddr::new(cfg.bind_ip, port + 1)) else {
                continue;
            };
            rtp.set_nonblocking(true)
                .map_err(|e| MediaError::Io(e.to_string()))?;
            rtcp.set_nonblocking(true)
                .map_err(|e| MediaError::Io(e.to_string()))?;
            return Ok((rtp, rtcp));
        }
        Err(MediaError::NoPorts)
    }

    /// Send lateness over all packets so far (against each packet's absolute deadline).
    pub fn pacing(&self) -> PacingSnapshot {
        let p = &self.inner.pacing;
        PacingSnapshot::from_counts(
            p.buckets
                .iter()
                .map(|b| b.load(Ordering::Relaxed))
                .collect(),
            p.max_ns.load(Ordering::Relaxed) as f64 / 1000.0,
            p.cpu_ns.load(Ordering::Relaxed) as f64 / 1e6,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_window_summarises_only_the_packets_sent_in_it() {
        // Setup: 100 packets 5 ms late. Window: 1000 packets, 990 at 10 µs and 10 at 2 ms.
        let mut before = vec![0u64; 500];
        before[500 - 1] = 100;
        let mut after = before.clone();
        after[0] += 990;
        after[199] += 10;
        let earlier = PacingSnapshot::from_counts(before, 5000.0, 10.0);
        let later = PacingSnapshot::from_counts(after, 5000.0, 30.0);
        assert_eq!(
            later.p99_us, 5000.0,
            "whole run: the setup's late packets count"
        );
        let window = later.since(&earlier);
        assert_eq!(window.packets, 1000);
        assert_eq!(window.p50_us, 10.0);
        assert_eq!(window.p99_us, 10.0);
        assert_eq!(window.worker_cpu_ms, 20.0);
        assert_eq!(window.max_us, 5000.0);
    }
}
