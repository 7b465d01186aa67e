//! Trunk configuration and the pure rules around it: number formatting, trunk selection for
//! outbound calls and source-address checks for inbound ones.

use std::net::{IpAddr, SocketAddr};

use serde::{Deserialize, Serialize};

/// SIP transport for a trunk or a listener.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum SipTransport {
    #[default]
    Udp,
    Tcp,
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

/// One SIP trunk: the gateway calls leave through and the peers calls may come from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrunkConfig {
    /// The spec's Trunk.name, the edge routing key.
    pub name: String,
    /// Gateway address outbound INVITEs go to.
    pub gateway: SocketAddr,
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
}

impl TrunkConfig {
    /// A UDP trunk with no credentials, E.164 numbers and only the gateway allowed inbound.
    pub fn new(name: impl Into<String>, gateway: SocketAddr) -> Self {
        TrunkConfig {
            name: name.into(),
            gateway,
            transport: SipTransport::Udp,
            credentials: None,
            from_domain: String::new(),
            number_format: NumberFormat::E164Plus,
            inbound_sources: Vec::new(),
            inbound_tenant: None,
        }
    }

    pub fn from_host(&self) -> String {
        if self.from_domain.is_empty() {
            self.gateway.ip().to_string()
        } else {
            self.from_domain.clone()
        }
    }

    pub fn allows_source(&self, ip: IpAddr) -> bool {
        self.gateway.ip() == ip || self.inbound_sources.contains(&ip)
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

/// Which trunk an inbound request from `ip` belongs to, if any.
pub fn trunk_for_source(trunks: &[TrunkConfig], ip: IpAddr) -> Option<&TrunkConfig> {
    trunks.iter().find(|t| t.allows_source(ip))
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

    #[test]
    fn inbound_sources() {
        let t = trunks();
        assert_eq!(
            trunk_for_source(&t, "127.0.0.1".parse().unwrap())
                .unwrap()
                .name,
            "carrier-a"
        );
        assert_eq!(
            trunk_for_source(&t, "127.0.0.3".parse().unwrap())
                .unwrap()
                .name,
            "carrier-a"
        );
        assert_eq!(
            trunk_for_source(&t, "127.0.0.2".parse().unwrap())
                .unwrap()
                .name,
            "carrier-b"
        );
        assert!(trunk_for_source(&t, "127.0.0.9".parse().unwrap()).is_none());
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
}
