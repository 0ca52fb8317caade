//! Optional TLS (`--tls-cert`, `--tls-key`): rustls with the ring provider, TLS 1.2 and 1.3.

use std::path::Path;
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::ServerConfig;

/// A server configuration from a PEM certificate chain and its PEM private key.
///
/// # Errors
/// A sentence naming the file that cannot be read or used; never the key's bytes.
pub fn server_config(cert: &Path, key: &Path) -> Result<Arc<ServerConfig>, String> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .and_then(Iterator::collect)
        .map_err(|err| format!("cannot read the certificate chain in --tls-cert: {err}"))?;
    if certs.is_empty() {
        return Err("--tls-cert holds no PEM certificate".to_owned());
    }
    let key = PrivateKeyDer::from_pem_file(key)
        .map_err(|err| format!("cannot read the private key in --tls-key: {err}"))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|err| format!("cannot set up TLS: {err}"))?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|err| format!("--tls-cert and --tls-key cannot be used together: {err}"))?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}
