//! Publishing a realistic 200-brick scenario on SQLite: validation (with the store's and
//! the audio resolver's reference lookups) and the publish write, each timed per iteration.
//! Target: validate + publish under 50 ms. `cargo run --release -p callsmith-bench --bin scenario_publish [iterations]`

use std::time::{Duration, Instant};

use callsmith_domain::objects::ObjectsConfig;
use callsmith_domain::scenario_check::validate_scenario;
use callsmith_domain::store::{NewAccount, Store};
use callsmith_domain::{Services, Settings};
use callsmith_scenarios::{canonical::content_hash_value, testing::realistic_scenario};

fn pct(sorted: &[Duration], q: f64) -> Duration {
    callsmith_bench::nearest_rank(sorted, q).unwrap_or_default()
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let iterations: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(200);
    let dir = tempfile::tempdir()?;
    let store = Store::connect(
        &format!("sqlite://{}", dir.path().join("bench.db").display()),
        4,
    )
    .await?;
    store.migrate().await?;
    store.tenant_create("ten_bench", "bench").await?;
    store
        .account_create(&NewAccount {
            sid: "acc_bench".into(),
            tenant_sid: "ten_bench".into(),
            name: "bench".into(),
            email: "bench@example.test".into(),
            external_id: String::new(),
            country: String::new(),
            region: String::new(),
            timezone: "UTC".into(),
            phone: String::new(),
            status: "active".into(),
        })
        .await?;
    // What the API validates with: the services the binary builds (the audio resolver over
    // local storage, the guarded client's policy, the node's synthesizers).
    let settings = Settings {
        public_url: "http://127.0.0.1:8080".into(),
        objects: ObjectsConfig {
            local_dir: dir.path().join("objects"),
            ..ObjectsConfig::default()
        },
        ..Settings::default()
    };
    let services = Services::new(store.clone(), &settings).map_err(anyhow::Error::msg)?;
    let base = realistic_scenario(200);
    let text = base.to_string();
    store
        .scenario_create(
            "scn_bench",
            "ten_bench",
            "acc_bench",
            "bench",
            "",
            "scv_bench_draft",
            &text,
            &content_hash_value(&base),
        )
        .await?;
    let (mut validate, mut publish, mut total) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..iterations {
        // New content each round so every publish records a version.
        let mut snap = base.clone();
        snap["name"] = serde_json::json!(format!("bench {i}"));
        let t0 = Instant::now();
        let errors = validate_scenario(&services, "acc_bench", &snap).await?;
        let t1 = Instant::now();
        anyhow::ensure!(
            errors.errors.is_empty(),
            "the generated scenario is invalid: {:?}",
            errors.errors
        );
        let hash = content_hash_value(&snap);
        let (_, created) = store
            .scenario_publish("scn_bench", "acc_bench", &snap.to_string(), &hash)
            .await?;
        let t2 = Instant::now();
        anyhow::ensure!(created, "publish recorded nothing");
        validate.push(t1 - t0);
        publish.push(t2 - t1);
        total.push(t2 - t0);
    }
    for (name, v) in [
        ("validate", &mut validate),
        ("publish (hash + write)", &mut publish),
        ("validate + publish", &mut total),
    ] {
        v.sort();
        println!(
            "{name:24} median {:>8.2?}  p99 {:>8.2?}  max {:>8.2?}",
            pct(v, 0.5),
            pct(v, 0.99),
            pct(v, 1.0)
        );
    }
    println!(
        "bricks: 200, iterations: {iterations}, snapshot bytes: {}",
        text.len()
    );
    let p99 = pct(&total, 0.99);
    println!(
        "target validate + publish < 50 ms (p99): {}",
        if p99 < Duration::from_millis(50) {
            "met"
        } else {
            "NOT met"
        }
    );
    Ok(())
}
