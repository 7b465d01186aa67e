//! The legacy campaign flow of docs/control-api.md ("Walk-through: a campaign end to end")
//! against the real binary and real SIPp callees, on both databases: three campaigns from
//! three numbers on three trunks, whose callees answer, answer busy and never answer. Each
//! attempt's statistics and reports equal what its callee did (a call that reached its
//! callee is a completed communication whatever the answer; `call_status` says how).

use std::time::Duration;

use callsmith_e2e::{Engine, EngineOptions, SU_TOKEN, Sipp, provision};
use serde_json::{Value, json};

/// The scenario of the walk-through (step 1).
fn greeter() -> Value {
    json!({"name": "Greeter", "constructor": {"bricks": {
        "start_call": {"v1": [{"id": "s", "description": "", "properties": {},
                               "outputs": [{"type": "next", "description": "", "next": "e"}]}]},
        "end": {"v1": [{"id": "e", "description": "", "properties": {}, "outputs": []}]}}}})
}

struct Legacy<'a> {
    e: &'a Engine,
    auth: (String, String),
}

impl Legacy<'_> {
    async fn send(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> (u16, Value) {
        let mut req = self
            .e
            .client
            .request(method, format!("{}{path}", self.e.base_url))
            .basic_auth(&self.auth.0, Some(&self.auth.1));
        if let Some(b) = body {
            req = req.json(&b);
        }
        let r = req.send().await.expect("legacy request");
        let status = r.status().as_u16();
        let text = r.text().await.expect("body");
        (
            status,
            serde_json::from_str(&text).unwrap_or(Value::String(text)),
        )
    }

    async fn post(&self, path: &str, body: Value) -> Value {
        let (s, v) = self.send(reqwest::Method::POST, path, Some(body)).await;
        assert_eq!(s, 200, "POST {path}: {v}");
        v
    }

    async fn get(&self, path: &str) -> Value {
        let (s, v) = self.send(reqwest::Method::GET, path, None).await;
        assert_eq!(s, 200, "GET {path}: {v}");
        v
    }
}

async fn campaign_flow(database_url: Option<String>) {
    // Three callees, one per trunk.
    let mut answers = Sipp::spawn("dialer_uas_echo.xml", None, None, &["-m", "2", "-rtp_echo"]);
    let mut busy = Sipp::spawn("uas_reject_486.xml", None, None, &["-m", "2"]);
    let mut rings = Sipp::spawn("uas_ring_forever.xml", None, None, &["-m", "2"]);
    let e = Engine::start(EngineOptions {
        database_url,
        trunks: vec![
            ("answers".into(), answers.addr),
            ("busy".into(), busy.addr),
            ("rings".into(), rings.addr),
        ],
        sip_toml: "ring_timeout_secs = 2\n".into(),
        ..Default::default()
    })
    .await;
    let t = provision(&e, "campaign", "answers", "+4930111").await;
    let su = |req: reqwest::RequestBuilder| {
        req.bearer_auth(SU_TOKEN)
            .header("X-Tenant-Sid", &t.tenant)
            .header("X-Account-Sid", &t.account)
    };
    for (trunk, number) in [("busy", "+4930112"), ("rings", "+4930113")] {
        let r = su(e.client.post(format!("{}/v1/internal/trunk", e.base_url)))
            .json(&json!({"name": trunk}))
            .send()
            .await
            .expect("trunk");
        assert_eq!(r.status().as_u16(), 201, "trunk {trunk}");
        let r = su(e.client.post(format!("{}/v1/number", e.base_url)))
            .json(&json!({"identifier": number, "trunk": trunk}))
            .send()
            .await
            .expect("number");
        assert_eq!(r.status().as_u16(), 201, "number {number}");
    }
    let token: Value = su(e.client.post(format!(
        "{}/v1/internal/account/{}/legacy-token",
        e.base_url, t.account
    )))
    .send()
    .await
    .expect("legacy token")
    .json()
    .await
    .expect("token json");
    let l = Legacy {
        e: &e,
        auth: (
            t.account.clone(),
            token["account_token"].as_str().expect("token").to_string(),
        ),
    };

    // The walk-through: scenario, campaigns, contacts, attempts.
    let scn = l.post("/v1/scenarios", greeter()).await["sid"]
        .as_str()
        .expect("scenario sid")
        .to_string();
    let mut runs = Vec::new();
    for (number, phones) in [
        ("+4930111", ["+491510000001", "+491510000002"]),
        ("+4930112", ["+491510000003", "+491510000004"]),
        ("+4930113", ["+491510000005", "+491510000006"]),
    ] {
        let cmp = l
            .post(
                "/v1/campaign",
                json!({"scenario_sid": scn, "number": number, "description": "Spring"}),
            )
            .await["sid"]
            .as_str()
            .expect("campaign sid")
            .to_string();
        let contacts: Vec<Value> = phones.iter().map(|p| json!({"phone": p})).collect();
        l.post(
            &format!("/v1/campaign/{cmp}/contact/batch"),
            Value::Array(contacts),
        )
        .await;
        let att = l
            .post(&format!("/v1/campaign/{cmp}/attempt"), json!({}))
            .await["sid"]
            .as_str()
            .expect("attempt sid")
            .to_string();
        runs.push((cmp, att));
    }
    // Every attempt completes.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    for (cmp, att) in &runs {
        loop {
            let a = l.get(&format!("/v1/campaign/{cmp}/attempt/{att}")).await;
            if a["status"] == "completed" {
                break;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "attempt {att} still {a}; log:\n{}",
                e.log()
            );
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    // What each callee did, and what the attempt says.
    assert!(
        answers.success(Duration::from_secs(20)).await,
        "{}",
        answers.dump()
    );
    assert!(
        busy.success(Duration::from_secs(20)).await,
        "{}",
        busy.dump()
    );
    assert!(
        rings.success(Duration::from_secs(20)).await,
        "{}",
        rings.dump()
    );
    let expected = [
        (&answers, json!({"answered": 2}), 2, "completed"),
        (&busy, json!({"busy": 2}), 0, "completed"),
        (&rings, json!({"no_answer": 2}), 0, "completed"),
    ];
    for ((cmp, att), (callee, call_status, answered, status)) in runs.iter().zip(expected) {
        let st = l
            .get(&format!("/v1/campaign/{cmp}/attempt/{att}/statistics"))
            .await;
        assert_eq!(callee.invites().len(), 2, "INVITEs the callee saw");
        assert_eq!(st["total"], 2, "{st}");
        assert_eq!(st["dialled"], 2, "{st}");
        assert_eq!(st["call_status"], call_status, "{st}");
        assert_eq!(st["answered"], answered, "{st}");
        assert_eq!(st["communication_status"][status], 2, "{st}");
        assert_eq!(st["setup_time_ms"]["count"], answered, "{st}");
        // Answered calls saved histories: the audio the engine received from the callee.
        assert_eq!(st["quality"]["calls"], answered, "{st}");
        assert_eq!(st["quality"]["packets_lost"], 0, "{st}");
        // The CSV report: a header and one line per call, each with its call status.
        let (code, csv) = l
            .send(
                reqwest::Method::GET,
                &format!("/v1/campaign/{cmp}/attempt/{att}/report/communication?format=csv"),
                None,
            )
            .await;
        assert_eq!(code, 200);
        let csv = csv.as_str().expect("csv text").to_string();
        let lines: Vec<&str> = csv.lines().collect();
        assert_eq!(lines.len(), 3, "{csv}");
        let name = call_status
            .as_object()
            .and_then(|m| m.keys().next().cloned())
            .expect("status name");
        assert!(
            lines[1..].iter().all(|l| l.contains(&format!(",{name},"))),
            "{csv}"
        );
        // The same attempt as a page.
        let (code, page) = l
            .send(
                reqwest::Method::GET,
                &format!("/v1/campaign/{cmp}/attempt/{att}/report.html"),
                None,
            )
            .await;
        assert_eq!(code, 200);
        let page = page.as_str().expect("html").to_string();
        assert!(page.contains(&format!("Attempt {att}")), "{page}");
        assert!(
            page.contains("<tr><th>communications</th><td>2</td></tr>"),
            "{page}"
        );
        assert!(page.contains(&format!("<tr><th>answered</th><td>{answered}</td></tr>")));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_campaign_runs_end_to_end_sqlite() {
    campaign_flow(None).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_campaign_runs_end_to_end_postgres() {
    let admin = std::env::var("CALLSMITH_TEST_PG_ADMIN_URL").expect(
        "CALLSMITH_TEST_PG_ADMIN_URL is not set: run `eval \"$(bash scripts/test-deps.sh)\"`",
    );
    let db = callsmith_domain::store::create_postgres_database(&admin, "cse2e_")
        .await
        .expect("a fresh database");
    campaign_flow(Some(db)).await
}
