//! Network namespaces a test creates for itself, so that a browser can call from an
//! address that is not loopback without any traffic reaching a real interface of the
//! machine: [`Lan::create`] makes two namespaces joined by a veth pair on a private /24,
//! and [`Netns::run`] runs a test body on a thread inside one of them, with a runtime whose
//! threads, sockets and child processes (the engine, the speech node, node and chromium)
//! all live there. The namespaces are deleted on drop, also when the test fails.
//!
//! Creating them needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN); a test that cannot fails
//! with a message saying so.

use std::future::Future;
use std::net::Ipv4Addr;
use std::os::fd::AsRawFd;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

/// A named network namespace (`ip netns add`), its loopback up; deleted on drop.
pub struct Netns {
    pub name: String,
}

/// Runs `ip` with `args`; panics with its output when it fails.
fn ip(args: &[&str]) {
    let out = Command::new("ip")
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("running `ip {}`: {e}", args.join(" ")));
    assert!(
        out.status.success(),
        "`ip {}` failed: {}. This test creates network namespaces and needs root \
         (CAP_NET_ADMIN, CAP_SYS_ADMIN)",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr).trim()
    );
}

impl Netns {
    /// A new namespace with a name unique to this process and call. Namespaces this
    /// helper made in test processes that are gone (killed before their drop ran) are
    /// deleted first.
    pub fn create(role: &str) -> Netns {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        sweep_stale();
        let name = format!(
            "callsmith-{}-{}-{role}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        ip(&["netns", "add", &name]);
        let ns = Netns { name };
        ip(&["-n", &ns.name, "link", "set", "lo", "up"]);
        ns
    }

    /// Runs `body` to completion on a thread that entered this namespace, in a runtime
    /// of its own (two workers); a panic of the body is this call's panic.
    pub fn run<F, Fut>(&self, body: F)
    where
        F: FnOnce() -> Fut + Send + 'static,
        Fut: Future<Output = ()>,
    {
        let path = format!("/run/netns/{}", self.name);
        let handle = std::thread::spawn(move || {
            let f = std::fs::File::open(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
            // SAFETY: setns on this thread with an open namespace file descriptor.
            let rc = unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) };
            assert_eq!(
                rc,
                0,
                "entering {path}: {}",
                std::io::Error::last_os_error()
            );
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .expect("runtime")
                .block_on(body());
        });
        if let Err(panic) = handle.join() {
            std::panic::resume_unwind(panic);
        }
    }
}

/// A TCP port on loopback inside a namespace that forwards each connection to an address
/// outside it ([`Forward::open`]); stops on drop.
pub struct Forward {
    pub port: u16,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for Forward {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Forward {
    /// Listens on 127.0.0.1 inside namespace `netns` and forwards every connection to `to`,
    /// as an SSH tunnel (`ssh -L`) does for a user who opens a remote console at
    /// `http://127.0.0.1:<port>`: the page's origin is then loopback, which browsers treat
    /// as secure (they grant the microphone only to secure origins).
    pub fn open(netns: &str, to: std::net::SocketAddr) -> Forward {
        let path = format!("/run/netns/{netns}");
        let (port_tx, port_rx) = std::sync::mpsc::channel();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            let f = std::fs::File::open(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
            // SAFETY: setns on this thread with an open namespace file descriptor.
            let rc = unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) };
            assert_eq!(
                rc,
                0,
                "entering {path}: {}",
                std::io::Error::last_os_error()
            );
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0))
                    .await
                    .expect("bind the forward");
                let _ = port_tx.send(listener.local_addr().expect("addr").port());
                let accept = async {
                    loop {
                        let Ok((mut inbound, _)) = listener.accept().await else {
                            continue;
                        };
                        tokio::spawn(async move {
                            if let Ok(mut outbound) = tokio::net::TcpStream::connect(to).await {
                                let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound)
                                    .await;
                            }
                        });
                    }
                };
                tokio::select! {
                    _ = accept => {}
                    _ = stopped => {}
                }
            });
        });
        let port = port_rx.recv().expect("the forward's port");
        Forward {
            port,
            stop: Some(stop),
            thread: Some(thread),
        }
    }
}

/// Deletes `callsmith-<pid>-…` namespaces whose process no longer runs.
fn sweep_stale() {
    let Ok(dir) = std::fs::read_dir("/run/netns") else {
        return;
    };
    for entry in dir.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(pid) = name
            .strip_prefix("callsmith-")
            .and_then(|rest| rest.split('-').next())
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
            let _ = Command::new("ip").args(["netns", "del", &name]).output();
        }
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .output();
    }
}

/// Two namespaces joined by a veth pair (`eth1` in each): `a` at [`Lan::A_IP`], `b` at
/// [`Lan::B_IP`], both in 10.203.0.0/24. No route leads out of them.
pub struct Lan {
    pub a: Netns,
    pub b: Netns,
}

impl Lan {
    pub const A_IP: Ipv4Addr = Ipv4Addr::new(10, 203, 0, 1);
    pub const B_IP: Ipv4Addr = Ipv4Addr::new(10, 203, 0, 2);

    pub fn create() -> Lan {
        let (a, b) = (Netns::create("a"), Netns::create("b"));
        ip(&[
            "-n", &a.name, "link", "add", "eth1", "type", "veth", "peer", "name", "eth1", "netns",
            &b.name,
        ]);
        for (ns, addr) in [(&a, Self::A_IP), (&b, Self::B_IP)] {
            ip(&[
                "-n",
                &ns.name,
                "addr",
                "add",
                &format!("{addr}/24"),
                "dev",
                "eth1",
            ]);
            ip(&["-n", &ns.name, "link", "set", "eth1", "up"]);
        }
        Lan { a, b }
    }
}
