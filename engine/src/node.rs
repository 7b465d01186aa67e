//! This node's call service: starts the SIP stack, the media engine and the loops that
//! place, answer and report calls (dialer, inbound, result delivery) over one [`Runtime`],
//! installs the browser-call runner, and drains them on shutdown. The only module that
//! knows every loop; the loops know the [`Runtime`] alone.

use std::sync::Arc;
use std::time::Duration;

use callsmith_domain::Services;
use callsmith_media::{MediaEngine, tts::TtsService};
use callsmith_sip::SipStack;
use tokio_util::sync::CancellationToken;

use crate::runtime::{Capacity, Runtime, RuntimeSettings};

/// The running call engine: SIP stack, dialer, inbound and delivery loops.
pub struct Engine {
    pub rt: Runtime,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    stop_delivery: CancellationToken,
    /// Stops the heartbeat ([`crate::cluster`]) once the node has nothing left to take over.
    stop_heartbeat: CancellationToken,
    heartbeat: tokio::task::JoinHandle<()>,
    drain_timeout: Duration,
}

/// Starts the call engine from the configuration (None when `[dialer] enabled = false`).
/// `local_tts_engine`: the synthesizer registered for the local speech node, if any.
pub async fn start(
    cfg: &crate::config::Config,
    services: Services,
    local_tts_engine: Option<String>,
) -> anyhow::Result<Option<Engine>> {
    if !cfg.dialer.enabled {
        return Ok(None);
    }
    // Before anything binds: a bad `[tts]` section is a start-up error naming the key.
    let tts: Arc<TtsService> = Arc::new(cfg.tts.service()?);
    let sip_cfg = cfg.sip.to_sip()?;
    // The node's capacity admits inbound calls (503 while full); unknown numbers are
    // answered 404 by the inbound handler (it knows the number table).
    let capacity = Capacity::new(&services, &cfg.dialer);
    let sip = SipStack::start(sip_cfg, capacity.clone())
        .await
        // The error names the transport and address that failed.
        .map_err(|e| anyhow::anyhow!("starting the SIP stack: {e}"))?;
    let media_cfg = callsmith_media::MediaConfig {
        workers: cfg.media.workers.max(1),
        bind_ip: cfg.media.bind_ip,
        rtp_port_min: cfg.media.rtp_port_min,
        rtp_port_max: cfg.media.rtp_port_max,
        rtp_timeout_ms: cfg.media.rtp_timeout_ms,
        vad: Some(callsmith_media::vad::VadConfig {
            barge_in_min_ms: cfg.media.barge_in_min_ms,
            ..Default::default()
        }),
        ..Default::default()
    };
    if cfg.media.ice_port_min > cfg.media.ice_port_max {
        anyhow::bail!("media.ice_port_min is above media.ice_port_max");
    }
    // The address SIP SDP carries: concrete, or no start (a wildcard in `c=` reads as hold).
    let sdp_ip = cfg
        .media
        .sdp_address(&callsmith_media::browser::host_addresses())?;
    let media = MediaEngine::new(media_cfg).map_err(|e| anyhow::anyhow!("media: {e}"))?;
    let host = std::env::var("HOSTNAME").unwrap_or_else(|_| "callsmith".into());
    let settings = RuntimeSettings {
        instance: format!("{host}:{}", std::process::id()),
        claim_token: format!("clm_{}", uuid::Uuid::new_v4().simple()),
        internal_url: cfg.internal_url()?,
        lease: Duration::from_secs(cfg.dialer.lease_secs.max(1)),
        ring_timeout: Duration::from_secs(cfg.sip.ring_timeout_secs.max(1)),
        max_call: Duration::from_secs(cfg.dialer.max_call_secs.max(1)),
        default_tts_engine: cfg.tts.default_engine().to_string(),
        local_tts_engine,
        default_stt_engine: cfg.dialer.default_stt_engine.clone(),
        media_ip: sdp_ip,
        dialer: cfg.dialer.clone(),
        llm_call_timeout: Duration::from_secs(cfg.adapters.llm_call_timeout_secs.max(1)),
    };
    let incoming = sip.take_incoming();
    tracing::info!(udp = ?sip.udp_addr(), tcp = ?sip.tcp_addr(), trunks = sip.trunks().len(), media = %sdp_ip, "call engine started");
    let rt = Runtime::new(services, Arc::new(sip), media, tts, settings, capacity);
    rt.services
        .browser
        .install(Arc::new(crate::browser::Runner::new(
            rt.clone(),
            &cfg.media,
        )));
    let stop_delivery = CancellationToken::new();
    let stop_heartbeat = CancellationToken::new();
    let heartbeat = tokio::spawn(crate::cluster::run(rt.clone(), stop_heartbeat.clone()));
    let mut tasks = vec![
        tokio::spawn(crate::dialer::run(rt.clone())),
        tokio::spawn(crate::delivery::run(rt.clone(), stop_delivery.clone())),
    ];
    if let Some(incoming) = incoming {
        tasks.push(tokio::spawn(crate::inbound::run(rt.clone(), incoming)));
    }
    Ok(Some(Engine {
        rt,
        tasks,
        stop_delivery,
        stop_heartbeat,
        heartbeat,
        drain_timeout: Duration::from_secs(cfg.dialer.drain_timeout_secs),
    }))
}

impl Engine {
    /// Graceful stop: no new calls; live calls finish (or are hung up when the drain time
    /// is up); pending result deliveries get one more pass; then the SIP stack stops.
    pub async fn drain(self) {
        let rt = self.rt;
        rt.draining.cancel();
        tracing::info!(live = rt.live.total(), "draining: no new calls");
        let renew = tokio::spawn(crate::dialer::renew_while_live(rt.clone()));
        if !rt.live.wait_idle(self.drain_timeout).await {
            tracing::warn!(
                live = rt.live.total(),
                "drain time is up: hanging up live calls"
            );
            rt.hangup_all.cancel();
            rt.live.wait_idle(Duration::from_secs(15)).await;
        }
        renew.abort();
        // Every call's progress is stored before the process goes.
        rt.journal.flush().await;
        // Nothing of this node is left for a peer to take over.
        self.stop_heartbeat.cancel();
        let _ = self.heartbeat.await;
        if let Err(e) = rt.store.node_leave(&rt.settings.claim_token).await {
            tracing::warn!(error = %e, "removing the node heartbeat failed");
        }
        // Let deliveries of the calls that just ended go out.
        tokio::time::sleep(Duration::from_millis(300)).await;
        self.stop_delivery.cancel();
        for t in &self.tasks {
            if !t.is_finished() {
                t.abort();
            }
        }
        rt.sip.shutdown();
        tracing::info!("call engine stopped");
    }
}
