//! Legacy account and campaign routes over HTTP Basic (account_sid:account_token), on SQLite
//! and PostgreSQL: the account record, campaigns as the legacy view of agents (both ways),
//! every GET /v1/campaign parameter in both forms and their precedence, RPC-style errors,
//! authentication failures and cross-account isolation.

use base64::Engine;
use callsmith_control::{
    both_backends,
    testing::{Fixture, TestResponse, TestServer},
};
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

async fn made(s: &TestServer, tok: &str, path: &str, body: Value) -> String {
    let r = s.post(path).bearer(tok).json(&body).send().await;
    r.expect(201);
    r.str("id")
}

async fn get(s: &TestServer, l: &Legacy, path: &str) -> TestResponse {
    s.get(path).header("authorization", &l.auth).send().await
}

async fn create(s: &TestServer, l: &Legacy, body: Value) -> TestResponse {
    s.post("/v1/campaign")
        .header("authorization", &l.auth)
        .json(&body)
        .send()
        .await
}

/// Asserts a legacy error: status, RPC code, a message and a details array.
#[track_caller]
fn rpc_error(r: &TestResponse, status: u16, code: i64) {
    r.expect(status);
    assert_eq!(r.body["code"], code, "{}", r.text);
    assert!(
        r.body["message"].as_str().is_some_and(|m| !m.is_empty()),
        "{}",
        r.text
    );
    assert!(r.body["details"].is_array(), "{}", r.text);
}

fn sids(r: &TestResponse) -> Vec<String> {
    r.body
        .as_array()
        .unwrap_or_else(|| panic!("not an array: {}", r.text))
        .iter()
        .map(|c| c["sid"].as_str().unwrap().to_string())
        .collect()
}

async fn account_record(s: TestServer) {
    let a = legacy(&s, "a").await;
    let b = legacy(&s, "b").await;
    let r = get(&s, &a, &format!("/v1/accounts/{}", a.f.account_sid)).await;
    r.expect(200);
    assert_eq!(r.body["sid"], a.f.account_sid.as_str());
    assert_eq!(r.body["tenant_sid"], a.f.tenant_sid.as_str());
    assert_eq!(r.body["name"], "account a");
    assert_eq!(r.body["email"], "owner-a@example.test");
    assert_eq!(r.body["country"], "de");
    assert_eq!(r.body["region"], "eu");
    assert_eq!(r.body["status"], "active");
    for k in [
        "external_id",
        "timezone",
        "phone",
        "creation_time",
        "update_time",
    ] {
        assert!(r.body[k].is_string(), "{k}: {}", r.text);
    }
    // Another account, or an unknown sid, reads as absent.
    rpc_error(
        &get(&s, &a, &format!("/v1/accounts/{}", b.f.account_sid)).await,
        404,
        5,
    );
    rpc_error(&get(&s, &a, "/v1/accounts/acc_nope").await, 404, 5);
    // Credentials: none, wrong token, not Basic, not base64, a v1 bearer token.
    let path = format!("/v1/accounts/{}", a.f.account_sid);
    let none = s.get(&path).send().await;
    rpc_error(&none, 401, 16);
    assert!(
        none.headers
            .get("www-authenticate")
            .is_some_and(|v| v.to_str().unwrap().starts_with("Basic"))
    );
    for h in [
        basic(&a.f.account_sid, "cs_lt_wrong"),
        basic(&b.f.account_sid, "x"),
        "Basic !!!not-base64".to_string(),
        format!("Bearer {}", a.f.account_key),
    ] {
        rpc_error(
            &s.get(&path).header("authorization", &h).send().await,
            401,
            16,
        );
    }
    // An inactive account's token stops working.
    s.su(
        Method::PATCH,
        &format!("/v1/internal/account/{}", a.f.account_sid),
    )
    .json(&json!({"status": "inactive"}))
    .send()
    .await
    .expect(200);
    rpc_error(&get(&s, &a, &path).await, 401, 16);
}

async fn campaigns_are_agents(s: TestServer) {
    let a = legacy(&s, "a").await;
    let b = legacy(&s, "b").await;
    let tok = a.f.admin_session.clone();
    let scenario = made(&s, &tok, "/v1/scenario", json!({"name": "S"})).await;
    let pool = made(&s, &tok, "/v1/number-pool", json!({"name": "P"})).await;
    made(&s, &tok, "/v1/number", json!({"identifier": "+4911"})).await;

    // Created on the legacy route: a campaign on a number, visible as a v1 agent.
    let r = create(
        &s,
        &a,
        json!({"description": "Spring sale", "scenario_sid": scenario, "number": "+4911"}),
    )
    .await;
    r.expect(200);
    let c1 = r.str("sid");
    assert!(c1.starts_with("agt_"));
    assert_eq!(r.body["account_sid"], a.f.account_sid.as_str());
    assert_eq!(r.body["description"], "Spring sale");
    assert_eq!(r.body["scenario_sid"], scenario.as_str());
    assert_eq!(r.body["number"], "+4911");
    assert_eq!(r.body["pool_sid"], "");
    assert_eq!(r.body["status"], "active");
    assert_eq!(r.body["archived"], false);
    assert!(r.body["creation_time"].is_string() && r.body["update_time"].is_string());
    let agent = s.get(&format!("/v1/agent/{c1}")).bearer(&tok).send().await;
    agent.expect(200);
    assert_eq!(agent.body["gateway_type"], "number");
    assert!(
        agent.body["number_sid"]
            .as_str()
            .unwrap()
            .starts_with("num_")
    );
    assert_eq!(agent.body["scenario_sid"], scenario.as_str());
    assert_eq!(agent.body["calling_schedule"]["strategy"], "always");

    // On a pool, inactive.
    let r = create(
        &s,
        &a,
        json!({"scenario_sid": scenario, "pool_sid": pool, "status": "inactive"}),
    )
    .await;
    r.expect(200);
    let c2 = r.str("sid");
    assert_eq!(r.body["pool_sid"], pool.as_str());
    assert_eq!(r.body["number"], "");
    assert_eq!(r.body["description"], "");
    assert_eq!(r.body["status"], "inactive");

    // An agent created on v1 is a campaign; archiving it on v1 shows as archived.
    let v1 = made(
        &s,
        &tok,
        "/v1/agent",
        json!({"gateway_type": "number_pool", "number_pool_sid": pool, "scenario_sid": scenario}),
    )
    .await;
    s.post(&format!("/v1/agent/{v1}/archive"))
        .bearer(&tok)
        .send()
        .await
        .expect(200);
    let list = get(&s, &a, "/v1/campaign").await;
    list.expect(200);
    assert_eq!(sids(&list), vec![v1.clone(), c2.clone(), c1.clone()]);
    assert_eq!(list.body[0]["archived"], true);
    assert_eq!(list.body[0]["description"], "");

    // Bad input: 400 INVALID_ARGUMENT, with the v1 rule's code as the ErrorInfo reason.
    for body in [
        json!({"scenario_sid": scenario}),
        json!({"scenario_sid": scenario, "number": "+4911", "pool_sid": pool}),
        json!({"scenario_sid": scenario, "number": "+4999"}),
        json!({"scenario_sid": "", "number": "+4911"}),
        json!({"number": "+4911"}),
        json!({"scenario_sid": scenario, "number": "+4911", "colour": "red"}),
        json!({"scenario_sid": scenario, "number": "+4911", "status": "paused"}),
        json!({"scenario_sid": scenario, "number": "+4911", "description": "x".repeat(1001)}),
        json!({"scenario_sid": 7, "number": "+4911"}),
    ] {
        rpc_error(&create(&s, &a, body).await, 400, 3);
    }
    let r = create(
        &s,
        &a,
        json!({"scenario_sid": "scn_nope", "number": "+4911"}),
    )
    .await;
    rpc_error(&r, 400, 3);
    assert_eq!(
        r.body["details"][0]["reason"], "unknown_scenario",
        "{}",
        r.text
    );
    assert_eq!(
        r.body["details"][0]["@type"],
        "type.googleapis.com/google.rpc.ErrorInfo"
    );
    let r = create(
        &s,
        &a,
        json!({"scenario_sid": scenario, "pool_sid": "npl_nope"}),
    )
    .await;
    rpc_error(&r, 400, 3);
    assert_eq!(r.body["details"][0]["reason"], "invalid_gateway");
    let r = s
        .post("/v1/campaign")
        .header("authorization", &a.auth)
        .raw_json("{not json")
        .send()
        .await;
    rpc_error(&r, 400, 3);
    // Another account's scenario is unknown here.
    let other_scenario = made(&s, &b.f.admin_session, "/v1/scenario", json!({"name": "B"})).await;
    rpc_error(
        &create(
            &s,
            &a,
            json!({"scenario_sid": other_scenario, "number": "+4911"}),
        )
        .await,
        400,
        3,
    );
    // Nothing was made by the rejected requests.
    assert_eq!(sids(&get(&s, &a, "/v1/campaign").await).len(), 3);

    // Isolation: b sees none of a's campaigns and cannot delete them.
    assert!(sids(&get(&s, &b, "/v1/campaign").await).is_empty());
    assert!(sids(&get(&s, &b, &format!("/v1/campaign?sid={c1}")).await).is_empty());
    let r = s
        .delete(&format!("/v1/campaign/{c1}"))
        .header("authorization", &b.auth)
        .send()
        .await;
    rpc_error(&r, 404, 5);

    // Authentication failures on every campaign route.
    rpc_error(&s.get("/v1/campaign").send().await, 401, 16);
    rpc_error(
        &s.post("/v1/campaign")
            .json(&json!({"scenario_sid": scenario, "number": "+4911"}))
            .send()
            .await,
        401,
        16,
    );
    rpc_error(
        &s.delete(&format!("/v1/campaign/{c1}"))
            .header("authorization", &basic(&a.f.account_sid, "wrong"))
            .send()
            .await,
        401,
        16,
    );

    // Delete on the legacy route removes the agent; again → 404.
    let r = s
        .delete(&format!("/v1/campaign/{c1}"))
        .header("authorization", &a.auth)
        .send()
        .await;
    r.expect(200);
    assert_eq!(r.body, json!({}));
    s.get(&format!("/v1/agent/{c1}"))
        .bearer(&tok)
        .send()
        .await
        .expect(404);
    rpc_error(
        &s.delete(&format!("/v1/campaign/{c1}"))
            .header("authorization", &a.auth)
            .send()
            .await,
        404,
        5,
    );
    // Delete on v1 removes the campaign (and its description).
    let r = create(
        &s,
        &a,
        json!({"description": "gone soon", "scenario_sid": scenario, "pool_sid": pool}),
    )
    .await;
    let c4 = r.str("sid");
    s.delete(&format!("/v1/agent/{c4}"))
        .bearer(&tok)
        .send()
        .await
        .expect(204);
    assert_eq!(sids(&get(&s, &a, "/v1/campaign").await), vec![v1, c2]);
}

async fn campaign_list_parameters(s: TestServer) {
    let a = legacy(&s, "a").await;
    let tok = a.f.admin_session.clone();
    let s1 = made(&s, &tok, "/v1/scenario", json!({"name": "S1"})).await;
    let s2 = made(&s, &tok, "/v1/scenario", json!({"name": "S2"})).await;
    let pool = made(&s, &tok, "/v1/number-pool", json!({"name": "P"})).await;
    made(&s, &tok, "/v1/number", json!({"identifier": "+4911"})).await;
    made(&s, &tok, "/v1/number", json!({"identifier": "+4933"})).await;
    let mk = |body: Value| {
        let s = &s;
        let a = &a;
        async move {
            let r = create(s, a, body).await;
            r.expect(200);
            r.str("sid")
        }
    };
    let c1 =
        mk(json!({"description": "alpha summer", "scenario_sid": s1, "number": "+4911"})).await;
    let c2 = mk(json!({"description": "beta winter", "scenario_sid": s2, "pool_sid": pool, "status": "inactive"})).await;
    let c3 =
        mk(json!({"description": "gamma summer", "scenario_sid": s1, "number": "+4933"})).await;
    s.post(&format!("/v1/agent/{c3}/archive"))
        .bearer(&tok)
        .send()
        .await
        .expect(200);

    let q = |query: String| {
        let s = &s;
        let a = &a;
        async move {
            let r = get(s, a, &format!("/v1/campaign?{query}")).await;
            r.expect(200);
            sids(&r)
        }
    };
    let v = |x: &[&String]| x.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    // Default: every campaign, archived too, newest first.
    assert_eq!(q(String::new()).await, v(&[&c3, &c2, &c1]));
    // archived, both forms; the structured form wins over the flat one.
    assert_eq!(q("filter.archived=true".into()).await, v(&[&c3]));
    assert_eq!(q("archived=false".into()).await, v(&[&c2, &c1]));
    assert_eq!(q("archived=1".into()).await, v(&[&c3]));
    assert_eq!(
        q("filter.archived=false&archived=true".into()).await,
        v(&[&c2, &c1])
    );
    // sid.
    assert_eq!(q(format!("filter.sid={c1}")).await, v(&[&c1]));
    assert_eq!(q(format!("sid={c2}")).await, v(&[&c2]));
    assert_eq!(q(format!("filter.sid={c1}&sid={c2}")).await, v(&[&c1]));
    // An empty value is no filter.
    assert_eq!(q(format!("filter.sid=&sid={c2}")).await, v(&[&c2]));
    assert_eq!(q("filter.sid=".into()).await, v(&[&c3, &c2, &c1]));
    // scenario_sid.
    assert_eq!(q(format!("filter.scenario_sid={s1}")).await, v(&[&c3, &c1]));
    assert_eq!(q(format!("scenario_sid={s2}")).await, v(&[&c2]));
    // description (exact).
    assert_eq!(
        q("filter.description=beta%20winter".into()).await,
        v(&[&c2])
    );
    assert_eq!(q("description=alpha%20summer".into()).await, v(&[&c1]));
    assert!(q("description=alpha".into()).await.is_empty());
    // number (the identifier; '+' is %2B in a query).
    assert_eq!(q("filter.number=%2B4911".into()).await, v(&[&c1]));
    assert_eq!(q("number=%2B4933".into()).await, v(&[&c3]));
    assert_eq!(
        q("filter.number=%2B4911&number=%2B4933".into()).await,
        v(&[&c1])
    );
    // status, pool_sid (flat only).
    assert_eq!(q("status=inactive".into()).await, v(&[&c2]));
    assert_eq!(q("status=active".into()).await, v(&[&c3, &c1]));
    assert_eq!(q(format!("pool_sid={pool}")).await, v(&[&c2]));
    // Filters combine with AND.
    assert_eq!(
        q("status=active&filter.archived=false".into()).await,
        v(&[&c1])
    );
    assert_eq!(
        q(format!("scenario_sid={s1}&number=%2B4933")).await,
        v(&[&c3])
    );
    // filter_or + filter_query: case-insensitive substring, any listed field.
    assert_eq!(
        q("filter_or=description&filter_query=SUMMER".into()).await,
        v(&[&c3, &c1])
    );
    assert_eq!(
        q("filter_or=number,pool_sid&filter_query=4933".into()).await,
        v(&[&c3])
    );
    assert_eq!(
        q(format!("filter_or=pool_sid&filter_query={}", &pool[4..])).await,
        v(&[&c2])
    );
    assert_eq!(
        q(format!("filter_or=scenario_sid&filter_query={s2}")).await,
        v(&[&c2])
    );
    assert_eq!(
        q(format!("filter_or=sid&filter_query={c1}")).await,
        v(&[&c1])
    );
    // Without filter_or every field is searched; wildcards are literal.
    assert_eq!(q("filter_query=winter".into()).await, v(&[&c2]));
    assert!(q("filter_query=%25".into()).await.is_empty());
    // filter_or alone filters nothing.
    assert_eq!(q("filter_or=description".into()).await.len(), 3);
    // Paging, both forms.
    assert_eq!(q("options.limit=2".into()).await, v(&[&c3, &c2]));
    assert_eq!(q("limit=1&offset=1".into()).await, v(&[&c2]));
    assert_eq!(q("options.offset=2".into()).await, v(&[&c1]));
    assert_eq!(q("options.limit=1&limit=3".into()).await, v(&[&c3]));
    assert_eq!(q("options.offset=1&offset=0".into()).await, v(&[&c2, &c1]));
    assert_eq!(q("limit=0".into()).await.len(), 3);
    assert!(q("offset=3".into()).await.is_empty());
    // order_by: number or name, both forms.
    assert_eq!(q("options.order_by=1".into()).await, v(&[&c1, &c2, &c3]));
    assert_eq!(
        q("order_by=CREATION_TIME_ASC".into()).await,
        v(&[&c1, &c2, &c3])
    );
    assert_eq!(q("order_by=0".into()).await, v(&[&c3, &c2, &c1]));
    assert_eq!(q("order_by=2".into()).await, v(&[&c1, &c2, &c3]));
    assert_eq!(
        q("options.order_by=description_desc".into()).await,
        v(&[&c3, &c2, &c1])
    );
    assert_eq!(
        q("options.order_by=3&order_by=1".into()).await,
        v(&[&c3, &c2, &c1])
    );

    // Malformed values: 400 INVALID_ARGUMENT naming the parameter.
    for (query, names) in [
        ("options.limit=abc", "options.limit"),
        ("limit=501", "limit"),
        ("limit=-1", "limit"),
        ("options.offset=-1", "options.offset"),
        ("offset=x", "offset"),
        ("order_by=9", "order_by"),
        ("options.order_by=name", "options.order_by"),
        ("archived=maybe", "archived"),
        ("filter.archived=yes", "filter.archived"),
        ("status=paused", "status"),
        ("filter_or=bogus&filter_query=x", "filter_or"),
        ("colour=red", "colour"),
        ("sid=a&sid=b", "sid"),
    ] {
        let r = get(&s, &a, &format!("/v1/campaign?{query}")).await;
        rpc_error(&r, 400, 3);
        assert!(
            r.body["message"].as_str().unwrap().contains(names),
            "{query}: {}",
            r.text
        );
    }
}

async fn documented_in_openapi(s: TestServer) {
    let doc = s.get("/openapi.json").send().await;
    doc.expect(200);
    let p = &doc.body["paths"];
    for (path, method, codes) in [
        (
            "/v1/accounts/{sid}",
            "get",
            &["200", "401", "404", "500"][..],
        ),
        ("/v1/campaign", "get", &["200", "400", "401", "500"][..]),
        ("/v1/campaign", "post", &["200", "400", "401", "500"][..]),
        (
            "/v1/campaign/{campaign_id}",
            "delete",
            &["200", "401", "404", "500"][..],
        ),
    ] {
        let op = &p[path][method];
        assert!(op.is_object(), "{method} {path} missing");
        assert_eq!(op["tags"][0], "legacy");
        assert!(op["security"][0]["basic"].is_array(), "{method} {path}");
        for c in codes {
            assert!(op["responses"][*c].is_object(), "{method} {path} lacks {c}");
        }
    }
    let params: Vec<&str> = p["/v1/campaign"]["get"]["parameters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["name"].as_str().unwrap())
        .collect();
    for n in [
        "filter.archived",
        "filter.sid",
        "filter.scenario_sid",
        "filter.description",
        "filter.number",
        "options.limit",
        "options.offset",
        "options.order_by",
        "limit",
        "offset",
        "order_by",
        "archived",
        "sid",
        "scenario_sid",
        "description",
        "number",
        "status",
        "pool_sid",
        "filter_or",
        "filter_query",
    ] {
        assert!(params.contains(&n), "parameter {n} missing: {params:?}");
    }
    for schema in [
        "Campaign",
        "CreateCampaign",
        "LegacyAccountRecord",
        "RpcStatus",
    ] {
        assert!(
            doc.body["components"]["schemas"][schema].is_object(),
            "{schema}"
        );
    }
}

both_backends!(
    account_record,
    campaigns_are_agents,
    campaign_list_parameters
);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openapi_documents_the_legacy_routes() {
    documented_in_openapi(TestServer::start(callsmith_control::testing::TestDb::Sqlite).await)
        .await;
}
