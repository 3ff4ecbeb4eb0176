//! A CA, a server certificate it signs (for `127.0.0.1` and `localhost`) and an unrelated
//! CA, made at test time with rcgen and written as PEM files.

use std::path::{Path, PathBuf};

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};

/// The PEM files of one test's public key infrastructure.
pub struct Pki {
    /// The CA that signed the server certificate.
    pub ca: PathBuf,
    /// A CA that signed nothing the servers present.
    pub wrong_ca: PathBuf,
    /// The server certificate.
    pub server_cert: PathBuf,
    /// The server's private key (mode 0600: PostgreSQL refuses a key others can read).
    pub server_key: PathBuf,
}

fn ca_params(name: &str) -> CertificateParams {
    let mut params = CertificateParams::new(Vec::new()).expect("no names is valid");
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name.push(DnType::CommonName, name);
    params
}

/// A self-signed CA: its PEM certificate and the issuer that signs with it.
fn new_ca(name: &str) -> (String, Issuer<'static, KeyPair>) {
    let params = ca_params(name);
    let key = KeyPair::generate().expect("CA key");
    let cert = params.self_signed(&key).expect("self-signed CA");
    (cert.pem(), Issuer::new(params, key))
}

fn write(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
}

impl Pki {
    /// Makes the CA, the server certificate and the wrong CA in `dir`.
    pub fn create(dir: &Path) -> Pki {
        let (ca_pem, issuer) = new_ca("lease test CA");
        let (wrong_pem, _) = new_ca("lease test CA (not the one)");
        let mut params = CertificateParams::new(vec!["127.0.0.1".into(), "localhost".into()])
            .expect("server names");
        params
            .distinguished_name
            .push(DnType::CommonName, "127.0.0.1");
        let key = KeyPair::generate().expect("server key");
        let cert = params.signed_by(&key, &issuer).expect("server certificate");
        let pki = Pki {
            ca: dir.join("ca.pem"),
            wrong_ca: dir.join("wrong-ca.pem"),
            server_cert: dir.join("server.pem"),
            server_key: dir.join("server.key"),
        };
        write(&pki.ca, &ca_pem);
        write(&pki.wrong_ca, &wrong_pem);
        write(&pki.server_cert, &cert.pem());
        write(&pki.server_key, &key.serialize_pem());
        set_mode(&pki.server_key, 0o600);
        pki
    }
}

fn set_mode(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .unwrap_or_else(|e| panic!("chmod {}: {e}", path.display()));
}
