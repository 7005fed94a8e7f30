//! HTTPS with a private CA, as behind a corporate TLS-inspecting proxy: the client
//! trusts the server only when `ClientOptions::ca_bundle` names the CA.
//!
//! The fixtures in `tests/fixtures/tls/` (valid 2020–2120, EC P-256) were made once with
//! `openssl ca`: a CA, and a server certificate for IP 127.0.0.1 / DNS localhost signed
//! by it. The CA key was not kept; make a new pair to change them.

// Test set-up helpers below fail loudly rather than return errors.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::PathBuf;
use std::sync::Arc;

use common::{
    TEST_TIMEOUT, chat_sse_response, collect, options, read_request_head, request, stream_error,
    text_of,
};
use kestrel_model::{ModelClient, ModelError, WireApi};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tls").join(name)
}

/// Serves `connections` TLS connections on 127.0.0.1, answering each request with a
/// short chat stream; handshakes the client refuses are skipped.
async fn start_tls_server(connections: usize) -> String {
    kestrel_model::install_crypto_provider();
    let certs: Vec<CertificateDer<'static>> =
        CertificateDer::pem_file_iter(fixture("server.pem")).unwrap().map(Result::unwrap).collect();
    let key = PrivateKeyDer::from_pem_file(fixture("server.key")).unwrap();
    let config =
        rustls::ServerConfig::builder().with_no_client_auth().with_single_cert(certs, key).unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base_url = format!("https://127.0.0.1:{}/v1", listener.local_addr().unwrap().port());
    tokio::spawn(async move {
        for _ in 0..connections {
            let Ok((tcp, _)) = listener.accept().await else { return };
            let Ok(mut tls) = acceptor.accept(tcp).await else { continue };
            if read_request_head(&mut tls).await.is_ok() {
                let _ = tls.write_all(&chat_sse_response("secure hello")).await;
                let _ = tls.shutdown().await;
            }
        }
    });
    base_url
}

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
