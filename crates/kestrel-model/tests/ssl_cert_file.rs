//! `SSL_CERT_FILE` is honoured (rustls-native-certs reads it for the platform verifier):
//! the fix the client's certificate error suggests works without any Kestrel setting.
//! One test in its own binary, because it sets a process-wide environment variable.

// Test set-up helpers below fail loudly rather than return errors.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::tls_server::{fixture, start_tls_server};
use common::{TEST_TIMEOUT, collect, options, request, text_of};
use kestrel_model::{ModelClient, WireApi};
use tokio_util::sync::CancellationToken;

#[tokio::test]
async fn ssl_cert_file_makes_a_private_ca_trusted() {
    let base_url = tokio::time::timeout(TEST_TIMEOUT, start_tls_server(1)).await.unwrap();
    // SAFETY: this test binary runs this one test, and no other thread reads the
    // environment while it is changed (the runtime is current-thread).
    unsafe {
        std::env::set_var("SSL_CERT_FILE", fixture("ca.pem"));
    }
    let client =
        ModelClient::new(common::provider(&base_url, WireApi::Chat), options(1).0).unwrap();
    let mut stream = client.stream(&request(), &CancellationToken::new()).await.unwrap();
    let (events, error) = collect(&mut stream).await;
    assert!(error.is_none(), "{error:?}");
    assert_eq!(text_of(&events), "secure hello");
}
