//! Store-level behaviour on SQLite and PostgreSQL: migrations, the hard-purge cascade, and
//! the one-round-trip reads (packed user pages, the joined profile) decoding exactly what
//! the per-row reads decode.

use callsmith_control::{both_backends, testing::TestServer};
use callsmith_domain::store;
use reqwest::Method;
use serde_json::json;

async fn migrations_are_idempotent_and_complete(s: TestServer) {
    // The harness already migrated; a second run applies nothing.
    assert_eq!(s.store.migrate().await.unwrap(), Vec::<i64>::new());
    let versions: Vec<i64> = store::migrations().iter().map(|m| m.0).collect();
    assert!(versions.contains(&1));
    assert!(versions.windows(2).all(|w| w[0] < w[1]));
    assert!(s.store.ping().await);
}

async fn hard_purge_leaves_no_row_of_the_subtree(s: TestServer) {
    let f = s.fixture().await;
    let keep = s.fixture_named("keep").await;
    s.su(Method::POST, "/v1/internal/trunk")
        .header("X-Tenant-Sid", &f.tenant_sid)
        .json(&json!({"name": "edge"}))
        .send()
        .await
        .expect(201);
    s.su(
        Method::PATCH,
        &format!(
            "/v1/internal/tenant/{}/feature-flag/global_llm",
            f.tenant_sid
        ),
    )
    .json(&json!({"enabled": true}))
    .send()
    .await
    .expect(200);
    let accounts = vec![f.account_sid.clone()];
    let before = s
        .store
        .subtree_row_counts(&f.tenant_sid, &accounts)
        .await
        .unwrap();
    for table in [
        "accounts",
        "users",
        "api_keys",
        "trunks",
        "feature_flag_rules",
    ] {
        let n = before
            .iter()
            .find(|(t, _)| t == table)
            .map(|(_, n)| *n)
            .unwrap_or(0);
        assert!(n > 0, "fixture should have rows in {table}: {before:?}");
    }
    s.su(
        Method::DELETE,
        &format!("/v1/internal/tenant/{}?hard=true", f.tenant_sid),
    )
    .send()
    .await
    .expect(204);
    let after = s
        .store
        .subtree_row_counts(&f.tenant_sid, &accounts)
        .await
        .unwrap();
    assert!(
        after.iter().all(|(_, n)| *n == 0),
        "rows survived the purge: {after:?}"
    );
    assert!(s.store.tenant_get(&f.tenant_sid).await.unwrap().is_none());
    // The other tenant is untouched.
    let other = s
        .store
        .subtree_row_counts(&keep.tenant_sid, std::slice::from_ref(&keep.account_sid))
        .await
        .unwrap();
    assert!(
        other.iter().any(|(t, n)| t == "users" && *n == 1),
        "{other:?}"
    );
}

/// `user_list` (packed into one JSON row on SQLite) and `profile_get` (one joined query)
/// return the same records, field for field, as `user_get` and `account_get`.
async fn one_round_trip_reads_match_row_reads(s: TestServer) {
    let f = s.fixture().await;
    // A logged-in user (last_login_at set), a soft-deleted one (deleted_at set), a name
    // with quotes and non-ASCII, and a second flag rule.
    for (email, name) in [
        ("b@example.test", "Bob \"the\" Ü"),
        ("c@example.test", "Carol"),
    ] {
        s.request(Method::POST, "/v1/user")
            .bearer(&f.account_key)
            .json(&json!({"email": email, "name": name}))
            .send()
            .await
            .expect(201);
    }
    let carol = s
        .store
        .user_by_email("c@example.test")
        .await
        .unwrap()
        .unwrap();
    s.request(Method::DELETE, &format!("/v1/user/{}", carol.sid))
        .bearer(&f.account_key)
        .send()
        .await
        .expect(204);
    for flag in ["global_tts", "global_llm"] {
        s.su(
            Method::PATCH,
            &format!("/v1/internal/tenant/{}/feature-flag/{flag}", f.tenant_sid),
        )
        .json(&json!({"enabled": true, "countries": ["de"]}))
        .send()
        .await
        .expect(200);
    }

    let (page, total) = s
        .store
        .user_list(&f.account_sid, true, "name", true, 100, 0)
        .await
        .unwrap();
    assert_eq!(total, 3);
    let names: Vec<&str> = page.iter().map(|u| u.name.as_str()).collect();
    let mut sorted = names.clone();
    sorted.sort_unstable_by(|a, b| b.cmp(a));
    assert_eq!(names, sorted, "name DESC order survives packing");
    for u in page.iter() {
        let one = s.store.user_get(&u.sid).await.unwrap().unwrap();
        assert_eq!(format!("{u:?}"), format!("{one:?}"));
    }
    assert!(page.iter().any(|u| u.deleted_at.is_some()));
    assert!(page.iter().any(|u| u.last_login_at.is_some()));
    let (empty, total) = s
        .store
        .user_list(&f.account_sid, false, "created_at", false, 10, 50)
        .await
        .unwrap();
    assert!(empty.is_empty());
    assert_eq!(total, 2);

    let p = s
        .store
        .profile_get(&f.admin_user_sid)
        .await
        .unwrap()
        .unwrap();
    let user = s.store.user_get(&f.admin_user_sid).await.unwrap().unwrap();
    let account = s.store.account_get(&f.account_sid).await.unwrap().unwrap();
    assert_eq!(format!("{:?}", p.user), format!("{user:?}"));
    assert_eq!(format!("{:?}", p.account), format!("{account:?}"));
    assert_eq!(
        p.flag_rules,
        s.store.flag_rules(&f.tenant_sid).await.unwrap()
    );
    assert_eq!(p.flag_rules.len(), 2);
    assert!(s.store.profile_get("us_missing").await.unwrap().is_none());

    // A tenant without stored rules still yields the profile.
    let other = s.fixture_named("bare").await;
    let p = s
        .store
        .profile_get(&other.admin_user_sid)
        .await
        .unwrap()
        .unwrap();
    assert!(p.flag_rules.is_empty());
    assert_eq!(p.account.sid, other.account_sid);
}

/// The first page of an account's users (deleted ones too when `show_deleted`), read
/// through the store, and how many match.
async fn stored_users(
    s: &TestServer,
    account: &str,
    show_deleted: bool,
) -> (std::sync::Arc<[store::UserRecord]>, i64) {
    s.store
        .user_list(account, show_deleted, "created_at", false, 100, 0)
        .await
        .unwrap()
}

/// The names on the first page of the account's live users, through the API, sorted.
async fn listed_names(s: &TestServer, f: &callsmith_control::testing::Fixture) -> Vec<String> {
    let r = s
        .request(Method::GET, "/v1/user")
        .bearer(&f.account_key)
        .send()
        .await;
    r.expect(200);
    let mut names: Vec<String> = r.body["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| u["name"].as_str().unwrap().to_string())
        .collect();
    names.sort();
    names
}

/// A page read again after any kind of change to a user shows the change: through the
/// API, through the store, by raw SQL on the pool, by a tenant's soft delete, restore
/// and hard-delete cascade. On SQLite pages come from memory between changes, so this
/// is what rules out a stale page; a rolled-back change leaves the page as it was.
async fn user_pages_show_every_change(s: TestServer) {
    let f = s.fixture().await;
    let admin = s.store.user_get(&f.admin_user_sid).await.unwrap().unwrap();
    let only_admin = vec![admin.name.clone()];
    assert_eq!(listed_names(&s, &f).await, only_admin);
    // Read twice: the second read is the one a cache would serve.
    assert_eq!(listed_names(&s, &f).await, only_admin);

    let created = s
        .request(Method::POST, "/v1/user")
        .bearer(&f.account_key)
        .json(&json!({"email": "d@example.test", "name": "Dora"}))
        .send()
        .await;
    created.expect(201);
    let dora = created.str("sid");
    let mut want = vec![admin.name.clone(), "Dora".to_string()];
    want.sort();
    assert_eq!(listed_names(&s, &f).await, want, "after a create");

    s.request(Method::PATCH, &format!("/v1/user/{dora}"))
        .bearer(&f.account_key)
        .json(&json!({"name": "Dorothea"}))
        .send()
        .await
        .expect(200);
    assert!(
        listed_names(&s, &f).await.contains(&"Dorothea".to_string()),
        "after a patch"
    );

    let (page, _) = stored_users(&s, &f.account_sid, false).await;
    assert!(
        page.iter()
            .any(|u| u.sid == dora && u.last_login_at.is_none())
    );
    s.store.user_touch_login(&dora).await.unwrap();
    let (page, _) = stored_users(&s, &f.account_sid, false).await;
    assert!(
        page.iter()
            .any(|u| u.sid == dora && u.last_login_at.is_some()),
        "after a login"
    );

    match s.store.pool() {
        store::Pool::Sqlite(p) => {
            sqlx::query("UPDATE users SET name = 'Raw' WHERE sid = $1")
                .bind(&dora)
                .execute(p)
                .await
                .unwrap();
            let mut tx = p.begin().await.unwrap();
            sqlx::query("UPDATE users SET name = 'Rolled back' WHERE sid = $1")
                .bind(&dora)
                .execute(&mut *tx)
                .await
                .unwrap();
            tx.rollback().await.unwrap();
        }
        store::Pool::Postgres(p) => {
            sqlx::query("UPDATE users SET name = 'Raw' WHERE sid = $1")
                .bind(&dora)
                .execute(p)
                .await
                .unwrap();
        }
    }
    let names = listed_names(&s, &f).await;
    assert!(
        names.contains(&"Raw".to_string()),
        "after raw SQL: {names:?}"
    );
    assert!(!names.contains(&"Rolled back".to_string()));

    s.request(Method::DELETE, &format!("/v1/user/{dora}"))
        .bearer(&f.account_key)
        .send()
        .await
        .expect(204);
    assert_eq!(listed_names(&s, &f).await, only_admin, "after a delete");

    let live = || async { stored_users(&s, &f.account_sid, false).await.1 };
    assert_eq!(live().await, 1);
    s.store.tenant_soft_delete(&f.tenant_sid).await.unwrap();
    assert_eq!(live().await, 0, "after the tenant's soft delete");
    s.store.tenant_restore(&f.tenant_sid).await.unwrap();
    assert_eq!(live().await, 1, "after the tenant's restore");
    assert_eq!(
        stored_users(&s, &f.account_sid, true).await.1,
        2,
        "the admin and the deleted user"
    );
    s.su(
        Method::DELETE,
        &format!("/v1/internal/tenant/{}?hard=true", f.tenant_sid),
    )
    .send()
    .await
    .expect(204);
    let (page, total) = stored_users(&s, &f.account_sid, true).await;
    assert_eq!(
        (page.len(), total),
        (0, 0),
        "after the hard delete's cascade"
    );
}

/// A credential that worked a moment ago (so on SQLite it is held in memory) stops working
/// at once when it is revoked, logged out, or its user, account or tenant is deactivated
/// or deleted.
async fn credentials_stop_working_the_moment_they_change(s: TestServer) {
    let f = s.fixture().await;
    let ok = |token: String, path: &'static str| {
        let s = &s;
        async move { s.get(path).bearer(&token).send().await.status }
    };

    // Account key, revoked.
    let key = format!("/v1/internal/account/{}/api-key", f.account_sid);
    let r = s
        .post(&key)
        .bearer(&f.tenant_key)
        .json(&json!({}))
        .send()
        .await;
    r.expect(201);
    let (sid, secret) = (r.str("sid"), r.str("secret"));
    assert_eq!(ok(secret.clone(), "/v1/user").await, 200);
    assert_eq!(ok(secret.clone(), "/v1/user").await, 200);
    s.delete(&format!("{key}/{sid}"))
        .bearer(&f.tenant_key)
        .send()
        .await
        .expect(204);
    assert_eq!(ok(secret, "/v1/user").await, 401, "revoked account key");

    // Tenant key, revoked.
    let key = format!("/v1/internal/tenant/{}/api-key", f.tenant_sid);
    let r = s.su(Method::POST, &key).json(&json!({})).send().await;
    r.expect(201);
    let (sid, secret) = (r.str("sid"), r.str("secret"));
    assert_eq!(ok(secret.clone(), "/v1/internal/account").await, 200);
    s.su(Method::DELETE, &format!("{key}/{sid}"))
        .send()
        .await
        .expect(204);
    assert_eq!(
        ok(secret, "/v1/internal/account").await,
        401,
        "revoked tenant key"
    );

    // A session, logged out; another, whose user is made inactive.
    let login = || s.login(&f.admin_email, &f.admin_password);
    let session = login().await;
    assert_eq!(ok(session.clone(), "/v1/profile").await, 200);
    s.post("/v1/auth/logout")
        .bearer(&session)
        .send()
        .await
        .expect(204);
    assert_eq!(ok(session, "/v1/profile").await, 401, "logged out");
    let session = login().await;
    assert_eq!(ok(session.clone(), "/v1/profile").await, 200);
    s.patch(&format!("/v1/user/{}", f.admin_user_sid))
        .bearer(&f.account_key)
        .json(&json!({"status": "inactive"}))
        .send()
        .await
        .expect(200);
    assert_eq!(ok(session, "/v1/profile").await, 401, "inactive user");

    // The account made inactive, then the tenant deleted.
    assert_eq!(ok(f.account_key.clone(), "/v1/user").await, 200);
    s.patch(&format!("/v1/internal/account/{}", f.account_sid))
        .bearer(&f.tenant_key)
        .json(&json!({"status": "inactive"}))
        .send()
        .await
        .expect(200);
    assert_eq!(
        ok(f.account_key.clone(), "/v1/user").await,
        401,
        "inactive account"
    );
    assert_eq!(ok(f.tenant_key.clone(), "/v1/internal/account").await, 200);
    s.su(
        Method::DELETE,
        &format!("/v1/internal/tenant/{}", f.tenant_sid),
    )
    .send()
    .await
    .expect(204);
    assert_eq!(
        ok(f.tenant_key.clone(), "/v1/internal/account").await,
        401,
        "deleted tenant"
    );
}

/// Runs `sql` (several statements) on the store's database.
async fn raw(s: &TestServer, sql: &str) {
    let sql = sqlx::AssertSqlSafe(sql.to_string());
    match s.store.pool() {
        store::Pool::Sqlite(p) => sqlx::raw_sql(sql).execute(p).await.map(|_| ()),
        store::Pool::Postgres(p) => sqlx::raw_sql(sql).execute(p).await.map(|_| ()),
    }
    .unwrap_or_else(|e| panic!("{e}"));
}

/// Migration 0372 (one active number per phone number) over a database that holds the
/// same number active in several accounts, as the schema before it allowed: it applies,
/// the oldest active row of each number keeps it and the later ones become inactive.
async fn number_identity_migration_resolves_duplicates(s: TestServer) {
    let fa = s.fixture_named("a").await;
    let fb = s.fixture_named("b").await;
    let mut sids = Vec::new();
    for identifier in ["+4930999001", "4930999002", "+4930999003"] {
        let r = s
            .post("/v1/number")
            .bearer(&fa.admin_session)
            .json(&json!({"identifier": identifier}))
            .send()
            .await;
        r.expect(201);
        sids.push(r.str("id"));
    }
    let [first, second, third] = [&sids[0], &sids[1], &sids[2]];
    // Back to the schema before 0372, then rows it would have refused: B's spellings of
    // A's numbers, one later than A's (…001, twice) and one older (…002), an inactive one.
    raw(
        &s,
        "DROP INDEX numbers_active_routing_key; ALTER TABLE numbers DROP COLUMN routing_key; \
         DELETE FROM callsmith_migrations WHERE version = 372",
    )
    .await;
    let (t, a) = (&fb.tenant_sid, &fb.account_sid);
    raw(
        &s,
        &format!(
            "INSERT INTO numbers (sid, tenant_sid, account_sid, identifier, name, pool_sid, trunk, status, created_at, updated_at) VALUES \
             ('num_dup1', '{t}', '{a}', '004930999001', '', NULL, NULL, 'active', '2099-01-01T00:00:00+00:00', '2099-01-01T00:00:00+00:00'), \
             ('num_dup2', '{t}', '{a}', '+4930999001', '', NULL, NULL, 'active', '2099-01-02T00:00:00+00:00', '2099-01-02T00:00:00+00:00'), \
             ('num_dup3', '{t}', '{a}', '+4930999002', '', NULL, NULL, 'active', '2001-01-01T00:00:00+00:00', '2001-01-01T00:00:00+00:00'), \
             ('num_dup4', '{t}', '{a}', '4930999003', '', NULL, NULL, 'inactive', '2099-01-01T00:00:00+00:00', '2099-01-01T00:00:00+00:00')"
        ),
    )
    .await;

    let before = s
        .store
        .number_get(second)
        .await
        .unwrap()
        .unwrap()
        .updated_at;
    assert_eq!(s.store.migrate().await.unwrap(), vec![372]);
    let status = async |sid: &str| s.store.number_get(sid).await.unwrap().unwrap().status;
    for (sid, want) in [
        (first.as_str(), "active"),
        ("num_dup1", "inactive"),
        ("num_dup2", "inactive"),
        ("num_dup3", "active"),
        (second.as_str(), "inactive"),
        (third.as_str(), "active"),
        ("num_dup4", "inactive"),
    ] {
        assert_eq!(status(sid).await, want, "{sid}");
    }
    // A row set inactive shows when it changed.
    let demoted = s.store.number_get(second).await.unwrap().unwrap();
    assert!(demoted.updated_at > before, "{demoted:?}");

    // The rule holds from then on: B's inactive spelling of A's number stays inactive.
    s.patch("/v1/number/num_dup4")
        .bearer(&fb.admin_session)
        .json(&json!({"status": "active"}))
        .send()
        .await
        .expect_error(409, "identifier_active");
    s.post("/v1/number")
        .bearer(&fb.admin_session)
        .json(&json!({"identifier": "+4930999001", "name": "again"}))
        .send()
        .await
        .expect_error(422, "identifier_taken");
}

both_backends!(
    credentials_stop_working_the_moment_they_change,
    user_pages_show_every_change,
    migrations_are_idempotent_and_complete,
    hard_purge_leaves_no_row_of_the_subtree,
    one_round_trip_reads_match_row_reads,
    number_identity_migration_resolves_duplicates
);
