//! A dispatch's own `schedule` over real HTTP, on SQLite and PostgreSQL: checked by the
//! agent's `calling_schedule` rules (a bad one is refused in the envelope and nothing is
//! stored), stored on the communication and shown by it, ignored with `scenario_sid`.

use callsmith_control::{
    both_backends,
    testing::{Fixture, TestServer, minimal_snapshot},
};
use serde_json::{Value, json};

const DISPATCH: &str = "/v1/communication/-/dispatch";

/// A published scenario, a number and an agent dialling from it; returns the agent id and
/// the scenario id.
async fn make_agent(s: &TestServer, f: &Fixture) -> (String, String) {
    let scenario = s.published_scenario(f, &minimal_snapshot("bot")).await;
    let n = s
        .post("/v1/number")
        .bearer(&f.account_key)
        .json(&json!({"identifier": "+4930444555", "name": "main"}))
        .send()
        .await;
    n.expect(201);
    let r = s
        .post("/v1/agent")
        .bearer(&f.account_key)
        .json(&json!({"gateway_type": "number", "number_sid": n.str("id"),
            "scenario_sid": scenario, "timezone": "Europe/Berlin"}))
        .send()
        .await;
    r.expect(201);
    (r.str("id"), scenario)
}

async fn communications(s: &TestServer, token: &str) -> i64 {
    let r = s.get("/v1/communication").bearer(token).send().await;
    r.expect(200);
    r.body["total"].as_i64().unwrap()
}

async fn a_dispatch_schedule_is_checked_stored_and_shown(s: TestServer) {
    let f = s.fixture().await;
    let tok = &f.account_key;
    let (agent, scenario) = make_agent(&s, &f).await;
    let dispatch = |schedule: Value| json!({"recipient": "+4915100000101", "agent_sid": agent, "schedule": schedule});

    // What the agent's calling_schedule refuses, a dispatch schedule refuses: 422
    // invalid_schedule naming the part, nothing stored.
    for (bad, part) in [
        (
            json!({"strategy": "weekly", "args": {"mon": [["10:00", "09:00"]]}}),
            "schedule: args.mon[0]",
        ),
        (
            json!({"strategy": "weekly", "args": {"mon": [["09:00", "12:00"], ["11:00", "13:00"]]}}),
            "schedule: args.mon",
        ),
        (json!({"strategy": "weekly", "args": {}}), "schedule: "),
        (json!({"strategy": "hourly"}), "schedule: "),
        (
            json!({"strategy": "always", "args": {"excluded_dates": ["tomorrow"]}}),
            "schedule: args.excluded_dates[0]",
        ),
        (json!({"strategy": "always", "args": [1]}), "schedule: args"),
    ] {
        let r = s
            .post(DISPATCH)
            .bearer(tok)
            .json(&dispatch(bad.clone()))
            .send()
            .await;
        r.expect_error(422, "invalid_schedule");
        let m = r.body["message"].as_str().unwrap();
        assert!(m.starts_with(part), "{bad}: {m}");
    }
    // Not the shape at all: 400 invalid_body (as for the agent).
    for bad in [
        json!("weekly"),
        json!({"args": {}}),
        json!({"strategy": "always", "when": "never"}),
    ] {
        s.post(DISPATCH)
            .bearer(tok)
            .json(&dispatch(bad))
            .send()
            .await
            .expect_error(400, "invalid_body");
    }
    assert_eq!(communications(&s, tok).await, 0, "nothing stored");

    // A good one is stored as sent and shown on the communication.
    let weekly = json!({"strategy": "weekly", "args": {
        "sat": [["10:00", "14:00"]], "excluded_dates": ["2026-12-26"]}});
    let r = s
        .post(DISPATCH)
        .bearer(tok)
        .json(&dispatch(weekly.clone()))
        .send()
        .await;
    r.expect(201);
    assert_eq!(r.body["schedule"], weekly, "{}", r.text);
    assert_eq!(
        r.body["timezone"], "Europe/Berlin",
        "read in the agent's zone"
    );
    let id = r.str("id");
    let g = s
        .get(&format!("/v1/communication/{id}"))
        .bearer(tok)
        .send()
        .await;
    g.expect(200);
    assert_eq!(g.body["schedule"], weekly);
    let row = s.store.communication_get(&id).await.unwrap().unwrap();
    let stored: Value = serde_json::from_str(row.schedule.as_deref().unwrap()).unwrap();
    assert_eq!(stored, weekly);
    assert!(row.dispatch_schedule().is_some(), "it reads back checked");

    // Absent or null: the agent's schedule applies, none is stored.
    for body in [
        json!({"recipient": "+4915100000102", "agent_sid": agent}),
        json!({"recipient": "+4915100000103", "agent_sid": agent, "schedule": null}),
    ] {
        let r = s.post(DISPATCH).bearer(tok).json(&body).send().await;
        r.expect(201);
        assert!(r.body["schedule"].is_null(), "{}", r.text);
    }

    // Ignored with scenario_sid (rule 5): neither checked nor stored.
    s.post("/v1/number")
        .bearer(&f.admin_session)
        .json(&json!({"identifier": "+4930444556"}))
        .send()
        .await
        .expect(201);
    let r = s
        .post(DISPATCH)
        .bearer(tok)
        .json(
            &json!({"recipient": "+4915100000104", "scenario_sid": scenario,
            "schedule": {"strategy": "hourly"}}),
        )
        .send()
        .await;
    r.expect(201);
    assert!(r.body["schedule"].is_null(), "{}", r.text);
    assert_eq!(communications(&s, tok).await, 4);
}
both_backends!(a_dispatch_schedule_is_checked_stored_and_shown);

/// The field's schema is the agent's `calling_schedule` one, and says what it does.
async fn the_dispatch_schedule_is_documented(s: TestServer) {
    let doc = s.get("/openapi.json").send().await;
    doc.expect(200);
    let body = &doc.body["components"]["schemas"]["DispatchBody"]["properties"]["schedule"];
    let text = body.to_string();
    assert!(text.contains("#/components/schemas/Schedule"), "{body}");
    assert!(text.contains("invalid_schedule"), "{body}");
    assert!(text.contains("instead of the agent"), "{body}");
    let comm = &doc.body["components"]["schemas"]["Communication"]["properties"]["schedule"];
    assert!(
        comm.to_string().contains("#/components/schemas/Schedule"),
        "{comm}"
    );
}
both_backends!(the_dispatch_schedule_is_documented);
