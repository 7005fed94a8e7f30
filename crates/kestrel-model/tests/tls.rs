//! HTTPS with a private CA, as behind a corporate TLS-inspecting proxy: the client
//! trusts the server only when `ClientOptions::ca_bundle` names the CA.
//!
//! The fixtures in `tests/fixtures/tls/` (valid 2020–2120, EC P-256) were made once with
//! `openssl ca`: a CA, and a server certificate for IP 127.0.0.1 / DNS localhost signed
//! by it. The CA key was not kept; make a new pair to change them.

// Test set-up helpers below fail loudly rather than return errors.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::tls_server::{fixture, start_tls_server};
use common::{TEST_TIMEOUT, collect, options, request, stream_error, text_of};
use kestrel_model::{ModelClient, ModelError, WireApi};
use tokio_util::sync::CancellationToken;

#[tokio::test]
async fn a_private_ca_is_trusted_only_through_ca_bundle() {
    let base_url = tokio::time::timeout(TEST_TIMEOUT, start_tls_server(2)).await.unwrap();
    let provider = common::provider(&base_url, WireApi::Chat);

    // Without the CA, the handshake fails and the error says why.
    let (untrusting, _) = options(1);
    let client = ModelClient::new(provider.clone(), untrusting).unwrap();
    let error = stream_error(&client).await;
    match &error {
        ModelError::Network { url, message, .. } => {
            assert_eq!(url, &format!("{base_url}/chat/completions"));
            assert!(message.to_lowercase().contains("certificate"), "{message}");
        }
        other => panic!("{other:?}"),
    }

    // With it, the same server is trusted.
    let (mut trusting, _) = options(1);
    trusting.ca_bundle = Some(fixture("ca.pem"));
    let client = ModelClient::new(provider, trusting).unwrap();
    let mut stream = client.stream(&request(), &CancellationToken::new()).await.unwrap();
    let (events, error) = collect(&mut stream).await;
    assert!(error.is_none(), "{error:?}");
    assert_eq!(text_of(&events), "secure hello");
}

#[tokio::test]
async fn a_ca_bundle_without_certificates_is_a_config_error() {
    kestrel_model::install_crypto_provider();
    let provider = common::provider("https://127.0.0.1:1/v1", WireApi::Chat);
    let (mut options, _) = options(1);
    options.ca_bundle = Some(fixture("server.key"));
    let error = ModelClient::new(provider, options).unwrap_err();
    assert!(
        matches!(&error, ModelError::InvalidConfig { message, .. } if message.contains("server.key")),
        "{error:?}"
    );
}
