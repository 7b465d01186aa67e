//! Trunk configuration and the pure rules around it: gateway addresses, number formatting,
//! trunk selection for outbound calls and source-address checks for inbound ones.

use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::str::FromStr;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::sdes::SrtpPolicy;
use crate::sdp::SdpCodec;

/// SIP transport for a trunk or a listener.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum SipTransport {
    #[default]
    Udp,
    Tcp,
    /// SIP over TLS (`transport=tls`, port 5061 by default; see [`crate::tls`]).
    Tls,
}

/// How numbers are written in the Request-URI, To and From users sent to a trunk.
///
/// Read from a table `{kind = "…", …}`; a key that the kind does not take is refused
/// (serde's internally tagged enums let stray keys through beside a unit variant, so the
/// table is read as [`NumberFormatTable`] first).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(
    rename_all = "snake_case",
    tag = "kind",
    try_from = "NumberFormatTable"
)]
pub enum NumberFormat {
    /// `+<country><national>`.
    #[default]
    E164Plus,
    /// `<country><national>`, no plus.
    E164,
    /// National form: the country code replaced by `trunk_prefix` (e.g. `0`).
    National {
        country_code: String,
        trunk_prefix: String,
    },
    /// Sent exactly as given.
    AsIs,
}

/// A `number_format` table as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct NumberFormatTable {
    kind: NumberFormatKind,
    country_code: Option<String>,
    trunk_prefix: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
enum NumberFormatKind {
    E164Plus,
    E164,
    National,
    AsIs,
}

impl TryFrom<NumberFormatTable> for NumberFormat {
    type Error = String;

    fn try_from(t: NumberFormatTable) -> Result<Self, Self::Error> {
        let national = t.kind == NumberFormatKind::National;
        if !national && (t.country_code.is_some() || t.trunk_prefix.is_some()) {
            return Err("country_code and trunk_prefix are keys of the national kind only".into());
        }
        Ok(match t.kind {
            NumberFormatKind::E164Plus => NumberFormat::E164Plus,
            NumberFormatKind::E164 => NumberFormat::E164,
            NumberFormatKind::AsIs => NumberFormat::AsIs,
            NumberFormatKind::National => NumberFormat::National {
                country_code: t.country_code.ok_or("national: country_code is required")?,
                trunk_prefix: t.trunk_prefix.ok_or("national: trunk_prefix is required")?,
            },
        })
    }
}

/// Digest credentials the trunk's gateway may challenge for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DigestCredentials {
    pub username: String,
    pub password: String,
    /// Only answer challenges for this realm, when set.
    pub realm: Option<String>,
}

/// Where a trunk's outbound INVITEs go: `IP:port`, or `host:port` with a DNS name that the
/// stack resolves when it starts (a name that does not resolve stops the start) and again
/// every [`crate::SipTimers::gateway_refresh`]. Every address, written or resolved, must
/// satisfy [`check_gateway_addr`]. Written as a string in the configuration.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum Gateway {
    /// An address used as written.
    Addr(SocketAddr),
    /// A DNS name and port.
    Host { name: String, port: u16 },
}

/// A trunk's `gateway` as written: a [`Gateway`], or a `sips:` URI of one
/// (`sips:host[:port]`, port [`crate::tls::DEFAULT_TLS_PORT`] when left out; RFC 3261
/// §19.1). With `sips:` every request the trunk sends has a `sips:` Request-URI and
/// Contact (TLS on every hop to the callee, RFC 5630), which needs `transport = "tls"`
/// ([`check_trunks`]). Dereferences to the [`Gateway`].
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct GatewayUri {
    /// Written as a `sips:` URI.
    pub sips: bool,
    pub target: Gateway,
}

impl std::ops::Deref for GatewayUri {
    type Target = Gateway;

    fn deref(&self) -> &Gateway {
        &self.target
    }
}

impl PartialEq<Gateway> for GatewayUri {
    fn eq(&self, other: &Gateway) -> bool {
        !self.sips && self.target == *other
    }
}

impl FromStr for GatewayUri {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if !crate::tls::is_sips(s) {
            return Ok(GatewayUri {
                sips: false,
                target: s.parse()?,
            });
        }
        let rest = &s[5..];
        let target = rest
            .parse::<Gateway>()
            .or_else(|e| {
                format!("{rest}:{}", crate::tls::DEFAULT_TLS_PORT)
                    .parse::<Gateway>()
                    .map_err(|_| e)
            })
            .map_err(|e| format!("{e}; a sips: gateway is sips:host or sips:host:port"))?;
        Ok(GatewayUri { sips: true, target })
    }
}

impl TryFrom<String> for GatewayUri {
    type Error = String;

    fn try_from(s: String) -> Result<Self, Self::Error> {
        s.parse()
    }
}

impl From<GatewayUri> for String {
    fn from(g: GatewayUri) -> String {
        g.to_string()
    }
}

impl From<Gateway> for GatewayUri {
    fn from(target: Gateway) -> Self {
        GatewayUri {
            sips: false,
            target,
        }
    }
}

impl From<SocketAddr> for GatewayUri {
    fn from(addr: SocketAddr) -> Self {
        Gateway::Addr(addr).into()
    }
}

impl fmt::Display for GatewayUri {
    /// As written: the gateway, after `sips:` when it is a `sips:` URI.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.sips {
            write!(f, "sips:{}", self.target)
        } else {
            write!(f, "{}", self.target)
        }
    }
}

impl GatewayUri {
    /// The scheme of the URIs the trunk's requests carry: `sips` or `sip`.
    pub fn scheme(&self) -> &'static str {
        if self.sips { "sips" } else { "sip" }
    }
}

/// How long one resolution of a gateway's name may take.
pub const GATEWAY_RESOLVE_TIMEOUT: Duration = Duration::from_secs(5);

/// The address policy of trunk gateways: one peer that datagrams and connections can go to.
/// Refused: port 0, the unspecified address (`0.0.0.0`, `::`), multicast and broadcast.
pub fn check_gateway_addr(addr: SocketAddr) -> Result<(), String> {
    let ip = addr.ip();
    let broadcast = matches!(ip, IpAddr::V4(v4) if v4.is_broadcast());
    if addr.port() == 0 {
        Err(format!("{addr}: port 0 is not a gateway's port"))
    } else if ip.is_unspecified() || ip.is_multicast() || broadcast {
        Err(format!(
            "{addr}: a gateway is one peer; unspecified, multicast and broadcast addresses are refused"
        ))
    } else {
        Ok(())
    }
}

/// A DNS name as a gateway may have it: dot-separated labels of ASCII letters, digits and
/// hyphens (no hyphen at either end of a label), at most 253 characters, not all digits.
fn valid_host_name(name: &str) -> bool {
    name.len() <= 253
        && !name.chars().all(|c| c.is_ascii_digit() || c == '.')
        && name.trim_end_matches('.').split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        })
}

impl FromStr for Gateway {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if let Ok(addr) = s.parse::<SocketAddr>() {
            check_gateway_addr(addr)?;
            return Ok(Gateway::Addr(addr));
        }
        let expected = || {
            format!(
                "gateway {s:?}: expected IP:port (127.0.0.1:5070, [2001:db8::1]:5060) or \
                 host:port (sip.carrier.example:5060)"
            )
        };
        let (name, port) = s.rsplit_once(':').ok_or_else(expected)?;
        let port: u16 = port.parse().map_err(|_| expected())?;
        if !valid_host_name(name) {
            return Err(expected());
        }
        if port == 0 {
            return Err(format!("gateway {s:?}: port 0 is not a gateway's port"));
        }
        Ok(Gateway::Host {
            name: name.to_ascii_lowercase(),
            port,
        })
    }
}

impl TryFrom<String> for Gateway {
    type Error = String;

    fn try_from(s: String) -> Result<Self, Self::Error> {
        s.parse()
    }
}

impl From<Gateway> for String {
    fn from(g: Gateway) -> String {
        g.to_string()
    }
}

impl From<SocketAddr> for Gateway {
    fn from(addr: SocketAddr) -> Self {
        Gateway::Addr(addr)
    }
}

impl fmt::Display for Gateway {
    /// As written: `IP:port` (IPv6 in brackets) or `host:port`; the host part of URIs.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Gateway::Addr(a) => write!(f, "{a}"),
            Gateway::Host { name, port } => write!(f, "{name}:{port}"),
        }
    }
}

impl Gateway {
    /// The host as a URI writes it (RFC 3261 §25.1): the name, the IPv4 address, or the
    /// IPv6 address in brackets.
    pub fn host(&self) -> String {
        match self {
            Gateway::Addr(SocketAddr::V6(a)) => format!("[{}]", a.ip()),
            Gateway::Addr(a) => a.ip().to_string(),
            Gateway::Host { name, .. } => name.clone(),
        }
    }

    /// The address, when written as one.
    pub fn addr(&self) -> Option<SocketAddr> {
        match self {
            Gateway::Addr(a) => Some(*a),
            Gateway::Host { .. } => None,
        }
    }

    /// The address INVITEs go to now: the written address, or the first address the name
    /// resolves to that satisfies [`check_gateway_addr`], preferring the family of `local`
    /// (the listener the trunk's transport sends from). Errors say what went wrong.
    pub async fn resolve(&self, local: Option<IpAddr>) -> Result<SocketAddr, String> {
        let (name, port) = match self {
            Gateway::Addr(a) => return Ok(*a),
            Gateway::Host { name, port } => (name.as_str(), *port),
        };
        let found = tokio::time::timeout(
            GATEWAY_RESOLVE_TIMEOUT,
            tokio::net::lookup_host((name, port)),
        )
        .await
        .map_err(|_| {
            format!(
                "{name} did not resolve within {}s",
                GATEWAY_RESOLVE_TIMEOUT.as_secs()
            )
        })?
        .map(|addrs| addrs.collect());
        choose_gateway_addr(name, found, local)
    }
}

/// The address a gateway name's lookup gives: the first that satisfies
/// [`check_gateway_addr`], of the family of `local` when there is one; errors name the host.
fn choose_gateway_addr(
    name: &str,
    found: std::io::Result<Vec<SocketAddr>>,
    local: Option<IpAddr>,
) -> Result<SocketAddr, String> {
    let found = found.map_err(|e| format!("{name} does not resolve: {e}"))?;
    let allowed: Vec<SocketAddr> = found
        .iter()
        .copied()
        .filter(|a| check_gateway_addr(*a).is_ok())
        .collect();
    let same_family = |a: &&SocketAddr| local.is_none_or(|l| l.is_ipv4() == a.is_ipv4());
    allowed
        .iter()
        .find(same_family)
        .or(allowed.first())
        .copied()
        .ok_or_else(|| {
            if found.is_empty() {
                format!("{name} does not resolve: no addresses")
            } else {
                format!(
                    "{name} resolves to no address a gateway may have ({found:?}; unspecified, \
                     multicast and broadcast addresses are refused)"
                )
            }
        })
}

/// One SIP trunk: the gateway calls leave through and the peers calls may come from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrunkConfig {
    /// The spec's Trunk.name, the edge routing key.
    pub name: String,
    /// Where outbound INVITEs go: `IP:port`, `host:port`, or either as a `sips:` URI
    /// (see [`GatewayUri`]).
    pub gateway: GatewayUri,
    #[serde(default)]
    pub transport: SipTransport,
    #[serde(default)]
    pub credentials: Option<DigestCredentials>,
    /// Host part of the From URI; the gateway's IP when empty.
    #[serde(default)]
    pub from_domain: String,
    #[serde(default)]
    pub number_format: NumberFormat,
    /// Source IPs allowed to send INVITEs for this trunk. The gateway's IP is always allowed.
    #[serde(default)]
    pub inbound_sources: Vec<IpAddr>,
    /// A tenant sid: inbound calls arriving on this trunk reach only that tenant's numbers.
    /// None: the trunk's inbound calls reach any tenant's. Carried for the engine, which
    /// routes inbound calls; the SIP layer does not read it, and outbound calls do not
    /// depend on it.
    #[serde(default)]
    pub inbound_tenant: Option<String>,
    /// Behind a SIP edge: the trunk's outbound INVITEs carry [`EDGE_TRUNK_HEADER`] with the
    /// trunk's name, the edge's routing key, and the edge sends each to the gateways it
    /// lists for that name (and removes the header). Off: no such header leaves the node.
    #[serde(default)]
    pub edge_route: bool,
    /// The audio codecs of this trunk's calls, most preferred first: the order of an
    /// outbound offer, and the codecs an inbound offer may be answered with (the answer
    /// takes the caller's most preferred of them, RFC 3264 §6.1). Default
    /// [`default_trunk_codecs`].
    #[serde(default = "default_trunk_codecs")]
    pub codecs: Vec<SdpCodec>,
    /// SRTP with SDES keys on this trunk's calls: `off` (default), `optional` or
    /// `required` (see [`SrtpPolicy`]).
    #[serde(default)]
    pub srtp: SrtpPolicy,
}

/// A trunk's codecs unless configured: PCMU, PCMA, G722. Offers lead with G.711, which
/// every carrier takes; a caller that prefers G.722 gets it.
pub fn default_trunk_codecs() -> Vec<SdpCodec> {
    vec![SdpCodec::Pcmu, SdpCodec::Pcma, SdpCodec::G722]
}

/// The header naming the trunk of an outbound INVITE for the SIP edge
/// ([`TrunkConfig::edge_route`]; `deploy/kamailio/kamailio.cfg` routes by it).
pub const EDGE_TRUNK_HEADER: &str = "X-Callsmith-Trunk";

impl TrunkConfig {
    /// A UDP trunk with no credentials, E.164 numbers and only the gateway allowed inbound.
    pub fn new(name: impl Into<String>, gateway: SocketAddr) -> Self {
        TrunkConfig {
            name: name.into(),
            gateway: gateway.into(),
            transport: SipTransport::Udp,
            credentials: None,
            from_domain: String::new(),
            number_format: NumberFormat::E164Plus,
            inbound_sources: Vec::new(),
            inbound_tenant: None,
            edge_route: false,
            codecs: default_trunk_codecs(),
            srtp: SrtpPolicy::Off,
        }
    }

    /// The trunk's codecs that are among `available` (what the media side can do), in the
    /// trunk's order of preference.
    pub fn preferred_codecs(&self, available: &[SdpCodec]) -> Vec<SdpCodec> {
        self.codecs
            .iter()
            .filter(|c| available.contains(c))
            .copied()
            .collect()
    }

    /// Host part of the From URI: `from_domain`, else the gateway's host as written.
    pub fn from_host(&self) -> String {
        if self.from_domain.is_empty() {
            self.gateway.host()
        } else {
            self.from_domain.clone()
        }
    }

    /// Whether a request from `ip` is this trunk's: `gateway_ip` (the gateway's address as
    /// written or last resolved) or one of `inbound_sources`.
    pub fn allows_source(&self, gateway_ip: Option<IpAddr>, ip: IpAddr) -> bool {
        gateway_ip == Some(ip) || self.inbound_sources.contains(&ip)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TrunkError {
    #[error("unknown trunk {0:?}")]
    Unknown(String),
    #[error("no trunk named and no default trunk configured")]
    NoneChosen,
    #[error("invalid number {0:?}")]
    InvalidNumber(String),
    #[error("trunk {0:?} has no codec the media side supports")]
    NoCodec(String),
}

/// Choose the trunk for an outbound call: the trunk named by the caller (the engine passes the
/// trunk bound to the number, else the tenant's default), else the stack's configured default.
pub fn select_trunk<'a>(
    trunks: &'a [TrunkConfig],
    requested: Option<&str>,
    default: Option<&str>,
) -> Result<&'a TrunkConfig, TrunkError> {
    let name = requested
        .filter(|n| !n.is_empty())
        .or(default)
        .ok_or(TrunkError::NoneChosen)?;
    trunks
        .iter()
        .find(|t| t.name == name)
        .ok_or_else(|| TrunkError::Unknown(name.to_string()))
}

/// Which trunk an inbound request from `ip` belongs to, if any; `gateway_ip` gives each
/// trunk's gateway address now (as written or last resolved).
pub fn trunk_for_source(
    trunks: &[TrunkConfig],
    gateway_ip: impl Fn(&TrunkConfig) -> Option<IpAddr>,
    ip: IpAddr,
) -> Option<&TrunkConfig> {
    trunks.iter().find(|t| t.allows_source(gateway_ip(t), ip))
}

/// What a stack's trunks must satisfy before it starts: names that are non-empty and
/// unique, and a `default` (when set) that names one of them.
pub fn check_trunks(trunks: &[TrunkConfig], default: Option<&str>) -> Result<(), String> {
    let mut seen = std::collections::HashSet::new();
    for t in trunks {
        if t.name.is_empty() {
            return Err(format!(
                "trunks: the trunk to {} has an empty name",
                t.gateway
            ));
        }
        if !seen.insert(t.name.as_str()) {
            return Err(format!("trunks: two trunks are named {:?}", t.name));
        }
        crate::tls::check_sips(&t.gateway.to_string(), t.transport == SipTransport::Tls)
            .map_err(|e| format!("trunks: trunk {:?}: gateway {e}", t.name))?;
        if t.codecs.is_empty() {
            return Err(format!(
                "trunks: trunk {:?} has an empty codecs list (name at least one of PCMU, PCMA, G722)",
                t.name
            ));
        }
        if let Some(c) = t
            .codecs
            .iter()
            .enumerate()
            .find_map(|(i, c)| t.codecs[..i].contains(c).then_some(c))
        {
            return Err(format!(
                "trunks: trunk {:?} lists codec {} twice",
                t.name,
                c.encoding_name()
            ));
        }
    }
    if let Some(d) = default
        && !seen.contains(d)
    {
        let names: Vec<&str> = trunks.iter().map(|t| t.name.as_str()).collect();
        return Err(if names.is_empty() {
            format!("default_trunk {d:?} names no trunk: no trunks are configured")
        } else {
            format!("default_trunk {d:?} names no trunk (the trunks are {names:?})")
        });
    }
    Ok(())
}

/// Rewrite `number` (E.164 with or without `+`, or national digits) for a trunk.
/// Spaces, dashes, dots and parentheses are dropped; anything else non-numeric is an error.
pub fn format_number(number: &str, format: &NumberFormat) -> Result<String, TrunkError> {
    if let NumberFormat::AsIs = format {
        if number.is_empty()
            || number
                .chars()
                .any(|c| c.is_control() || c == '@' || c == ' ')
        {
            return Err(TrunkError::InvalidNumber(number.to_string()));
        }
        return Ok(number.to_string());
    }
    let trimmed: String = number
        .chars()
        .filter(|c| !matches!(c, ' ' | '-' | '.' | '(' | ')'))
        .collect();
    let (plus, digits) = match trimmed.strip_prefix('+') {
        Some(rest) => (true, rest.to_string()),
        None => (false, trimmed.clone()),
    };
    if digits.is_empty() || !digits.chars().all(|c| c.is_ascii_digit()) {
        return Err(TrunkError::InvalidNumber(number.to_string()));
    }
    Ok(match format {
        NumberFormat::E164Plus => format!("+{digits}"),
        NumberFormat::E164 => digits,
        NumberFormat::National {
            country_code,
            trunk_prefix,
        } => match digits.strip_prefix(country_code.as_str()) {
            Some(national) if plus || digits.len() > 10 => format!("{trunk_prefix}{national}"),
            _ => digits,
        },
        NumberFormat::AsIs => trimmed,
    })
}

/// Normalise a number received from a trunk so lookups match however the peer wrote it:
/// digits only, with a leading `+` kept when present.
pub fn normalize_received(number: &str) -> String {
    let plus = number.starts_with('+');
    let digits: String = number.chars().filter(|c| c.is_ascii_digit()).collect();
    if plus { format!("+{digits}") } else { digits }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trunks() -> Vec<TrunkConfig> {
        let mut a = TrunkConfig::new("carrier-a", "127.0.0.1:5070".parse().unwrap());
        a.inbound_sources.push("127.0.0.3".parse().unwrap());
        let b = TrunkConfig::new("carrier-b", "127.0.0.2:5060".parse().unwrap());
        vec![a, b]
    }

    #[test]
    fn selection_prefers_named_then_default() {
        let t = trunks();
        assert_eq!(
            select_trunk(&t, Some("carrier-b"), Some("carrier-a"))
                .unwrap()
                .name,
            "carrier-b"
        );
        assert_eq!(
            select_trunk(&t, None, Some("carrier-a")).unwrap().name,
            "carrier-a"
        );
        assert_eq!(
            select_trunk(&t, Some(""), Some("carrier-a")).unwrap().name,
            "carrier-a"
        );
        assert_eq!(
            select_trunk(&t, None, None).unwrap_err(),
            TrunkError::NoneChosen
        );
        assert_eq!(
            select_trunk(&t, Some("nope"), Some("carrier-a")).unwrap_err(),
            TrunkError::Unknown("nope".into())
        );
    }

    fn written(t: &TrunkConfig) -> Option<IpAddr> {
        t.gateway.addr().map(|a| a.ip())
    }

    #[test]
    fn inbound_sources() {
        let t = trunks();
        assert_eq!(
            trunk_for_source(&t, written, "127.0.0.1".parse().unwrap())
                .unwrap()
                .name,
            "carrier-a"
        );
        assert_eq!(
            trunk_for_source(&t, written, "127.0.0.3".parse().unwrap())
                .unwrap()
                .name,
            "carrier-a"
        );
        assert_eq!(
            trunk_for_source(&t, written, "127.0.0.2".parse().unwrap())
                .unwrap()
                .name,
            "carrier-b"
        );
        assert!(trunk_for_source(&t, written, "127.0.0.9".parse().unwrap()).is_none());
    }

    #[test]
    fn number_formats() {
        let national = NumberFormat::National {
            country_code: "44".into(),
            trunk_prefix: "0".into(),
        };
        assert_eq!(
            format_number("+44 20 7946-0000", &NumberFormat::E164Plus).unwrap(),
            "+442079460000"
        );
        assert_eq!(
            format_number("442079460000", &NumberFormat::E164Plus).unwrap(),
            "+442079460000"
        );
        assert_eq!(
            format_number("+442079460000", &NumberFormat::E164).unwrap(),
            "442079460000"
        );
        assert_eq!(
            format_number("+442079460000", &national).unwrap(),
            "02079460000"
        );
        assert_eq!(
            format_number("02079460000", &national).unwrap(),
            "02079460000"
        );
        assert_eq!(format_number("*99#", &NumberFormat::AsIs).unwrap(), "*99#");
        assert!(format_number("12ab", &NumberFormat::E164Plus).is_err());
        assert!(format_number("", &NumberFormat::E164).is_err());
        assert!(format_number("a@b", &NumberFormat::AsIs).is_err());
        assert_eq!(normalize_received("+1 (555) 0100"), "+15550100");
    }

    /// `sips:` gateways (RFC 3261 §19.1): port 5061 when left out, written back as given,
    /// and refused on a trunk whose transport is not TLS.
    #[test]
    fn a_sips_gateway_defaults_to_5061_and_needs_a_tls_trunk() {
        for (written, target, shown) in [
            (
                "sips:SIP.Carrier.example",
                "sip.carrier.example:5061",
                "sips:sip.carrier.example:5061",
            ),
            (
                "sips:carrier.example:5071",
                "carrier.example:5071",
                "sips:carrier.example:5071",
            ),
            ("SIPS:192.0.2.10", "192.0.2.10:5061", "sips:192.0.2.10:5061"),
            ("sips:[::1]", "[::1]:5061", "sips:[::1]:5061"),
            ("sips:[::1]:5062", "[::1]:5062", "sips:[::1]:5062"),
        ] {
            let g: GatewayUri = written.parse().unwrap();
            assert!(g.sips, "{written}");
            assert_eq!(g.scheme(), "sips");
            assert_eq!(g.target.to_string(), target, "{written}");
            assert_eq!(g.to_string(), shown);
            assert_eq!(shown.parse::<GatewayUri>().unwrap(), g, "round trip");
        }
        let plain: GatewayUri = "127.0.0.1:5070".parse().unwrap();
        assert!(!plain.sips);
        assert_eq!(plain.scheme(), "sip");
        assert_eq!(plain.to_string(), "127.0.0.1:5070");
        for bad in [
            "sips:",
            "sips:host:0",
            "sips:bad_name",
            "sips:0.0.0.0",
            "sips:h:99999",
        ] {
            let e = bad.parse::<GatewayUri>().unwrap_err();
            assert!(e.contains("sips:host"), "{bad}: {e}");
        }

        let mut t = TrunkConfig::new("secure", "127.0.0.1:5061".parse().unwrap());
        t.gateway = "sips:sip.carrier.example".parse().unwrap();
        for transport in [SipTransport::Udp, SipTransport::Tcp] {
            t.transport = transport;
            let e = check_trunks(std::slice::from_ref(&t), None).unwrap_err();
            assert!(
                e.contains("\"secure\"")
                    && e.contains("sips:sip.carrier.example:5061")
                    && e.contains("only used over TLS"),
                "{e}"
            );
        }
        t.transport = SipTransport::Tls;
        assert_eq!(check_trunks(&[t], None), Ok(()));
    }

    #[test]
    fn gateways_are_addresses_or_host_names_with_a_port() {
        assert_eq!(
            "127.0.0.1:5070".parse::<Gateway>().unwrap(),
            Gateway::Addr("127.0.0.1:5070".parse().unwrap())
        );
        let host: Gateway = "SIP.Carrier.example:5060".parse().unwrap();
        assert_eq!(
            host,
            Gateway::Host {
                name: "sip.carrier.example".into(),
                port: 5060
            }
        );
        assert_eq!(host.to_string(), "sip.carrier.example:5060");
        assert_eq!(host.host(), "sip.carrier.example");
        assert_eq!(host.addr(), None);
        for bad in [
            "carrier",
            "127.0.0.1",
            "carrier:",
            "carrier:99999",
            "carrier:0",
            "bad_name:5060",
            "-carrier:5060",
            "a..b:5060",
            "1.2.3:5060",
            "0.0.0.0:5060",
            "224.0.0.1:5060",
            "255.255.255.255:5060",
            "127.0.0.1:0",
        ] {
            let e = bad.parse::<Gateway>().unwrap_err();
            assert!(e.contains("gateway") || e.contains(bad), "{bad}: {e}");
        }
        let e = "carrier".parse::<Gateway>().unwrap_err();
        assert!(e.contains("host:port") && e.contains("IP:port"), "{e}");
    }

    #[tokio::test]
    async fn host_names_resolve_within_the_gateway_policy() {
        let g: Gateway = "localhost:5070".parse().unwrap();
        let v4 = g.resolve(Some("127.0.0.1".parse().unwrap())).await.unwrap();
        assert_eq!(v4, "127.0.0.1:5070".parse::<SocketAddr>().unwrap());
        let literal = Gateway::Addr("127.0.0.2:5080".parse().unwrap());
        assert_eq!(
            literal.resolve(None).await.unwrap(),
            "127.0.0.2:5080".parse::<SocketAddr>().unwrap()
        );
    }

    #[test]
    fn a_name_needs_an_address_within_the_policy() {
        let a = |s: &str| s.parse::<SocketAddr>().unwrap();
        let not_found = std::io::Error::other("failed to lookup address information");
        let e = choose_gateway_addr("sip.carrier.example", Err(not_found), None).unwrap_err();
        assert!(
            e.contains("sip.carrier.example does not resolve") && e.contains("lookup"),
            "{e}"
        );
        let e = choose_gateway_addr("empty.example", Ok(vec![]), None).unwrap_err();
        assert!(e.contains("empty.example does not resolve"), "{e}");
        let e = choose_gateway_addr(
            "multicast.example",
            Ok(vec![a("224.0.0.1:5060"), a("0.0.0.0:5060")]),
            None,
        )
        .unwrap_err();
        assert!(e.contains("no address a gateway may have"), "{e}");
        // A refused address is passed over; the listener's family comes first.
        let both = vec![a("[::1]:5060"), a("224.0.0.1:5060"), a("127.0.0.1:5060")];
        let v4 = Some("127.0.0.1".parse().unwrap());
        let v6 = Some("::1".parse().unwrap());
        assert_eq!(
            choose_gateway_addr("h", Ok(both.clone()), v4),
            Ok(a("127.0.0.1:5060"))
        );
        assert_eq!(
            choose_gateway_addr("h", Ok(both.clone()), v6),
            Ok(a("[::1]:5060"))
        );
        assert_eq!(
            choose_gateway_addr("h", Ok(both), None),
            Ok(a("[::1]:5060"))
        );
        assert_eq!(
            choose_gateway_addr("h", Ok(vec![a("[::1]:5060")]), v4),
            Ok(a("[::1]:5060")),
            "another family when the name has no address of the listener's"
        );
    }

    #[test]
    fn trunk_names_are_unique_and_the_default_names_one() {
        let t = trunks();
        assert_eq!(check_trunks(&t, Some("carrier-b")), Ok(()));
        assert_eq!(check_trunks(&t, None), Ok(()));
        let e = check_trunks(&t, Some("carier-b")).unwrap_err();
        assert!(
            e.contains("\"carier-b\"") && e.contains("carrier-a") && e.contains("carrier-b"),
            "{e}"
        );
        let e = check_trunks(&[], Some("carrier")).unwrap_err();
        assert!(e.contains("no trunks are configured"), "{e}");
        let mut twice = trunks();
        twice.push(TrunkConfig::new(
            "carrier-a",
            "127.0.0.4:5060".parse().unwrap(),
        ));
        assert!(
            check_trunks(&twice, None)
                .unwrap_err()
                .contains("two trunks")
        );
        let unnamed = vec![TrunkConfig::new("", "127.0.0.4:5060".parse().unwrap())];
        assert!(
            check_trunks(&unnamed, None)
                .unwrap_err()
                .contains("empty name")
        );
    }

    #[test]
    fn a_trunks_codecs_order_its_offers_and_must_be_distinct_and_non_empty() {
        let mut t = TrunkConfig::new("pbx", "127.0.0.4:5060".parse().unwrap());
        assert_eq!(
            t.codecs,
            vec![SdpCodec::Pcmu, SdpCodec::Pcma, SdpCodec::G722]
        );
        t.codecs = vec![SdpCodec::G722, SdpCodec::Pcmu];
        assert_eq!(
            t.preferred_codecs(&[SdpCodec::Pcmu, SdpCodec::Pcma, SdpCodec::G722]),
            vec![SdpCodec::G722, SdpCodec::Pcmu]
        );
        assert_eq!(t.preferred_codecs(&[SdpCodec::Pcmu]), vec![SdpCodec::Pcmu]);
        assert_eq!(check_trunks(std::slice::from_ref(&t), None), Ok(()));
        t.codecs = vec![];
        let e = check_trunks(std::slice::from_ref(&t), None).unwrap_err();
        assert!(e.contains("\"pbx\" has an empty codecs list"), "{e}");
        t.codecs = vec![SdpCodec::G722, SdpCodec::Pcmu, SdpCodec::G722];
        let e = check_trunks(std::slice::from_ref(&t), None).unwrap_err();
        assert!(e.contains("lists codec G722 twice"), "{e}");
    }

    #[test]
    fn an_ipv6_gateway_is_bracketed_in_uris() {
        let t = TrunkConfig::new("v6", "[::1]:5080".parse().unwrap());
        assert_eq!(t.gateway.to_string(), "[::1]:5080");
        assert_eq!(t.from_host(), "[::1]");
        let t = TrunkConfig::new("v4", "127.0.0.1:5080".parse().unwrap());
        assert_eq!(t.from_host(), "127.0.0.1");
    }
}
