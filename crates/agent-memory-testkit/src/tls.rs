//! Throwaway certificates for the TLS fixtures, generated when a test process first needs them
//! (with `rcgen`; nothing is committed): one certificate authority, a server certificate it
//! signed for `localhost` and `127.0.0.1` (not `127.0.0.2`, which the TLS Redis fixture also
//! listens on, so a test can connect to a name the certificate does not hold), a client
//! certificate for [`CLIENT_NAME`], and a second authority that signed nothing the servers
//! use, for "unknown CA" tests.
//!
//! The files are PEM in a temporary directory that a watchdog removes when the test process is
//! gone; key files are `0600`. Fixtures that run servers as another user copy what they need
//! with [`TestCerts::copy_server_files`].

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use tempfile::TempDir;

use crate::util::{fail, sh_quote, Watchdog};

/// The common name of the client certificate, also the PostgreSQL role the client-certificate
/// tests log in as (PostgreSQL's `cert` authentication maps the common name to the role).
pub const CLIENT_NAME: &str = "agent_memory_client";

/// The host names and addresses the server certificate holds.
pub const SERVER_NAMES: [&str; 2] = ["localhost", "127.0.0.1"];

/// A loopback address the TLS servers also listen on that the server certificate does not
/// name: connecting to it fails `verify-full` host name checks.
pub const UNNAMED_ADDRESS: &str = "127.0.0.2";

/// The certificate files of one test process, from [`shared_certs`].
#[derive(Debug)]
pub struct TestCerts {
    dir: TempDir,
    _watchdog: Watchdog,
}

/// The certificates every TLS fixture of this process uses, generated on first use.
///
/// # Panics
/// When the certificates cannot be generated or written.
pub fn shared_certs() -> &'static TestCerts {
    static CERTS: OnceLock<TestCerts> = OnceLock::new();
    CERTS.get_or_init(TestCerts::generate)
}

impl TestCerts {
    /// Generates a fresh authority, server and client certificates, and a second authority.
    ///
    /// # Panics
    /// When generation or writing fails.
    pub fn generate() -> Self {
        let dir = tempfile::Builder::new()
            .prefix("agent-memory-certs-")
            .tempdir()
            .unwrap_or_else(|e| fail(&format!("cannot create a directory for certificates: {e}")));
        // A shared instance lives in a static, which is never dropped: the watchdog removes it.
        let watchdog =
            Watchdog::spawn(&format!("rm -rf {}", sh_quote(&path_text(dir.path()))), None);
        let certs = Self { dir, _watchdog: watchdog };

        let (ca_pem, ca) = authority("agent-memory test CA");
        certs.write("ca.crt", &ca_pem);
        let (other_pem, _) = authority("agent-memory unrelated CA");
        certs.write("other-ca.crt", &other_pem);

        let names: Vec<String> = SERVER_NAMES.iter().map(|name| (*name).to_owned()).collect();
        // Cluster nodes show their server certificate as a client certificate to each other on
        // the cluster bus, so it serves both purposes, as cluster node certificates usually do.
        let (server_cert, server_key) = leaf(
            &ca,
            names,
            "localhost",
            &[ExtendedKeyUsagePurpose::ServerAuth, ExtendedKeyUsagePurpose::ClientAuth],
        );
        certs.write("server.crt", &server_cert);
        certs.write_key("server.key", &server_key);
        let (client_cert, client_key) =
            leaf(&ca, Vec::new(), CLIENT_NAME, &[ExtendedKeyUsagePurpose::ClientAuth]);
        certs.write("client.crt", &client_cert);
        certs.write_key("client.key", &client_key);
        certs
    }

    /// The authority that signed the server and client certificates.
    pub fn ca(&self) -> PathBuf {
        self.path("ca.crt")
    }

    /// An authority that signed nothing the servers present.
    pub fn other_ca(&self) -> PathBuf {
        self.path("other-ca.crt")
    }

    /// The server certificate, for [`SERVER_NAMES`].
    pub fn server_cert(&self) -> PathBuf {
        self.path("server.crt")
    }

    /// The server certificate's key (`0600`).
    pub fn server_key(&self) -> PathBuf {
        self.path("server.key")
    }

    /// The client certificate, for [`CLIENT_NAME`].
    pub fn client_cert(&self) -> PathBuf {
        self.path("client.crt")
    }

    /// The client certificate's key (`0600`).
    pub fn client_key(&self) -> PathBuf {
        self.path("client.key")
    }

    /// Copies the CA and the server certificate and key into `dir` as `ca.crt`, `server.crt`
    /// and `server.key` (`0600`), for servers that must own their key file.
    ///
    /// # Panics
    /// When a file cannot be copied.
    pub fn copy_server_files(&self, dir: &Path) {
        for (from, to) in [
            (self.ca(), "ca.crt"),
            (self.server_cert(), "server.crt"),
            (self.server_key(), "server.key"),
        ] {
            std::fs::copy(&from, dir.join(to))
                .unwrap_or_else(|e| fail(&format!("cannot copy {}: {e}", from.display())));
        }
        restrict(&dir.join("server.key"));
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn write(&self, name: &str, pem: &str) {
        std::fs::write(self.path(name), pem)
            .unwrap_or_else(|e| fail(&format!("cannot write {name}: {e}")));
    }

    fn write_key(&self, name: &str, pem: &str) {
        self.write(name, pem);
        restrict(&self.path(name));
    }
}

/// A self-signed authority: its certificate in PEM, and the issuer that signs with it.
fn authority(name: &str) -> (String, Issuer<'static, KeyPair>) {
    let key = KeyPair::generate().unwrap_or_else(|e| fail(&format!("cannot generate a key: {e}")));
    let mut params = CertificateParams::new(Vec::<String>::new())
        .unwrap_or_else(|e| fail(&format!("bad CA parameters: {e}")));
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name.push(DnType::CommonName, name);
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let cert =
        params.self_signed(&key).unwrap_or_else(|e| fail(&format!("cannot sign the CA: {e}")));
    (cert.pem(), Issuer::new(params, key))
}

/// A certificate signed by `issuer` for `names` (subject alternative names), with `common_name`
/// and the extended key `usages`: its PEM and its key's PEM.
fn leaf(
    issuer: &Issuer<'static, KeyPair>,
    names: Vec<String>,
    common_name: &str,
    usages: &[ExtendedKeyUsagePurpose],
) -> (String, String) {
    let key = KeyPair::generate().unwrap_or_else(|e| fail(&format!("cannot generate a key: {e}")));
    let mut params =
        CertificateParams::new(names).unwrap_or_else(|e| fail(&format!("bad parameters: {e}")));
    params.distinguished_name.push(DnType::CommonName, common_name);
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages = usages.to_vec();
    let cert = params
        .signed_by(&key, issuer)
        .unwrap_or_else(|e| fail(&format!("cannot sign a certificate: {e}")));
    (cert.pem(), key.serialize_pem())
}

/// Makes a key file readable by its owner only, as PostgreSQL, PgBouncer and the library
/// require.
fn restrict(path: &Path) {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
            .unwrap_or_else(|e| fail(&format!("cannot restrict {}: {e}", path.display())));
    }
    #[cfg(not(unix))]
    let _ = path;
}

fn path_text(path: &Path) -> String {
    path.to_str().unwrap_or_else(|| fail("the temporary directory path is not UTF-8")).to_owned()
}
