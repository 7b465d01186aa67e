//! Test harness (feature `testing`): the real router and server served on 127.0.0.1:0 against a
//! temporary SQLite file or a fresh PostgreSQL database, an HTTP client, a superuser
//! token and fixture helpers.
//!
//! ```ignore
//! use callsmith_control::{both_backends, testing::TestServer};
//! async fn lists_users(s: TestServer) {
//!     let f = s.fixture().await;
//!     let r = s.get("/v1/user").bearer(&f.admin_session).send().await;
//!     assert_eq!(r.status, 200);
//! }
//! both_backends!(lists_users);   // generates lists_users::sqlite and lists_users::postgres
//! ```
//!
//! PostgreSQL: `CALLSMITH_TEST_PG_ADMIN_URL` must name a role with CREATEDB (run
//! `eval "$(bash scripts/test-deps.sh)"`); without it PostgreSQL tests FAIL, they never
//! skip. One database is created per test process (nextest runs each test in its own
//! process) and migrated; databases of this harness older than two hours are dropped.

use std::{net::SocketAddr, sync::Arc};

use serde_json::{Value, json};
use tokio::task::JoinHandle;

use callsmith_domain::bootstrap;

use crate::{
    api::{AppState, Settings},
    auth::{password::PasswordCost, tokens},
    store::{Store, TenantPurger},
};

/// Which database a test server runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TestDb {
    Sqlite,
    Postgres,
}

/// A running control-plane server for one test.
pub struct TestServer {
    pub base_url: String,
    pub addr: SocketAddr,
    pub client: reqwest::Client,
    /// A superuser bearer token.
    pub superuser_token: String,
    pub store: Store,
    pub state: AppState,
    pub db: TestDb,
    _dir: tempfile::TempDir,
    task: JoinHandle<()>,
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

const PG_PREFIX: &str = "csft_";

/// The admin URL, or a panic that says how to get one.
pub fn pg_admin_url() -> String {
    match std::env::var("CALLSMITH_TEST_PG_ADMIN_URL") {
        Ok(v) if !v.is_empty() => v,
        _ => panic!(
            "CALLSMITH_TEST_PG_ADMIN_URL is not set: PostgreSQL tests cannot run. Run `eval \"$(bash scripts/test-deps.sh)\"` first \
             (it starts PostgreSQL and prints the variables)."
        ),
    }
}

/// Creates a fresh, empty PostgreSQL database and returns its URL.
pub async fn fresh_pg_database() -> String {
    let admin = pg_admin_url();
    crate::store::create_postgres_database(&admin, PG_PREFIX)
        .await
        .unwrap_or_else(|e| panic!("creating a test database through {admin}: {e}"))
}

impl TestServer {
    /// Starts a server on a fresh database of the given backend.
    pub async fn start(db: TestDb) -> TestServer {
        Self::start_with(db, |_| {}).await
    }

    /// Starts a server, letting `tune` adjust the settings first.
    pub async fn start_with(db: TestDb, tune: impl FnOnce(&mut Settings)) -> TestServer {
        let dir = tempfile::tempdir().expect("tempdir");
        let url = match db {
            TestDb::Sqlite => format!("sqlite://{}", dir.path().join("test.db").display()),
            TestDb::Postgres => fresh_pg_database().await,
        };
        let store = Store::connect(&url, 8)
            .await
            .unwrap_or_else(|e| panic!("connect {url}: {e}"));
        store.migrate().await.expect("migrations apply");
        let superuser_token = tokens::generate(tokens::TokenKind::Superuser);
        bootstrap::ensure_superuser(&store, dir.path(), Some(&superuser_token))
            .await
            .expect("bootstrap superuser");

        Self::serve(store, db, dir, superuser_token, tune).await
    }

    /// A second server on this server's database and object storage, as a peer node of a
    /// cluster is: keys, sessions, rows and stored objects serve on both; each has its own
    /// process state (live feeds).
    pub async fn peer(&self) -> TestServer {
        let dir = tempfile::tempdir().expect("tempdir");
        let objects = self.state.settings.objects.clone();
        Self::serve(
            self.store.clone(),
            self.db,
            dir,
            self.superuser_token.clone(),
            move |s| s.objects = objects,
        )
        .await
    }

    async fn serve(
        store: Store,
        db: TestDb,
        dir: tempfile::TempDir,
        superuser_token: String,
        tune: impl FnOnce(&mut Settings),
    ) -> TestServer {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind loopback");
        let addr = listener.local_addr().expect("local addr");
        let base_url = format!("http://{addr}");
        let mut settings = Settings {
            public_url: base_url.clone(),
            password_cost: PasswordCost::fast_for_tests(),
            objects: crate::objects::ObjectsConfig {
                local_dir: dir.path().join("objects"),
                ..Default::default()
            },
            ..Settings::default()
        };
        tune(&mut settings);
        let http = settings.http;
        let state = AppState::new(store.clone(), settings);
        let app = crate::router(state.clone());
        // The production server (timeouts, peer addresses), never shut down gracefully:
        // dropping the TestServer aborts it.
        let task = tokio::spawn(async move {
            let _ = crate::api::serve(listener, app, http, std::future::pending()).await;
        });
        let client = reqwest::Client::builder()
            .timeout(std::time::Duration::from_secs(30))
            .build()
            .expect("client");
        TestServer {
            base_url,
            addr,
            client,
            superuser_token,
            store,
            state,
            db,
            _dir: dir,
            task,
        }
    }

    /// Registers a tenant purger (see [`crate::store::TenantPurger`]).
    pub fn register_purger(&self, p: Arc<dyn TenantPurger>) {
        self.store.register_purger(p);
    }

    pub fn request(&self, method: reqwest::Method, path: &str) -> TestRequest {
        TestRequest {
            inner: self
                .client
                .request(method, format!("{}{}", self.base_url, path)),
        }
    }
    pub fn get(&self, path: &str) -> TestRequest {
        self.request(reqwest::Method::GET, path)
    }
    pub fn post(&self, path: &str) -> TestRequest {
        self.request(reqwest::Method::POST, path)
    }
    pub fn patch(&self, path: &str) -> TestRequest {
        self.request(reqwest::Method::PATCH, path)
    }
    pub fn delete(&self, path: &str) -> TestRequest {
        self.request(reqwest::Method::DELETE, path)
    }
    /// A request carrying the superuser token.
    pub fn su(&self, method: reqwest::Method, path: &str) -> TestRequest {
        self.request(method, path).bearer(&self.superuser_token)
    }

    /// Creates a tenant as the superuser; returns its sid.
    pub async fn create_tenant(&self, name: &str) -> String {
        let r = self
            .su(reqwest::Method::POST, "/v1/internal/tenant")
            .json(&json!({"name": name}))
            .send()
            .await;
        r.expect(201);
        r.str("sid")
    }

    /// Creates an account in a tenant as the superuser; returns its sid.
    pub async fn create_account(&self, tenant_sid: &str, body: Value) -> String {
        let r = self
            .su(reqwest::Method::POST, "/v1/internal/account")
            .header("X-Tenant-Sid", tenant_sid)
            .json(&body)
            .send()
            .await;
        r.expect(201);
        r.str("sid")
    }

    /// Issues a tenant API key; returns the secret.
    pub async fn tenant_key(&self, tenant_sid: &str) -> String {
        let r = self
            .su(
                reqwest::Method::POST,
                &format!("/v1/internal/tenant/{tenant_sid}/api-key"),
            )
            .json(&json!({}))
            .send()
            .await;
        r.expect(201);
        r.str("secret")
    }

    /// Issues an account API key; returns (key sid, secret).
    pub async fn account_key(&self, account_sid: &str) -> (String, String) {
        let r = self
            .su(
                reqwest::Method::POST,
                &format!("/v1/internal/account/{account_sid}/api-key"),
            )
            .json(&json!({}))
            .send()
            .await;
        r.expect(201);
        (r.str("sid"), r.str("secret"))
    }

    /// Creates a user with a password in an account (as the superuser); returns its sid.
    pub async fn create_user(
        &self,
        account_sid: &str,
        email: &str,
        password: &str,
        roles: &[&str],
    ) -> String {
        let r = self
            .su(reqwest::Method::POST, "/v1/user")
            .header("X-Account-Sid", account_sid)
            .json(&json!({"email": email, "name": email, "password": password, "roles": roles}))
            .send()
            .await;
        r.expect(201);
        r.str("sid")
    }

    /// Logs in; returns the session token.
    pub async fn login(&self, email: &str, password: &str) -> String {
        let r = self
            .post("/v1/auth/login")
            .json(&json!({"email": email, "password": password}))
            .send()
            .await;
        r.expect(200);
        r.str("session_token")
    }

    /// A tenant with one account, a tenant key, an account key and an admin user with a
    /// session — the usual starting point of a resource test. `tag` keeps emails unique
    /// when a test needs two fixtures.
    pub async fn fixture_named(&self, tag: &str) -> Fixture {
        let tenant_sid = self.create_tenant(&format!("tenant {tag}")).await;
        let account_sid =
            self.create_account(&tenant_sid, json!({"name": format!("account {tag}"), "email": format!("owner-{tag}@example.test"), "country": "de", "region": "eu"})).await;
        let tenant_key = self.tenant_key(&tenant_sid).await;
        let (account_key_sid, account_key) = self.account_key(&account_sid).await;
        let admin_email = format!("admin-{tag}@example.test");
        let admin_password = "admin-password".to_string();
        let admin_user_sid = self
            .create_user(&account_sid, &admin_email, &admin_password, &["admin"])
            .await;
        let admin_session = self.login(&admin_email, &admin_password).await;
        Fixture {
            tenant_sid,
            account_sid,
            tenant_key,
            account_key_sid,
            account_key,
            admin_user_sid,
            admin_email,
            admin_password,
            admin_session,
        }
    }

    /// [`TestServer::fixture_named`] with tag `a`.
    pub async fn fixture(&self) -> Fixture {
        self.fixture_named("a").await
    }

    /// A scenario of `f`'s account with `snapshot` as its draft (content hash `h0`),
    /// written through the store; returns its sid.
    pub async fn draft_scenario(&self, f: &Fixture, snapshot: &str) -> String {
        let sid = crate::ids::new_sid(crate::ids::prefix::SCENARIO);
        let draft = crate::ids::new_sid(crate::ids::prefix::SCENARIO_VERSION);
        self.store
            .scenario_create(
                &sid,
                &f.tenant_sid,
                &f.account_sid,
                "t",
                "",
                &draft,
                snapshot,
                "h0",
            )
            .await
            .expect("scenario created");
        sid
    }

    /// [`TestServer::draft_scenario`], published as version 1.
    pub async fn published_scenario(&self, f: &Fixture, snapshot: &str) -> String {
        let sid = self.draft_scenario(f, snapshot).await;
        self.store
            .scenario_publish(&sid, &f.account_sid, snapshot, "h0")
            .await
            .expect("scenario published");
        sid
    }
}

/// The smallest scenario snapshot: start the call, end it; `name` is its name.
pub fn minimal_snapshot(name: &str) -> String {
    json!({"name": name, "constructor": {"bricks": {
        "start_call": {"v1": [{"id": "s", "description": "", "properties": {}, "outputs": [{"type": "next", "description": "", "next": "e"}]}]},
        "end": {"v1": [{"id": "e", "description": "", "properties": {}, "outputs": []}]}
    }}})
    .to_string()
}

/// Ids and credentials made by [`TestServer::fixture_named`].
#[derive(Debug, Clone)]
pub struct Fixture {
    pub tenant_sid: String,
    pub account_sid: String,
    /// Tenant API key secret.
    pub tenant_key: String,
    pub account_key_sid: String,
    /// Account API key secret.
    pub account_key: String,
    pub admin_user_sid: String,
    pub admin_email: String,
    pub admin_password: String,
    /// Session token of the admin user.
    pub admin_session: String,
}

/// A request being built.
pub struct TestRequest {
    inner: reqwest::RequestBuilder,
}

impl TestRequest {
    pub fn bearer(self, token: &str) -> Self {
        TestRequest {
            inner: self.inner.bearer_auth(token),
        }
    }
    pub fn header(self, name: &str, value: &str) -> Self {
        TestRequest {
            inner: self.inner.header(name, value),
        }
    }
    pub fn json(self, body: &Value) -> Self {
        TestRequest {
            inner: self.inner.json(body),
        }
    }
    /// A raw body with Content-Type application/json (for malformed-JSON tests).
    pub fn raw_json(self, body: &str) -> Self {
        TestRequest {
            inner: self
                .inner
                .header("content-type", "application/json")
                .body(body.to_string()),
        }
    }
    /// Access to the underlying reqwest builder for anything else.
    pub fn map(self, f: impl FnOnce(reqwest::RequestBuilder) -> reqwest::RequestBuilder) -> Self {
        TestRequest {
            inner: f(self.inner),
        }
    }
    pub async fn send(self) -> TestResponse {
        let resp = self.inner.send().await.expect("request to the test server");
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        let text = resp.text().await.expect("response body");
        let body = if text.is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text).unwrap_or(Value::String(text.clone()))
        };
        TestResponse {
            status,
            headers,
            body,
            text,
        }
    }
}

/// A received response with its body parsed as JSON (`Value::String` if it is not JSON).
#[derive(Debug)]
pub struct TestResponse {
    pub status: u16,
    pub headers: reqwest::header::HeaderMap,
    pub body: Value,
    pub text: String,
}

impl TestResponse {
    /// Panics with the body unless the status is `status`.
    #[track_caller]
    pub fn expect(&self, status: u16) -> &Self {
        assert_eq!(
            self.status, status,
            "unexpected status; body: {}",
            self.text
        );
        self
    }
    /// Asserts status and the envelope's `error` code.
    #[track_caller]
    pub fn expect_error(&self, status: u16, error: &str) -> &Self {
        self.expect(status);
        assert_eq!(
            self.body["error"], error,
            "unexpected error code; body: {}",
            self.text
        );
        assert!(
            self.body["code"]
                .as_str()
                .is_some_and(|c| c.starts_with("ERR")),
            "envelope lacks a code: {}",
            self.text
        );
        assert!(
            self.body["message"].is_string(),
            "envelope lacks a message: {}",
            self.text
        );
        self
    }
    /// A string field of the body (panics if absent).
    #[track_caller]
    pub fn str(&self, field: &str) -> String {
        self.body[field]
            .as_str()
            .unwrap_or_else(|| panic!("no string field {field} in {}", self.text))
            .to_string()
    }
    /// The `sid`s of a page's items, in order.
    pub fn sids(&self) -> Vec<String> {
        self.body["items"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|i| i["sid"].as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// Generates `mod $name { sqlite, postgres }` tests that run `async fn $name(TestServer)`
/// on each backend.
#[macro_export]
macro_rules! both_backends {
    ($($name:ident),* $(,)?) => {$(
        mod $name {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqlite() {
                super::$name($crate::testing::TestServer::start($crate::testing::TestDb::Sqlite).await).await
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn postgres() {
                super::$name($crate::testing::TestServer::start($crate::testing::TestDb::Postgres).await).await
            }
        }
    )*};
}
