//! The redis-rs client for a [`RedisConfig`]: plain, or TLS with the configured root CA.

use lease_core::{LeaseError, Result};

use crate::config::RedisConfig;

/// The client for `url` (`config`'s URL, or one node of it): with [`RedisConfig::tls_root_certificates`] set, a TLS
/// client trusting only those roots (the URL must be `rediss://`); otherwise
/// `redis::Client::open`, which for `rediss://` trusts the system roots.
///
/// Errors: `InvalidInput` for a bad URL, a CA that is not PEM, a CA with a plain `redis://`
/// URL, or TLS asked for in a build without the `tls-rustls` feature.
pub(crate) fn client(config: &RedisConfig, url: &str) -> Result<redis::Client> {
    let invalid = |e: redis::RedisError| LeaseError::invalid("redis url", e.to_string());
    let tls_url = url.trim_start().starts_with("rediss:");
    if (tls_url || config.tls_root_certificates.is_some()) && !cfg!(feature = "tls-rustls") {
        return Err(LeaseError::invalid(
            "redis url",
            "TLS needs lease-redis built with feature `tls-rustls` (on in crate `lease`'s `redis`)",
        ));
    }
    #[cfg(feature = "tls-rustls")]
    {
        if tls_url {
            install_crypto_provider();
        }
        if let Some(root_cert) = &config.tls_root_certificates {
            let certificates = redis::TlsCertificates {
                client_tls: None,
                root_cert: Some(root_cert.clone()),
            };
            return redis::Client::build_with_tls(url, certificates).map_err(invalid);
        }
    }
    redis::Client::open(url).map_err(invalid)
}

/// redis-rs builds its rustls config from the process-wide crypto provider; installs ring's
/// when the process has none (a process that installed its own keeps it).
#[cfg(feature = "tls-rustls")]
fn install_crypto_provider() {
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        // Err only when another thread installed one first: that one is used.
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
}
