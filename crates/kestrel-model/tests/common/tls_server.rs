//! A one-purpose HTTPS server for the TLS tests, using the committed fixtures.

use std::path::PathBuf;
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;

use super::{chat_sse_response, read_request_head};

pub fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tls").join(name)
}

/// Serves `connections` TLS connections on 127.0.0.1, answering each request with a
/// short chat stream; handshakes the client refuses are skipped.
pub async fn start_tls_server(connections: usize) -> String {
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
