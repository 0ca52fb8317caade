//! libpq's TLS settings (`sslmode`, `sslrootcert`, `sslcert`, `sslkey`) and what they make of a
//! connection: the driver's mode, the rustls configuration, and whether a failed handshake
//! falls back to a plain connection. The rules are libpq's, written out in the module docs
//! ("TLS"); the file reading, trust stores and verifier are the crate's shared
//! [`tls`](crate::tls) module.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio_postgres_rustls::MakeRustlsConnect;

use crate::error::{MemoryError, Result};
use crate::tls::{self, Verification};

/// How a connection uses TLS: libpq's `sslmode`, with libpq's meaning.
///
/// | mode | encrypted | server certificate checked |
/// | --- | --- | --- |
/// | `Disable` | never | – |
/// | `Prefer` (the default) | when the server accepts TLS | the chain, when a root certificate is available |
/// | `Require` | always | the chain, when a root certificate is available (libpq's twist: then it is `VerifyCa`) |
/// | `VerifyCa` | always | the chain |
/// | `VerifyFull` | always | the chain and the host name |
///
/// See the [module docs](super) ("TLS") for where root certificates come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum SslMode {
    /// Plain connections only.
    Disable,
    /// TLS when the server offers it, else plain; a failed handshake is retried once without
    /// TLS, as libpq does.
    Prefer,
    /// TLS or no connection; the certificate is checked only when a root certificate is given
    /// or present in the default place.
    Require,
    /// TLS, with a certificate signed by a trusted authority.
    VerifyCa,
    /// TLS, with a certificate signed by a trusted authority that names the host.
    VerifyFull,
}

impl SslMode {
    /// The URL spelling, as libpq writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Disable => "disable",
            Self::Prefer => "prefer",
            Self::Require => "require",
            Self::VerifyCa => "verify-ca",
            Self::VerifyFull => "verify-full",
        }
    }

    /// The mode a URL spells, if it is one of ours.
    pub(crate) fn parse(word: &str) -> Option<Self> {
        [Self::Disable, Self::Prefer, Self::Require, Self::VerifyCa, Self::VerifyFull]
            .into_iter()
            .find(|mode| mode.as_str() == word)
    }

    /// What the driver is told: it knows only whether TLS is off, optional or required; the
    /// certificate checks are the rustls configuration's.
    fn driver(self) -> tokio_postgres::config::SslMode {
        use tokio_postgres::config::SslMode as Driver;
        match self {
            Self::Disable => Driver::Disable,
            Self::Prefer => Driver::Prefer,
            Self::Require | Self::VerifyCa | Self::VerifyFull => Driver::Require,
        }
    }
}

/// Where the trusted CA certificates come from (`sslrootcert`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum RootCert {
    /// A PEM file.
    File(PathBuf),
    /// The operating system's trust store (`sslrootcert=system`).
    System,
}

/// The TLS settings as given, before [`resolve`] reads any file.
#[derive(Clone, Default, PartialEq, Eq)]
pub(crate) struct TlsSettings {
    pub(crate) mode: Option<SslMode>,
    pub(crate) root_cert: Option<RootCert>,
    pub(crate) cert: Option<PathBuf>,
    pub(crate) key: Option<PathBuf>,
}

impl fmt::Debug for TlsSettings {
    // Paths are not secret, but nothing about the key is shown beyond whether one is set.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsSettings")
            .field("sslmode", &self.mode.map(SslMode::as_str))
            .field("sslrootcert", &self.root_cert)
            .field("sslcert", &self.cert)
            .field("sslkey", &self.key.as_ref().map(|_| "set"))
            .finish()
    }
}

/// The settings made concrete: the mode in force, and the connector built from the files.
#[derive(Clone)]
pub(crate) struct Tls {
    /// The mode in force (the default resolved).
    pub(crate) mode: SslMode,
    /// What the certificate check covers, for `Debug`.
    checks: &'static str,
    client_cert: bool,
    /// The rustls connector; unused under `Disable`.
    pub(crate) connector: MakeRustlsConnect,
}

impl Tls {
    /// The driver's `sslmode`.
    pub(crate) fn driver_mode(&self) -> tokio_postgres::config::SslMode {
        self.mode.driver()
    }

    /// Whether a failed handshake is retried once without TLS (libpq's `prefer`).
    pub(crate) fn falls_back_to_plain(&self) -> bool {
        self.mode == SslMode::Prefer
    }
}

impl fmt::Debug for Tls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tls")
            .field("sslmode", &self.mode.as_str())
            .field("server_certificate", &self.checks)
            .field("client_certificate", &self.client_cert)
            .finish()
    }
}

/// libpq's default file `name` under `~/.postgresql`, when it exists.
fn default_file(name: &str) -> Option<PathBuf> {
    let path = dirs::home_dir()?.join(".postgresql").join(name);
    path.is_file().then_some(path)
}

/// Reads the files `settings` name (or libpq's defaults) and builds the connector.
///
/// # Errors
/// [`Invalid`](MemoryError::Invalid) naming the libpq parameter (`sslmode`, `sslrootcert`,
/// `sslcert` or `sslkey`) for a combination libpq refuses, or a file that is missing, unreadable,
/// malformed, or (for the key) readable by other users.
pub(crate) fn resolve(settings: &TlsSettings) -> Result<Tls> {
    let system = settings.root_cert == Some(RootCert::System);
    let mode = match settings.mode {
        // libpq: "weak sslmode may not be used with sslrootcert=system".
        Some(mode) if system && mode != SslMode::VerifyFull => {
            return Err(MemoryError::invalid(
                "sslmode",
                "must be verify-full with sslrootcert=system, as in libpq",
            ))
        }
        Some(mode) => mode,
        None if system => SslMode::VerifyFull,
        None => SslMode::Prefer,
    };
    if mode == SslMode::Disable {
        // No file is read for connections that never use TLS.
        return Ok(Tls {
            mode,
            checks: "none (no TLS)",
            client_cert: false,
            connector: connector(&Verification::EncryptOnly, None)?,
        });
    }
    let roots = match &settings.root_cert {
        Some(RootCert::File(path)) => Some(file_roots(path)?),
        Some(RootCert::System) => Some(tls::system_roots("sslrootcert")?),
        None => default_file("root.crt").map(|path| file_roots(&path)).transpose()?,
    };
    // libpq checks the chain in every mode once it has a root certificate, and the host name in
    // verify-full only.
    let (verification, checks) =
        match (mode, roots) {
            (SslMode::VerifyCa | SslMode::VerifyFull, None) => return Err(MemoryError::invalid(
                "sslmode",
                "verify-ca and verify-full need a root certificate: set sslrootcert to a CA file, \
                 or to system for the system's trusted authorities",
            )),
            (SslMode::VerifyFull, Some(roots)) => {
                (Verification::Full(Arc::new(roots)), "chain and host name")
            }
            (_, Some(roots)) => (Verification::Chain(Arc::new(roots)), "chain"),
            (_, None) => (Verification::EncryptOnly, "none (encryption only)"),
        };
    let client = client_auth(settings)?;
    let client_cert = client.is_some();
    Ok(Tls { mode, checks, client_cert, connector: connector(&verification, client)? })
}

fn file_roots(path: &Path) -> Result<rustls::RootCertStore> {
    tls::roots_from_pem("sslrootcert", &tls::read("sslrootcert", path)?)
}

type ClientAuth =
    (Vec<rustls::pki_types::CertificateDer<'static>>, rustls::pki_types::PrivateKeyDer<'static>);

/// The client certificate and key: the ones named, or libpq's default files when the
/// certificate file exists.
fn client_auth(settings: &TlsSettings) -> Result<Option<ClientAuth>> {
    let cert = settings.cert.clone().or_else(|| default_file("postgresql.crt"));
    let Some(cert) = cert else {
        if settings.key.is_some() {
            return Err(MemoryError::invalid("sslkey", "is set, but sslcert is not"));
        }
        return Ok(None);
    };
    let key = settings.key.clone().or_else(|| default_file("postgresql.key")).ok_or_else(|| {
        MemoryError::invalid("sslkey", "is needed with sslcert: the certificate has no private key")
    })?;
    let certs = tls::certificates("sslcert", &tls::read("sslcert", &cert)?)?;
    tls::check_key_permissions("sslkey", &key)?;
    let key = tls::private_key("sslkey", &tls::read("sslkey", &key)?)?;
    Ok(Some((certs, key)))
}

fn connector(verification: &Verification, client: Option<ClientAuth>) -> Result<MakeRustlsConnect> {
    Ok(MakeRustlsConnect::new(tls::client_config(verification, client, "sslkey")?))
}
