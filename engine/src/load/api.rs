//! The control API of the throwaway node, as its superuser: what `callsmith load`
//! provisions and reads through.

use anyhow::{Context, bail};
use serde_json::Value;

/// The control API of the throwaway node, as its superuser.
pub struct Api {
    pub base: String,
    pub token: String,
    pub tenant: Option<String>,
    pub account: Option<String>,
    pub client: reqwest::Client,
}

impl Api {
    async fn send(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> anyhow::Result<Value> {
        let mut req = self
            .client
            .request(method.clone(), format!("{}{path}", self.base))
            .bearer_auth(&self.token);
        if let Some(t) = &self.tenant {
            req = req.header("X-Tenant-Sid", t);
        }
        if let Some(a) = &self.account {
            req = req.header("X-Account-Sid", a);
        }
        if let Some(b) = body {
            req = req.json(&b);
        }
        let r = req
            .send()
            .await
            .with_context(|| format!("{method} {path}"))?;
        let status = r.status();
        let v: Value = r.json().await.unwrap_or(Value::Null);
        if !status.is_success() {
            bail!("{method} {path}: {status}: {}", describe_error(&v));
        }
        Ok(v)
    }

    pub async fn post(&self, path: &str, body: Value) -> anyhow::Result<Value> {
        self.send(reqwest::Method::POST, path, Some(body)).await
    }

    pub async fn get(&self, path: &str) -> anyhow::Result<Value> {
        self.send(reqwest::Method::GET, path, None).await
    }
}

/// An API error as a line, with the scenario's validation errors when there are some.
fn describe_error(v: &Value) -> String {
    let mut out = v["message"].as_str().unwrap_or("").to_string();
    for e in v["data"]["errors"]["scenario"]
        .as_array()
        .into_iter()
        .flatten()
    {
        out.push_str(&format!(
            "\n  {} {}{}",
            e["code"].as_str().unwrap_or(""),
            e["message"].as_str().unwrap_or(""),
            e["node_id"]
                .as_str()
                .filter(|n| !n.is_empty())
                .map(|n| format!(" (brick {n})"))
                .unwrap_or_default()
        ));
    }
    if out.is_empty() { v.to_string() } else { out }
}

/// Every communication of the batch, oldest first.
pub async fn all_communications(api: &Api, batch: &str) -> anyhow::Result<Vec<Value>> {
    let mut out = Vec::new();
    loop {
        let page = api
            .get(&format!(
                "/v1/communication?batch={batch}&limit=500&offset={}",
                out.len()
            ))
            .await?;
        let items = page["items"].as_array().cloned().unwrap_or_default();
        let n = items.len();
        out.extend(items);
        if n == 0 || !page["has_more"].as_bool().unwrap_or(false) {
            break;
        }
    }
    out.reverse();
    Ok(out)
}
