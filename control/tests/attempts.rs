//! A communication's attempts on SQLite and PostgreSQL: every end of a dial stores an
//! attempt in the same write; a strategy's retry puts the row back, due later and
//! unclaimed, with no result delivery; the last attempt's end queues the delivery; the
//! API lists the attempts, paged; an in-call opt-out lists the number and ends the
//! communication.

use callsmith_control::{
    both_backends,
    testing::{TestServer, minimal_snapshot},
};
use callsmith_domain::{
    communication::CommunicationStatus,
    store::SOURCE_OPT_OUT,
    store::communications::{CallFinish, CallWrite, Claim, ClaimScope, Deliveries},
    usecases::opt_out_number,
};
use chrono::{Duration, DurationRound, Utc};
use serde_json::json;

fn claim(token: &str) -> Claim {
    Claim {
        token: token.into(),
        by: "test".into(),
        until: Utc::now() + Duration::seconds(60),
    }
}

fn ms(t: chrono::DateTime<Utc>) -> chrono::DateTime<Utc> {
    t.duration_trunc(Duration::milliseconds(1)).unwrap()
}

/// One dial of `sid` under `token`: its INVITE from `from` and its end, in one batch (the
/// batched path on PostgreSQL).
fn dial(sid: &str, token: &str, from: &str, end: CallFinish, d: &Deliveries) -> Vec<CallWrite> {
    let t = Utc::now();
    vec![
        CallWrite::Started {
            sid: sid.into(),
            token: token.into(),
            from_number: from.into(),
            trunk: Some("edge".into()),
            at: t - Duration::seconds(2),
        },
        CallWrite::Finish {
            sid: sid.into(),
            token: token.into(),
            finish: Box::new(end),
            deliveries: Some(Box::new(d.clone())),
            at: t,
        },
    ]
}

async fn a_retry_is_stored_with_its_attempt_and_the_result_follows_the_last(s: TestServer) {
    let f = s.fixture().await;
    let scn = s.published_scenario(&f, &minimal_snapshot("t")).await;
    s.post("/v1/number")
        .bearer(&f.admin_session)
        .json(&json!({"identifier": "+4911"}))
        .send()
        .await
        .expect(201);
    let r = s
        .post("/v1/communication/-/dispatch")
        .bearer(&f.account_key)
        .json(&json!({"recipient": "+15550001", "scenario_sid": scn}))
        .send()
        .await;
    r.expect(201);
    let sid = r.str("id");
    let d = Deliveries {
        tenant_sid: f.tenant_sid.clone(),
        account_sid: f.account_sid.clone(),
        agent_sid: "agt_x".into(),
        urls: vec!["https://a.example/r".into()],
    };
    let rows = s
        .store
        .communication_claim_due(&claim("one"), &ClaimScope::TestCalls, 10)
        .await
        .unwrap();
    assert_eq!(rows.len(), 1);

    // First dial: busy, and the strategy dials again in 2 s.
    let retry_at = Utc::now() + Duration::seconds(2);
    let busy = CallFinish {
        call_status: Some("busy".into()),
        sip_code: Some(486),
        end_reason: Some("not_answered".into()),
        outcome: Some("busy".into()),
        retry_at: Some(retry_at),
        ..CallFinish::new(CommunicationStatus::Completed)
    };
    let changed = s
        .store
        .communications_apply(&dial(&sid, "one", "+4911", busy, &d))
        .await
        .unwrap();
    assert_eq!(changed, vec![true, true]);
    let row = s.store.communication_get(&sid).await.unwrap().unwrap();
    assert_eq!(row.communication_status, CommunicationStatus::Queued);
    assert_eq!(ms(row.due_at), ms(retry_at));
    assert_eq!(row.claim_token, None);
    assert_eq!(row.started_at, None, "the next dial starts afresh");
    assert_eq!(row.sip_code, Some(486), "the row shows its last attempt");
    let (queued, _) = s
        .store
        .result_delivery_list(&f.account_sid, None, 10, 0)
        .await
        .unwrap();
    assert!(queued.is_empty(), "no result before the last attempt");
    // A process that lost its claim writes nothing: no second attempt, no change.
    let stale = CallFinish {
        call_status: Some("busy".into()),
        outcome: Some("busy".into()),
        retry_at: Some(Utc::now()),
        ..CallFinish::new(CommunicationStatus::Completed)
    };
    assert_eq!(
        s.store
            .communications_apply(&dial(&sid, "one", "+4911", stale, &d))
            .await
            .unwrap(),
        vec![false, false]
    );
    // The reconcile of expired claims leaves a row waiting for its retry alone.
    s.store.communications_reconcile().await.unwrap();
    let again = s.store.communication_get(&sid).await.unwrap().unwrap();
    assert_eq!(again.communication_status, CommunicationStatus::Queued);
    assert_eq!(ms(again.due_at), ms(retry_at));
    assert_eq!(
        s.store
            .communication_attempts_all(&sid)
            .await
            .unwrap()
            .len(),
        1
    );
    // Not due yet: no claim takes it.
    assert!(
        s.store
            .communication_claim_due(&claim("early"), &ClaimScope::TestCalls, 10)
            .await
            .unwrap()
            .is_empty()
    );

    // Due: the second dial answers and the strategy is done.
    tokio::time::sleep((retry_at - Utc::now()).to_std().unwrap_or_default()).await;
    let rows = s
        .store
        .communication_claim_due(&claim("two"), &ClaimScope::TestCalls, 10)
        .await
        .unwrap();
    assert_eq!(rows.len(), 1);
    let answered = CallFinish {
        call_status: Some("answered".into()),
        sip_code: Some(200),
        duration: 12,
        amd: Some("human".into()),
        outcome: Some("completed".into()),
        ..CallFinish::new(CommunicationStatus::Completed)
    };
    s.store
        .communications_apply(&dial(&sid, "two", "+4911", answered, &d))
        .await
        .unwrap();
    let row = s.store.communication_get(&sid).await.unwrap().unwrap();
    assert_eq!(row.communication_status, CommunicationStatus::Completed);
    let (queued, total) = s
        .store
        .result_delivery_list(&f.account_sid, None, 10, 0)
        .await
        .unwrap();
    assert_eq!(total, 1, "{queued:?}");

    // The API lists both attempts, oldest first, paged.
    let page = s
        .get(&format!("/v1/communication/{sid}/attempt"))
        .bearer(&f.account_key)
        .send()
        .await;
    page.expect(200);
    assert_eq!(page.body["total"], 2, "{}", page.text);
    let items = page.body["items"].as_array().unwrap();
    assert_eq!(items[0]["n"], 1);
    assert_eq!(items[0]["sip_code"], 486);
    assert_eq!(items[0]["call_status"], "busy");
    assert_eq!(items[0]["outcome"], "busy");
    assert_eq!(items[0]["from_number"], "+4911");
    assert_eq!(items[0]["trunk"], "edge");
    assert!(items[0]["started_at"].is_string());
    assert_eq!(items[1]["n"], 2);
    assert_eq!(items[1]["call_status"], "answered");
    assert_eq!(items[1]["amd"], "human");
    assert_eq!(items[1]["outcome"], "completed");
    let second = s
        .get(&format!("/v1/communication/{sid}/attempt?limit=1&offset=1"))
        .bearer(&f.account_key)
        .send()
        .await;
    second.expect(200);
    assert_eq!(second.body["items"][0]["n"], 2);
    // Another account's communication reads as absent; a bad page is a 400.
    s.get("/v1/communication/com_nope/attempt")
        .bearer(&f.account_key)
        .send()
        .await
        .expect_error(404, "communication_not_found");
    s.get(&format!("/v1/communication/{sid}/attempt?limit=-1"))
        .bearer(&f.account_key)
        .send()
        .await
        .expect(400);
    // The account's dials to the number, for the frequency cap and the sticky caller ID.
    let dials = s
        .store
        .recipient_dials_since(&f.account_sid, "+15550001", Utc::now() - Duration::hours(1))
        .await
        .unwrap();
    assert_eq!(dials.len(), 2);
    assert_eq!(
        s.store
            .recipient_last_from_number(&f.account_sid, "+15550001")
            .await
            .unwrap()
            .as_deref(),
        Some("+4911")
    );
}

/// The route and the attempt's fields are in /openapi.json.
async fn the_attempt_list_is_documented(s: TestServer) {
    let doc = s.get("/openapi.json").send().await;
    doc.expect(200);
    let op = &doc.body["paths"]["/v1/communication/{id}/attempt"]["get"];
    assert!(op["responses"]["200"].is_object(), "{op}");
    assert!(op["responses"]["404"].is_object(), "{op}");
    let props = &doc.body["components"]["schemas"]["CommunicationAttempt"]["properties"];
    for field in [
        "n",
        "started_at",
        "ended_at",
        "from_number",
        "trunk",
        "sip_code",
        "call_status",
        "end_reason",
        "amd",
        "outcome",
    ] {
        assert!(props[field].is_object(), "{field}: {props}");
    }
}

both_backends!(the_attempt_list_is_documented);
both_backends!(a_retry_is_stored_with_its_attempt_and_the_result_follows_the_last);

/// An in-call opt-out as the engine writes it: the recipient is listed with source
/// `opt_out` through the list's own add (the `POST /v1/do-not-call` one), then the end is
/// written with the attempt `opted_out` and no retry: the row is done, its result queued,
/// and a new dispatch to the number is refused. Listing a number twice keeps its entry.
async fn an_opt_out_lists_the_number_and_ends_the_communication(s: TestServer) {
    let f = s.fixture().await;
    let scn = s.published_scenario(&f, &minimal_snapshot("t")).await;
    s.post("/v1/number")
        .bearer(&f.admin_session)
        .json(&json!({"identifier": "+4912"}))
        .send()
        .await
        .expect(201);
    let dispatch = json!({"recipient": "0049 151 5550002", "scenario_sid": scn});
    let r = s
        .post("/v1/communication/-/dispatch")
        .bearer(&f.account_key)
        .json(&dispatch)
        .send()
        .await;
    r.expect(201);
    let sid = r.str("id");
    let rows = s
        .store
        .communication_claim_due(&claim("one"), &ClaimScope::TestCalls, 10)
        .await
        .unwrap();
    assert_eq!(rows.len(), 1);
    let number = opt_out_number(&rows[0].recipient).expect("a phone number");
    assert_eq!(number, "+491515550002");
    let added = s
        .store
        .do_not_call_add(
            &f.tenant_sid,
            &f.account_sid,
            std::slice::from_ref(&number),
            SOURCE_OPT_OUT,
        )
        .await
        .unwrap();
    assert_eq!(added, 1);
    let d = Deliveries {
        tenant_sid: f.tenant_sid.clone(),
        account_sid: f.account_sid.clone(),
        agent_sid: "agt_x".into(),
        urls: vec!["https://a.example/r".into()],
    };
    let opted_out = CallFinish {
        call_status: Some("answered".into()),
        sip_code: Some(200),
        duration: 9,
        variables: r#"{"opt_out":"true"}"#.into(),
        opted_out: true,
        outcome: Some("opted_out".into()),
        ..CallFinish::new(CommunicationStatus::Completed)
    };
    s.store
        .communications_apply(&dial(&sid, "one", "+4912", opted_out, &d))
        .await
        .unwrap();
    let row = s.store.communication_get(&sid).await.unwrap().unwrap();
    assert_eq!(row.communication_status, CommunicationStatus::Completed);
    assert_eq!(row.claim_token, None);
    let attempts = s.store.communication_attempts_all(&sid).await.unwrap();
    assert_eq!(attempts.len(), 1);
    assert_eq!(attempts[0].outcome.as_deref(), Some("opted_out"));
    let (queued, total) = s
        .store
        .result_delivery_list(&f.account_sid, None, 10, 0)
        .await
        .unwrap();
    assert_eq!(total, 1, "the result is delivered: {queued:?}");

    // The entry as the API shows it, and the number refused at the next dispatch.
    let entry = s
        .get("/v1/do-not-call/%2B491515550002")
        .bearer(&f.account_key)
        .send()
        .await;
    entry.expect(200);
    assert_eq!(entry.body["source"], "opt_out", "{}", entry.text);
    s.post("/v1/communication/-/dispatch")
        .bearer(&f.account_key)
        .json(&dispatch)
        .send()
        .await
        .expect_error(422, "recipient_suppressed");
    // A number listed by the API first keeps its entry when its recipient opts out.
    s.post("/v1/do-not-call")
        .bearer(&f.account_key)
        .json(&json!({"number": "+491515550003"}))
        .send()
        .await
        .expect(201);
    let again = s
        .store
        .do_not_call_add(
            &f.tenant_sid,
            &f.account_sid,
            &["+491515550003".to_string()],
            SOURCE_OPT_OUT,
        )
        .await
        .unwrap();
    assert_eq!(again, 0);
    let kept = s
        .store
        .do_not_call_get(&f.account_sid, "+491515550003")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(kept.source, "api");
}

both_backends!(an_opt_out_lists_the_number_and_ends_the_communication);
