//! The legacy campaign flow over HTTP Basic, on SQLite and PostgreSQL: scenarios, contacts
//! (one, a JSON array, a CSV import), attempts (instant, delayed, canceled), attempt
//! statistics and the communication and contact reports (JSON and CSV), which refuse an
//! attempt over the statistics limit; a campaign's contact limit; every error path answers the RPC status object, and
//! no account reaches another's campaign, contact or attempt.

use base64::Engine;
use callsmith_control::{
    both_backends,
    testing::{Fixture, TestDb, TestResponse, TestServer, minimal_snapshot},
};
use callsmith_domain::store::{
    NewAttempt, NewAttemptCall, NewCommunication, Pool, StoreError, sqlx,
};
use chrono::{DateTime, Duration, Utc};
use reqwest::Method;
use serde_json::{Value, json};

fn basic(user: &str, pass: &str) -> String {
    format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!("{user}:{pass}"))
    )
}

/// An account fixture plus its legacy Basic credential.
struct Legacy {
    f: Fixture,
    auth: String,
}

async fn legacy(s: &TestServer, tag: &str) -> Legacy {
    let f = s.fixture_named(tag).await;
    let r = s
        .su(
            Method::POST,
            &format!("/v1/internal/account/{}/legacy-token", f.account_sid),
        )
        .send()
        .await;
    r.expect(201);
    let auth = basic(&f.account_sid, &r.str("account_token"));
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

async fn delete(s: &TestServer, l: &Legacy, path: &str) -> TestResponse {
    s.delete(path).header("authorization", &l.auth).send().await
}

async fn import(s: &TestServer, l: &Legacy, campaign: &str, csv: &[u8]) -> TestResponse {
    let body = csv.to_vec();
    s.post(&format!("/v1/campaign/{campaign}/contact/import"))
        .header("authorization", &l.auth)
        .header("content-type", "text/csv")
        .map(|r| r.body(body))
        .send()
        .await
}

/// Asserts a legacy error: status, RPC code, a message and a details array; returns the
/// message.
#[track_caller]
fn rpc_error(r: &TestResponse, status: u16, code: i64) -> String {
    r.expect(status);
    assert_eq!(r.body["code"], code, "{}", r.text);
    assert!(r.body["details"].is_array(), "{}", r.text);
    let m = r.body["message"].as_str().unwrap_or_default().to_string();
    assert!(!m.is_empty(), "{}", r.text);
    m
}

fn arr(r: &TestResponse) -> &Vec<Value> {
    r.body
        .as_array()
        .unwrap_or_else(|| panic!("not an array: {}", r.text))
}

fn field(r: &TestResponse, name: &str) -> Vec<String> {
    arr(r)
        .iter()
        .map(|c| c[name].as_str().unwrap_or_default().to_string())
        .collect()
}

fn constructor() -> Value {
    let snapshot: Value = serde_json::from_str(&minimal_snapshot("x")).unwrap();
    snapshot["constructor"].clone()
}

/// A scenario published on the legacy route, a number and a campaign dialling from it.
async fn campaign(s: &TestServer, l: &Legacy, number: &str) -> String {
    let r = post(
        s,
        l,
        "/v1/scenarios",
        json!({"name": "Bot", "constructor": constructor()}),
    )
    .await;
    r.expect(200);
    let scenario = r.str("sid");
    s.post("/v1/number")
        .bearer(&l.f.admin_session)
        .json(&json!({"identifier": number}))
        .send()
        .await
        .expect(201);
    let r = post(
        s,
        l,
        "/v1/campaign",
        json!({"scenario_sid": scenario, "number": number}),
    )
    .await;
    r.expect(200);
    r.str("sid")
}

/// Runs one statement with `binds` (text) on the test database.
async fn sql(s: &TestServer, statement: &str, binds: &[&str]) {
    let statement = sqlx::AssertSqlSafe(statement.to_string());
    match s.store.pool() {
        Pool::Sqlite(p) => {
            let mut q = sqlx::query(statement);
            for b in binds {
                q = q.bind(b.to_string());
            }
            q.execute(p).await.unwrap();
        }
        Pool::Postgres(p) => {
            let mut q = sqlx::query(statement);
            for b in binds {
                q = q.bind(b.to_string());
            }
            q.execute(p).await.unwrap();
        }
    }
}

/// What a finished (or progressing) call wrote to its communication.
struct Call<'a> {
    status: &'a str,
    call_status: Option<&'a str>,
    sip_code: Option<i64>,
    started: Option<DateTime<Utc>>,
    answered: Option<DateTime<Utc>>,
    ended: Option<DateTime<Utc>>,
    duration: i64,
    goals: &'a str,
    variables: &'a str,
    error: Option<&'a str>,
}

impl Default for Call<'_> {
    fn default() -> Self {
        Call {
            status: "completed",
            call_status: None,
            sip_code: None,
            started: None,
            answered: None,
            ended: None,
            duration: 0,
            goals: "[]",
            variables: "{}",
            error: None,
        }
    }
}

/// Writes `c` to the communication `sid` as the engine would have.
async fn write_call(s: &TestServer, sid: &str, c: Call<'_>) {
    macro_rules! run {
        ($p:expr) => {
            sqlx::query(
                "UPDATE communications SET communication_status = $2, call_status = $3, sip_code = $4, started_at = $5, \
                 answered_at = $6, ended_at = $7, duration = $8, goals = $9, variables = $10, error = $11 WHERE sid = $1",
            )
            .bind(sid)
            .bind(c.status)
            .bind(c.call_status)
            .bind(c.sip_code)
            .bind(c.started)
            .bind(c.answered)
            .bind(c.ended)
            .bind(c.duration)
            .bind(c.goals)
            .bind(c.variables)
            .bind(c.error)
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
    assert_eq!(n, 1, "no communication {sid}");
}

async fn scenarios(s: TestServer) {
    let a = legacy(&s, "a").await;
    let b = legacy(&s, "b").await;
    let r = post(
        &s,
        &a,
        "/v1/scenarios",
        json!({"name": " Greeter ", "description": "says hi", "constructor": constructor()}),
    )
    .await;
    r.expect(200);
    let sid = r.str("sid");
    assert!(sid.starts_with("scn_"));
    assert_eq!(r.body["account_sid"], a.f.account_sid.as_str());
    assert_eq!(r.body["name"], "Greeter");
    assert_eq!(r.body["description"], "says hi");
    assert_eq!(r.body["version"], 1);
    assert!(r.body["creation_time"].is_string() && r.body["update_time"].is_string());
    // The same scenario on the v1 routes, published.
    let v1 = s
        .get(&format!("/v1/scenario/{sid}"))
        .bearer(&a.f.admin_session)
        .send()
        .await;
    v1.expect(200);
    assert_eq!(v1.body["latest_version"], 1);
    // A v1 scenario without a publish is listed with version 0.
    let draft = s
        .post("/v1/scenario")
        .bearer(&a.f.admin_session)
        .json(&json!({"name": "Draft only"}))
        .send()
        .await;
    draft.expect(201);
    let draft = draft.str("id");
    let list = get(&s, &a, "/v1/scenarios").await;
    list.expect(200);
    assert_eq!(field(&list, "sid"), [draft.clone(), sid.clone()]);
    assert_eq!(arr(&list)[0]["version"], 0);
    assert_eq!(
        field(
            &get(&s, &a, "/v1/scenarios?filter_query=greet").await,
            "sid"
        ),
        [sid.as_str()]
    );
    assert_eq!(
        field(
            &get(&s, &a, "/v1/scenarios?options.limit=1&offset=1").await,
            "sid"
        ),
        [sid.as_str()]
    );
    let one = get(&s, &a, &format!("/v1/scenarios/{sid}")).await;
    one.expect(200);
    assert_eq!(one.body, r.body);

    // Invalid content: 400 listing the SCN entries, and nothing is kept.
    let bad = post(
        &s,
        &a,
        "/v1/scenarios",
        json!({"name": "Broken", "constructor": {"bricks": {"end": {"v1": [{"id": "e", "description": "", "properties": {}, "outputs": []}]}}}}),
    )
    .await;
    let m = rpc_error(&bad, 400, 3);
    assert!(m.contains("SCN"), "{m}");
    assert_eq!(bad.body["details"][0]["reason"], "scenario_invalid");
    // Bad name, unknown field, missing constructor, malformed JSON.
    for body in [
        json!({"name": "a\u{7}b", "constructor": constructor()}),
        json!({"name": "X", "constructor": constructor(), "colour": 1}),
        json!({"name": "X"}),
    ] {
        rpc_error(&post(&s, &a, "/v1/scenarios", body).await, 400, 3);
    }
    let r = s
        .post("/v1/scenarios")
        .header("authorization", &a.auth)
        .raw_json("{nope")
        .send()
        .await;
    rpc_error(&r, 400, 3);
    assert_eq!(arr(&get(&s, &a, "/v1/scenarios").await).len(), 2);
    for q in ["limit=501", "offset=-1", "limit=x", "colour=red"] {
        rpc_error(&get(&s, &a, &format!("/v1/scenarios?{q}")).await, 400, 3);
    }

    // Another account's scenario reads as absent; so does an unknown one.
    rpc_error(&get(&s, &b, &format!("/v1/scenarios/{sid}")).await, 404, 5);
    rpc_error(&get(&s, &a, "/v1/scenarios/scn_nope").await, 404, 5);
    assert!(arr(&get(&s, &b, "/v1/scenarios").await).is_empty());
    // Credentials.
    rpc_error(&s.get("/v1/scenarios").send().await, 401, 16);
    rpc_error(
        &s.post("/v1/scenarios")
            .header("authorization", &basic(&a.f.account_sid, "wrong"))
            .json(&json!({"name": "X", "constructor": constructor()}))
            .send()
            .await,
        401,
        16,
    );
}

async fn contacts(s: TestServer) {
    let a = legacy(&s, "a").await;
    let b = legacy(&s, "b").await;
    let c = campaign(&s, &a, "+4911").await;
    let other = campaign(&s, &b, "+4922").await;
    let path = format!("/v1/campaign/{c}/contact");

    // One contact: separators dropped, variables kept.
    let r = post(
        &s,
        &a,
        &path,
        json!({"phone": "+49 (30) 123-45", "variables": {"name": "Ann", "age": 41, "vip": true}}),
    )
    .await;
    r.expect(200);
    let ann = r.str("sid");
    assert!(ann.starts_with("cnt_"));
    assert_eq!(r.body["campaign_sid"], c.as_str());
    assert_eq!(r.body["phone"], "+493012345");
    assert_eq!(
        r.body["variables"],
        json!({"name": "Ann", "age": 41, "vip": true})
    );
    assert_eq!(r.body["attempt_sid"], "");
    assert_eq!(r.body["communication_sid"], "");
    let r = post(&s, &a, &path, json!({"phone": "4912"})).await;
    r.expect(200);
    assert_eq!(r.body["variables"], json!({}));

    // Bad single contacts.
    let m = rpc_error(&post(&s, &a, &path, json!({"phone": "12"})).await, 400, 3);
    assert!(m.starts_with("phone: "), "{m}");
    let r = post(&s, &a, &path, json!({"phone": "+49abc"})).await;
    let m = rpc_error(&r, 400, 3);
    assert!(m.contains("\"+49abc\""), "{m}");
    assert_eq!(r.body["details"][0]["reason"], "invalid_recipient");
    let m = rpc_error(
        &post(
            &s,
            &a,
            &path,
            json!({"phone": "4913", "variables": {"x": {"y": 1}}}),
        )
        .await,
        400,
        3,
    );
    assert!(m.starts_with("variables.x: "), "{m}");
    for body in [
        json!({"phone": "4913", "variables": [1]}),
        json!({"phone": "4913", "colour": "red"}),
        json!({"variables": {}}),
        json!({"phone": 4913}),
    ] {
        rpc_error(&post(&s, &a, &path, body).await, 400, 3);
    }

    // A JSON array: all or none; the message names the item.
    let batch = format!("{path}/batch");
    let r = post(
        &s,
        &a,
        &batch,
        json!([{"phone": "+4920"}, {"phone": "+4921", "variables": {"k": "v"}}]),
    )
    .await;
    r.expect(200);
    assert_eq!(field(&r, "phone"), ["+4920", "+4921"]);
    assert_eq!(arr(&r)[1]["variables"], json!({"k": "v"}));
    let m = rpc_error(
        &post(&s, &a, &batch, json!([{"phone": "+4923"}, {"phone": "x"}])).await,
        400,
        3,
    );
    assert!(m.starts_with("[1]: phone: "), "{m}");
    let m = rpc_error(
        &post(
            &s,
            &a,
            &batch,
            json!([{"phone": "+4923", "variables": {"a": [1]}}]),
        )
        .await,
        400,
        3,
    );
    assert!(m.starts_with("[0]: variables.a: "), "{m}");
    rpc_error(&post(&s, &a, &batch, json!([])).await, 400, 3);
    rpc_error(
        &post(&s, &a, &batch, json!({"phone": "+4923"})).await,
        400,
        3,
    );
    let too_many: Vec<Value> = (0..10_001).map(|_| json!({"phone": "+4923"})).collect();
    rpc_error(&post(&s, &a, &batch, Value::Array(too_many)).await, 400, 3);
    assert_eq!(arr(&get(&s, &a, &path).await).len(), 4);

    // CSV import: phone plus variable columns.
    let r = import(
        &s,
        &a,
        &c,
        b"\xef\xbb\xbfname,phone,city\r\nBob,+4930 1,\"Berlin, Mitte\"\r\n\"Eve \"\"E\"\"\",4931,\n",
    )
    .await;
    r.expect(200);
    assert_eq!(field(&r, "phone"), ["+49301", "4931"]);
    assert_eq!(
        arr(&r)[0]["variables"],
        json!({"name": "Bob", "city": "Berlin, Mitte"})
    );
    assert_eq!(
        arr(&r)[1]["variables"],
        json!({"name": "Eve \"E\"", "city": ""})
    );
    let bad: [(&[u8], &str); 8] = [
        (b"name\nBob\n", "row 1: no phone column"),
        (
            b"phone,a,a\n1234,x,y\n",
            "row 1: column 3: \"a\" named twice",
        ),
        (b"phone\n", "no contacts given"),
        (b"", "row 1: a header row"),
        (
            b"phone,name\n4932,A\n4933\n",
            "row 3: 1 fields, the header has 2",
        ),
        (b"phone\n4932\nnope\n", "row 3: phone: "),
        (b"phone\n\"4932\n", "row 2: unterminated quoted field"),
        (b"phone\n\xff\xfe\n", "body: not UTF-8"),
    ];
    for (csv, expected) in bad {
        let m = rpc_error(&import(&s, &a, &c, csv).await, 400, 3);
        assert!(m.starts_with(expected), "{expected}: {m}");
    }
    // Nothing was added by the rejected requests.
    let all = get(&s, &a, &path).await;
    all.expect(200);
    assert_eq!(
        field(&all, "phone"),
        ["+493012345", "4912", "+4920", "+4921", "+49301", "4931"]
    );

    // Paging and filters, in both forms.
    assert_eq!(
        field(
            &get(&s, &a, &format!("{path}?limit=2&offset=1")).await,
            "phone"
        ),
        ["4912", "+4920"]
    );
    assert_eq!(
        field(
            &get(&s, &a, &format!("{path}?options.limit=1&limit=3")).await,
            "phone"
        ),
        ["+493012345"]
    );
    assert_eq!(
        field(
            &get(&s, &a, &format!("{path}?phone=%2B4921")).await,
            "phone"
        ),
        ["+4921"]
    );
    assert_eq!(
        field(
            &get(&s, &a, &format!("{path}?filter.phone=4912&phone=%2B4921")).await,
            "phone"
        ),
        ["4912"]
    );
    for q in [
        "limit=501",
        "options.offset=-2",
        "colour=red",
        "limit=1&limit=2",
    ] {
        rpc_error(&get(&s, &a, &format!("{path}?{q}")).await, 400, 3);
    }

    // Delete, then again → 404.
    let r = delete(&s, &a, &format!("{path}/{ann}")).await;
    r.expect(200);
    assert_eq!(r.body, json!({}));
    rpc_error(&delete(&s, &a, &format!("{path}/{ann}")).await, 404, 5);
    assert_eq!(arr(&get(&s, &a, &path).await).len(), 5);

    // Unknown campaign, another account's campaign, a contact of another campaign.
    let bob = field(&get(&s, &a, &format!("{path}?phone=%2B49301")).await, "sid").remove(0);
    for campaign in ["agt_nope", other.as_str()] {
        let p = format!("/v1/campaign/{campaign}/contact");
        rpc_error(&get(&s, &a, &p).await, 404, 5);
        rpc_error(&post(&s, &a, &p, json!({"phone": "+4940"})).await, 404, 5);
        rpc_error(
            &post(&s, &a, &format!("{p}/batch"), json!([{"phone": "+4940"}])).await,
            404,
            5,
        );
        rpc_error(&import(&s, &a, campaign, b"phone\n+4940\n").await, 404, 5);
        rpc_error(&delete(&s, &a, &format!("{p}/{bob}")).await, 404, 5);
    }
    // b cannot reach a's campaign or contact from anywhere.
    rpc_error(&get(&s, &b, &path).await, 404, 5);
    rpc_error(
        &post(&s, &b, &path, json!({"phone": "+4940"})).await,
        404,
        5,
    );
    rpc_error(&import(&s, &b, &c, b"phone\n+4940\n").await, 404, 5);
    rpc_error(&delete(&s, &b, &format!("{path}/{bob}")).await, 404, 5);
    rpc_error(
        &delete(&s, &b, &format!("/v1/campaign/{other}/contact/{bob}")).await,
        404,
        5,
    );
    assert_eq!(arr(&get(&s, &a, &path).await).len(), 5);
    assert!(arr(&get(&s, &b, &format!("/v1/campaign/{other}/contact")).await).is_empty());
    // Credentials.
    rpc_error(&s.get(&path).send().await, 401, 16);
    rpc_error(&s.post(&format!("{path}/import")).send().await, 401, 16);
    // Deleting the campaign deletes its contacts.
    delete(&s, &a, &format!("/v1/campaign/{c}"))
        .await
        .expect(200);
    let left = s
        .store
        .legacy_contact_list(&a.f.account_sid, &c, None, 100, 0)
        .await
        .unwrap();
    assert!(left.is_empty());
}

/// The communications of the account's agent `agent`, oldest first.
async fn communications(s: &TestServer, l: &Legacy, agent: &str) -> Vec<Value> {
    let r = s
        .get(&format!("/v1/communication?agent_sid={agent}"))
        .bearer(&l.f.admin_session)
        .send()
        .await;
    r.expect(200);
    let mut items = r.body["items"].as_array().unwrap().clone();
    items.reverse();
    items
}

async fn attempts(s: TestServer) {
    let a = legacy(&s, "a").await;
    let b = legacy(&s, "b").await;
    let c = campaign(&s, &a, "+4911").await;
    let contacts = format!("/v1/campaign/{c}/contact");
    let attempts = format!("/v1/campaign/{c}/attempt");
    post(
        &s,
        &a,
        &format!("{contacts}/batch"),
        json!([{"phone": "+4920", "variables": {"name": "Ann", "n": 1}}, {"phone": "+4921"}, {"phone": "+4922"}]),
    )
    .await
    .expect(200);

    // An instant attempt dials every contact through the campaign's agent.
    let r = post(&s, &a, &attempts, json!({})).await;
    r.expect(200);
    let first = r.str("sid");
    assert!(first.starts_with("att_"));
    assert_eq!(r.body["campaign_sid"], c.as_str());
    assert_eq!(r.body["status"], "running");
    assert_eq!(r.body["delayed"], false);
    assert_eq!(r.body["contact_count"], 3);
    let calls = communications(&s, &a, &c).await;
    assert_eq!(calls.len(), 3);
    let recipients: Vec<&str> = calls
        .iter()
        .map(|c| c["recipient"].as_str().unwrap())
        .collect();
    assert_eq!(recipients, ["+4920", "+4921", "+4922"]);
    assert_eq!(calls[0]["data"], json!({"name": "Ann", "n": 1}));
    assert_eq!(calls[0]["from_number"], "+4911");
    assert_eq!(calls[0]["version"], 1);
    assert!(calls.iter().all(|c| c["communication_status"] == "new"));
    // The contacts name the attempt and their communication.
    let listed = get(&s, &a, &contacts).await;
    assert!(field(&listed, "attempt_sid").iter().all(|x| *x == first));
    let mut made: Vec<String> = field(&listed, "communication_sid");
    made.sort();
    let mut ids: Vec<String> = calls
        .iter()
        .map(|c| c["id"].as_str().unwrap().to_string())
        .collect();
    ids.sort();
    assert_eq!(made, ids);

    // Nothing left to dial.
    let m = rpc_error(&post(&s, &a, &attempts, json!({})).await, 400, 9);
    assert!(m.starts_with("no contact to dial"), "{m}");

    // A delayed attempt takes only the contacts added since.
    post(
        &s,
        &a,
        &format!("{contacts}/batch"),
        json!([{"phone": "+4930"}, {"phone": "+4931"}]),
    )
    .await
    .expect(200);
    for at in [Utc::now() - Duration::seconds(5), Utc::now()] {
        let m = rpc_error(
            &post(&s, &a, &attempts, json!({"scheduled_at": at.to_rfc3339()})).await,
            400,
            3,
        );
        assert!(m.starts_with("scheduled_at: "), "{m}");
    }
    for body in [
        json!({"scheduled_at": "tomorrow"}),
        json!({"when": "now"}),
        json!("now"),
    ] {
        rpc_error(&post(&s, &a, &attempts, body).await, 400, 3);
    }
    let at = Utc::now() + Duration::hours(2);
    let r = post(&s, &a, &attempts, json!({"scheduled_at": at.to_rfc3339()})).await;
    r.expect(200);
    let delayed = r.str("sid");
    assert_eq!(r.body["status"], "scheduled");
    assert_eq!(r.body["delayed"], true);
    assert_eq!(r.body["contact_count"], 2);
    let scheduled: DateTime<Utc> = r.str("scheduled_at").parse().unwrap();
    assert!((scheduled - at).num_milliseconds().abs() < 1);
    let calls = communications(&s, &a, &c).await;
    assert_eq!(calls.len(), 5);
    for call in &calls[3..] {
        let due: DateTime<Utc> = call["due_at"].as_str().unwrap().parse().unwrap();
        assert!((due - at).num_milliseconds().abs() < 1, "{call}");
        assert!(call["scheduled_at"].is_string());
    }

    // List (newest first) and get.
    let list = get(&s, &a, &attempts).await;
    list.expect(200);
    assert_eq!(field(&list, "sid"), [delayed.clone(), first.clone()]);
    assert_eq!(
        field(
            &get(&s, &a, &format!("{attempts}?limit=1&offset=1")).await,
            "sid"
        ),
        [first.as_str()]
    );
    rpc_error(&get(&s, &a, &format!("{attempts}?limit=-1")).await, 400, 3);
    let one = get(&s, &a, &format!("{attempts}/{first}")).await;
    one.expect(200);
    assert_eq!(one.body["contact_count"], 3);

    // Cancel the delayed attempt: its calls end canceled; again → 409.
    let r = post(&s, &a, &format!("{attempts}/{delayed}/cancel"), json!({})).await;
    r.expect(200);
    assert_eq!(r.body["status"], "canceled");
    let calls = communications(&s, &a, &c).await;
    assert!(
        calls[3..]
            .iter()
            .all(|c| c["communication_status"] == "canceled")
    );
    assert!(calls[3..].iter().all(|c| c["ended_at"].is_string()));
    assert!(
        calls[..3]
            .iter()
            .all(|c| c["communication_status"] == "new")
    );
    let m = rpc_error(
        &post(&s, &a, &format!("{attempts}/{delayed}/cancel"), json!({})).await,
        409,
        10,
    );
    assert!(m.contains("canceled already"), "{m}");
    // Its contacts stay dialled: no new attempt takes them.
    rpc_error(&post(&s, &a, &attempts, json!({})).await, 400, 9);

    // Cancel the running attempt: a call a dialer claimed runs on, the others end.
    let dialing = calls[0]["id"].as_str().unwrap();
    sql(
        &s,
        "UPDATE communications SET communication_status = 'dialing' WHERE sid = $1",
        &[dialing],
    )
    .await;
    let r = post(&s, &a, &format!("{attempts}/{first}/cancel"), json!({})).await;
    r.expect(200);
    assert_eq!(r.body["status"], "canceled");
    let calls = communications(&s, &a, &c).await;
    let statuses: Vec<&str> = calls[..3]
        .iter()
        .map(|c| c["communication_status"].as_str().unwrap())
        .collect();
    assert_eq!(statuses, ["dialing", "canceled", "canceled"]);

    // A completed attempt cannot be canceled.
    post(&s, &a, &contacts, json!({"phone": "+4940"}))
        .await
        .expect(200);
    let done = post(&s, &a, &attempts, json!({})).await.str("sid");
    let call = communications(&s, &a, &c).await[5]["id"]
        .as_str()
        .unwrap()
        .to_string();
    write_call(&s, &call, Call::default()).await;
    let r = get(&s, &a, &format!("{attempts}/{done}")).await;
    assert_eq!(r.body["status"], "completed");
    let m = rpc_error(
        &post(&s, &a, &format!("{attempts}/{done}/cancel"), json!({})).await,
        409,
        10,
    );
    assert!(m.contains("completed"), "{m}");

    // Unknown attempt; an attempt under another campaign of the account.
    rpc_error(&get(&s, &a, &format!("{attempts}/att_nope")).await, 404, 5);
    rpc_error(
        &post(&s, &a, &format!("{attempts}/att_nope/cancel"), json!({})).await,
        404,
        5,
    );
    let c2 = campaign(&s, &a, "+4912").await;
    rpc_error(
        &get(&s, &a, &format!("/v1/campaign/{c2}/attempt/{first}")).await,
        404,
        5,
    );
    // A campaign without contacts has nothing to dial.
    rpc_error(
        &post(&s, &a, &format!("/v1/campaign/{c2}/attempt"), json!({})).await,
        400,
        9,
    );

    // An archived campaign never dials.
    post(
        &s,
        &a,
        &format!("/v1/campaign/{c2}/contact"),
        json!({"phone": "+4950"}),
    )
    .await
    .expect(200);
    s.post(&format!("/v1/agent/{c2}/archive"))
        .bearer(&a.f.admin_session)
        .send()
        .await
        .expect(200);
    let m = rpc_error(
        &post(&s, &a, &format!("/v1/campaign/{c2}/attempt"), json!({})).await,
        400,
        9,
    );
    assert!(m.contains("archived"), "{m}");
    // A campaign whose scenario was never published cannot dial.
    let unpublished = s
        .post("/v1/scenario")
        .bearer(&a.f.admin_session)
        .json(&json!({"name": "Draft"}))
        .send()
        .await
        .str("id");
    let c3 = post(
        &s,
        &a,
        "/v1/campaign",
        json!({"scenario_sid": unpublished, "number": "+4912"}),
    )
    .await
    .str("sid");
    post(
        &s,
        &a,
        &format!("/v1/campaign/{c3}/contact"),
        json!({"phone": "+4951"}),
    )
    .await
    .expect(200);
    let r = post(&s, &a, &format!("/v1/campaign/{c3}/attempt"), json!({})).await;
    rpc_error(&r, 400, 3);
    assert_eq!(r.body["details"][0]["reason"], "scenario_not_published");
    assert!(communications(&s, &a, &c3).await.is_empty());

    // b reaches none of a's campaigns or attempts, on any route.
    let bc = campaign(&s, &b, "+4960").await;
    for p in [
        attempts.clone(),
        format!("{attempts}/{first}"),
        format!("/v1/campaign/{bc}/attempt/{first}"),
    ] {
        rpc_error(&get(&s, &b, &p).await, 404, 5);
    }
    rpc_error(&post(&s, &b, &attempts, json!({})).await, 404, 5);
    rpc_error(
        &post(&s, &b, &format!("{attempts}/{done}/cancel"), json!({})).await,
        404,
        5,
    );
    rpc_error(
        &post(
            &s,
            &b,
            &format!("/v1/campaign/{bc}/attempt/{first}/cancel"),
            json!({}),
        )
        .await,
        404,
        5,
    );
    rpc_error(
        &post(&s, &a, "/v1/campaign/agt_nope/attempt", json!({})).await,
        404,
        5,
    );
    rpc_error(&s.get(&attempts).send().await, 401, 16);
    // Deleting the campaign deletes its attempts.
    delete(&s, &a, &format!("/v1/campaign/{c}"))
        .await
        .expect(200);
    rpc_error(&get(&s, &a, &format!("{attempts}/{first}")).await, 404, 5);
}

async fn statistics_and_reports(s: TestServer) {
    let a = legacy(&s, "a").await;
    let b = legacy(&s, "b").await;
    let c = campaign(&s, &a, "+4911").await;
    import(
        &s,
        &a,
        &c,
        b"phone,name,tier\n+4920,Ann,gold\n+4921,Bob,silver\n+4922,Cat,\n+4923,Dan,gold\n+4924,Eve,\n",
    )
    .await
    .expect(200);
    let attempt = post(&s, &a, &format!("/v1/campaign/{c}/attempt"), json!({}))
        .await
        .str("sid");
    let base = format!("/v1/campaign/{c}/attempt/{attempt}");
    let calls = communications(&s, &a, &c).await;
    let id = |i: usize| calls[i]["id"].as_str().unwrap().to_string();
    let t0: DateTime<Utc> = "2030-01-02T03:04:05Z".parse().unwrap();
    let ms = Duration::milliseconds;
    write_call(
        &s,
        &id(0),
        Call {
            call_status: Some("answered"),
            sip_code: Some(200),
            started: Some(t0),
            answered: Some(t0 + ms(1200)),
            ended: Some(t0 + ms(31_200)),
            duration: 30,
            goals: r#"["greeted","sale"]"#,
            variables: r#"{"answer":"yes","score":3}"#,
            ..Call::default()
        },
    )
    .await;
    write_call(
        &s,
        &id(1),
        Call {
            call_status: Some("answered"),
            sip_code: Some(200),
            started: Some(t0),
            answered: Some(t0 + ms(800)),
            ended: Some(t0 + ms(10_800)),
            duration: 10,
            ..Call::default()
        },
    )
    .await;
    write_call(
        &s,
        &id(2),
        Call {
            call_status: Some("busy"),
            sip_code: Some(486),
            started: Some(t0),
            ended: Some(t0 + ms(300)),
            ..Call::default()
        },
    )
    .await;
    write_call(
        &s,
        &id(3),
        Call {
            status: "failed",
            error: Some("no trunk"),
            ..Call::default()
        },
    )
    .await;

    // Statistics equal the rows.
    let r = get(&s, &a, &format!("{base}/statistics")).await;
    r.expect(200);
    let st = &r.body;
    assert_eq!(st["attempt_sid"], attempt.as_str());
    assert_eq!(st["status"], "running");
    assert_eq!(st["total"], 5);
    assert_eq!(
        st["communication_status"],
        json!({"new": 1, "queued": 0, "dialing": 0, "in_progress": 0, "completed": 3, "failed": 1, "canceled": 0, "interrupted": 0})
    );
    assert_eq!(st["call_status"], json!({"answered": 2, "busy": 1}));
    assert_eq!(st["goals"], json!({"greeted": 1, "sale": 1}));
    assert_eq!(st["dialled"], 3);
    assert_eq!(st["answered"], 2);
    assert!((st["answer_rate"].as_f64().unwrap() - 2.0 / 3.0).abs() < 1e-9);
    assert_eq!(
        st["setup_time_ms"],
        json!({"count": 2, "p50": 800, "p95": 1200, "p99": 1200})
    );
    assert_eq!(
        st["duration_seconds"],
        json!({"count": 2, "p50": 10, "p95": 30, "p99": 30})
    );

    // The v1 statistics of the campaign's agent give the same figures.
    let v1 = |query: &str| {
        s.get(&format!("/v1/communication/-/statistics{query}"))
            .bearer(&a.f.account_key)
            .send()
    };
    let r = v1(&format!("?agent_sid={c}")).await;
    r.expect(200);
    let mut same = st.clone();
    let same = same.as_object_mut().unwrap();
    same.remove("attempt_sid");
    same.remove("status");
    assert_eq!(
        same.remove("quality").expect("attempt quality")["calls"],
        0,
        "rows written without a call have no history"
    );
    let mut v1_body = r.body.clone();
    let quality = v1_body
        .as_object_mut()
        .unwrap()
        .remove("quality")
        .expect("v1 statistics carry quality");
    assert_eq!(v1_body, serde_json::Value::Object(same.clone()));
    // These rows were written without a call, so no history was read.
    assert_eq!(quality["calls"], 0);
    assert_eq!(quality["loss_percent"], 0.0);
    // The same set as a page.
    let r = s
        .get(&format!("/v1/communication/-/report.html?agent_sid={c}"))
        .bearer(&a.f.account_key)
        .send()
        .await;
    r.expect(200);
    assert_eq!(
        r.headers.get("content-type").and_then(|v| v.to_str().ok()),
        Some("text/html; charset=utf-8")
    );
    for shown in [
        "<tr><th>communications</th><td>5</td></tr>",
        "<tr><th>answered</th><td>2</td></tr>",
        "<tr><th>answer rate</th><td>66.7 %</td></tr>",
        "<svg",
    ] {
        assert!(r.text.contains(shown), "{shown}: {}", r.text);
    }
    s.get("/v1/communication/-/report.html?direction=up")
        .bearer(&a.f.account_key)
        .send()
        .await
        .expect_error(400, "invalid_query");
    let r = v1(&format!("?agent_sid={c}&direction=outbound")).await;
    r.expect(200);
    assert_eq!(r.body["total"], 5);
    let r = v1(&format!("?agent_sid={c}&direction=inbound")).await;
    r.expect(200);
    assert_eq!(r.body["total"], 0);
    assert_eq!(r.body["answer_rate"], 0.0);
    assert_eq!(
        r.body["setup_time_ms"],
        json!({"count": 0, "p50": 0, "p95": 0, "p99": 0})
    );
    let r = v1("?created_to=2000-01-01T00:00:00Z").await;
    r.expect(200);
    assert_eq!(r.body["total"], 0);
    v1("?direction=sideways")
        .await
        .expect_error(400, "invalid_query");
    v1("?created_from=yesterday")
        .await
        .expect_error(400, "invalid_query");
    // Another account's key sees none of these calls.
    let r = s
        .get(&format!("/v1/communication/-/statistics?agent_sid={c}"))
        .bearer(&b.f.account_key)
        .send()
        .await;
    r.expect(200);
    assert_eq!(r.body["total"], 0);

    // Communication report, JSON.
    let r = get(&s, &a, &format!("{base}/report/communication")).await;
    r.expect(200);
    let rows = arr(&r);
    assert_eq!(rows.len(), 5);
    assert_eq!(rows[0]["communication_sid"], id(0).as_str());
    assert_eq!(rows[0]["phone"], "+4920");
    assert_eq!(rows[0]["communication_status"], "completed");
    assert_eq!(rows[0]["call_status"], "answered");
    assert_eq!(rows[0]["sip_code"], 200);
    assert_eq!(rows[0]["answered"], true);
    assert_eq!(rows[0]["setup_time_ms"], 1200);
    assert_eq!(rows[0]["duration"], 30);
    assert_eq!(rows[0]["goal"], "sale");
    assert_eq!(rows[0]["started_at"], "2030-01-02T03:04:05Z");
    assert_eq!(rows[2]["call_status"], "busy");
    assert_eq!(rows[2]["answered"], false);
    assert_eq!(rows[3]["error"], "no trunk");
    assert_eq!(rows[4]["communication_status"], "new");
    assert_eq!(rows[4]["call_status"], "");
    assert!(rows[4].get("started_at").is_none(), "{}", rows[4]);
    let contact_sids = field(
        &get(&s, &a, &format!("/v1/campaign/{c}/contact")).await,
        "sid",
    );
    assert_eq!(field(&r, "contact_sid"), contact_sids);

    // Communication report, CSV.
    let r = get(&s, &a, &format!("{base}/report/communication?format=csv")).await;
    r.expect(200);
    assert!(
        r.headers["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/csv")
    );
    let lines: Vec<&str> = r.text.split("\r\n").filter(|l| !l.is_empty()).collect();
    assert_eq!(lines.len(), 6);
    assert!(lines[0].starts_with("communication_sid,contact_sid,phone,from_number,communication_status,call_status,sip_code,answered,setup_time_ms,duration,goal"));
    assert!(
        lines[1].starts_with(&format!(
            "{},{},+4920,+4911,completed,answered,200,true,1200,30,sale,",
            id(0),
            contact_sids[0]
        )),
        "{}",
        lines[1]
    );
    assert!(
        lines[1].contains("2030-01-02T03:04:05.000000Z"),
        "{}",
        lines[1]
    );

    // Contact report, JSON and CSV.
    let r = get(&s, &a, &format!("{base}/report/contact")).await;
    r.expect(200);
    let rows = arr(&r);
    assert_eq!(rows.len(), 5);
    assert_eq!(rows[0]["contact_sid"], contact_sids[0].as_str());
    assert_eq!(rows[0]["variables"], json!({"name": "Ann", "tier": "gold"}));
    assert_eq!(rows[0]["result"], json!({"answer": "yes", "score": 3}));
    assert_eq!(rows[0]["answered"], true);
    assert_eq!(rows[0]["goal"], "sale");
    assert_eq!(rows[4]["result"], json!({}));
    let r = get(&s, &a, &format!("{base}/report/contact?format=csv")).await;
    r.expect(200);
    let lines: Vec<&str> = r.text.split("\r\n").filter(|l| !l.is_empty()).collect();
    assert_eq!(
        lines[0],
        "contact_sid,phone,communication_sid,communication_status,call_status,answered,duration,goal,name,tier,result.answer,result.score"
    );
    assert_eq!(
        lines[1],
        format!(
            "{},+4920,{},completed,answered,true,30,sale,Ann,gold,yes,3",
            contact_sids[0],
            id(0)
        )
    );
    assert_eq!(
        lines[3],
        format!(
            "{},+4922,{},completed,busy,false,0,,Cat,,,",
            contact_sids[2],
            id(2)
        )
    );
    // Unknown format or parameter.
    for q in ["format=xml", "format=csv&format=json", "colour=red"] {
        rpc_error(
            &get(&s, &a, &format!("{base}/report/contact?{q}")).await,
            400,
            3,
        );
        rpc_error(
            &get(&s, &a, &format!("{base}/report/communication?{q}")).await,
            400,
            3,
        );
    }
    // A deleted contact keeps its row in the reports and statistics.
    delete(
        &s,
        &a,
        &format!("/v1/campaign/{c}/contact/{}", contact_sids[0]),
    )
    .await
    .expect(200);
    let r = get(&s, &a, &format!("{base}/report/contact")).await;
    assert_eq!(arr(&r)[0]["contact_sid"], contact_sids[0].as_str());
    assert_eq!(
        get(&s, &a, &format!("{base}/statistics")).await.body["total"],
        5
    );

    // The last call ends: the attempt has completed.
    write_call(&s, &id(4), Call::default()).await;
    let st = get(&s, &a, &format!("{base}/statistics")).await;
    assert_eq!(st.body["status"], "completed");
    assert_eq!(st.body["communication_status"]["completed"], 4);

    // Another account, an unknown attempt or campaign: 404 on every route.
    let bc = campaign(&s, &b, "+4930").await;
    for tail in ["statistics", "report/communication", "report/contact"] {
        rpc_error(&get(&s, &b, &format!("{base}/{tail}")).await, 404, 5);
        rpc_error(
            &get(
                &s,
                &b,
                &format!("/v1/campaign/{bc}/attempt/{attempt}/{tail}"),
            )
            .await,
            404,
            5,
        );
        rpc_error(
            &get(&s, &a, &format!("/v1/campaign/{c}/attempt/att_nope/{tail}")).await,
            404,
            5,
        );
        rpc_error(&s.get(&format!("{base}/{tail}")).send().await, 401, 16);
    }
}

/// The report page's headers: a CSP that runs no script and allows the page's one style
/// block by its hash (so the page still renders styled), and `nosniff`.
#[track_caller]
fn assert_report_page(r: &TestResponse) {
    r.expect(200);
    assert_eq!(r.headers["content-type"], "text/html; charset=utf-8");
    assert_eq!(r.headers["x-content-type-options"], "nosniff");
    let csp = r.headers["content-security-policy"].to_str().unwrap();
    assert!(csp.starts_with("default-src 'none'; "), "{csp}");
    assert!(!csp.contains("unsafe"), "{csp}");
    assert!(!csp.contains("script-src"), "no script may run: {csp}");
    let style = r
        .text
        .split_once("<style>")
        .and_then(|(_, rest)| rest.split_once("</style>"))
        .map(|(style, _)| style)
        .expect("a style block");
    use sha2::Digest;
    let hash = base64::engine::general_purpose::STANDARD.encode(sha2::Sha256::digest(style));
    assert!(
        csp.contains(&format!("style-src 'sha256-{hash}'")),
        "{csp} allows the page's style"
    );
    assert_eq!(r.text.matches("<style").count(), 1, "one style block");
    assert!(!r.text.contains(" style="), "no style attributes");
    // The only script element is the JSON data block, which is never executed.
    assert_eq!(
        r.text.matches("<script").count(),
        r.text.matches("<script type=\"application/json\"").count()
    );
}

/// Report CSV cells and headers that a spreadsheet would run as formulas are written
/// with a leading `'`; plain numbers (phone numbers in E.164 among them) are left as they
/// are; JSON reports keep the values as stored. The report pages, legacy and v1, carry
/// a CSP and `nosniff`.
async fn report_cells_cannot_run_as_formulas(s: TestServer) {
    let a = legacy(&s, "a").await;
    let c = campaign(&s, &a, "+4911").await;
    import(
        &s,
        &a,
        &c,
        b"phone,=cmd,@who,-n\n+4920,\"=HYPERLINK(\"\"http://127.0.0.1/x\"\")\",@SUM(A1),-5\n",
    )
    .await
    .expect(200);
    let attempt = post(&s, &a, &format!("/v1/campaign/{c}/attempt"), json!({}))
        .await
        .str("sid");
    let base = format!("/v1/campaign/{c}/attempt/{attempt}");
    let calls = communications(&s, &a, &c).await;
    let id = calls[0]["id"].as_str().unwrap().to_string();
    write_call(
        &s,
        &id,
        Call {
            status: "failed",
            goals: r#"["+goal()"]"#,
            variables: "{\"=r\":\"\\t=1+2\",\"score\":\"-3\"}",
            error: Some("-2+3"),
            ..Call::default()
        },
    )
    .await;
    let r = get(&s, &a, &format!("{base}/report/contact?format=csv")).await;
    r.expect(200);
    let lines: Vec<&str> = r.text.split("\r\n").filter(|l| !l.is_empty()).collect();
    assert_eq!(
        lines[0],
        "contact_sid,phone,communication_sid,communication_status,call_status,answered,duration,goal,'-n,'=cmd,'@who,result.=r,result.score"
    );
    let contact = r.text.lines().nth(1).unwrap().split(',').next().unwrap();
    assert_eq!(
        lines[1],
        format!(
            "{contact},+4920,{id},failed,,false,0,'+goal(),-5,\"'=HYPERLINK(\"\"http://127.0.0.1/x\"\")\",'@SUM(A1),'\t=1+2,-3"
        )
    );
    let r = get(&s, &a, &format!("{base}/report/communication?format=csv")).await;
    r.expect(200);
    let row: Vec<&str> = r.text.split("\r\n").nth(1).unwrap().split(',').collect();
    assert_eq!(
        (row[0], row[2], row[10], row[12]),
        (id.as_str(), "+4920", "'+goal()", "'-2+3"),
        "{row:?}"
    );
    // JSON carries the values as they are.
    let r = get(&s, &a, &format!("{base}/report/contact")).await;
    assert_eq!(
        arr(&r)[0]["variables"]["=cmd"],
        "=HYPERLINK(\"http://127.0.0.1/x\")"
    );
    assert_eq!(arr(&r)[0]["goal"], "+goal()");

    assert_report_page(&get(&s, &a, &format!("{base}/report.html")).await);
    assert_report_page(
        &s.get(&format!("/v1/communication/-/report.html?agent_sid={c}"))
            .bearer(&a.f.account_key)
            .send()
            .await,
    );
}

/// Two attempts racing for one contact: the second write fails as a whole (no attempt, no
/// communication, no link), so a contact is never dialled twice.
async fn a_contact_is_dialled_once(s: TestServer) {
    let a = legacy(&s, "a").await;
    let c = campaign(&s, &a, "+4911").await;
    let contact = post(
        &s,
        &a,
        &format!("/v1/campaign/{c}/contact"),
        json!({"phone": "+4920"}),
    )
    .await
    .str("sid");
    post(&s, &a, &format!("/v1/campaign/{c}/attempt"), json!({}))
        .await
        .expect(200);
    let first = communications(&s, &a, &c).await.remove(0);
    let now = Utc::now();
    let racer = NewAttempt {
        sid: "att_racer".into(),
        tenant_sid: a.f.tenant_sid.clone(),
        account_sid: a.f.account_sid.clone(),
        campaign_sid: c.clone(),
        scheduled_at: now,
        delayed: false,
        batch_sid: "bat_racer".into(),
    };
    let call = NewCommunication {
        sid: "com_racer".into(),
        tenant_sid: a.f.tenant_sid.clone(),
        account_sid: a.f.account_sid.clone(),
        agent_sid: Some(c.clone()),
        scenario_sid: first["scenario_sid"].as_str().unwrap().into(),
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
        due_at: now,
    };
    let r = s
        .store
        .legacy_attempt_create(
            &racer,
            &[NewAttemptCall {
                contact_sid: contact,
                dial: 1,
                communication: call,
            }],
        )
        .await;
    assert!(matches!(r, Err(StoreError::Unique)), "{r:?}");
    assert!(
        s.store
            .communication_get("com_racer")
            .await
            .unwrap()
            .is_none()
    );
    assert_eq!(
        arr(&get(&s, &a, &format!("/v1/campaign/{c}/attempt")).await).len(),
        1
    );
}

/// A hard tenant purge removes the flow's rows with the rest of the subtree.
async fn purge_removes_the_flow(s: TestServer) {
    let a = legacy(&s, "a").await;
    let c = campaign(&s, &a, "+4911").await;
    import(&s, &a, &c, b"phone,name\n+4920,Ann\n+4921,Bob\n")
        .await
        .expect(200);
    post(&s, &a, &format!("/v1/campaign/{c}/attempt"), json!({}))
        .await
        .expect(200);
    let accounts = vec![a.f.account_sid.clone()];
    let before = s
        .store
        .subtree_row_counts(&a.f.tenant_sid, &accounts)
        .await
        .unwrap();
    for table in ["legacy_contacts", "legacy_attempts", "legacy_attempt_calls"] {
        assert!(
            before.iter().any(|(t, n)| t == table && *n > 0),
            "{table}: {before:?}"
        );
    }
    s.su(
        Method::DELETE,
        &format!("/v1/internal/tenant/{}?hard=true", a.f.tenant_sid),
    )
    .send()
    .await
    .expect(204);
    let after = s
        .store
        .subtree_row_counts(&a.f.tenant_sid, &accounts)
        .await
        .unwrap();
    assert!(after.iter().all(|(_, n)| *n == 0), "{after:?}");
}

/// A campaign larger than one INSERT statement's rows (500): its contacts, its attempt's
/// communications and their links to the contacts are all written, each call to its own
/// contact.
async fn a_campaign_larger_than_one_statement_is_written_whole(s: TestServer) {
    let a = legacy(&s, "a").await;
    let c = campaign(&s, &a, "+4911").await;
    const N: usize = 1201;
    let mut csv = String::from("phone,n\n");
    for i in 0..N {
        csv.push_str(&format!("+4920{i:05},{i}\n"));
    }
    let added = import(&s, &a, &c, csv.as_bytes()).await;
    added.expect(200);
    let contacts: std::collections::BTreeMap<String, String> = arr(&added)
        .iter()
        .map(|k| {
            (
                k["sid"].as_str().unwrap().to_string(),
                k["phone"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(contacts.len(), N);
    let attempt = post(&s, &a, &format!("/v1/campaign/{c}/attempt"), json!({})).await;
    attempt.expect(200);
    let base = format!("/v1/campaign/{c}/attempt/{}", attempt.str("sid"));
    let st = get(&s, &a, &format!("{base}/statistics")).await;
    assert_eq!(st.body["total"], N, "{}", st.text);
    let rows = get(&s, &a, &format!("{base}/report/contact")).await;
    rows.expect(200);
    let dialled: std::collections::BTreeMap<String, String> = arr(&rows)
        .iter()
        .map(|r| {
            assert_eq!(
                r["variables"]["n"]
                    .as_str()
                    .map(|n| format!("+4920{:05}", n.parse::<usize>().unwrap())),
                r["phone"].as_str().map(String::from),
                "{r}"
            );
            (
                r["contact_sid"].as_str().unwrap().to_string(),
                r["phone"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        dialled, contacts,
        "every contact dialled once, at its own number"
    );
    let sids: std::collections::BTreeSet<&str> = arr(&rows)
        .iter()
        .map(|r| r["communication_sid"].as_str().unwrap())
        .collect();
    assert_eq!(sids.len(), N, "a communication per contact");
}

both_backends!(
    scenarios,
    contacts,
    attempts,
    statistics_and_reports,
    report_cells_cannot_run_as_formulas,
    a_contact_is_dialled_once,
    purge_removes_the_flow,
    a_campaign_larger_than_one_statement_is_written_whole
);

/// The attempt statistics, the page and both reports read an attempt's calls under the
/// statistics service's limit (a setting, 200,000 by default): an attempt with more calls
/// is 400 INVALID_ARGUMENT with the reason `too_many_communications`, and one at the limit
/// is read whole.
async fn an_attempt_over_the_statistics_limit_is_refused(db: TestDb) {
    let s = TestServer::start_with(db, |settings| settings.statistics_max_communications = 2).await;
    let a = legacy(&s, "a").await;
    let attempt_of = |campaign: String| {
        let (s, a) = (&s, &a);
        async move {
            let sid = post(s, a, &format!("/v1/campaign/{campaign}/attempt"), json!({}))
                .await
                .str("sid");
            format!("/v1/campaign/{campaign}/attempt/{sid}")
        }
    };
    let big = campaign(&s, &a, "+4911").await;
    import(&s, &a, &big, b"phone\n+4920\n+4921\n+4922\n")
        .await
        .expect(200);
    let big = attempt_of(big).await;
    let small = campaign(&s, &a, "+4912").await;
    import(&s, &a, &small, b"phone\n+4930\n+4931\n")
        .await
        .expect(200);
    let small = attempt_of(small).await;
    for path in [
        "statistics",
        "report.html",
        "report/communication",
        "report/communication?format=csv",
        "report/contact",
        "report/contact?format=csv",
    ] {
        let r = get(&s, &a, &format!("{big}/{path}")).await;
        let m = rpc_error(&r, 400, 3);
        assert_eq!(
            m, "the attempt has 3 calls; one request reads at most 2",
            "{path}"
        );
        assert_eq!(
            r.body["details"][0]["reason"], "too_many_communications",
            "{path}: {}",
            r.text
        );
        get(&s, &a, &format!("{small}/{path}")).await.expect(200);
    }
    let st = get(&s, &a, &format!("{small}/statistics")).await;
    assert_eq!(st.body["total"], 2, "{}", st.text);
    let rows = get(&s, &a, &format!("{small}/report/communication")).await;
    assert_eq!(field(&rows, "phone"), ["+4930", "+4931"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_attempt_over_the_statistics_limit_is_refused_sqlite() {
    an_attempt_over_the_statistics_limit_is_refused(TestDb::Sqlite).await
}
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_attempt_over_the_statistics_limit_is_refused_postgres() {
    an_attempt_over_the_statistics_limit_is_refused(TestDb::Postgres).await
}

/// A campaign holds at most its contact limit (a setting, 200,000 by default): an add that
/// would pass it, by one contact, a JSON array or a CSV import, is 400 FAILED_PRECONDITION
/// and adds nothing; another campaign of the account has a limit of its own.
async fn a_campaign_holds_at_most_its_contact_limit(db: TestDb) {
    let s =
        TestServer::start_with(db, |settings| settings.legacy_max_contacts_per_campaign = 3).await;
    assert_eq!(
        TestServer::start(TestDb::Sqlite)
            .await
            .state
            .settings
            .legacy_max_contacts_per_campaign,
        200_000
    );
    let a = legacy(&s, "a").await;
    let c = campaign(&s, &a, "+4911").await;
    let phones = |r: TestResponse| field(&r, "phone");
    let list = format!("/v1/campaign/{c}/contact");
    let batch = format!("/v1/campaign/{c}/contact/batch");
    post(
        &s,
        &a,
        &batch,
        json!([{"phone": "+4920"}, {"phone": "+4921"}]),
    )
    .await
    .expect(200);
    let m = rpc_error(
        &post(
            &s,
            &a,
            &batch,
            json!([{"phone": "+4922"}, {"phone": "+4923"}]),
        )
        .await,
        400,
        9,
    );
    assert_eq!(
        m,
        "a campaign holds at most 3 contacts; with these 2 it would hold 4: put the rest in another campaign"
    );
    let m = rpc_error(&import(&s, &a, &c, b"phone\n+4922\n+4923\n").await, 400, 9);
    assert!(m.contains("it would hold 4"), "{m}");
    assert_eq!(phones(get(&s, &a, &list).await), ["+4920", "+4921"]);
    post(&s, &a, &list, json!({"phone": "+4922"}))
        .await
        .expect(200);
    let m = rpc_error(
        &post(&s, &a, &list, json!({"phone": "+4923"})).await,
        400,
        9,
    );
    assert!(m.contains("with these 1 it would hold 4"), "{m}");
    assert_eq!(
        phones(get(&s, &a, &list).await),
        ["+4920", "+4921", "+4922"]
    );
    // The limit is the campaign's: another campaign of the account fills up on its own.
    let other = campaign(&s, &a, "+4912").await;
    import(&s, &a, &other, b"phone\n+4930\n+4931\n+4932\n")
        .await
        .expect(200);
    // An attempt dials every contact of the full campaign.
    let attempt = post(&s, &a, &format!("/v1/campaign/{c}/attempt"), json!({})).await;
    attempt.expect(200);
    let st = get(
        &s,
        &a,
        &format!("/v1/campaign/{c}/attempt/{}/statistics", attempt.str("sid")),
    )
    .await;
    assert_eq!(st.body["total"], 3, "{}", st.text);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_campaign_holds_at_most_its_contact_limit_sqlite() {
    a_campaign_holds_at_most_its_contact_limit(TestDb::Sqlite).await
}
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_campaign_holds_at_most_its_contact_limit_postgres() {
    a_campaign_holds_at_most_its_contact_limit(TestDb::Postgres).await
}
