//! SIP over TLS (RFC 3261 §26.2, RFC 5630): the node's certificate, the CA bundle peers
//! are verified against, and the inbound listener.
//!
//! Outbound TLS connections are dialled by rsipstack's TLS transport with the node's
//! [`rsipstack::transport::tls::TlsConfig`] built here: the gateway's certificate is always
//! verified against `ca_file` (for the gateway's host name, or its IP address when written
//! as one), and the node's certificate is presented when the gateway asks for one (mutual
//! TLS). Inbound, rsipstack's listener takes no client certificates, so the listener is
//! here: rustls with the node's certificate, client certificates verified against
//! `ca_file` (required with `require_client_cert`), and an allow-list of the names a
//! client certificate must carry. A connection that fails either check is closed after the
//! handshake and never reaches SIP.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rsipstack::transaction::endpoint::EndpointInnerRef;
use rsipstack::transport::SipAddr;
use rsipstack::transport::connection::SipConnection;
use rsipstack::transport::tls::{TlsConfig, TlsConnection};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, pem::PemObject};
use serde::{Deserialize, Serialize};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

/// The port of `sips:` and `transport=tls` URIs without one (RFC 3261 §19.1.2).
pub const DEFAULT_TLS_PORT: u16 = 5061;

/// The answer to a request for a `sips:` Request-URI that did not arrive over TLS: 416
/// Unsupported URI Scheme. RFC 5630 §4.1 leaves the UAS 416 or 480; 416 says what is
/// wrong (the scheme cannot be served on that transport) and is final, where 480 would
/// invite the caller to try again the same way.
pub const SIPS_WITHOUT_TLS: u16 = 416;

/// Whether `uri` is a `sips:` URI (the scheme is case-insensitive, RFC 3261 §19.1.1).
pub fn is_sips(uri: &str) -> bool {
    uri.get(..5)
        .is_some_and(|scheme| scheme.eq_ignore_ascii_case("sips:"))
}

/// The one `sips:` rule (RFC 3261 §19.1 and §26.2.2, RFC 5630): a `sips:` URI is only
/// used where the signalling is TLS, for a trunk's gateway, a transfer target or an
/// inbound Request-URI alike. `tls`: the signalling it would go over is TLS. The error
/// names the URI and the rule.
pub fn check_sips(uri: &str, tls: bool) -> Result<(), String> {
    if is_sips(uri) && !tls {
        Err(format!(
            "{uri} is a sips: URI, which is only used over TLS (transport = \"tls\")"
        ))
    } else {
        Ok(())
    }
}

/// How long an inbound TLS handshake may take.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// The `[sip.tls]` table: the node's certificate and what it trusts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SipTlsConfig {
    /// TLS listen address for inbound calls (port 5061 by convention); unset: no TLS
    /// listener. Trunks with `transport = "tls"` need it (it is their Contact).
    #[serde(default)]
    pub listen: Option<SocketAddr>,
    /// The node's certificate chain (PEM), leaf first: served to inbound peers and
    /// presented to gateways that ask for a client certificate.
    pub cert_file: PathBuf,
    /// The private key of `cert_file` (PEM: PKCS#8, PKCS#1 or SEC1).
    pub key_file: PathBuf,
    /// CA certificates (PEM) that gateways' and clients' certificates must chain to. A
    /// public carrier's: the system bundle, e.g. `/etc/ssl/certs/ca-certificates.crt`.
    pub ca_file: PathBuf,
    /// Inbound mutual TLS: a client that presents no certificate chaining to `ca_file` is
    /// refused during the handshake. Off: a client certificate is verified when one is
    /// presented.
    #[serde(default)]
    pub require_client_cert: bool,
    /// Names (DNS names or IP addresses) an inbound client certificate must be valid
    /// for, one of them; empty: any certificate `ca_file` verifies. Needs
    /// `require_client_cert`.
    #[serde(default)]
    pub allowed_names: Vec<String>,
}

/// The files of [`SipTlsConfig`], read and checked.
pub struct TlsMaterial {
    cert_pem: Vec<u8>,
    key_pem: Vec<u8>,
    ca_pem: Vec<u8>,
    server: Arc<rustls::ServerConfig>,
    allowed: Vec<ServerName<'static>>,
}

impl std::fmt::Debug for TlsMaterial {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsMaterial").finish_non_exhaustive()
    }
}

fn read(what: &str, path: &Path) -> Result<Vec<u8>, String> {
    std::fs::read(path).map_err(|e| format!("sip.tls.{what} {}: {e}", path.display()))
}

fn certificates(
    what: &str,
    path: &Path,
    pem: &[u8],
) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| {
            format!(
                "sip.tls.{what} {}: not PEM certificates: {e}",
                path.display()
            )
        })?;
    if certs.is_empty() {
        return Err(format!(
            "sip.tls.{what} {}: no PEM certificate in it",
            path.display()
        ));
    }
    Ok(certs)
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

impl TlsMaterial {
    /// Reads and checks the files: each error names the setting and the file.
    pub fn load(config: &SipTlsConfig) -> Result<TlsMaterial, String> {
        let cert_pem = read("cert_file", &config.cert_file)?;
        let key_pem = read("key_file", &config.key_file)?;
        let ca_pem = read("ca_file", &config.ca_file)?;
        let chain = certificates("cert_file", &config.cert_file, &cert_pem)?;
        let key = PrivateKeyDer::from_pem_slice(&key_pem).map_err(|e| {
            format!(
                "sip.tls.key_file {}: no PEM private key in it ({e})",
                config.key_file.display()
            )
        })?;
        let mut roots = rustls::RootCertStore::empty();
        for ca in certificates("ca_file", &config.ca_file, &ca_pem)? {
            roots
                .add(ca)
                .map_err(|e| format!("sip.tls.ca_file {}: {e}", config.ca_file.display()))?;
        }
        if !config.allowed_names.is_empty() && !config.require_client_cert {
            return Err(
                "sip.tls.allowed_names needs sip.tls.require_client_cert = true (a client \
                 without a certificate has no name to check)"
                    .into(),
            );
        }
        let allowed = config
            .allowed_names
            .iter()
            .map(|n| {
                ServerName::try_from(n.clone()).map_err(|_| {
                    format!("sip.tls.allowed_names: {n:?} is not a DNS name or an IP address")
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
            Arc::new(roots),
            provider(),
        );
        let verifier = if config.require_client_cert {
            verifier.build()
        } else {
            verifier.allow_unauthenticated().build()
        }
        .map_err(|e| format!("sip.tls.ca_file {}: {e}", config.ca_file.display()))?;
        let server = rustls::ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("sip.tls: {e}"))?
            .with_client_cert_verifier(verifier)
            .with_single_cert(chain, key)
            .map_err(|e| {
                format!(
                    "sip.tls.cert_file {} and key_file {}: {e}",
                    config.cert_file.display(),
                    config.key_file.display()
                )
            })?;
        Ok(TlsMaterial {
            cert_pem,
            key_pem,
            ca_pem,
            server: Arc::new(server),
            allowed,
        })
    }

    /// What rsipstack dials gateways with: `ca_file` as the trust anchors and the node's
    /// certificate for gateways that ask for one.
    pub fn client_config(&self) -> TlsConfig {
        TlsConfig {
            client_cert: Some(self.cert_pem.clone()),
            client_key: Some(self.key_pem.clone()),
            ca_certs: Some(self.ca_pem.clone()),
            ..TlsConfig::default()
        }
    }

    /// Whether a client's certificate chain passes the allow-list: its leaf is valid for
    /// one of the allowed names (always, when the list is empty).
    fn allows(&self, peer: Option<&[CertificateDer<'static>]>) -> bool {
        if self.allowed.is_empty() {
            return true;
        }
        let Some(leaf) = peer.and_then(|c| c.first()) else {
            return false;
        };
        let Ok(cert) = webpki::EndEntityCert::try_from(leaf) else {
            return false;
        };
        self.allowed
            .iter()
            .any(|n| cert.verify_is_valid_for_subject_name(n).is_ok())
    }
}

/// Binds the TLS listener (a taken address is a start-up error).
pub async fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    TcpListener::bind(addr).await
}

/// Accepts TLS connections until `cancel`, hands each that passes the handshake and the
/// allow-list to the endpoint as a SIP connection.
pub async fn serve(
    listener: TcpListener,
    material: Arc<TlsMaterial>,
    endpoint: EndpointInnerRef,
    cancel: CancellationToken,
) {
    let acceptor = tokio_rustls::TlsAcceptor::from(material.server.clone());
    let Ok(local) = listener.local_addr() else {
        return;
    };
    let local = SipAddr {
        r#type: Some(rsipstack::sip::Transport::Tls),
        addr: local.into(),
    };
    loop {
        let (stream, remote) = tokio::select! {
            _ = cancel.cancelled() => return,
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(error) => {
                    warn!(%error, "sip tls: accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let acceptor = acceptor.clone();
        let material = material.clone();
        let endpoint = endpoint.clone();
        let local = local.clone();
        let cancel = cancel.child_token();
        tokio::spawn(async move {
            let tls = match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
                Ok(Ok(tls)) => tls,
                Ok(Err(error)) => {
                    info!(%remote, %error, "sip tls: handshake refused");
                    return;
                }
                Err(_) => {
                    info!(%remote, "sip tls: handshake timed out");
                    return;
                }
            };
            if !material.allows(tls.get_ref().1.peer_certificates()) {
                warn!(%remote, "sip tls: the client's certificate names none of sip.tls.allowed_names: connection closed");
                return;
            }
            let remote_addr = SipAddr {
                r#type: Some(rsipstack::sip::Transport::Tls),
                addr: remote.into(),
            };
            match TlsConnection::from_server_stream(tls, local, remote_addr, Some(cancel)).await {
                Ok(conn) => {
                    debug!(%remote, "sip tls: connection accepted");
                    endpoint
                        .transport_layer
                        .add_connection(SipConnection::Tls(conn));
                }
                Err(error) => warn!(%remote, %error, "sip tls: connection not usable"),
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sips_uris_need_tls() {
        for uri in [
            "sips:+15550100@sip.carrier.example",
            "SIPS:carrier",
            "Sips:[::1]:5061",
        ] {
            assert!(is_sips(uri), "{uri}");
            assert_eq!(check_sips(uri, true), Ok(()));
            let e = check_sips(uri, false).unwrap_err();
            assert!(e.contains(uri) && e.contains("only used over TLS"), "{e}");
        }
        for uri in [
            "sip:+15550100@carrier",
            "tel:+15550100",
            "sips",
            "",
            "sip:sips@x",
        ] {
            assert!(!is_sips(uri), "{uri}");
            assert_eq!(check_sips(uri, false), Ok(()));
        }
    }
}
