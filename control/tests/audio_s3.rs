//! Audio files on S3-compatible object storage: the audio routes (upload, get, location,
//! signed link, delete, the size limit, hard tenant delete) against a real S3 server, moto's
//! standalone server started by the test on a free loopback port with a bucket the test
//! creates, on SQLite and PostgreSQL. The server is installed by scripts/test-deps.sh, which
//! exports CALLSMITH_TEST_MOTO_SERVER; without it these tests fail, they never skip.

use callsmith_control::testing::{TestDb, TestResponse, TestServer};
use callsmith_domain::objects::{Provider, S3Config};
use callsmith_e2e::peers::s3::S3Server;
use reqwest::{
    Method,
    multipart::{Form, Part},
};

const MIB: usize = 1024 * 1024;

async fn s3_server(db: TestDb, s3: &S3Server, bucket: &str) -> TestServer {
    s3.create_bucket(bucket).await;
    let endpoint = s3.endpoint.clone();
    let bucket = bucket.to_string();
    TestServer::start_with(db, move |s| {
        s.objects.provider = Provider::S3;
        s.objects.s3 = S3Config {
            endpoint: Some(endpoint),
            bucket,
            region: "us-east-1".into(),
            access_key_id: Some("testing".into()),
            secret_access_key: Some("testing".into()),
            allow_http: true,
            virtual_hosted_style: false,
        };
    })
    .await
}

async fn upload(s: &TestServer, token: &str, bytes: Vec<u8>, mime: Option<&str>) -> TestResponse {
    let mut part = Part::bytes(bytes).file_name("prompt.wav");
    if let Some(m) = mime {
        part = part.mime_str(m).unwrap();
    }
    s.post("/v1/audio")
        .bearer(token)
        .map(|b| b.multipart(Form::new().part("file", part)))
        .send()
        .await
}

async fn audio_routes_on_s3(db: TestDb) {
    let s3 = S3Server::start().await;
    let bucket = "callsmith-audio";
    let s = s3_server(db, &s3, bucket).await;
    let f = s.fixture().await;
    let mut wav: Vec<u8> = b"RIFF\x24\x00\x00\x00WAVEfmt \x10\x00\x00\x00".to_vec();
    wav.extend((0..50_000u32).map(|i| (i % 251) as u8));

    // Upload: stored in the bucket under audio/<account>/<id>.wav with its canonical
    // content type, as a download.
    let r = upload(&s, &f.account_key, wav.clone(), Some("audio/x-wav")).await;
    r.expect(201);
    let id = r.str("id");
    assert_eq!(r.str("provider"), "s3");
    let key = format!("audio/{}/{id}.wav", f.account_sid);
    assert_eq!(r.str("url"), format!("s3://{bucket}/{key}"));
    assert_eq!(r.str("content_type"), "audio/wav");
    assert_eq!(s3.keys(bucket).await, vec![key.clone()]);
    let (ct, cd, bytes) = s3
        .object_with_disposition(bucket, &key)
        .await
        .expect("object stored");
    assert_eq!((ct.as_str(), cd.as_str()), ("audio/wav", "attachment"));
    assert_eq!(bytes, wav);

    // Get and location (served through the service from the bucket).
    let g = s
        .get(&format!("/v1/audio/{id}"))
        .bearer(&f.account_key)
        .send()
        .await;
    g.expect(200);
    assert_eq!(g.body, r.body);
    let got = s.client.get(r.str("location")).send().await.unwrap();
    assert_eq!(got.status(), 200);
    assert_eq!(got.headers()["content-type"], "audio/wav");
    assert_eq!(got.headers()["x-content-type-options"], "nosniff");
    assert!(
        got.headers()["content-security-policy"]
            .to_str()
            .unwrap()
            .starts_with("sandbox;")
    );
    assert_eq!(got.bytes().await.unwrap().to_vec(), wav);

    // Signed link: an S3 presigned GET on the endpoint, with the requested lifetime.
    let l = s
        .get(&format!("/v1/audio/{id}/signed-link?ttl=120"))
        .bearer(&f.account_key)
        .send()
        .await;
    l.expect(200);
    let signed = l.str("signed_url");
    assert!(
        signed.starts_with(&format!("{}/{bucket}/{key}?", s3.endpoint)),
        "{signed}"
    );
    let u = url::Url::parse(&signed).unwrap();
    let q: std::collections::HashMap<String, String> = u.query_pairs().into_owned().collect();
    assert_eq!(q.get("X-Amz-Expires").map(String::as_str), Some("120"));
    assert!(q.contains_key("X-Amz-Signature"), "{signed}");
    let expires: chrono::DateTime<chrono::Utc> = l.str("expires_at").parse().unwrap();
    let left = (expires - chrono::Utc::now()).num_seconds();
    assert!((110..=121).contains(&left), "{left}");
    let got = reqwest::get(&signed).await.unwrap();
    assert_eq!(got.status(), 200);
    assert_eq!(got.headers()["content-type"], "audio/wav");
    assert_eq!(got.headers()["content-disposition"], "attachment");
    assert_eq!(got.bytes().await.unwrap().to_vec(), wav);

    // No part type and bytes of no known format: stored as application/octet-stream.
    let plain = upload(&s, &f.account_key, vec![1, 2, 3], None).await;
    plain.expect(201);
    let plain_key = format!("audio/{}/{}.wav", f.account_sid, plain.str("id"));
    assert_eq!(
        s3.object(bucket, &plain_key).await.unwrap().0,
        "application/octet-stream"
    );

    // Over 32 MiB: 413, and nothing new in the bucket (the multipart upload is aborted).
    let over = upload(&s, &f.account_key, vec![7u8; 32 * MIB + 1], None).await;
    over.expect_error(413, "file_too_large");
    let mut want = vec![key.clone(), plain_key.clone()];
    want.sort();
    assert_eq!(s3.keys(bucket).await, want);

    // Delete: the row and the object go; the location stops serving.
    s.delete(&format!("/v1/audio/{id}"))
        .bearer(&f.account_key)
        .send()
        .await
        .expect(204);
    assert!(s3.object(bucket, &key).await.is_none());
    assert_eq!(s3.keys(bucket).await, vec![plain_key.clone()]);
    assert_eq!(
        s.client
            .get(r.str("location"))
            .send()
            .await
            .unwrap()
            .status(),
        404
    );
    s.get(&format!("/v1/audio/{id}/signed-link"))
        .bearer(&f.account_key)
        .send()
        .await
        .expect_error(404, "audio_not_found");

    // A hard tenant delete purges the tenant's objects from the bucket; others stay.
    let b = s.fixture_named("b").await;
    let kept = upload(&s, &b.account_key, vec![9, 9], None).await;
    kept.expect(201);
    let kept_key = format!("audio/{}/{}.wav", b.account_sid, kept.str("id"));
    s.su(
        Method::DELETE,
        &format!("/v1/internal/tenant/{}?hard=true", f.tenant_sid),
    )
    .send()
    .await
    .expect(204);
    assert_eq!(s3.keys(bucket).await, vec![kept_key]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn audio_routes_on_s3_sqlite() {
    audio_routes_on_s3(TestDb::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn audio_routes_on_s3_postgres() {
    audio_routes_on_s3(TestDb::Postgres).await;
}

/// A recording stored by the node that ran the call is served by a peer on the same
/// database and bucket, streamed and as a presigned link.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recording_made_on_one_node_is_served_by_a_peer() {
    use callsmith_control::testing::minimal_snapshot;
    use callsmith_domain::{
        communication::CommunicationStatus,
        objects::CallObjects,
        store::communications::{CallFinish, CallWrite, Claim, ClaimScope},
    };
    use chrono::Utc;
    use serde_json::json;

    let s3 = S3Server::start().await;
    let owner = s3_server(TestDb::Postgres, &s3, "cluster-recordings").await;
    let peer = owner.peer().await;
    let f = owner.fixture().await;
    let scn = owner.published_scenario(&f, &minimal_snapshot("t")).await;
    owner
        .post("/v1/number")
        .bearer(&f.admin_session)
        .json(&json!({"identifier": "+4911"}))
        .send()
        .await
        .expect(201);
    let r = owner
        .post("/v1/communication/-/dispatch")
        .bearer(&f.account_key)
        .json(&json!({"recipient": "+15550001", "scenario_sid": scn}))
        .send()
        .await;
    r.expect(201);
    let id = r.str("id");
    // The node running the call records it into the bucket and writes its end.
    let claim = Claim {
        token: "owner".into(),
        by: "owner-host:1".into(),
        until: Utc::now() + chrono::Duration::seconds(60),
    };
    let claimed = owner
        .store
        .communication_claim_due(&claim, &ClaimScope::TestCalls, 10)
        .await
        .unwrap();
    assert_eq!(claimed.len(), 1);
    let objects = CallObjects::new(&f.account_sid, &id);
    let wav = bytes::Bytes::from_static(b"RIFF....WAVEfmt recorded on the owner");
    owner
        .state
        .objects
        .put(&objects.recording(), wav.clone(), Some("audio/wav"))
        .await
        .unwrap();
    let mut end = CallFinish::new(CommunicationStatus::Completed);
    end.call_status = Some("answered".into());
    end.recording_path = Some(objects.recording());
    for w in [
        CallWrite::Started {
            sid: id.clone(),
            token: "owner".into(),
            from_number: "+4911".into(),
            trunk: None,
            at: Utc::now(),
        },
        CallWrite::Finish {
            sid: id.clone(),
            token: "owner".into(),
            finish: Box::new(end),
            deliveries: None,
            at: Utc::now(),
        },
    ] {
        assert!(owner.store.communication_apply(w).await.unwrap());
    }
    drop(owner);

    // The peer serves it: streamed, and as a presigned link to the same bytes.
    let r = peer
        .get(&format!("/v1/communication/{id}/recording"))
        .bearer(&f.account_key)
        .send()
        .await;
    r.expect(200);
    assert_eq!(r.headers["content-type"], "audio/wav");
    assert_eq!(r.text.as_bytes(), &wav[..]);
    let r = peer
        .get(&format!(
            "/v1/communication/{id}/recording?mode=url&expires_in=60"
        ))
        .bearer(&f.account_key)
        .send()
        .await;
    r.expect(200);
    let got = reqwest::get(&r.str("signed_url")).await.unwrap();
    assert_eq!(got.status(), 200);
    assert_eq!(got.bytes().await.unwrap(), wav);
}
