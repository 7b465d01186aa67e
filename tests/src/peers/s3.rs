//! An S3-compatible object store on loopback: moto's standalone server on a free port,
//! installed by scripts/test-deps.sh (which exports CALLSMITH_TEST_MOTO_SERVER). Without it
//! the tests that need it fail, they never skip. Credentials are moto's `testing`, region
//! `us-east-1`.

use std::{
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

/// A moto S3 server on 127.0.0.1, killed when dropped.
pub struct S3Server {
    /// `http://127.0.0.1:<port>`.
    pub endpoint: String,
    child: Child,
    http: reqwest::Client,
}

impl Drop for S3Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl S3Server {
    pub async fn start() -> S3Server {
        let bin = std::env::var("CALLSMITH_TEST_MOTO_SERVER").unwrap_or_else(|_| {
            panic!(
                "CALLSMITH_TEST_MOTO_SERVER is not set: run `eval \"$(bash scripts/test-deps.sh)\"` first \
                 (it installs moto[server] and prints the variable)"
            )
        });
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new(&bin)
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("starting {bin}: {e}"));
        let s = S3Server {
            endpoint: format!("http://127.0.0.1:{port}"),
            child,
            http: reqwest::Client::new(),
        };
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if s.http.get(&s.endpoint).send().await.is_ok() {
                break;
            }
            assert!(Instant::now() < deadline, "moto did not come up on {port}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        s
    }

    /// CreateBucket (moto accepts unsigned requests).
    pub async fn create_bucket(&self, bucket: &str) {
        let r = self
            .http
            .put(format!("{}/{bucket}", self.endpoint))
            .send()
            .await
            .unwrap();
        assert!(r.status().is_success(), "create bucket: {}", r.status());
    }

    /// A client of the bucket, independent of the service (object_store, signed requests).
    pub fn bucket(&self, bucket: &str) -> object_store::aws::AmazonS3 {
        object_store::aws::AmazonS3Builder::new()
            .with_endpoint(&self.endpoint)
            .with_bucket_name(bucket)
            .with_region("us-east-1")
            .with_access_key_id("testing")
            .with_secret_access_key("testing")
            .with_allow_http(true)
            .build()
            .unwrap()
    }

    /// The keys in the bucket.
    pub async fn keys(&self, bucket: &str) -> Vec<String> {
        use futures::TryStreamExt;
        use object_store::ObjectStore;
        let mut keys: Vec<String> = self
            .bucket(bucket)
            .list(None)
            .map_ok(|m| m.location.to_string())
            .try_collect()
            .await
            .unwrap();
        keys.sort();
        keys
    }

    /// GetObject straight from the bucket: None when absent, else content type and bytes.
    pub async fn object(&self, bucket: &str, key: &str) -> Option<(String, Vec<u8>)> {
        self.object_with_disposition(bucket, key)
            .await
            .map(|(ct, _, bytes)| (ct, bytes))
    }

    /// GetObject straight from the bucket: content type, content disposition and bytes.
    pub async fn object_with_disposition(
        &self,
        bucket: &str,
        key: &str,
    ) -> Option<(String, String, Vec<u8>)> {
        use object_store::{Attribute, ObjectStore};
        match self.bucket(bucket).get(&key.into()).await {
            Err(object_store::Error::NotFound { .. }) => None,
            Err(e) => panic!("get {key}: {e}"),
            Ok(r) => {
                let ct = r
                    .attributes
                    .get(&Attribute::ContentType)
                    .map(|v| v.to_string())
                    .unwrap_or_default();
                let cd = r
                    .attributes
                    .get(&Attribute::ContentDisposition)
                    .map(|v| v.to_string())
                    .unwrap_or_default();
                Some((ct, cd, r.bytes().await.unwrap().to_vec()))
            }
        }
    }

    /// The engine's `[objects]` configuration for `bucket` on this server.
    pub fn objects_toml(&self, bucket: &str) -> String {
        format!(
            "[objects]\nprovider = \"s3\"\n[objects.s3]\nendpoint = \"{}\"\nbucket = \"{bucket}\"\n\
             region = \"us-east-1\"\naccess_key_id = \"testing\"\nsecret_access_key = \"testing\"\n\
             allow_http = true\n",
            self.endpoint
        )
    }
}
