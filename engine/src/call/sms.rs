//! The sms brick in a live call: the agent's SMS settings and provider.

use callsmith_domain::store::AgentRecord;

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
    let sms = agent.sms.as_ref().ok_or("the agent has no SMS settings")?;
    if sms.provider_sid.is_empty() {
        return Err("sms.provider_sid missing".into());
    }
    let p = rt
        .store
        .sms_provider_get(&sms.provider_sid)
        .await
        .map_err(|e| e.to_string())?
        .filter(|p| p.account_sid == agent.account_sid)
        .ok_or("the SMS provider no longer exists")?;
    let from = if sms.use_alpha {
        sms.alpha.as_str()
    } else if sms.number.is_empty() {
        call_from
    } else {
        sms.number.as_str()
    };
    callsmith_domain::sms::send(&rt.services.outbound, &p, from, to, text)
        .await
        .map_err(|e| e.to_string())
}
