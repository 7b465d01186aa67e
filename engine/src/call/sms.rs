//! The sms brick in a live call: the agent's SMS settings and provider.

use callsmith_domain::store::AgentRecord;
use serde_json::Value;

use crate::runtime::Runtime;

/// Sends an SMS through the agent's provider ([`callsmith_domain::sms::send`]).
pub(super) async fn send_sms(
    rt: &Runtime,
    agent: Option<&AgentRecord>,
    call_from: &str,
    to: &str,
    text: &str,
) -> Result<(), String> {
    let agent = agent.ok_or("a test call has no agent SMS settings")?;
    let sms: Value = agent
        .sms
        .as_deref()
        .and_then(|s| serde_json::from_str(s).ok())
        .ok_or("the agent has no SMS settings")?;
    let provider_sid = sms
        .get("provider_sid")
        .and_then(|v| v.as_str())
        .ok_or("sms.provider_sid missing")?;
    let p = rt
        .store
        .sms_provider_get(provider_sid)
        .await
        .map_err(|e| e.to_string())?
        .filter(|p| p.account_sid == agent.account_sid)
        .ok_or("the SMS provider no longer exists")?;
    let use_alpha = sms
        .get("use_alpha")
        .and_then(|v| v.as_bool())
        .unwrap_or(false);
    let from = if use_alpha {
        sms.get("alpha")
            .and_then(|v| v.as_str())
            .unwrap_or_default()
    } else {
        sms.get("number")
            .and_then(|v| v.as_str())
            .unwrap_or(call_from)
    };
    callsmith_domain::sms::send(&rt.services.outbound, &p, from, to, text).await
}
