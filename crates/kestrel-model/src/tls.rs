//! TLS set-up: rustls with the `ring` provider (no aws-lc), the platform's roots (which
//! honour `SSL_CERT_FILE` / `SSL_CERT_DIR` on Linux), plus an optional CA bundle for
//! users behind a corporate TLS-inspecting proxy.
//!
//! The roots are loaded on the first certificate to verify, not when a client is built:
//! reading and parsing the system store costs milliseconds that a plain-http request to
//! a local server (or a worker that never makes a request) should not pay.

use std::path::Path;
use std::sync::{Arc, OnceLock};

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};

/// Installs rustls' `ring` crypto provider as the process default. Idempotent: does
/// nothing when a provider is already installed. The binary calls it at the top of
/// `main`; `ModelClient::new` calls it too, since reqwest cannot build without one.
pub fn install_crypto_provider() {
    if CryptoProvider::get_default().is_none() {
        // Losing a race to another installer is fine: a provider is installed either way.
        let _already_installed = rustls::crypto::ring::default_provider().install_default();
    }
}

/// Reads the PEM certificates of a CA bundle file. Fails with a message naming the
/// file when it cannot be read or holds no certificate.
pub(crate) fn read_ca_bundle(path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let pem = std::fs::read(path)
        .map_err(|e| format!("cannot read the CA bundle {}: {e}", path.display()))?;
    let certificates = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("the CA bundle {} is not valid PEM: {e}", path.display()))?;
    if certificates.is_empty() {
        return Err(format!("the CA bundle {} holds no PEM certificate", path.display()));
    }
    Ok(certificates)
}

/// The client's TLS configuration: HTTP/1.1 over TLS 1.2/1.3, server certificates
/// checked against the platform's roots plus `extra_roots`, loaded on first use.
///
/// Fails only if the installed crypto provider offers no usable protocol version.
pub(crate) fn client_config(
    extra_roots: Vec<CertificateDer<'static>>,
) -> Result<rustls::ClientConfig, String> {
    let provider = CryptoProvider::get_default()
        .cloned()
        .unwrap_or_else(|| Arc::new(rustls::crypto::ring::default_provider()));
    let verifier = LazyRootsVerifier::new(Arc::clone(&provider), extra_roots);
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("cannot set up TLS: {e}"))?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(verifier))
        .with_no_client_auth();
    // The client speaks HTTP/1.1 only (streaming APIs need nothing more).
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

/// Verifies server certificates as the platform verifier does, building it (and so
/// reading the system's roots) the first time a certificate must be checked. Signature
/// checks need no roots and use the provider directly, as the platform verifier would.
#[derive(Debug)]
struct LazyRootsVerifier {
    provider: Arc<CryptoProvider>,
    extra_roots: Vec<CertificateDer<'static>>,
    built: OnceLock<Result<rustls_platform_verifier::Verifier, rustls::Error>>,
}

impl LazyRootsVerifier {
    fn new(provider: Arc<CryptoProvider>, extra_roots: Vec<CertificateDer<'static>>) -> Self {
        Self { provider, extra_roots, built: OnceLock::new() }
    }

    /// The platform verifier; an error (no roots at all) is kept and reported on every
    /// handshake, naming the cause.
    fn platform(&self) -> Result<&rustls_platform_verifier::Verifier, rustls::Error> {
        self.built
            .get_or_init(|| {
                rustls_platform_verifier::Verifier::new_with_extra_roots(
                    self.extra_roots.iter().cloned(),
                    Arc::clone(&self.provider),
                )
            })
            .as_ref()
            .map_err(Clone::clone)
    }
}

impl ServerCertVerifier for LazyRootsVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        self.platform()?.verify_server_cert(
            end_entity,
            intermediates,
            server_name,
            ocsp_response,
            now,
        )
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider.signature_verification_algorithms.supported_schemes()
    }
}
