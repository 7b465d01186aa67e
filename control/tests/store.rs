//! Store-level behaviour on SQLite and PostgreSQL: migrations and the hard-purge cascade.

use callsmith_control::{both_backends, store, testing::TestServer};
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

both_backends!(
    migrations_are_idempotent_and_complete,
    hard_purge_leaves_no_row_of_the_subtree
);
