//! An agent's typed settings (gateway type, calling schedule, limits, result targets, SMS,
//! status), shared by the agent use cases (which check them), the HTTP layer (which
//! documents them) and the engine (which reads them from the stored agent). [`Status`]
//! is also the status of users, accounts, numbers, pools and SMS providers.

use serde::{Deserialize, Serialize};

/// `number` or `number_pool`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum GatewayType {
    Number,
    NumberPool,
}

impl GatewayType {
    /// The stored text (`number`, `number_pool`).
    pub fn as_str(self) -> &'static str {
        match self {
            GatewayType::Number => "number",
            GatewayType::NumberPool => "number_pool",
        }
    }

    /// The type of a stored agent: `number_pool`, else `number`.
    pub fn parse(s: &str) -> GatewayType {
        if s == "number_pool" {
            GatewayType::NumberPool
        } else {
            GatewayType::Number
        }
    }
}

/// `active` or `inactive`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Active,
    Inactive,
}

impl Status {
    /// The stored text.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Active => "active",
            Status::Inactive => "inactive",
        }
    }
    /// A stored status: `active`, anything else reads as inactive.
    pub fn parse(s: &str) -> Status {
        if s == "active" {
            Status::Active
        } else {
            Status::Inactive
        }
    }
}

/// When the agent may start calls (docs/agents.md): `always` or `weekly`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct Schedule {
    /// `always` (args: excluded_dates) or `weekly` (args: mon..sun windows
    /// `[["HH:MM","HH:MM"]]` in the agent's timezone, excluded_dates).
    pub strategy: String,
    /// Always an object: omitted or null reads as `{}`.
    #[serde(default = "no_args", deserialize_with = "args_object")]
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub args: serde_json::Value,
}

impl Schedule {
    /// Calls at any time (the schedule of an agent that names none).
    pub fn always() -> Schedule {
        Schedule {
            strategy: "always".into(),
            args: no_args(),
        }
    }
}

fn no_args() -> serde_json::Value {
    serde_json::json!({})
}

/// `args` as sent, with null read as `{}` (any other non-object is left for the
/// schedule check to reject).
fn args_object<'de, D: serde::Deserializer<'de>>(d: D) -> Result<serde_json::Value, D::Error> {
    let v = serde_json::Value::deserialize(d)?;
    Ok(if v.is_null() { no_args() } else { v })
}

/// Call limits of one agent.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct Limits {
    /// New calls this agent starts per second, 1–1000.
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 1000))]
    pub cps: i64,
    /// Calls of this agent live at once (calls per line), 1–100000.
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 100000))]
    pub cpl: i64,
}

/// One result delivery target.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct Target {
    /// Absolute http(s) URL the communication result is POSTed to.
    pub url: String,
}

/// Where results go.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq, Default)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct CommunicationResult {
    #[serde(default)]
    pub targets: Vec<Target>,
}

impl CommunicationResult {
    /// The distinct http(s) target URLs (sorted).
    pub fn urls(&self) -> Vec<String> {
        let mut urls: Vec<String> = self
            .targets
            .iter()
            .map(|t| t.url.clone())
            .filter(|u| u.starts_with("http://") || u.starts_with("https://"))
            .collect();
        urls.sort();
        urls.dedup();
        urls
    }
}

/// How the agent's scenarios send SMS. The sender is always a value registered on the
/// provider: `alpha` (use_alpha=true) or `number` (use_alpha=false). The empty settings
/// (`provider_sid` empty, `use_alpha` false, `alpha` and `number` empty) mean the agent
/// sends no SMS.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct AgentSms {
    /// `smp_` id of a provider of the account; empty when the agent sends no SMS.
    pub provider_sid: String,
    #[serde(default)]
    pub use_alpha: bool,
    #[serde(default)]
    pub alpha: String,
    #[serde(default)]
    pub number: String,
}

impl AgentSms {
    /// The empty settings: no SMS.
    pub fn is_unset(&self) -> bool {
        self.provider_sid.trim().is_empty()
            && !self.use_alpha
            && self.alpha.trim().is_empty()
            && self.number.trim().is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn result_urls_are_http_distinct_and_sorted() {
        let t: CommunicationResult = serde_json::from_str(
            r#"{"targets":[{"url":"http://b/x"},{"url":"ftp://b"},{"url":"http://a/x"},{"url":"http://b/x"}]}"#,
        )
        .unwrap();
        assert_eq!(
            t.urls(),
            vec!["http://a/x".to_string(), "http://b/x".to_string()]
        );
        assert!(CommunicationResult::default().urls().is_empty());
    }
}
