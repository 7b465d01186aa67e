//! `callsmith load`: a speech-aware SIPp. It runs a throwaway node (an embedded SQLite
//! database in a temporary directory, the control API on a loopback port of its own),
//! provisions a tenant, an account, a trunk to `--target`, a number, the scenario of
//! `--scenario` (validated and published through the API, so a bad file gets the same
//! SCN1xx errors) and an agent with `--cps` and `--cpl`, dispatches `--calls` calls to the
//! target's user in one dispatch batch, shows their progress, and writes `report.json` and
//! `report.html` with the figures of `GET /v1/communication/-/statistics?batch=…`, the
//! calls and the turns of their saved histories over time.

use std::{
    io::Write,
    net::SocketAddr,
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

use anyhow::{Context, bail};
use serde_json::{Value, json};

use crate::config::Config;

/// Arguments of `callsmith load`.
#[derive(Debug, clap::Args)]
pub struct LoadArgs {
    /// Who to call: `sip:USER@HOST:PORT`, USER a number (digits, optional `+`).
    #[arg(long)]
    pub target: String,
    /// Scenario JSON: the `constructor` (bricks and their outputs), or an object holding it
    /// under `constructor`.
    #[arg(long)]
    pub scenario: PathBuf,
    /// Calls to place.
    #[arg(long, default_value_t = 10)]
    pub calls: u64,
    /// New calls per second.
    #[arg(long, default_value_t = 1)]
    pub cps: u32,
    /// Calls live at once.
    #[arg(long, default_value_t = 10)]
    pub cpl: u32,
    /// Folder for report.json and report.html (created). Default `./callsmith-load-<time>`.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Stop waiting for the calls this long after the last one could have started.
    #[arg(long, default_value_t = 300)]
    pub timeout_secs: u64,
}

/// `sip:USER@HOST:PORT` → (USER, HOST:PORT); the port defaults to 5060.
pub fn parse_target(target: &str) -> anyhow::Result<(String, SocketAddr)> {
    let rest = target
        .strip_prefix("sip:")
        .context("--target: a SIP URI, sip:USER@HOST:PORT")?;
    let (user, host) = rest
        .split_once('@')
        .context("--target: sip:USER@HOST:PORT needs a user")?;
    let digits = user.strip_prefix('+').unwrap_or(user);
    if digits.is_empty() || !digits.chars().all(|c| c.is_ascii_digit()) {
        bail!("--target: the user {user:?} is not a number (digits, optional +)");
    }
    let host = if host.contains(':') {
        host.to_string()
    } else {
        format!("{host}:5060")
    };
    let addr = host
        .parse::<SocketAddr>()
        .with_context(|| format!("--target: {host:?} is not IP:PORT"))?;
    Ok((user.to_string(), addr))
}

/// The throwaway node's configuration: `cfg` with its data, database, SIP port and trunk
/// replaced.
fn node_config(mut cfg: Config, data_dir: &Path, gateway: SocketAddr) -> Config {
    cfg.data_dir = data_dir.to_path_buf();
    cfg.database.url = None;
    cfg.bootstrap_superuser_token = Some(format!("cs_su_load_{}", uuid::Uuid::new_v4().simple()));
    cfg.sip.udp = Some(SocketAddr::from(([127, 0, 0, 1], 0)));
    cfg.sip.tcp = None;
    let mut trunk = callsmith_sip::TrunkConfig::new("load", gateway);
    trunk.number_format = callsmith_sip::NumberFormat::AsIs;
    cfg.sip.trunks = vec![trunk];
    cfg.sip.default_trunk = Some("load".into());
    cfg
}

/// The control API of the throwaway node, as its superuser.
struct Api {
    base: String,
    token: String,
    tenant: Option<String>,
    account: Option<String>,
    client: reqwest::Client,
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

    async fn post(&self, path: &str, body: Value) -> anyhow::Result<Value> {
        self.send(reqwest::Method::POST, path, Some(body)).await
    }

    async fn get(&self, path: &str) -> anyhow::Result<Value> {
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

/// Runs the load; returns the report folder.
pub async fn run(cfg: Config, args: LoadArgs) -> anyhow::Result<PathBuf> {
    if args.calls == 0 || args.cps == 0 || args.cpl == 0 {
        bail!("--calls, --cps and --cpl must be at least 1");
    }
    let (user, gateway) = parse_target(&args.target)?;
    let text = std::fs::read_to_string(&args.scenario)
        .with_context(|| format!("reading {}", args.scenario.display()))?;
    let file: Value = serde_json::from_str(&text)
        .with_context(|| format!("{} is not JSON", args.scenario.display()))?;
    let constructor = file.get("constructor").cloned().unwrap_or(file);
    let out = args.out.clone().unwrap_or_else(|| {
        PathBuf::from(format!(
            "callsmith-load-{}",
            chrono::Utc::now().format("%Y%m%dT%H%M%S")
        ))
    });
    std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;

    let data = tempfile::tempdir().context("a temporary data directory")?;
    let cfg = node_config(cfg, data.path(), gateway);
    let token = cfg.bootstrap_superuser_token.clone().unwrap_or_default();
    let node = crate::start(&cfg, None).await?;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let (base, server) = crate::loopback_api(&node, async move {
        let _ = stopped.await;
    })
    .await?;

    let mut api = Api {
        base,
        token,
        tenant: None,
        account: None,
        client: reqwest::Client::builder()
            .timeout(Duration::from_secs(30))
            .build()?,
    };
    let t = api
        .post("/v1/internal/tenant", json!({"name": "load"}))
        .await?;
    api.tenant = t["sid"].as_str().map(String::from);
    api.post("/v1/internal/trunk", json!({"name": "load"}))
        .await?;
    let a = api
        .post(
            "/v1/internal/account",
            json!({"name": "load", "email": "load@callsmith.invalid", "timezone": "UTC"}),
        )
        .await?;
    api.account = a["sid"].as_str().map(String::from);
    let number = api
        .post(
            "/v1/number",
            json!({"identifier": "+10000000000", "name": "load caller id", "trunk": "load"}),
        )
        .await?;
    let stem = args
        .scenario
        .file_stem()
        .map(|s| s.to_string_lossy().to_string())
        .unwrap_or_else(|| "scenario".into());
    let scenario = api
        .post(
            "/v1/scenario",
            json!({"name": stem, "constructor": constructor}),
        )
        .await?;
    let scenario_sid = scenario["id"].as_str().context("scenario id")?.to_string();
    api.post(&format!("/v1/scenario/{scenario_sid}/publish"), json!({}))
        .await
        .context("publishing the scenario")?;
    let agent = api
        .post(
            "/v1/agent",
            json!({
                "gateway_type": "number",
                "number_sid": number["id"],
                "scenario_sid": scenario_sid,
                "limits": {"cps": args.cps, "cpl": args.cpl},
            }),
        )
        .await?;
    let agent_sid = agent["id"].as_str().context("agent id")?.to_string();

    let started = chrono::Utc::now();
    let t0 = Instant::now();
    // The first dispatch starts the batch; every other one joins it.
    let mut batch: Option<String> = None;
    for _ in 0..args.calls {
        let mut body = json!({"agent_sid": agent_sid, "recipient": user});
        if let Some(b) = &batch {
            body["batch_sid"] = json!(b);
        }
        let c = api.post("/v1/communication/-/dispatch", body).await?;
        if batch.is_none() {
            batch = Some(c["batch_sid"].as_str().context("batch_sid")?.to_string());
        }
    }
    let batch = batch.unwrap_or_default();
    // Poll the statistics until every call is final (or the deadline).
    let deadline = Duration::from_secs(args.calls / u64::from(args.cps) + args.timeout_secs);
    let statistics_path = format!("/v1/communication/-/statistics?batch={batch}");
    let mut stats;
    let mut timed_out = false;
    loop {
        stats = api.get(&statistics_path).await?;
        let open = ["new", "queued", "dialing", "in_progress"]
            .iter()
            .map(|s| stats["communication_status"][*s].as_i64().unwrap_or(0))
            .sum::<i64>();
        progress(&stats, open, args.calls, t0.elapsed());
        if open == 0 {
            break;
        }
        if t0.elapsed() > deadline {
            timed_out = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    eprintln!();
    let finished = chrono::Utc::now();
    let rows = all_communications(&api, &batch).await?;
    let turns = turns(&node, api.account.as_deref().unwrap_or_default(), &batch).await?;
    let report = json!({
        "target": args.target,
        "scenario": args.scenario.display().to_string(),
        "calls": args.calls,
        "cps": args.cps,
        "cpl": args.cpl,
        "started_at": started,
        "finished_at": finished,
        "timed_out": timed_out,
        "statistics": stats,
        "communications": rows,
        "turns": turns,
        "batch_sid": batch,
    });
    std::fs::write(out.join("report.json"), serde_json::to_vec_pretty(&report)?)?;
    std::fs::write(
        out.join("report.html"),
        callsmith_control::communication::report::html(&report),
    )?;

    let _ = stop.send(());
    let _ = server.await;
    if let Some(e) = node.engine {
        e.drain().await;
    }
    node.store.close().await;
    if timed_out {
        bail!(
            "calls still open {} s after the last could start; report in {}",
            args.timeout_secs,
            out.display()
        );
    }
    Ok(out)
}

/// One line of progress on stderr, redrawn in place.
fn progress(stats: &Value, open: i64, calls: u64, elapsed: Duration) {
    let done = stats["total"].as_i64().unwrap_or(0) - open;
    let width = 30usize;
    let filled = (done.max(0) as usize * width) / (calls.max(1) as usize);
    let live = stats["communication_status"]["dialing"]
        .as_i64()
        .unwrap_or(0)
        + stats["communication_status"]["in_progress"]
            .as_i64()
            .unwrap_or(0);
    eprint!(
        "\r[{}{}] {done}/{calls} done, {live} live, {} answered, {} failed  {:.0} s ",
        "#".repeat(filled.min(width)),
        ".".repeat(width - filled.min(width)),
        stats["answered"].as_i64().unwrap_or(0),
        stats["communication_status"]["failed"]
            .as_i64()
            .unwrap_or(0),
        elapsed.as_secs_f64()
    );
    let _ = std::io::stderr().flush();
}

/// Every communication of the agent, oldest first.
/// The turns of the saved histories of the batch's calls (the first 2,000 histories, as the
/// statistics read them), for the turn latency plot.
async fn turns(
    node: &crate::Node,
    account_sid: &str,
    batch: &str,
) -> anyhow::Result<Vec<callsmith_control::communication::report::TurnPoint>> {
    let filter = callsmith_control::store::communications::CommunicationFilter {
        batch_sid: Some(batch.to_string()),
        ..Default::default()
    };
    let rows = node
        .services
        .statistics
        .select(&node.store, account_sid, &filter)
        .await
        .map_err(|e| anyhow::anyhow!("reading the calls: {e:?}"))?;
    let refs: Vec<_> = rows.iter().collect();
    let histories = callsmith_control::communication::statistics::read_histories(
        &node.services.objects,
        account_sid,
        &refs,
    )
    .await;
    Ok(callsmith_control::communication::report::turn_points(
        &histories,
    ))
}

async fn all_communications(api: &Api, batch: &str) -> anyhow::Result<Vec<Value>> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_are_sip_uris_with_a_number() {
        assert_eq!(
            parse_target("sip:100@127.0.0.1:5070").unwrap(),
            ("100".into(), "127.0.0.1:5070".parse().unwrap())
        );
        assert_eq!(
            parse_target("sip:+4930@127.0.0.1").unwrap().1,
            "127.0.0.1:5060".parse::<std::net::SocketAddr>().unwrap()
        );
        for bad in [
            "100@127.0.0.1",
            "sip:127.0.0.1:5060",
            "sip:bob@127.0.0.1",
            "sip:1@host:x",
        ] {
            assert!(parse_target(bad).is_err(), "{bad}");
        }
    }
}
