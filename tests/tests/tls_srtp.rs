//! A real engine dials a real phone over SIP TLS with SRTP: the `callsmith` binary, a trunk
//! with `transport = "tls"` and `srtp = "required"`, and baresip (TLS, SRTP mandatory,
//! auto-answer) as the callee, with certificates the test makes. The agent's greeting plays
//! as SRTP that baresip decrypts, the call completes with its goal, and no key reaches the
//! engine's log.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use callsmith_e2e::*;
use serde_json::json;

/// baresip answering `+15550123` over TLS on `port + 1`, SRTP mandatory, audio looped.
fn spawn_phone(certs: &Path, port: u16) -> (tokio::process::Child, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("config"),
        format!(
            "poll_method epoll\nsip_listen 127.0.0.1:{port}\nsip_certificate {}\nsip_cafile {}\n\
             audio_player aubridge,ab1\naudio_source aubridge,ab1\naudio_alert aubridge,ab2\n\
             module_path /usr/lib/baresip/modules\nmodule g711.so\nmodule aubridge.so\n\
             module srtp.so\nmodule_app account.so\nmodule_app menu.so\n",
            certs.join("phone.pem").display(),
            certs.join("ca.pem").display()
        ),
    )
    .unwrap();
    std::fs::write(
        dir.path().join("accounts"),
        format!(
            "<sip:+15550123@127.0.0.1:{port};transport=tls>;regint=0;audio_codecs=PCMU;\
             mediaenc=srtp-mand;answermode=auto\n"
        ),
    )
    .unwrap();
    let child = tokio::process::Command::new("baresip")
        .arg("-f")
        .arg(dir.path())
        .args(["-t", "60"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn baresip");
    (child, dir)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_engine_calls_a_phone_over_tls_with_srtp() {
    let certs = tempfile::tempdir().unwrap();
    tls_certificates(certs.path());
    let mut attempt = 0;
    let (mut phone, _dir, port) = loop {
        attempt += 1;
        let port = free_udp_port();
        let (mut child, dir) = spawn_phone(certs.path(), port);
        tokio::time::sleep(Duration::from_millis(800)).await;
        match child.try_wait() {
            Ok(None) => break (child, dir, port),
            _ if attempt < 3 => continue,
            _ => panic!("baresip does not start"),
        }
    };
    let c = |f: &str| certs.path().join(f).display().to_string();
    let e = Engine::start(EngineOptions {
        extra_toml: format!(
            "[sip.tls]\nlisten = \"127.0.0.1:0\"\ncert_file = {:?}\nkey_file = {:?}\nca_file = {:?}\n\
             [[sip.trunks]]\nname = \"secure\"\ngateway = \"127.0.0.1:{}\"\ntransport = \"tls\"\n\
             srtp = \"required\"\n",
            c("node.crt"),
            c("node.key"),
            c("ca.pem"),
            port + 1
        ),
        ..Default::default()
    })
    .await;
    let t = provision(&e, "tls", "secure", "+4930100900").await;
    let store = store_of(&e, None).await;
    let scn = create_scenario(
        &store,
        &t,
        &greeting_scenario("Hello over a secure line. Goodbye."),
        true,
    )
    .await;
    let agent = create_agent(&store, &t, &AgentSpec::new(scn, t.number_id.clone())).await;
    let comm = e
        .dispatch(&t, json!({"recipient": "+15550123", "agent_sid": agent}))
        .await;
    let id = comm["id"].as_str().expect("id").to_string();
    let done = e
        .wait_communication(&t.account, &id, Duration::from_secs(60))
        .await;
    let _ = phone.start_kill();
    let out = phone.wait_with_output().await.expect("baresip output");
    let phone_log =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        done["communication_status"],
        "completed",
        "{done}\n{}\n{phone_log}",
        e.log()
    );
    assert_eq!(done["call_status"], "answered", "{done}");
    assert_eq!(done["goals"], json!(["greeted"]), "{done}");
    assert!(phone_log.contains("Call established"), "{phone_log}");
    assert!(
        phone_log.contains("srtp-mand") && !phone_log.contains("failed to decrypt"),
        "baresip decrypted every packet of ours: {phone_log}"
    );
    assert!(
        !e.log().contains("inline:"),
        "no SDES key in the engine's log"
    );
}
