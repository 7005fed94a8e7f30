//! TLS set-up: rustls with the `ring` provider (no aws-lc), the platform's roots (which
//! honour `SSL_CERT_FILE` / `SSL_CERT_DIR` on Linux), plus an optional CA bundle for
//! users behind a corporate TLS-inspecting proxy.

use std::path::Path;

/// Installs rustls' `ring` crypto provider as the process default. Idempotent: does
/// nothing when a provider is already installed. The binary calls it at the top of
/// `main`; `ModelClient::new` calls it too, since reqwest cannot build without one.
pub fn install_crypto_provider() {
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        // Losing a race to another installer is fine: a provider is installed either way.
        let _already_installed = rustls::crypto::ring::default_provider().install_default();
    }
}

/// Reads the PEM certificates of a CA bundle file. Fails with a message naming the
/// file when it cannot be read or holds no certificate.
pub(crate) fn read_ca_bundle(path: &Path) -> Result<Vec<reqwest::Certificate>, String> {
    let pem = std::fs::read(path)
        .map_err(|e| format!("cannot read the CA bundle {}: {e}", path.display()))?;
    let certificates = reqwest::Certificate::from_pem_bundle(&pem)
        .map_err(|e| format!("the CA bundle {} is not valid PEM: {e}", path.display()))?;
    if certificates.is_empty() {
        return Err(format!("the CA bundle {} holds no PEM certificate", path.display()));
    }
    Ok(certificates)
}
