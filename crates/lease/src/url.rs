//! Which backend a URL names (the scheme part of [`crate::open`]).

use std::path::PathBuf;

use crate::error::OpenError;

/// A parsed backend URL. Parsing does not depend on which features are compiled in, so a
/// URL for a disabled backend is recognised and reported as
/// [`OpenError::FeatureDisabled`] rather than as an unknown scheme.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum BackendUrl {
    /// `sqlite:PATH` or `sqlite://PATH`: a SQLite database file (created if missing).
    SqliteFile(PathBuf),
    /// `sqlite::memory:`: a private in-memory SQLite database (not durable).
    SqliteMemory,
    /// `postgres://...` or `postgresql://...`: the whole URL, handed to the driver.
    Postgres(String),
    /// `redis://...` or `rediss://...`: the whole URL, handed to the driver.
    Redis(String),
    /// `memory:`: the in-memory reference backend (a fresh, empty store).
    Memory,
}

impl BackendUrl {
    /// Parses `url` by its scheme. Typed errors for an unknown scheme or a SQLite URL
    /// without a path.
    pub fn parse(url: &str) -> Result<Self, OpenError> {
        let url = url.trim();
        let (scheme, rest) = url.split_once(':').ok_or_else(|| OpenError::InvalidUrl {
            url: url.to_owned(),
            reason: "no scheme (expected sqlite:, postgres://, redis:// or memory:)".to_owned(),
        })?;
        match scheme.to_ascii_lowercase().as_str() {
            "sqlite" => {
                if rest == ":memory:" {
                    return Ok(BackendUrl::SqliteMemory);
                }
                let path = rest.strip_prefix("//").unwrap_or(rest);
                if path.is_empty() {
                    return Err(OpenError::InvalidUrl {
                        url: url.to_owned(),
                        reason: "no database path (sqlite:PATH or sqlite::memory:)".to_owned(),
                    });
                }
                Ok(BackendUrl::SqliteFile(PathBuf::from(path)))
            }
            "postgres" | "postgresql" => Ok(BackendUrl::Postgres(url.to_owned())),
            "redis" | "rediss" => Ok(BackendUrl::Redis(url.to_owned())),
            "memory" if rest.is_empty() => Ok(BackendUrl::Memory),
            _ => Err(OpenError::UnknownScheme {
                scheme: scheme.to_owned(),
            }),
        }
    }

    /// The cargo feature of crate `lease` that compiles this backend in.
    pub fn feature(&self) -> &'static str {
        match self {
            BackendUrl::SqliteFile(_) | BackendUrl::SqliteMemory => "sqlite",
            BackendUrl::Postgres(_) => "postgres",
            BackendUrl::Redis(_) => "redis",
            BackendUrl::Memory => "memory",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schemes() {
        assert_eq!(
            BackendUrl::parse("sqlite:leases.db").expect("file"),
            BackendUrl::SqliteFile("leases.db".into())
        );
        assert_eq!(
            BackendUrl::parse("sqlite:///var/lib/app/leases.db").expect("abs"),
            BackendUrl::SqliteFile("/var/lib/app/leases.db".into())
        );
        assert_eq!(
            BackendUrl::parse("sqlite:/tmp/x.db").expect("abs"),
            BackendUrl::SqliteFile("/tmp/x.db".into())
        );
        assert_eq!(
            BackendUrl::parse("sqlite::memory:").expect("memory"),
            BackendUrl::SqliteMemory
        );
        assert_eq!(
            BackendUrl::parse("postgres://postgres@127.0.0.1:5432/test").expect("pg"),
            BackendUrl::Postgres("postgres://postgres@127.0.0.1:5432/test".into())
        );
        assert_eq!(
            BackendUrl::parse("postgresql://h/db").expect("pg"),
            BackendUrl::Postgres("postgresql://h/db".into())
        );
        assert_eq!(
            BackendUrl::parse("redis://127.0.0.1:6379").expect("redis"),
            BackendUrl::Redis("redis://127.0.0.1:6379".into())
        );
        assert_eq!(
            BackendUrl::parse("memory:").expect("mem"),
            BackendUrl::Memory
        );
    }

    #[test]
    fn bad_urls_are_typed_errors() {
        assert!(matches!(
            BackendUrl::parse("mysql://h/db"),
            Err(OpenError::UnknownScheme { scheme }) if scheme == "mysql"
        ));
        assert!(matches!(
            BackendUrl::parse("leases.db"),
            Err(OpenError::InvalidUrl { .. })
        ));
        assert!(matches!(
            BackendUrl::parse("sqlite:"),
            Err(OpenError::InvalidUrl { .. })
        ));
        assert!(matches!(
            BackendUrl::parse("sqlite://"),
            Err(OpenError::InvalidUrl { .. })
        ));
        assert!(matches!(
            BackendUrl::parse("memory:x"),
            Err(OpenError::UnknownScheme { .. })
        ));
    }

    #[test]
    fn features() {
        assert_eq!(BackendUrl::SqliteMemory.feature(), "sqlite");
        assert_eq!(BackendUrl::Postgres(String::new()).feature(), "postgres");
        assert_eq!(BackendUrl::Redis(String::new()).feature(), "redis");
        assert_eq!(BackendUrl::Memory.feature(), "memory");
    }
}
