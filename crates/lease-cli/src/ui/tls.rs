//! The console's own TLS (docs/decisions/0043-console.md, "Access and transport"): rustls with the ring
//! provider the backends' TLS already uses, a certificate chain and key read from PEM files
//! at start (a file that does not read is bad usage, before the backend is opened).

use std::path::Path;
use std::sync::Arc;

use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::TlsAcceptor;

use crate::failure::Failure;

/// An acceptor serving the chain in `cert` (server certificate first) with the key in `key`,
/// HTTP/1.1 only.
pub fn acceptor(cert: &Path, key: &Path) -> Result<TlsAcceptor, Failure> {
    let chain = CertificateDer::pem_file_iter(cert)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .map_err(|e| bad_file("--tls-cert", cert, &e))?;
    if chain.is_empty() {
        return Err(Failure::Usage(format!(
            "--tls-cert {}: no certificate in the file",
            cert.display()
        )));
    }
    let private = PrivateKeyDer::from_pem_file(key).map_err(|e| bad_file("--tls-key", key, &e))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| Failure::Failed(format!("TLS: {e}")))?
        .with_no_client_auth()
        .with_single_cert(chain, private)
        .map_err(|e| {
            Failure::Usage(format!(
                "--tls-cert {} with --tls-key {}: {e}",
                cert.display(),
                key.display()
            ))
        })?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}

fn bad_file(flag: &str, path: &Path, e: &dyn std::fmt::Display) -> Failure {
    Failure::Usage(format!("{flag} {}: {e}", path.display()))
}
