use std::path::Path as FsPath;

use super::signing_key::read_or_create_key;
use super::*;

fn local(dir: &FsPath) -> Objects {
    let cfg = ObjectsConfig {
        local_dir: dir.join("objects"),
        ..Default::default()
    };
    Objects::new(&cfg, "http://127.0.0.1:1").unwrap()
}

#[tokio::test]
async fn put_get_stream_delete_and_uris() {
    let d = tempfile::tempdir().unwrap();
    let o = local(d.path());
    o.put(
        "audio/acc_1/x.wav",
        Bytes::from_static(b"abc"),
        Some("audio/wav"),
    )
    .await
    .unwrap();
    assert_eq!(o.get("audio/acc_1/x.wav").await.unwrap().as_ref(), b"abc");
    assert_eq!(o.head("audio/acc_1/x.wav").await.unwrap(), 3);
    let uri = o.uri("audio/acc_1/x.wav");
    assert!(
        uri.starts_with("file:///") && uri.ends_with("/objects/audio/acc_1/x.wav"),
        "{uri}"
    );
    assert_eq!(o.path_of(&uri).as_deref(), Some("audio/acc_1/x.wav"));
    assert_eq!(
        o.path_of("/audio/acc_1/x.wav").as_deref(),
        Some("audio/acc_1/x.wav")
    );
    assert_eq!(o.path_of("s3://other/audio/x"), None);
    assert!(o.path_of("audio/../etc/passwd").is_none());
    // The URI is readable by the call runtime's loader (object_store URL parsing).
    let url = url::Url::parse(&uri).unwrap();
    let (store, p) = object_store::parse_url(&url).unwrap();
    assert_eq!(
        store.get(&p).await.unwrap().bytes().await.unwrap().as_ref(),
        b"abc"
    );
    o.delete("audio/acc_1/x.wav").await.unwrap();
    o.delete("audio/acc_1/x.wav").await.unwrap();
    assert!(matches!(
        o.get("audio/acc_1/x.wav").await,
        Err(ObjectError::NotFound)
    ));
    assert!(matches!(
        o.get("../x").await,
        Err(ObjectError::InvalidPath(_))
    ));
}

#[tokio::test]
async fn streamed_put_aborts_over_limit_and_on_error() {
    let d = tempfile::tempdir().unwrap();
    let o = local(d.path());
    let chunks = |n: usize| {
        futures::stream::iter((0..n).map(|_| Ok::<_, std::io::Error>(Bytes::from(vec![7u8; 1000]))))
    };
    assert_eq!(
        o.put_stream("r/a/ok", None, chunks(3), 3000).await.unwrap(),
        3000
    );
    assert!(matches!(
        o.put_stream("r/a/big", None, chunks(4), 3000).await,
        Err(ObjectError::TooLarge(3000))
    ));
    let failing = futures::stream::iter(vec![
        Ok(Bytes::from_static(b"abc")),
        Err(std::io::Error::other("reset")),
    ]);
    assert!(matches!(
        o.put_stream("r/a/cut", None, failing, 3000).await,
        Err(ObjectError::Interrupted(_))
    ));
    let mut names = vec![];
    for e in walk(&d.path().join("objects")) {
        names.push(e);
    }
    assert_eq!(
        names.len(),
        1,
        "only the complete object remains: {names:?}"
    );
    assert!(names[0].ends_with("r/a/ok"));
}

fn walk(dir: &FsPath) -> Vec<String> {
    let mut out = vec![];
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p.display().to_string());
        }
    }
    out
}

#[tokio::test]
async fn local_links_sign_and_verify() {
    let d = tempfile::tempdir().unwrap();
    let o = local(d.path());
    let link = o
        .signed_link(
            "audio/acc_1/x.wav",
            Duration::from_secs(60),
            Some("audio/wav"),
        )
        .await
        .unwrap();
    assert!(
        link.signed_url
            .starts_with("http://127.0.0.1:1/v1/storage/signed?")
    );
    let (p, ct) = o.resolve_signed_url(&link.signed_url).unwrap().unwrap();
    assert_eq!(
        (p.as_str(), ct.as_deref()),
        ("audio/acc_1/x.wav", Some("audio/wav"))
    );
    let tampered = link.signed_url.replace("acc_1", "acc_2");
    assert_eq!(
        o.resolve_signed_url(&tampered).unwrap().unwrap_err(),
        LinkError::BadSignature
    );
    let past = Utc::now().timestamp() - 1;
    let old = o.sign("a/b/c", past, None);
    assert_eq!(
        o.resolve_signed_url(&old).unwrap().unwrap_err(),
        LinkError::Expired
    );
    assert!(o.resolve_signed_url("http://elsewhere/x").is_none());
    // A second store with another key does not accept the first one's links.
    let d2 = tempfile::tempdir().unwrap();
    let o2 = local(d2.path());
    assert!(o2.resolve_signed_url(&link.signed_url).unwrap().is_err());
    let t = o.capability_token("aud_1");
    assert!(o.verify_capability_token("aud_1", &t));
    assert!(!o.verify_capability_token("aud_2", &t));
    assert!(!o2.verify_capability_token("aud_1", &t));
    assert!(!o.verify_capability_token("aud_1", &t[..30]));
}

#[test]
fn key_file_is_generated_once_and_private() {
    let d = tempfile::tempdir().unwrap();
    let f = d.path().join("k");
    let a = read_or_create_key(&f).unwrap();
    let b = read_or_create_key(&f).unwrap();
    assert_eq!(a, b);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(&f).unwrap().permissions().mode() & 0o777,
            0o600
        );
    }
}

#[test]
fn ttl_bounds_and_owner() {
    assert_eq!(link_ttl("ttl", None).unwrap(), Duration::from_secs(3600));
    assert_eq!(
        link_ttl("ttl", Some(604_800)).unwrap(),
        Duration::from_secs(604_800)
    );
    assert!(link_ttl("ttl", Some(604_801)).is_err());
    assert!(
        link_ttl("expires_in", Some(0))
            .unwrap_err()
            .starts_with("expires_in:")
    );
    assert_eq!(owner_of("audio/acc_1/x.wav"), Some("acc_1"));
    assert_eq!(owner_of("audio/acc_1"), None);
}

#[tokio::test]
async fn s3_presigns_offline() {
    let cfg = ObjectsConfig {
        provider: Provider::S3,
        s3: S3Config {
            endpoint: Some("http://127.0.0.1:9000".into()),
            bucket: "calls".into(),
            region: "us-east-1".into(),
            access_key_id: Some("AKIDEXAMPLE".into()),
            secret_access_key: Some("wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY".into()),
            allow_http: true,
            virtual_hosted_style: false,
        },
        signing_key: Some("k".repeat(32)),
        ..Default::default()
    };
    let o = Objects::new(&cfg, "http://127.0.0.1:1").unwrap();
    assert_eq!(o.provider(), Provider::S3);
    assert_eq!(o.uri("audio/acc/x.wav"), "s3://calls/audio/acc/x.wav");
    assert_eq!(
        o.path_of("s3://calls/audio/acc/x.wav").as_deref(),
        Some("audio/acc/x.wav")
    );
    let link = o
        .signed_link("audio/acc/x.wav", Duration::from_secs(600), None)
        .await
        .unwrap();
    assert!(
        link.signed_url
            .starts_with("http://127.0.0.1:9000/calls/audio/acc/x.wav?"),
        "{}",
        link.signed_url
    );
    assert!(link.signed_url.contains("X-Amz-Expires=600"));
    assert!(link.signed_url.contains("X-Amz-Signature="));
}

/// Many histories written into one folder at once (as calls end together): each one lands
/// whole, none is lost to the bound on local writes at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_puts_into_one_folder_at_once_all_land() {
    let d = tempfile::tempdir().unwrap();
    let o = Arc::new(local(d.path()));
    let puts = (0..200).map(|i| {
        let o = o.clone();
        tokio::spawn(async move {
            let body = format!("{{\"call\":{i}}}");
            o.put(
                &format!("calls/acc_1/com_{i}.history.json"),
                Bytes::from(body),
                Some("application/json"),
            )
            .await
        })
    });
    for r in futures::future::join_all(puts).await {
        r.unwrap().unwrap();
    }
    for i in 0..200 {
        let got = o
            .get(&format!("calls/acc_1/com_{i}.history.json"))
            .await
            .unwrap();
        assert_eq!(got.as_ref(), format!("{{\"call\":{i}}}").as_bytes());
    }
    let names = std::fs::read_dir(d.path().join("objects/calls/acc_1"))
        .unwrap()
        .count();
    assert_eq!(names, 200, "no staged file is left beside the objects");
}
