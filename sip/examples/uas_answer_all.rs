//! A UAS that answers every inbound call from loopback trunks and waits for the caller's BYE.
//! Used by the SIP load bench and for manual interop checks:
//! `cargo run --release -p callsmith-sip --example uas_answer_all -- 127.0.0.1:5070`
//! Prints `listening <udp addr>` once ready, then one line per second with call counts.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use callsmith_sip::{LegEvent, LocalMedia, SipConfig, SipStack, TrunkConfig};

#[tokio::main]
async fn main() {
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:5070".into());
    let Ok(addr) = addr.parse() else {
        eprintln!("usage: uas_answer_all <ip:port>");
        std::process::exit(2);
    };
    if std::env::var_os("RUST_LOG").is_some() {
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .init();
    }
    let mut trunk = TrunkConfig::new("loopback", "127.0.0.1:5060".parse().expect("addr"));
    trunk.inbound_sources = (1..=8)
        .map(|i| std::net::IpAddr::from([127, 0, 0, i]))
        .collect();
    let config = SipConfig {
        udp: Some(addr),
        tcp: None,
        trunks: vec![trunk],
        ..Default::default()
    };
    let stack = match SipStack::start(config, |_: &str, _: &str| true).await {
        Ok(s) => s,
        Err(e) => {
            eprintln!("cannot start: {e}");
            std::process::exit(1);
        }
    };
    println!(
        "listening {}",
        stack.udp_addr().map(|a| a.to_string()).unwrap_or_default()
    );
    let answered = Arc::new(AtomicU64::new(0));
    let ended = Arc::new(AtomicU64::new(0));
    {
        let (a, e) = (answered.clone(), ended.clone());
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_secs(1)).await;
                println!(
                    "answered {} ended {}",
                    a.load(Ordering::Relaxed),
                    e.load(Ordering::Relaxed)
                );
            }
        });
    }
    let Some(mut calls) = stack.take_incoming() else {
        return;
    };
    let media_ip = addr.ip();
    while let Some(call) = calls.recv().await {
        let (answered, ended) = (answered.clone(), ended.clone());
        tokio::spawn(async move {
            let Ok(mut leg) = call.answer(LocalMedia::g711(media_ip, 40000)).await else {
                return;
            };
            answered.fetch_add(1, Ordering::Relaxed);
            while let Some(ev) = leg.next_event().await {
                if matches!(ev, LegEvent::Ended(_)) {
                    ended.fetch_add(1, Ordering::Relaxed);
                    break;
                }
            }
        });
    }
}
