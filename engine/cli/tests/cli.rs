//! The real `callsmith` binary: first start generates the superuser token file (0600),
//! serves the API with it, and a second start keeps the existing credential.

use std::{
    io::{BufRead, BufReader},
    process::{Child, Command, Stdio},
    time::Duration,
};

struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `callsmith serve` on an ephemeral loopback port; returns the process, its address
/// and the console URL it logged.
fn start(data_dir: &std::path::Path) -> (Server, String, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_callsmith"))
        .arg("serve")
        .env("CALLSMITH_DATA_DIR", data_dir)
        // The local speech node is not what these tests are about.
        .env("CALLSMITH_SPEECH__LOCAL", "false")
        .env("CALLSMITH_HTTP__LISTEN", "127.0.0.1:0")
        .env("CALLSMITH_SIP__UDP", "127.0.0.1:0")
        .env("CALLSMITH_LOG__FORMAT", "json")
        .env_remove("CALLSMITH_BOOTSTRAP_SUPERUSER_TOKEN")
        .env_remove("CALLSMITH_DATABASE__URL")
        .env_remove("RUST_LOG")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn callsmith");
    let stdout = child.stdout.take().expect("stdout");
    let server = Server(child);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let Ok(v) = serde_json::from_str::<serde_json::Value>(&line) else {
                continue;
            };
            let field = |name: &str| v["fields"][name].as_str().unwrap_or_default().to_string();
            if v["fields"]["message"] == "control API listening" {
                let _ = tx.send(field("listen"));
            } else if field("message").starts_with("web console: open ") {
                let _ = tx.send(field("url"));
            }
        }
    });
    let addr = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("callsmith did not report its listen address");
    let console = rx
        .recv_timeout(Duration::from_secs(10))
        .expect("callsmith did not print the console's URL");
    (server, addr, console)
}

#[tokio::test]
async fn first_start_bootstraps_a_superuser_token_file() {
    let dir = tempfile::tempdir().unwrap();
    let (server, addr, console) = start(dir.path());
    assert_eq!(console, format!("http://{addr}/"), "the console's URL");
    let token_file = dir.path().join("superuser.token");
    let token = std::fs::read_to_string(&token_file)
        .expect("superuser.token written")
        .trim()
        .to_string();
    assert!(token.starts_with("cs_su_"));
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(&token_file).unwrap().permissions().mode() & 0o777,
            0o600
        );
    }
    assert!(
        dir.path().join("callsmith.db").exists(),
        "SQLite database under the data dir"
    );

    let client = reqwest::Client::new();
    let url = format!("http://{addr}/v1/internal/tenant");
    let ok = client.get(&url).bearer_auth(&token).send().await.unwrap();
    assert_eq!(ok.status(), 200);
    assert!(ok.headers().contains_key("x-request-id"));
    let denied = client.get(&url).send().await.unwrap();
    assert_eq!(denied.status(), 401);
    let ready = client
        .get(format!("http://{addr}/readyz"))
        .send()
        .await
        .unwrap();
    assert_eq!(ready.status(), 200);
    drop(server);

    // A second start finds the credential and leaves the file alone; the token still works.
    std::fs::remove_file(&token_file).unwrap();
    let (_server, addr, _) = start(dir.path());
    assert!(!token_file.exists(), "no second token is generated");
    let again = client
        .get(format!("http://{addr}/v1/internal/tenant"))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(again.status(), 200);
}

#[test]
fn migrate_subcommand_creates_the_database_and_exits() {
    let dir = tempfile::tempdir().unwrap();
    let status = Command::new(env!("CARGO_BIN_EXE_callsmith"))
        .arg("migrate")
        .env("CALLSMITH_DATA_DIR", dir.path())
        // The local speech node is not what these tests are about.
        .env("CALLSMITH_SPEECH__LOCAL", "false")
        .env(
            "CALLSMITH_BOOTSTRAP_SUPERUSER_TOKEN",
            "cs_su_0123456789abcdef0123456789abcdef",
        )
        .env_remove("CALLSMITH_DATABASE__URL")
        .status()
        .expect("run callsmith migrate");
    assert!(status.success());
    assert!(dir.path().join("callsmith.db").exists());
    assert!(
        !dir.path().join("superuser.token").exists(),
        "an explicit token is never written to disk"
    );
}

/// A `sip.default_trunk` that names no trunk is a start-up error naming the key and the
/// trunks there are, on a node that places no calls too.
#[test]
fn a_misspelled_default_trunk_stops_the_start() {
    for dialer in ["true", "false"] {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("callsmith.toml");
        std::fs::write(
            &config,
            "[sip]\ndefault_trunk = \"carier\"\n\
             [[sip.trunks]]\nname = \"carrier\"\ngateway = \"127.0.0.1:5070\"\n",
        )
        .unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_callsmith"))
            .arg("--config")
            .arg(&config)
            .arg("serve")
            .env("CALLSMITH_DATA_DIR", dir.path())
            .env("CALLSMITH_SPEECH__LOCAL", "false")
            .env("CALLSMITH_HTTP__LISTEN", "127.0.0.1:0")
            .env("CALLSMITH_SIP__UDP", "127.0.0.1:0")
            .env("CALLSMITH_DIALER__ENABLED", dialer)
            .env(
                "CALLSMITH_BOOTSTRAP_SUPERUSER_TOKEN",
                "cs_su_0123456789abcdef0123456789abcdef",
            )
            .env_remove("CALLSMITH_DATABASE__URL")
            .stdin(Stdio::null())
            .output()
            .expect("run callsmith");
        assert!(
            !out.status.success(),
            "dialer {dialer}: the start must fail"
        );
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("sip.default_trunk \"carier\" names no trunk") && err.contains("carrier"),
            "dialer {dialer}: {err}"
        );
    }
}

/// A SIP port someone else holds (UDP or TCP) is a start-up error: the process exits at
/// once, naming the transport and address, and leaves no HTTP server behind.
#[test]
fn a_taken_sip_port_stops_the_start() {
    let udp = std::net::UdpSocket::bind("127.0.0.1:0").expect("bind");
    let tcp = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let free_udp = || {
        std::net::UdpSocket::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .to_string()
    };
    let cases = [
        (
            "udp",
            udp.local_addr().unwrap(),
            vec![("CALLSMITH_SIP__UDP", udp.local_addr().unwrap().to_string())],
        ),
        (
            "tcp",
            tcp.local_addr().unwrap(),
            vec![
                ("CALLSMITH_SIP__UDP", free_udp()),
                ("CALLSMITH_SIP__TCP", tcp.local_addr().unwrap().to_string()),
            ],
        ),
    ];
    for (transport, held, env) in cases {
        let dir = tempfile::tempdir().unwrap();
        let http = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let http_addr = http.local_addr().unwrap();
        drop(http);
        let t0 = std::time::Instant::now();
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_callsmith"));
        cmd.arg("serve")
            .env("CALLSMITH_DATA_DIR", dir.path())
            // The local speech node is not what these tests are about.
            .env("CALLSMITH_SPEECH__LOCAL", "false")
            .env("CALLSMITH_HTTP__LISTEN", http_addr.to_string())
            .env(
                "CALLSMITH_BOOTSTRAP_SUPERUSER_TOKEN",
                "cs_su_0123456789abcdef0123456789abcdef",
            )
            .env_remove("CALLSMITH_DATABASE__URL")
            .env_remove("RUST_BACKTRACE")
            .stdin(Stdio::null());
        for (k, v) in &env {
            cmd.env(k, v);
        }
        let out = cmd.output().expect("run callsmith");
        assert!(!out.status.success(), "{transport}: the start must fail");
        assert!(t0.elapsed() < Duration::from_secs(30), "{:?}", t0.elapsed());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("starting the call engine")
                && err.contains(&format!("{transport} {held}")),
            "{transport}: {err}"
        );
        assert!(
            std::net::TcpStream::connect(http_addr).is_err(),
            "{transport}: no HTTP server is left listening"
        );
    }
    drop((udp, tcp));
}

/// The default log (text, INFO), read from a pipe, of a start and of an inbound INVITE to a
/// number no agent serves (404): no ANSI colour codes, no SIP message, and the calling and
/// called numbers shown redacted only.
#[test]
fn the_default_log_has_no_colour_no_sip_message_and_no_full_number() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("callsmith.toml");
    std::fs::write(
        &config,
        "[[sip.trunks]]\nname = \"carrier\"\ngateway = \"127.0.0.1:5999\"\n",
    )
    .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_callsmith"))
        .arg("serve")
        .arg("--config")
        .arg(&config)
        .env("CALLSMITH_DATA_DIR", dir.path())
        // The local speech node is not what these tests are about.
        .env("CALLSMITH_SPEECH__LOCAL", "false")
        .env("CALLSMITH_HTTP__LISTEN", "127.0.0.1:0")
        .env("CALLSMITH_SIP__UDP", "127.0.0.1:0")
        .env_remove("CALLSMITH_CONFIG")
        .env_remove("CALLSMITH_LOG__FORMAT")
        .env_remove("CALLSMITH_LOG__FILTER")
        .env_remove("CALLSMITH_BOOTSTRAP_SUPERUSER_TOKEN")
        .env_remove("CALLSMITH_DATABASE__URL")
        .env_remove("RUST_LOG")
        .env_remove("NO_COLOR")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn callsmith");
    let stdout = child.stdout.take().expect("stdout");
    let stderr = child.stderr.take().expect("stderr");
    let server = Server(child);
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    for stream in [
        Box::new(stdout) as Box<dyn std::io::Read + Send>,
        Box::new(stderr),
    ] {
        let tx = tx.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stream).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
    }
    drop(tx);
    let mut log = Vec::new();
    let wait_for = |needle: &str, log: &mut Vec<String>| -> String {
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            let line = rx
                .recv_timeout(left)
                .unwrap_or_else(|_| panic!("no log line with {needle:?} in:\n{}", log.join("\n")));
            log.push(line.clone());
            if line.contains(needle) {
                return line;
            }
        }
    };

    let started = wait_for("call engine started", &mut log);
    assert!(
        !started.contains('\x1b'),
        "ANSI escape in a piped log: {started:?}"
    );
    let udp: std::net::SocketAddr = started
        .split("udp=Some(")
        .nth(1)
        .and_then(|rest| rest.split(')').next())
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| panic!("no SIP UDP address in {started:?}"));

    let sock = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let me = sock.local_addr().unwrap();
    let sdp = "v=0\r\no=peer 1 1 IN IP4 127.0.0.1\r\ns=-\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\n\
               m=audio 6000 RTP/AVP 0\r\na=rtpmap:0 PCMU/8000\r\n";
    let invite = format!(
        "INVITE sip:+4930123456567@127.0.0.1 SIP/2.0\r\n\
         Via: SIP/2.0/UDP {me};rport;branch=z9hG4bK-cli-log\r\n\
         Max-Forwards: 70\r\n\
         From: <sip:+15550001@127.0.0.1>;tag=cli\r\n\
         To: <sip:+4930123456567@127.0.0.1>\r\n\
         Call-ID: cli-log@127.0.0.1\r\n\
         CSeq: 1 INVITE\r\n\
         Contact: <sip:+15550001@{me}>\r\n\
         Content-Type: application/sdp\r\n\
         Content-Length: {}\r\n\r\n{sdp}",
        sdp.len()
    );
    sock.send_to(invite.as_bytes(), udp).unwrap();
    let mut buf = vec![0u8; 65536];
    let status = loop {
        let (n, _) = sock.recv_from(&mut buf).expect("a response to the INVITE");
        let text = String::from_utf8_lossy(&buf[..n]).into_owned();
        if !text.starts_with("SIP/2.0 1") {
            break text.lines().next().unwrap_or_default().to_string();
        }
    };
    assert_eq!(status, "SIP/2.0 404 Not Found");
    wait_for("no active agent serves", &mut log);
    drop(server);
    log.extend(rx.iter());

    let all = log.join("\n");
    assert!(!all.contains('\x1b'), "ANSI escape in a piped log:\n{all}");
    for dump in ["INVITE sip:", "SIP/2.0", "raw_message", "v=0"] {
        assert!(
            !all.contains(dump),
            "a SIP message ({dump:?}) at INFO:\n{all}"
        );
    }
    for number in ["4930123456567", "15550001"] {
        assert!(
            !all.contains(number),
            "full number {number} in the log:\n{all}"
        );
    }
    assert!(all.contains("+49********567"), "{all}");
    assert!(all.contains("+*****001"), "{all}");
}
