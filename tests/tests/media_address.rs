//! The media address SDP carries is always concrete. An engine bound to every interface
//! (`media.bind_ip = "0.0.0.0"`) writes the host's one LAN address into its SIP offers
//! (`c=` and `o=`), or, on a host without exactly one, does not start and names
//! `media.advertised_ip`. Each case runs in network namespaces the test creates
//! ([`netns`]): the host's addresses are the test's own, and nothing leaves them.

use std::process::Stdio;
use std::time::Duration;

use callsmith_e2e::netns::{Lan, Netns};
use callsmith_e2e::*;
use serde_json::{Value, json};

/// start_call → end_call.
fn hang_up_at_once() -> Value {
    json!({"name": "hang up", "constructor": {"bricks": {
        "start_call": {"v1": [{"id": "s", "description": "", "properties": {}, "outputs": [{"type": "next", "description": "", "next": "bye"}]}]},
        "end_call": {"v1": [{"id": "bye", "description": "", "properties": {"signal": ""}, "outputs": []}]}
    }}})
}

/// The SIP offer of a call to a gateway on 127.0.0.1, placed by an engine bound to every
/// interface on a host whose one LAN address is 10.203.0.1: its SDP names that address.
#[test]
fn a_wildcard_media_address_is_offered_as_the_hosts_lan_address() {
    let lan = Lan::create();
    lan.a.run(|| async {
        let gateway = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let e = Engine::start(EngineOptions {
            trunks: vec![("edge".into(), gateway.local_addr().unwrap())],
            media_toml: "bind_ip = \"0.0.0.0\"\n".into(),
            ..Default::default()
        })
        .await;
        let t = provision(&e, "wildcard", "edge", "+4930100900").await;
        let store = store_of(&e, None).await;
        let scn = create_scenario(&store, &t, &hang_up_at_once(), false).await;
        e.dispatch(
            &t,
            json!({"recipient": "+4915550900", "scenario_sid": scn, "draft": true}),
        )
        .await;
        let mut buf = vec![0u8; 65536];
        let invite = loop {
            let (n, _) = tokio::time::timeout(Duration::from_secs(15), gateway.recv_from(&mut buf))
                .await
                .expect("the engine sends its INVITE to the gateway")
                .unwrap();
            let msg = String::from_utf8_lossy(&buf[..n]).to_string();
            if msg.starts_with("INVITE ") {
                break msg;
            }
        };
        let sdp = invite
            .split_once("\r\n\r\n")
            .map(|(_, body)| body)
            .unwrap_or_default();
        assert!(sdp.contains("c=IN IP4 10.203.0.1\r\n"), "{sdp}");
        assert!(sdp.contains(" IN IP4 10.203.0.1\r\n"), "o= line: {sdp}");
        assert!(!sdp.contains("0.0.0.0"), "{sdp}");
    });
}

/// A wildcard media address on a host with no LAN address (only loopback), or with two:
/// the start fails, naming the setting that resolves it.
#[test]
fn a_wildcard_media_address_without_one_lan_address_stops_the_start() {
    let bare = Netns::create("bare");
    let lan = Lan::create();
    // Two LAN addresses in the first namespace of the pair.
    let out = std::process::Command::new("ip")
        .args([
            "-n",
            &lan.a.name,
            "addr",
            "add",
            "10.203.1.1/24",
            "dev",
            "eth1",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    for (ns, says) in [
        (
            &bare,
            "no IPv4 address other than loopback and link-local".to_string(),
        ),
        (
            &lan.a,
            format!("several IPv4 addresses ({}, 10.203.1.1)", Lan::A_IP),
        ),
    ] {
        ns.run(move || async move {
            let dir = tempfile::tempdir().unwrap();
            let out = tokio::time::timeout(
                Duration::from_secs(60),
                tokio::process::Command::new(binary())
                    .arg("serve")
                    .env("CALLSMITH_DATA_DIR", dir.path())
                    .env("CALLSMITH_SPEECH__LOCAL", "false")
                    .env("CALLSMITH_HTTP__LISTEN", "127.0.0.1:0")
                    .env("CALLSMITH_SIP__UDP", "127.0.0.1:0")
                    .env("CALLSMITH_MEDIA__BIND_IP", "0.0.0.0")
                    .env("CALLSMITH_BOOTSTRAP_SUPERUSER_TOKEN", SU_TOKEN)
                    .env_remove("CALLSMITH_DATABASE__URL")
                    .stdin(Stdio::null())
                    .kill_on_drop(true)
                    .output(),
            )
            .await
            .expect("the start ends within 60 s")
            .expect("run callsmith");
            assert!(!out.status.success(), "{says}: the start must fail");
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(
                err.contains("media.bind_ip is 0.0.0.0")
                    && err.contains(&says)
                    && err.contains("set media.advertised_ip"),
                "{err}"
            );
        });
    }
    // The announced address wins over the discovery: the same host starts with it.
    lan.a.run(|| async {
        let e = Engine::start(EngineOptions {
            media_toml: "bind_ip = \"0.0.0.0\"\nadvertised_ip = \"10.203.1.1\"\n".into(),
            ..Default::default()
        })
        .await;
        assert!(e.log().contains("media=10.203.1.1"), "{}", e.log());
    });
}
