//! baresip (Debian's SIP phone) as a callee on loopback: no sound card, it answers on its
//! own and speaks a WAV file into the call (`aufile`), with the codecs it is given, over
//! UDP or over TLS with SRTP required ([`Baresip::secure_callee`], certificates from
//! [`tls_certificates`]).

use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair};
use tokio::process::{Child, Command};

/// A running baresip whose one account answers every call.
pub struct Baresip {
    child: Option<Child>,
    /// Where it listens for SIP (over TLS for a [`Baresip::secure_callee`]).
    pub addr: SocketAddr,
    _dir: tempfile::TempDir,
}

impl Baresip {
    /// Starts baresip answering at `user@127.0.0.1:<a free port>`: [`Baresip::callee_on`]
    /// 127.0.0.1.
    pub async fn callee(user: &str, codecs: &str, wav: &Path) -> Baresip {
        Baresip::callee_on("127.0.0.1".parse().unwrap(), user, codecs, wav).await
    }

    /// Starts baresip answering at `user@ip:<a free port>` (SIP and RTP on `ip`, a loopback
    /// address of either family), offering and accepting
    /// `codecs` (baresip names: `G722/16000/1` (its clock as it counts it), `PCMU`, `PCMA`) and speaking `wav` (played from
    /// its start when a call is answered). A baresip whose probed port was taken before
    /// it bound exits at once; it is started again on a fresh port.
    pub async fn callee_on(ip: IpAddr, user: &str, codecs: &str, wav: &Path) -> Baresip {
        Baresip::spawn(ip, user, codecs, wav, None).await
    }

    /// Starts baresip answering `user` over SIP TLS on 127.0.0.1 ([`Baresip::addr`] is its
    /// TLS address), SRTP required (`mediaenc=srtp-mand`), with `certs/phone.pem` as its
    /// certificate and `certs/ca.pem` as the CA it trusts ([`tls_certificates`]).
    pub async fn secure_callee(user: &str, codecs: &str, wav: &Path, certs: &Path) -> Baresip {
        Baresip::spawn("127.0.0.1".parse().unwrap(), user, codecs, wav, Some(certs)).await
    }

    async fn spawn(
        ip: IpAddr,
        user: &str,
        codecs: &str,
        wav: &Path,
        certs: Option<&Path>,
    ) -> Baresip {
        for _ in 0..3 {
            let port = std::net::UdpSocket::bind((ip, 0))
                .and_then(|s| s.local_addr())
                .map(|a| a.port())
                .expect("free udp port");
            let sip = SocketAddr::new(ip, port);
            let dir = tempfile::tempdir().expect("tempdir");
            let mut config = format!(
                "poll_method epoll\nsip_listen {sip}\nnet_interface {ip}\nnet_prefer_ipv6 {v6}\n\
                 audio_source aufile,{wav}\n\
                 audio_player aubridge,ab1\naudio_alert aubridge,ab2\n\
                 module_path /usr/lib/baresip/modules\nmodule g722.so\nmodule g711.so\n\
                 module aufile.so\nmodule aubridge.so\nmodule_app account.so\nmodule_app menu.so\n",
                wav = wav.display(),
                v6 = if ip.is_ipv6() { "yes" } else { "no" },
            );
            // baresip listens for TLS one port above `sip_listen`.
            let (addr, account) = match certs {
                None => (sip, format!("<sip:{user}@{sip}>")),
                Some(certs) => {
                    config.push_str(&format!(
                        "sip_certificate {}\nsip_cafile {}\nmodule srtp.so\n",
                        certs.join("phone.pem").display(),
                        certs.join("ca.pem").display()
                    ));
                    (
                        SocketAddr::new(ip, port + 1),
                        format!("<sip:{user}@{sip};transport=tls>;mediaenc=srtp-mand"),
                    )
                }
            };
            std::fs::write(dir.path().join("config"), config).expect("config");
            std::fs::write(
                dir.path().join("accounts"),
                format!("{account};regint=0;answermode=auto;audio_codecs={codecs}\n"),
            )
            .expect("accounts");
            let mut child = Command::new("baresip")
                .arg("-f")
                .arg(dir.path())
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .kill_on_drop(true)
                .spawn()
                .expect("baresip is installed (scripts/test-deps.sh)");
            tokio::time::sleep(Duration::from_millis(800)).await;
            if let Ok(None) = child.try_wait() {
                return Baresip {
                    child: Some(child),
                    addr,
                    _dir: dir,
                };
            }
        }
        panic!("baresip does not start");
    }

    /// Stops baresip and returns what it printed.
    pub async fn output(mut self) -> String {
        let Some(mut child) = self.child.take() else {
            return String::new();
        };
        let _ = child.start_kill();
        match tokio::time::timeout(Duration::from_secs(10), child.wait_with_output()).await {
            Ok(Ok(out)) => {
                String::from_utf8_lossy(&out.stdout).into_owned()
                    + &String::from_utf8_lossy(&out.stderr)
            }
            _ => String::new(),
        }
    }
}

/// ca.pem, node.crt/.key (the engine's) and phone.pem (baresip's, certificate and key).
pub fn tls_certificates(dir: &Path) {
    let ca_key = KeyPair::generate().unwrap();
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name.push(DnType::CommonName, "e2e CA");
    let ca = params.self_signed(&ca_key).unwrap();
    std::fs::write(dir.join("ca.pem"), ca.pem()).unwrap();
    for stem in ["node", "phone"] {
        let key = KeyPair::generate().unwrap();
        let cert = CertificateParams::new(vec!["127.0.0.1".to_string()])
            .unwrap()
            .signed_by(&key, &ca, &ca_key)
            .unwrap();
        std::fs::write(dir.join(format!("{stem}.crt")), cert.pem()).unwrap();
        std::fs::write(dir.join(format!("{stem}.key")), key.serialize_pem()).unwrap();
        std::fs::write(
            dir.join(format!("{stem}.pem")),
            cert.pem() + &key.serialize_pem(),
        )
        .unwrap();
    }
}
