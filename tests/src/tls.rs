//! A certificate authority of a test's own: a control plane served over HTTPS (wrangler's
//! `--local-protocol https` with this certificate) that the test's clients, the CLI and the
//! sandboxes trust through `SSL_CERT_FILE`, as a self-hoster's private CA would be.

use anyhow::Result;
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair};
use std::path::PathBuf;

pub struct TestCa {
    _dir: tempfile::TempDir,
    /// The authority's certificate (what clients trust).
    pub ca: PathBuf,
    /// The server's certificate (for `localhost` and 127.0.0.1) and its key.
    pub cert: PathBuf,
    pub key: PathBuf,
}

impl TestCa {
    pub fn new() -> Result<TestCa> {
        let dir = tempfile::Builder::new().prefix("inspect-ca-").tempdir()?;
        let ca_key = KeyPair::generate()?;
        let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
        ca_params
            .distinguished_name
            .push(DnType::CommonName, "inspect test authority");
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let ca = ca_params.self_signed(&ca_key)?;
        let key = KeyPair::generate()?;
        let mut params =
            CertificateParams::new(vec!["localhost".to_owned(), "127.0.0.1".to_owned()])?;
        params
            .distinguished_name
            .push(DnType::CommonName, "localhost");
        let cert = params.signed_by(&key, &ca, &ca_key)?;
        let out = TestCa {
            ca: dir.path().join("ca.pem"),
            cert: dir.path().join("cert.pem"),
            key: dir.path().join("key.pem"),
            _dir: dir,
        };
        std::fs::write(&out.ca, ca.pem())?;
        std::fs::write(&out.cert, cert.pem())?;
        std::fs::write(&out.key, key.serialize_pem())?;
        Ok(out)
    }

    /// Makes this process (and what it starts from now on: the local host, the CLI, the
    /// sandboxes through the host) trust the authority. Before any client is made.
    pub fn trust(&self) {
        std::env::set_var("SSL_CERT_FILE", &self.ca);
    }
}
