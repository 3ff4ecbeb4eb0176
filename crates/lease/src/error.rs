//! Why [`crate::open()`] / [`crate::open_with()`] could not open (or [`crate::destroy()`]
//! remove) a backend.

use lease_core::LeaseError;

/// The error of [`crate::open()`]: a URL it cannot use, a backend not compiled in, or the
/// backend's own failure to open.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OpenError {
    /// The URL's scheme names no backend.
    #[error(
        "unknown backend scheme {scheme:?} (expected sqlite:, postgres://, redis:// or memory:)"
    )]
    UnknownScheme {
        /// The scheme found.
        scheme: String,
    },
    /// The URL is malformed for its backend.
    #[error("invalid backend URL {url:?}: {reason}")]
    InvalidUrl {
        /// The URL given, its password redacted ([`lease_core::redact_url`]), so the message
        /// can be logged.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The URL names a backend whose cargo feature is off in this build.
    #[error(
        "the {backend} backend is not compiled in: enable feature \"{feature}\" of crate lease"
    )]
    FeatureDisabled {
        /// The backend the URL names.
        backend: &'static str,
        /// The feature that compiles it in.
        feature: &'static str,
    },
    /// [`crate::OpenOptions::shared_only`] was set and the URL names a store only this
    /// process can reach.
    #[error(
        "the {backend} store of this URL lives in this process only; other processes cannot share it"
    )]
    NotShared {
        /// The backend the URL names.
        backend: &'static str,
    },
    /// The URL's `?namespace=` and [`crate::OpenOptions::namespace`] name different
    /// namespaces.
    #[error("the URL names namespace {url:?} but the options name {options:?}")]
    NamespaceConflict {
        /// The URL's namespace.
        url: String,
        /// The options' namespace.
        options: String,
    },
    /// The backend failed to open (unreachable server, bad schema, unsafe configuration).
    #[error(transparent)]
    Backend(#[from] LeaseError),
}

impl OpenError {
    /// [`OpenError::InvalidUrl`] for `url`, its password redacted.
    pub(crate) fn invalid_url(url: &str, reason: &str) -> Self {
        OpenError::InvalidUrl {
            url: lease_core::redact_url(url),
            reason: reason.to_owned(),
        }
    }
}
