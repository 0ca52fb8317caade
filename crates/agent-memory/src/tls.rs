//! What the PostgreSQL and Redis providers share for TLS: one crypto provider (rustls on
//! `ring`), reading the certificate and key files a URL or builder names, the trust stores,
//! the verifier for the modes that check less than everything, and the fixed sentence a TLS
//! failure gets in [`MemoryError::Storage`].
//!
//! Files are read when the store is built, so a missing or malformed file is
//! [`Invalid`](MemoryError::Invalid) naming the parameter before anything connects. No message
//! names the file or shows its contents: the parameter's name is enough to find it, and key
//! material never leaves this module except into the TLS stack.

use std::error::Error as StdError;
use std::path::Path;
use std::sync::{Arc, OnceLock};

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::{CryptoProvider, WebPkiSupportedAlgorithms};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::server::ParsedCertificate;
use rustls::{
    AlertDescription, CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore,
    SignatureScheme,
};

use crate::error::{MemoryError, Result};

/// The crypto provider every TLS connection of this crate uses: `ring`, chosen explicitly so a
/// build that also links `aws-lc-rs` (through another dependency) still behaves the same.
pub(crate) fn provider() -> Arc<CryptoProvider> {
    static PROVIDER: OnceLock<Arc<CryptoProvider>> = OnceLock::new();
    Arc::clone(PROVIDER.get_or_init(|| Arc::new(rustls::crypto::ring::default_provider())))
}

/// Installs `ring` as rustls's process-wide default provider, unless the application installed
/// one already (then that one is used, as the application asked).
///
/// The Redis driver builds its TLS configurations with rustls's default provider and fails
/// without one; our PostgreSQL connections never rely on it.
#[cfg(feature = "redis")]
pub(crate) fn install_default_provider() {
    if CryptoProvider::get_default().is_none() {
        // Losing a race with another installer is fine: a default exists either way.
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
}

/// The bytes of the file `param` names.
///
/// # Errors
/// [`Invalid`](MemoryError::Invalid) naming `param` when the file cannot be read.
pub(crate) fn read(param: &'static str, path: &Path) -> Result<Vec<u8>> {
    std::fs::read(path).map_err(|_| MemoryError::invalid(param, "names a file that cannot be read"))
}

/// Every certificate in a PEM file (`-----BEGIN CERTIFICATE-----` blocks), at least one.
///
/// # Errors
/// [`Invalid`](MemoryError::Invalid) naming `param` when the file holds none or a malformed one.
pub(crate) fn certificates(
    param: &'static str,
    pem: &[u8],
) -> Result<Vec<CertificateDer<'static>>> {
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|_| MemoryError::invalid(param, "names a file that is not valid PEM"))?;
    if certs.is_empty() {
        return Err(MemoryError::invalid(param, "names a file that holds no PEM certificate"));
    }
    Ok(certs)
}

/// The private key in a PEM file (PKCS#8, PKCS#1 or SEC1).
///
/// # Errors
/// [`Invalid`](MemoryError::Invalid) naming `param` when the file holds no key.
pub(crate) fn private_key(param: &'static str, pem: &[u8]) -> Result<PrivateKeyDer<'static>> {
    PrivateKeyDer::from_pem_slice(pem)
        .map_err(|_| MemoryError::invalid(param, "names a file that holds no PEM private key"))
}

/// Refuses a private key file that other users may read, as libpq does: a key readable by its
/// group or by anyone is as good as published.
///
/// libpq accepts at most `0600`, or `0640` for a file owned by root (so a system-wide key can be
/// shared through a group). It checks only files owned by root or by the current user; this
/// check applies the `0600` rule to every file not owned by root, which is stricter in the one
/// case libpq skips (a key owned by a third user) and needs no system call.
///
/// # Errors
/// [`Invalid`](MemoryError::Invalid) naming `param` for a file with looser permissions, or one
/// that is not a regular file.
pub(crate) fn check_key_permissions(param: &'static str, path: &Path) -> Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;

        let meta = std::fs::metadata(path)
            .map_err(|_| MemoryError::invalid(param, "names a file that cannot be read"))?;
        if !meta.is_file() {
            return Err(MemoryError::invalid(param, "names something that is not a regular file"));
        }
        let (group_or_other, root_may) = (0o077, 0o037);
        let loose = if meta.uid() == 0 {
            meta.mode() & root_may != 0
        } else {
            meta.mode() & group_or_other != 0
        };
        if loose {
            return Err(MemoryError::invalid(
                param,
                "names a key file that other users can access; it must have permissions 0600 \
                 or less (0640 or less when owned by root)",
            ));
        }
    }
    #[cfg(not(unix))]
    let _ = (param, path);
    Ok(())
}

/// A trust store holding the certificates of one PEM file.
///
/// # Errors
/// [`Invalid`](MemoryError::Invalid) naming `param` when the file holds no usable certificate.
pub(crate) fn roots_from_pem(param: &'static str, pem: &[u8]) -> Result<RootCertStore> {
    let mut roots = RootCertStore::empty();
    let (added, _ignored) = roots.add_parsable_certificates(certificates(param, pem)?);
    if added == 0 {
        return Err(MemoryError::invalid(param, "names a file with no usable CA certificate"));
    }
    Ok(roots)
}

/// The operating system's trust store (`sslrootcert=system`).
///
/// # Errors
/// [`Invalid`](MemoryError::Invalid) naming `param` when the system store holds no certificate.
pub(crate) fn system_roots(param: &'static str) -> Result<RootCertStore> {
    let mut roots = RootCertStore::empty();
    // Unreadable entries are skipped, as OpenSSL skips them; an empty store is an error below.
    let found = rustls_native_certs::load_native_certs();
    roots.add_parsable_certificates(found.certs);
    if roots.is_empty() {
        return Err(MemoryError::invalid(
            param,
            "asks for the system's trusted certificates, but none were found",
        ));
    }
    Ok(roots)
}

/// How much of the server's certificate a connection checks.
#[derive(Debug, Clone)]
pub(crate) enum Verification {
    /// Nothing: the connection is encrypted, and anyone in the middle can read it.
    EncryptOnly,
    /// That a trusted authority signed the certificate; not which host it names.
    Chain(Arc<RootCertStore>),
    /// The chain, and that the certificate names the host connected to.
    Full(Arc<RootCertStore>),
}

/// A rustls client configuration on this crate's provider.
///
/// # Errors
/// [`Invalid`](MemoryError::Invalid) naming `key_param` when the client key does not fit the
/// certificate or the provider cannot use it.
pub(crate) fn client_config(
    verification: &Verification,
    client_auth: Option<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>)>,
    key_param: &'static str,
) -> Result<ClientConfig> {
    let provider = provider();
    let builder = ClientConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()
        .map_err(|_| MemoryError::invalid(key_param, "cannot be used with this TLS stack"))?;
    let builder = match verification {
        Verification::Full(roots) => {
            let verifier = WebPkiServerVerifier::builder_with_provider(Arc::clone(roots), provider)
                .build()
                .map_err(|_| MemoryError::invalid(key_param, "has no usable CA certificate"))?;
            builder.with_webpki_verifier(verifier)
        }
        Verification::Chain(roots) => builder.dangerous().with_custom_certificate_verifier(
            Arc::new(PartialVerifier::new(Some(Arc::clone(roots)), &provider)),
        ),
        Verification::EncryptOnly => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(PartialVerifier::new(None, &provider))),
    };
    match client_auth {
        None => Ok(builder.with_no_client_auth()),
        Some((certs, key)) => builder
            .with_client_auth_cert(certs, key)
            .map_err(|_| MemoryError::invalid(key_param, "does not match the client certificate")),
    }
}

/// The verifier of the modes that check less than a browser would: libpq's `verify-ca` (the
/// chain, not the host name) and `require`/`prefer` without a root certificate (nothing).
///
/// It still verifies the handshake signature with the certificate's key, so the peer must hold
/// the key of the certificate it shows: what it skips is only the question whether that
/// certificate should be trusted (always, for `roots: None`) or names this host (never).
#[derive(Debug)]
struct PartialVerifier {
    roots: Option<Arc<RootCertStore>>,
    algorithms: WebPkiSupportedAlgorithms,
}

impl PartialVerifier {
    fn new(roots: Option<Arc<RootCertStore>>, provider: &CryptoProvider) -> Self {
        Self { roots, algorithms: provider.signature_verification_algorithms }
    }
}

impl ServerCertVerifier for PartialVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        now: UnixTime,
    ) -> std::result::Result<ServerCertVerified, rustls::Error> {
        if let Some(roots) = &self.roots {
            let cert = ParsedCertificate::try_from(end_entity)?;
            rustls::client::verify_server_cert_signed_by_trust_anchor(
                &cert,
                roots,
                intermediates,
                now,
                self.algorithms.all,
            )?;
        }
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

/// The fixed sentence for a failure anywhere in `err`'s source chain that TLS caused, or `None`
/// when TLS had no part in it. Each sentence starts with "TLS:" and names what to check;
/// none quotes the driver, a host or a certificate.
pub(crate) fn describe_failure(err: &(dyn StdError + 'static)) -> Option<&'static str> {
    let mut next = Some(err);
    while let Some(current) = next {
        if let Some(tls) = as_rustls(current) {
            return Some(describe(tls));
        }
        next = current.source();
    }
    None
}

/// The fixed sentence for a TLS failure that reached us only as text: the Redis cluster client
/// turns the errors of its first connections into a message, which quotes rustls's `Display`
/// ("invalid peer certificate: …", "received fatal alert: …"). `None` for any other text.
#[cfg(feature = "redis")]
pub(crate) fn describe_failure_text(text: &str) -> Option<&'static str> {
    if let Some(at) = text.find("invalid peer certificate: ") {
        let detail = &text[at..];
        return Some(
            if detail.contains("not valid for name") || detail.contains("NotValidForName") {
                describe(&rustls::Error::InvalidCertificate(CertificateError::NotValidForName))
            } else if detail.contains("UnknownIssuer") {
                describe(&rustls::Error::InvalidCertificate(CertificateError::UnknownIssuer))
            } else if ["expired", "Expired", "not valid yet", "NotValidYet"]
                .iter()
                .any(|w| detail.contains(w))
            {
                describe(&rustls::Error::InvalidCertificate(CertificateError::Expired))
            } else {
                describe(&rustls::Error::InvalidCertificate(CertificateError::BadEncoding))
            },
        );
    }
    if let Some(at) = text.find("received fatal alert: ") {
        let alert = &text[at + "received fatal alert: ".len()..];
        let alert = alert.split(|c: char| !c.is_ascii_alphanumeric()).next().unwrap_or("");
        let alert = match alert {
            "CertificateRequired" => AlertDescription::CertificateRequired,
            "BadCertificate" | "UnknownCA" | "CertificateUnknown" | "AccessDenied" => {
                AlertDescription::BadCertificate
            }
            _ => AlertDescription::HandshakeFailure,
        };
        return Some(describe(&rustls::Error::AlertReceived(alert)));
    }
    None
}

/// `err` as a rustls error, also when an `io::Error` carries it (as tokio-rustls reports
/// handshake failures): `io::Error::source` skips the error it wraps, `get_ref` does not.
fn as_rustls<'a>(err: &'a (dyn StdError + 'static)) -> Option<&'a rustls::Error> {
    // redis-rs keeps its cause behind an `Arc`, whose `Error` impl forwards `source` past it.
    let err: &(dyn StdError + 'static) =
        match err.downcast_ref::<Arc<dyn StdError + Send + Sync + 'static>>() {
            Some(inner) => inner.as_ref(),
            None => err,
        };
    if let Some(tls) = err.downcast_ref::<rustls::Error>() {
        return Some(tls);
    }
    err.downcast_ref::<std::io::Error>()?.get_ref()?.downcast_ref::<rustls::Error>()
}

fn describe(err: &rustls::Error) -> &'static str {
    use rustls::Error as E;
    match err {
        E::InvalidCertificate(CertificateError::NotValidForName)
        | E::InvalidCertificate(CertificateError::NotValidForNameContext { .. }) => {
            "TLS: the server's certificate does not name the host connected to"
        }
        E::InvalidCertificate(
            CertificateError::Expired
            | CertificateError::ExpiredContext { .. }
            | CertificateError::NotValidYet
            | CertificateError::NotValidYetContext { .. },
        ) => "TLS: the server's certificate has expired or is not valid yet",
        E::InvalidCertificate(CertificateError::UnknownIssuer) => {
            "TLS: the server's certificate is not signed by a trusted authority (check the CA \
             certificate setting)"
        }
        E::InvalidCertificate(_) => "TLS: the server's certificate was refused",
        E::AlertReceived(AlertDescription::CertificateRequired) => {
            "TLS: the server requires a client certificate"
        }
        E::AlertReceived(
            AlertDescription::BadCertificate
            | AlertDescription::UnknownCA
            | AlertDescription::CertificateUnknown
            | AlertDescription::UnsupportedCertificate
            | AlertDescription::CertificateExpired
            | AlertDescription::CertificateRevoked
            | AlertDescription::AccessDenied,
        ) => "TLS: the server refused the client certificate",
        _ => "TLS: the handshake with the server failed",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_are_found_behind_io_errors_and_named_by_cause() {
        let name = rustls::Error::InvalidCertificate(CertificateError::NotValidForName);
        let wrapped = std::io::Error::new(std::io::ErrorKind::InvalidData, name);
        assert_eq!(
            describe_failure(&wrapped),
            Some("TLS: the server's certificate does not name the host connected to")
        );
        let issuer = rustls::Error::InvalidCertificate(CertificateError::UnknownIssuer);
        assert!(describe_failure(&issuer).unwrap().contains("trusted authority"));
        let required = rustls::Error::AlertReceived(AlertDescription::CertificateRequired);
        assert!(describe_failure(&required).unwrap().contains("requires a client certificate"));
        let plain = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        assert_eq!(describe_failure(&plain), None);
    }

    #[cfg(feature = "redis")]
    #[test]
    fn failures_known_only_as_text_are_named_from_rustls_display() {
        for err in [
            rustls::Error::InvalidCertificate(CertificateError::UnknownIssuer),
            rustls::Error::InvalidCertificate(CertificateError::NotValidForName),
            rustls::Error::AlertReceived(AlertDescription::CertificateRequired),
            rustls::Error::AlertReceived(AlertDescription::UnknownCA),
        ] {
            let text = format!("Failed to create initial connections - Io: {err}");
            assert_eq!(describe_failure_text(&text), Some(describe(&err)), "{text}");
        }
        assert_eq!(describe_failure_text("Connection refused (os error 111)"), None);
    }

    #[test]
    fn bad_files_are_invalid_naming_the_parameter_only() {
        let err = read("sslrootcert", Path::new("/nonexistent/secret-dir/root.crt")).unwrap_err();
        assert_eq!(err.to_string(), "invalid sslrootcert: names a file that cannot be read");
        let err = certificates("cacert", b"not pem at all").unwrap_err();
        assert_eq!(err.to_string(), "invalid cacert: names a file that holds no PEM certificate");
        let err =
            private_key("key", b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n");
        assert!(err.unwrap_err().to_string().starts_with("invalid key:"));
    }
}
