//! Talking to the Docker engine: why a container could not be had ([`ContainerError`]), and
//! the bounded, blocking calls to the engine that building and starting containers share.

use std::time::Duration;

/// Why a container could not be had.
#[derive(Debug, thiserror::Error)]
pub enum ContainerError {
    /// No Docker engine answers (`DOCKER_HOST`, else the local socket).
    #[error(
        "no Docker engine answers ({0}); install and start one as root: \
         `apt-get install -y docker.io` and `dockerd --bridge=none --iptables=false &`"
    )]
    NoEngine(String),
    /// A binary, library or file the image is built from is missing on this machine.
    #[error("cannot assemble the {image} image: {reason}")]
    Assemble {
        /// The image.
        image: String,
        /// What is missing.
        reason: String,
    },
    /// The engine refused to build the image.
    #[error("cannot build the image {image}: {reason}")]
    Build {
        /// The image.
        image: String,
        /// The engine's answer.
        reason: String,
    },
    /// The container did not start or did not become ready.
    #[error("cannot start a {image} container: {reason}")]
    Start {
        /// The image.
        image: String,
        /// testcontainers' answer.
        reason: String,
    },
}

/// Runs a bollard call on a private current-thread runtime, bounded by 10 s.
pub(super) fn block_on<T, F>(call: F) -> Result<T, String>
where
    F: std::future::Future<Output = T>,
{
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("no runtime for the engine call: {e}"))?;
    runtime
        .block_on(async { tokio::time::timeout(Duration::from_secs(10), call).await })
        .map_err(|_| "the engine gave no answer within 10 s".to_owned())
}

/// Ok when a Docker engine answers a ping (`DOCKER_HOST`, else the local socket).
pub fn engine_answers() -> Result<(), ContainerError> {
    let docker = testcontainers::bollard::Docker::connect_with_defaults()
        .map_err(|e| ContainerError::NoEngine(e.to_string()))?;
    block_on(async { docker.ping().await })
        .and_then(|pinged| pinged.map_err(|e| e.to_string()))
        .map(|_| ())
        .map_err(ContainerError::NoEngine)
}
