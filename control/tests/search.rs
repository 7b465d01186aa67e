//! Text search is case-insensitive for every script, on SQLite and PostgreSQL, on every
//! list route that searches text: GET /v1/number (identifier, name), GET /v1/campaign
//! (filter_or fields) and GET /v1/scenario (name).

use base64::Engine;
use callsmith_control::{
    both_backends,
    testing::{TestResponse, TestServer},
};
use callsmith_domain::store::{Pool, sqlx};
use reqwest::Method;
use serde_json::{Value, json};

/// Names in several scripts, each with upper-case letters beyond ASCII, and the searches
/// (in other cases) that must find exactly that name.
const NAMES: &[(&str, &[&str])] = &[
    ("Zürich Öst", &["öst", "ÖST", "Öst", "zÜrich", "ü"]),
    ("ÉCOLE Normale", &["école", "École", "é", "NORMALE"]),
    ("Αθήνα ΟΔΟΣ", &["οδοσ", "οδος", "ΟδΟς", "ΑΘΉΝΑ", "αθήνα"]),
    ("МОСКВА Центр", &["москва", "Москва", "ЦЕНТР", "центр"]),
    ("plain", &["PLAIN", "lai"]),
];

fn q(term: &str) -> String {
    url::form_urlencoded::byte_serialize(term.as_bytes()).collect()
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

fn field(r: &TestResponse, items: &Value, key: &str) -> Vec<String> {
    sorted(
        items
            .as_array()
            .unwrap_or_else(|| panic!("no items: {}", r.text))
            .iter()
            .map(|i| i[key].as_str().unwrap().to_string())
            .collect(),
    )
}

/// Runs every search of [`NAMES`] through `search`, which answers the names found.
async fn check_every_name<F, Fut>(what: &str, search: F)
where
    F: Fn(String) -> Fut,
    Fut: std::future::Future<Output = Vec<String>>,
{
    for (name, terms) in NAMES {
        for term in *terms {
            assert_eq!(
                search(term.to_string()).await,
                vec![name.to_string()],
                "{what}: {term:?} finds {name:?} only"
            );
        }
    }
    assert!(
        search("ß".into()).await.is_empty(),
        "{what}: no false match"
    );
}

async fn numbers(s: TestServer) {
    let f = s.fixture().await;
    let tok = &f.admin_session;
    for (i, (name, _)) in NAMES.iter().enumerate() {
        s.post("/v1/number")
            .bearer(tok)
            .json(&json!({"identifier": format!("+49300{i}"), "name": name}))
            .send()
            .await
            .expect(201);
    }
    let s = &s;
    for filter_or in ["", "&filter_or=name", "&filter_or=identifier,name"] {
        check_every_name(&format!("/v1/number{filter_or}"), |term| async move {
            let r = s
                .get(&format!("/v1/number?filter_query={}{filter_or}", q(&term)))
                .bearer(tok)
                .send()
                .await;
            r.expect(200);
            assert_eq!(r.body["total"], r.body["items"].as_array().unwrap().len());
            field(&r, &r.body["items"], "name")
        })
        .await;
    }
}

async fn campaigns(s: TestServer) {
    let f = s.fixture().await;
    let tok = &f.admin_session;
    let token = s
        .su(
            Method::POST,
            &format!("/v1/internal/account/{}/legacy-token", f.account_sid),
        )
        .send()
        .await;
    token.expect(201);
    let auth = format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!(
            "{}:{}",
            f.account_sid,
            token.str("account_token")
        ))
    );
    let scenario = s
        .post("/v1/scenario")
        .bearer(tok)
        .json(&json!({"name": "S"}))
        .send()
        .await;
    scenario.expect(201);
    s.post("/v1/number")
        .bearer(tok)
        .json(&json!({"identifier": "+4911"}))
        .send()
        .await
        .expect(201);
    for (name, _) in NAMES {
        s.post("/v1/campaign")
            .header("authorization", &auth)
            .json(&json!({"description": name, "scenario_sid": scenario.str("id"), "number": "+4911"}))
            .send()
            .await
            .expect(200);
    }
    let s = &s;
    for filter_or in ["", "&filter_or=description"] {
        let auth = &auth;
        check_every_name(&format!("/v1/campaign{filter_or}"), |term| async move {
            let r = s
                .get(&format!(
                    "/v1/campaign?filter_query={}{filter_or}",
                    q(&term)
                ))
                .header("authorization", auth)
                .send()
                .await;
            r.expect(200);
            field(&r, &r.body, "description")
        })
        .await;
    }
}

async fn scenarios(s: TestServer) {
    let f = s.fixture().await;
    let tok = &f.admin_session;
    for (name, _) in NAMES {
        s.post("/v1/scenario")
            .bearer(tok)
            .json(&json!({"name": name}))
            .send()
            .await
            .expect(201);
    }
    let s = &s;
    check_every_name("/v1/scenario", |term| async move {
        let r = s
            .get(&format!("/v1/scenario?filter_query={}", q(&term)))
            .bearer(tok)
            .send()
            .await;
        r.expect(200);
        assert_eq!(r.body["total"], r.body["items"].as_array().unwrap().len());
        field(&r, &r.body["items"], "name")
    })
    .await;
}

/// The database's `search_fold` is the folding the search patterns get.
async fn fold_function(s: TestServer) {
    for (input, folded) in [
        ("Zürich ÖST", "zürich öst"),
        ("ΟΔΟΣ Οδός", "οδοσ οδόσ"),
        ("МОСКВА", "москва"),
        ("ÉCOLE", "école"),
        ("plain", "plain"),
    ] {
        let sql = "SELECT search_fold($1)";
        let got: String = match s.store.pool() {
            Pool::Sqlite(p) => sqlx::query_scalar(sql).bind(input).fetch_one(p).await,
            Pool::Postgres(p) => sqlx::query_scalar(sql).bind(input).fetch_one(p).await,
        }
        .unwrap();
        assert_eq!(got, folded, "{input:?}");
    }
}

both_backends!(numbers, campaigns, scenarios, fold_function);

/// On PostgreSQL the folding does not depend on the database's LC_CTYPE: under `C`, where
/// `lower()` folds ASCII only, `search_fold` still folds every script.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_fold_ignores_the_database_ctype() {
    use sqlx::Connection;
    let admin = callsmith_control::testing::pg_admin_url();
    let name = format!(
        "csft_{}_{}_cctype",
        chrono::Utc::now().timestamp(),
        std::process::id()
    );
    let mut conn = sqlx::PgConnection::connect(&admin).await.unwrap();
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "CREATE DATABASE \"{name}\" TEMPLATE template0 ENCODING 'UTF8' LC_COLLATE 'C' LC_CTYPE 'C'"
    )))
    .execute(&mut conn)
    .await
    .unwrap();
    let mut url = url::Url::parse(&admin).unwrap();
    url.set_path(&format!("/{name}"));
    let store = callsmith_domain::store::Store::connect(url.as_str(), 2)
        .await
        .unwrap();
    store.migrate().await.unwrap();
    let Pool::Postgres(p) = store.pool() else {
        unreachable!()
    };
    let (lower, folded): (String, String) =
        sqlx::query_as("SELECT lower('ÖST ΟΔΟΣ'), search_fold('ÖST ΟΔΟΣ')")
            .fetch_one(p)
            .await
            .unwrap();
    store.close().await;
    // A backend this role may not end can be on the new database for a moment (the drop
    // was refused once with 42501): the drop is tried until it has gone.
    let mut dropped = false;
    for _ in 0..50 {
        let drop = format!("DROP DATABASE \"{name}\" WITH (FORCE)");
        if sqlx::query(sqlx::AssertSqlSafe(drop))
            .execute(&mut conn)
            .await
            .is_ok()
        {
            dropped = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(dropped, "the scratch database {name} could not be dropped");
    assert_eq!(
        lower, "Öst ΟΔΟΣ",
        "lower() under LC_CTYPE C folds ASCII only"
    );
    assert_eq!(folded, "öst οδοσ");
}
