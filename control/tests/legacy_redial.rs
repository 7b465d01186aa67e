//! Redialling contacts in the legacy flow (`POST …/attempt` with `redial`), on SQLite and
//! PostgreSQL: `failed` takes contacts whose latest call ended unanswered, `all` every
//! contact whose latest call ended, never one still under way; an attempt is a dispatch
//! batch whose v1 statistics equal the attempt's; a contact's dial number is unique, so two
//! attempts never redial it together.

use base64::Engine;
use callsmith_control::{
    both_backends,
    testing::{Fixture, TestResponse, TestServer, minimal_snapshot},
};
use callsmith_domain::store::{NewAttempt, NewAttemptCall, Pool, StoreError, sqlx};
use reqwest::Method;
use serde_json::{Value, json};

struct Legacy {
    f: Fixture,
    auth: String,
}

async fn legacy(s: &TestServer) -> Legacy {
    let f = s.fixture().await;
    let r = s
        .su(
            Method::POST,
            &format!("/v1/internal/account/{}/legacy-token", f.account_sid),
        )
        .send()
        .await;
    r.expect(201);
    let auth = format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!(
            "{}:{}",
            f.account_sid,
            r.str("account_token")
        ))
    );
    Legacy { f, auth }
}

async fn get(s: &TestServer, l: &Legacy, path: &str) -> TestResponse {
    s.get(path).header("authorization", &l.auth).send().await
}

async fn post(s: &TestServer, l: &Legacy, path: &str, body: Value) -> TestResponse {
    s.post(path)
        .header("authorization", &l.auth)
        .json(&body)
        .send()
        .await
}

#[track_caller]
fn rpc_error(r: &TestResponse, status: u16, code: i64) -> String {
    r.expect(status);
    assert_eq!(r.body["code"], code, "{}", r.text);
    assert!(r.body["details"].is_array(), "{}", r.text);
    r.body["message"].as_str().unwrap_or_default().to_string()
}

async fn campaign(s: &TestServer, l: &Legacy) -> String {
    let snapshot: Value = serde_json::from_str(&minimal_snapshot("x")).unwrap();
    let r = post(
        s,
        l,
        "/v1/scenarios",
        json!({"name": "Bot", "constructor": snapshot["constructor"]}),
    )
    .await;
    r.expect(200);
    let scenario = r.str("sid");
    s.post("/v1/number")
        .bearer(&l.f.admin_session)
        .json(&json!({"identifier": "+4911"}))
        .send()
        .await
        .expect(201);
    let r = post(
        s,
        l,
        "/v1/campaign",
        json!({"scenario_sid": scenario, "number": "+4911"}),
    )
    .await;
    r.expect(200);
    r.str("sid")
}

/// Ends the communication `sid` as the engine would: answered or not.
async fn end_call(s: &TestServer, sid: &str, answered: bool) {
    let t = chrono::Utc::now();
    let (call_status, answered_at) = if answered {
        ("answered", Some(t))
    } else {
        ("busy", None)
    };
    macro_rules! run {
        ($p:expr) => {
            sqlx::query(
                "UPDATE communications SET communication_status = 'completed', call_status = $2, started_at = $3, \
                 answered_at = $4, ended_at = $3 WHERE sid = $1",
            )
            .bind(sid)
            .bind(call_status)
            .bind(t)
            .bind(answered_at)
            .execute($p)
            .await
            .unwrap()
            .rows_affected()
        };
    }
    let n = match s.store.pool() {
        Pool::Sqlite(p) => run!(p),
        Pool::Postgres(p) => run!(p),
    };
    assert_eq!(n, 1);
}

/// The campaign's contacts by phone: (sid, attempt_sid, communication_sid, dial_count).
async fn contacts(s: &TestServer, l: &Legacy, c: &str) -> Vec<(String, String, String, i64)> {
    let r = get(s, l, &format!("/v1/campaign/{c}/contact")).await;
    r.expect(200);
    r.body
        .as_array()
        .unwrap()
        .iter()
        .map(|k| {
            (
                k["sid"].as_str().unwrap().to_string(),
                k["attempt_sid"].as_str().unwrap().to_string(),
                k["communication_sid"].as_str().unwrap().to_string(),
                k["dial_count"].as_i64().unwrap(),
            )
        })
        .collect()
}

async fn redial(s: TestServer) {
    let a = legacy(&s).await;
    let c = campaign(&s, &a).await;
    let attempts = format!("/v1/campaign/{c}/attempt");
    post(
        &s,
        &a,
        &format!("/v1/campaign/{c}/contact/batch"),
        json!([{"phone": "+4920"}, {"phone": "+4921"}, {"phone": "+4922"}]),
    )
    .await
    .expect(200);
    assert!(contacts(&s, &a, &c).await.iter().all(|k| k.3 == 0));
    let r = post(&s, &a, &attempts, json!({})).await;
    r.expect(200);
    let first = r.str("sid");
    let batch = r.str("batch_sid");
    assert!(batch.starts_with("bat_"), "{}", r.text);
    let k = contacts(&s, &a, &c).await;
    assert!(k.iter().all(|k| k.1 == first && k.3 == 1), "{k:?}");
    // Ann answered, Bob was busy, Cat's call has not ended.
    end_call(&s, &k[0].2, true).await;
    end_call(&s, &k[1].2, false).await;

    // Without redial nothing is left: 400 FAILED_PRECONDITION naming redial.
    let m = rpc_error(&post(&s, &a, &attempts, json!({})).await, 400, 9);
    assert!(m.contains("redial"), "{m}");
    // A redial mode outside the vocabulary is INVALID_ARGUMENT.
    rpc_error(
        &post(&s, &a, &attempts, json!({"redial": "busy"})).await,
        400,
        3,
    );

    // redial=failed takes Bob only (Cat's call is still under way, Ann answered).
    let r = post(&s, &a, &attempts, json!({"redial": "failed"})).await;
    r.expect(200);
    let second = r.str("sid");
    assert_eq!(r.body["contact_count"], 1);
    assert_ne!(r.str("batch_sid"), batch);
    let after = contacts(&s, &a, &c).await;
    assert_eq!((after[1].1.as_str(), after[1].3), (second.as_str(), 2));
    assert_ne!(after[1].2, k[1].2, "a new communication");
    assert_eq!((after[0].1.as_str(), after[0].3), (first.as_str(), 1));
    // The first attempt keeps its three calls in its reports and statistics.
    let rows = get(&s, &a, &format!("{attempts}/{first}/report/contact")).await;
    assert_eq!(rows.body.as_array().unwrap().len(), 3);
    assert_eq!(rows.body[1]["communication_sid"], k[1].2.as_str());
    let st = get(&s, &a, &format!("{attempts}/{first}/statistics")).await;
    assert_eq!(st.body["total"], 3);
    // Bob's new call has not ended: nothing is left to redial as failed.
    let m = rpc_error(
        &post(&s, &a, &attempts, json!({"redial": "failed"})).await,
        400,
        9,
    );
    assert!(m.contains("unanswered"), "{m}");

    // The attempt is a dispatch batch: the v1 statistics of it equal the attempt's.
    let v1 = s
        .get(&format!("/v1/communication/-/statistics?batch={batch}"))
        .bearer(&a.f.account_key)
        .send()
        .await;
    v1.expect(200);
    let mut legacy_stats = st.body.clone();
    let o = legacy_stats.as_object_mut().unwrap();
    o.remove("attempt_sid");
    o.remove("status");
    assert_eq!(v1.body, legacy_stats);

    // redial=all takes every contact whose latest call ended: Ann and, once ended, Bob
    // and Cat.
    end_call(&s, &after[1].2, false).await;
    end_call(&s, &k[2].2, false).await;
    let r = post(&s, &a, &attempts, json!({"redial": "all"})).await;
    r.expect(200);
    assert_eq!(r.body["contact_count"], 3);
    let third = r.str("sid");
    let last = contacts(&s, &a, &c).await;
    assert_eq!(last.iter().map(|k| k.3).collect::<Vec<_>>(), vec![2, 3, 2]);
    assert!(last.iter().all(|k| k.1 == third));
    // Nothing ended since: redial=all has nothing left either.
    let m = rpc_error(
        &post(&s, &a, &attempts, json!({"redial": "all"})).await,
        400,
        9,
    );
    assert!(m.contains("still under way"), "{m}");
    // The attempt's report page draws the campaign's cpl (10 by default).
    let page = get(&s, &a, &format!("{attempts}/{third}/report.html")).await;
    page.expect(200);
    assert!(page.text.contains("dashed: 10"), "{}", page.text);

    // Two attempts racing to redial the same contact: the dial number is taken once.
    let scenario_sid = s
        .store
        .communication_get(&k[0].2)
        .await
        .unwrap()
        .unwrap()
        .scenario_sid;
    let call = |sid: &str| {
        let new = callsmith_domain::store::NewCommunication {
            sid: sid.into(),
            tenant_sid: a.f.tenant_sid.clone(),
            account_sid: a.f.account_sid.clone(),
            agent_sid: Some(c.clone()),
            scenario_sid: scenario_sid.clone(),
            version: Some(1),
            draft_version: None,
            recipient: "+4920".into(),
            from_number: "+4911".into(),
            trunk: None,
            direction: "outbound".into(),
            is_test: false,
            data: "{}".into(),
            strategy_sid: None,
            batch_sid: None,
            timezone: "UTC".into(),
            scheduled_at: None,
            schedule: None,
            due_at: chrono::Utc::now(),
        };
        NewAttemptCall {
            contact_sid: last[0].0.clone(),
            dial: 3,
            communication: new,
        }
    };
    let attempt = |sid: &str| NewAttempt {
        sid: sid.into(),
        tenant_sid: a.f.tenant_sid.clone(),
        account_sid: a.f.account_sid.clone(),
        campaign_sid: c.clone(),
        scheduled_at: chrono::Utc::now(),
        delayed: false,
        batch_sid: "bat_race".into(),
    };
    s.store
        .legacy_attempt_create(&attempt("att_one"), &[call("com_one")])
        .await
        .unwrap();
    let r = s
        .store
        .legacy_attempt_create(&attempt("att_two"), &[call("com_two")])
        .await;
    assert!(matches!(r, Err(StoreError::Unique)), "{r:?}");
    assert!(
        s.store
            .communication_get("com_two")
            .await
            .unwrap()
            .is_none()
    );
}

both_backends!(redial);
