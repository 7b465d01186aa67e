//! What a finished call left in storage, per communication: the saved history (typed),
//! the recording and speech turns (proxy or signed link) and the 404s of each, on SQLite
//! and PostgreSQL. Every served object carries an allow-listed type, `nosniff`, a
//! sandboxing CSP and `Content-Disposition: attachment`.
//! The calls themselves run end to end in the `tests` crate, which reads the same routes.

use bytes::Bytes;
use callsmith_control::{
    both_backends,
    testing::{TestServer, minimal_snapshot},
};
use callsmith_domain::{
    communication::{
        CommunicationStatus,
        history::{CallHistory, Direction, Heard, TurnLog},
    },
    objects::{CallObjects, bucket_reference},
    store::communications::{CallFinish, CallWrite, Claim, ClaimScope},
};
use chrono::Utc;
use serde_json::json;

/// Asserts the headers every object download carries.
#[track_caller]
fn assert_download(h: &reqwest::header::HeaderMap, content_type: &str, filename: &str) {
    assert_eq!(h["content-type"], content_type, "{h:?}");
    assert_eq!(h["x-content-type-options"], "nosniff", "{h:?}");
    assert_eq!(
        h["content-security-policy"], "sandbox; default-src 'none'; frame-ancestors 'none'",
        "{h:?}"
    );
    assert_eq!(
        h["content-disposition"],
        format!("attachment; filename=\"{filename}\""),
        "{h:?}"
    );
}

/// A history as the engine writes it.
fn history(id: &str) -> CallHistory {
    let now = Utc::now();
    CallHistory {
        communication_id: id.into(),
        direction: Direction::Outbound,
        recipient: "+15550001".into(),
        from_number: "+4911".into(),
        call_id: "abc@127.0.0.1".into(),
        answered_at: now,
        ended_at: now,
        duration_ms: 1200,
        end: callsmith_scenarios::history::EndReason::End {
            brick_id: "e".into(),
        },
        forced_end: None,
        hangup: None,
        goals: vec!["reached".into()],
        variables: [("name".to_string(), "Ann".to_string())].into(),
        steps: 2,
        trace: Vec::new(),
        prompts: Vec::new(),
        turns: vec![TurnLog {
            index: 1,
            heard: Heard::Dtmf,
            dtmf: Some("12".into()),
            ..Default::default()
        }],
        errors: Vec::new(),
        transfers: Vec::new(),
        media: None,
    }
}

async fn history_and_recording(s: TestServer) {
    let f = s.fixture().await;
    let sid = s.published_scenario(&f, &minimal_snapshot("t")).await;
    let tok = &f.admin_session;
    let r = s
        .post("/v1/number")
        .bearer(tok)
        .json(&json!({"identifier": "+4911"}))
        .send()
        .await;
    r.expect(201);
    let dispatch = |recipient: &str| {
        s.post("/v1/communication/-/dispatch")
            .bearer(&f.account_key)
            .json(&json!({"recipient": recipient, "scenario_sid": sid}))
    };
    let answered = dispatch("+15550001").send().await;
    answered.expect(201);
    let id = answered.str("id");
    let unanswered = dispatch("+15550002").send().await;
    unanswered.expect(201);
    let other_id = unanswered.str("id");

    // Nothing saved yet: 404 with the object's name.
    s.get(&format!("/v1/communication/{id}/history"))
        .bearer(&f.account_key)
        .send()
        .await
        .expect_error(404, "history_not_found");
    let why = recording_404(&s, &f.account_key, &id).await;
    assert!(why.contains("has not ended"), "{why}");

    // The engine's end of an answered call: history and recording stored, end written.
    let claim = Claim {
        token: "tok".into(),
        by: "test".into(),
        until: Utc::now() + chrono::Duration::seconds(60),
    };
    let claimed = s
        .store
        .communication_claim_due(&claim, &ClaimScope::TestCalls, 10)
        .await
        .unwrap();
    assert_eq!(claimed.len(), 2);
    let objects = CallObjects::new(&f.account_sid, &id);
    s.state
        .objects
        .put(
            &objects.history(),
            Bytes::from(serde_json::to_vec(&history(&id)).unwrap()),
            Some("application/json"),
        )
        .await
        .unwrap();
    let wav = Bytes::from_static(b"RIFF....WAVEfmt ");
    s.state
        .objects
        .put(&objects.recording(), wav.clone(), Some("audio/wav"))
        .await
        .unwrap();
    let started = CallWrite::Started {
        sid: id.clone(),
        token: "tok".into(),
        from_number: "+4911".into(),
        trunk: None,
        at: Utc::now(),
    };
    assert!(s.store.communication_apply(started).await.unwrap());
    let mut end = CallFinish::new(CommunicationStatus::Completed);
    end.call_status = Some("answered".into());
    end.history_path = Some(objects.history());
    end.recording_path = Some(objects.recording());
    let finish = CallWrite::Finish {
        sid: id.clone(),
        token: "tok".into(),
        finish: Box::new(end),
        deliveries: None,
        at: Utc::now(),
    };
    assert!(s.store.communication_apply(finish).await.unwrap());

    // The history, typed: what the engine wrote is what the API serves.
    let r = s
        .get(&format!("/v1/communication/{id}/history"))
        .bearer(&f.account_key)
        .send()
        .await;
    r.expect(200);
    assert_download(
        &r.headers,
        "application/json",
        &format!("{id}.history.json"),
    );
    let h: CallHistory = serde_json::from_value(r.body.clone()).expect("a CallHistory");
    assert_eq!(h.communication_id, id);
    assert_eq!(h.goals, ["reached"]);
    assert_eq!(h.turns[0].dtmf.as_deref(), Some("12"));

    // The recording: streamed, or a signed link that serves the same bytes.
    let r = s
        .get(&format!("/v1/communication/{id}/recording"))
        .bearer(&f.account_key)
        .send()
        .await;
    r.expect(200);
    assert_download(&r.headers, "audio/wav", "recording.wav");
    assert_eq!(r.text.as_bytes(), &wav[..]);
    let r = s
        .get(&format!(
            "/v1/communication/{id}/recording?mode=url&expires_in=60"
        ))
        .bearer(&f.account_key)
        .send()
        .await;
    r.expect(200);
    let link = r.str("signed_url");
    let got = reqwest::get(&link).await.unwrap();
    assert_eq!(got.status(), 200, "{link}");
    assert_download(got.headers(), "audio/wav", "recording.wav");
    assert_eq!(got.bytes().await.unwrap(), wav);

    // A listen turn's caller audio: streamed or linked, as a download.
    let turn = objects.speech_turn(1);
    s.state
        .objects
        .put(&turn, wav.clone(), Some("audio/wav"))
        .await
        .unwrap();
    let reference = bucket_reference(&turn);
    let r = s
        .get(&format!(
            "/v1/communication/{id}/speech-recording?path={reference}"
        ))
        .bearer(&f.account_key)
        .send()
        .await;
    r.expect(200);
    assert_download(&r.headers, "audio/wav", "1.wav");
    assert_eq!(r.text.as_bytes(), &wav[..]);
    let r = s
        .get(&format!(
            "/v1/communication/{id}/speech-recording?path={reference}&mode=url"
        ))
        .bearer(&f.account_key)
        .send()
        .await;
    r.expect(200);
    let got = reqwest::get(r.str("signed_url")).await.unwrap();
    assert_eq!(got.status(), 200);
    assert_download(got.headers(), "audio/wav", "1.wav");

    // Bad queries: 400; the other call has neither; another account sees nothing.
    for q in [
        "mode=stream",
        "mode=url&expires_in=0",
        "mode=url&expires_in=604801",
        "x=1",
    ] {
        s.get(&format!("/v1/communication/{id}/recording?{q}"))
            .bearer(&f.account_key)
            .send()
            .await
            .expect(400);
    }
    s.get(&format!("/v1/communication/{other_id}/history"))
        .bearer(&f.account_key)
        .send()
        .await
        .expect_error(404, "history_not_found");
    let why = recording_404(&s, &f.account_key, &other_id).await;
    assert!(why.contains("has not ended"), "{why}");
    let other = s.fixture_named("b").await;
    for what in ["history", "recording"] {
        s.get(&format!("/v1/communication/{id}/{what}"))
            .bearer(&other.account_key)
            .send()
            .await
            .expect_error(404, "communication_not_found");
    }
    s.get(&format!("/v1/communication/{id}/history"))
        .send()
        .await
        .expect(401);
}

/// The message of the 404 `recording_not_found` of communication `id`.
async fn recording_404(s: &TestServer, key: &str, id: &str) -> String {
    let r = s
        .get(&format!("/v1/communication/{id}/recording"))
        .bearer(key)
        .send()
        .await;
    r.expect_error(404, "recording_not_found");
    r.str("message")
}

/// Ends the claimed call `sid`: answered or not, with no recording.
async fn finish(s: &TestServer, sid: &str, answered: bool) {
    let mut end = CallFinish::new(CommunicationStatus::Completed);
    end.call_status = Some(if answered { "answered" } else { "no_answer" }.into());
    end.answered_at = answered.then(Utc::now);
    let finish = CallWrite::Finish {
        sid: sid.to_string(),
        token: "tok".into(),
        finish: Box::new(end),
        deliveries: None,
        at: Utc::now(),
    };
    assert!(s.store.communication_apply(finish).await.unwrap());
}

/// A missing recording's 404 says why: not ended, not answered, no agent, an agent that
/// does not record, or deleted from storage.
async fn a_missing_recording_says_why(s: TestServer) {
    let f = s.fixture().await;
    let sid = s.published_scenario(&f, &minimal_snapshot("t")).await;
    let tok = &f.admin_session;
    let r = s
        .post("/v1/number")
        .bearer(tok)
        .json(&json!({"identifier": "+4911"}))
        .send()
        .await;
    r.expect(201);
    let number = r.str("id");
    let r = s
        .post("/v1/agent")
        .bearer(tok)
        .json(&json!({"gateway_type": "number", "number_sid": number, "scenario_sid": sid, "call_recording": false}))
        .send()
        .await;
    r.expect(201);
    let agent = r.str("id");
    let dispatch = |body: serde_json::Value| {
        s.post("/v1/communication/-/dispatch")
            .bearer(&f.account_key)
            .json(&body)
    };
    let mut ids = Vec::new();
    for body in [
        json!({"recipient": "+15550001", "scenario_sid": sid}),
        json!({"recipient": "+15550002", "scenario_sid": sid}),
        json!({"recipient": "+15550003", "agent_sid": agent}),
    ] {
        let r = dispatch(body).send().await;
        r.expect(201);
        ids.push(r.str("id"));
    }
    let [unanswered, test_call, agent_call] = &ids[..] else {
        unreachable!()
    };
    let claim = Claim {
        token: "tok".into(),
        by: "test".into(),
        until: Utc::now() + chrono::Duration::seconds(60),
    };
    let mut claimed = s
        .store
        .communication_claim_due(&claim, &ClaimScope::TestCalls, 10)
        .await
        .unwrap();
    claimed.extend(
        s.store
            .communication_claim_due(&claim, &ClaimScope::Agent(agent.clone()), 10)
            .await
            .unwrap(),
    );
    assert_eq!(claimed.len(), 3);
    finish(&s, unanswered, false).await;
    finish(&s, test_call, true).await;
    finish(&s, agent_call, true).await;

    let why = recording_404(&s, &f.account_key, unanswered).await;
    assert!(why.contains("was not answered"), "{why}");
    let why = recording_404(&s, &f.account_key, test_call).await;
    assert!(why.contains("has no agent"), "{why}");
    let why = recording_404(&s, &f.account_key, agent_call).await;
    assert!(
        why.contains(&agent) && why.contains("call_recording is off"),
        "{why}"
    );

    // A recording stored, then removed from storage.
    let recorded = dispatch(json!({"recipient": "+15550004", "scenario_sid": sid}))
        .send()
        .await;
    recorded.expect(201);
    let recorded = recorded.str("id");
    s.store
        .communication_claim_due(&claim, &ClaimScope::TestCalls, 10)
        .await
        .unwrap();
    let path = CallObjects::new(&f.account_sid, &recorded).recording();
    let mut end = CallFinish::new(CommunicationStatus::Completed);
    end.answered_at = Some(Utc::now());
    end.recording_path = Some(path.clone());
    let write = CallWrite::Finish {
        sid: recorded.clone(),
        token: "tok".into(),
        finish: Box::new(end),
        deliveries: None,
        at: Utc::now(),
    };
    assert!(s.store.communication_apply(write).await.unwrap());
    let why = recording_404(&s, &f.account_key, &recorded).await;
    assert!(why.contains("deleted"), "{why}");
}

both_backends!(history_and_recording, a_missing_recording_says_why);
