//! Which backend a URL names (the scheme part of [`crate::open()`]), and its namespace.

use std::path::PathBuf;

use lease_core::redact_url;

use crate::error::OpenError;

/// The query parameter that chooses the namespace (SQLite, Redis) or schema (PostgreSQL).
pub const NAMESPACE_PARAM: &str = "namespace";

/// The query parameter of a `rediss://` URL naming a PEM file of CA certificates to trust
/// instead of the system roots (the name libpq uses for the same thing; a PostgreSQL URL's
/// `sslrootcert` goes to the driver, which reads it itself).
pub const ROOT_CERT_PARAM: &str = "sslrootcert";

/// The backend a URL names. Its `Debug` redacts the password of a server URL, so a log
/// line or an error never shows it.
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Target {
    /// `sqlite:PATH` or `sqlite://PATH`: a SQLite database file (created if missing).
    SqliteFile(PathBuf),
    /// `sqlite::memory:`: a private in-memory SQLite database (not durable).
    SqliteMemory,
    /// `postgres://...` or `postgresql://...`: the URL (without `namespace`), handed to the
    /// driver.
    Postgres(String),
    /// `redis://...`, `rediss://...` or `redis+cluster://host:port,host:port` (a Redis
    /// Cluster; `?partitions=N` splits the namespace): the URL (without
    /// `namespace`), handed to the driver.
    Redis(String),
    /// `memory:`: the in-memory reference backend (a fresh, empty store).
    Memory,
}

impl std::fmt::Debug for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Target::SqliteFile(path) => f.debug_tuple("SqliteFile").field(path).finish(),
            Target::SqliteMemory => f.write_str("SqliteMemory"),
            Target::Postgres(url) => f.debug_tuple("Postgres").field(&redact_url(url)).finish(),
            Target::Redis(url) => f.debug_tuple("Redis").field(&redact_url(url)).finish(),
            Target::Memory => f.write_str("Memory"),
        }
    }
}

/// A parsed backend URL: the backend and, from `?namespace=NAME`, the namespace (SQLite,
/// Redis) or schema (PostgreSQL) to use instead of the backend's default.
///
/// Parsing does not depend on which features are compiled in, so a URL for a disabled
/// backend is recognised and reported as [`OpenError::FeatureDisabled`] rather than as an
/// unknown scheme. The backend validates the namespace itself when it opens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackendUrl {
    /// The backend.
    pub target: Target,
    /// The `namespace` query parameter, if given.
    pub namespace: Option<String>,
}

impl BackendUrl {
    /// Parses `url` by its scheme. Typed errors for an unknown scheme, a SQLite URL without
    /// a path, an empty or repeated `namespace`, or query parameters a backend does not take.
    pub fn parse(url: &str) -> Result<Self, OpenError> {
        let url = url.trim();
        let invalid = |reason: &str| OpenError::invalid_url(url, reason);
        let (scheme, rest) = url.split_once(':').ok_or_else(|| {
            invalid("no scheme (expected sqlite:, postgres://, redis:// or memory:)")
        })?;
        let (rest, query) = match rest.split_once('?') {
            Some((rest, query)) => (rest, Some(query)),
            None => (rest, None),
        };
        let mut namespace = None;
        let mut others = Vec::new();
        for pair in query
            .into_iter()
            .flat_map(|q| q.split('&'))
            .filter(|p| !p.is_empty())
        {
            match pair.split_once('=') {
                Some((NAMESPACE_PARAM, value)) => {
                    if value.is_empty() {
                        return Err(invalid("empty namespace"));
                    }
                    if namespace.replace(value.to_owned()).is_some() {
                        return Err(invalid("namespace given twice"));
                    }
                }
                _ => others.push(pair),
            }
        }
        let base = &url[..scheme.len() + 1 + rest.len()];
        let driver_url = if others.is_empty() {
            base.to_owned()
        } else {
            format!("{base}?{}", others.join("&"))
        };
        let scheme = scheme.to_ascii_lowercase();
        let target = match scheme.as_str() {
            "sqlite" | "memory" if !others.is_empty() => {
                return Err(invalid(&format!(
                    "{scheme} takes no query parameters but {NAMESPACE_PARAM}"
                )));
            }
            "sqlite" if rest == ":memory:" => Target::SqliteMemory,
            "sqlite" => {
                let path = rest.strip_prefix("//").unwrap_or(rest);
                if path.is_empty() {
                    return Err(invalid("no database path (sqlite:PATH or sqlite::memory:)"));
                }
                Target::SqliteFile(PathBuf::from(path))
            }
            "postgres" | "postgresql" => Target::Postgres(driver_url),
            "redis" | "rediss" | "redis+cluster" => Target::Redis(driver_url),
            "memory" if rest.is_empty() && namespace.is_none() => Target::Memory,
            "memory" if rest.is_empty() => {
                return Err(invalid("the in-memory backend has no namespaces"));
            }
            _ => return Err(OpenError::UnknownScheme { scheme }),
        };
        Ok(BackendUrl { target, namespace })
    }

    /// The cargo feature of crate `lease` that compiles this backend in.
    pub fn feature(&self) -> &'static str {
        match self.target {
            Target::SqliteFile(_) | Target::SqliteMemory => "sqlite",
            Target::Postgres(_) => "postgres",
            Target::Redis(_) => "redis",
            Target::Memory => "memory",
        }
    }

    /// The backend's name, for messages.
    pub fn backend_name(&self) -> &'static str {
        match self.target {
            Target::SqliteFile(_) | Target::SqliteMemory => "SQLite",
            Target::Postgres(_) => "PostgreSQL",
            Target::Redis(_) => "Redis",
            Target::Memory => "in-memory",
        }
    }
}

/// Takes the query parameter `name` out of `url`: the URL without it (the other parameters
/// kept in order) and its last value, if it was there.
pub fn take_param(url: &str, name: &str) -> (String, Option<String>) {
    let Some((base, query)) = url.split_once('?') else {
        return (url.to_owned(), None);
    };
    let mut value = None;
    let mut kept = Vec::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        match pair.split_once('=') {
            Some((key, v)) if key == name => value = Some(v.to_owned()),
            _ => kept.push(pair),
        }
    }
    let url = if kept.is_empty() {
        base.to_owned()
    } else {
        format!("{base}?{}", kept.join("&"))
    };
    (url, value)
}

#[cfg(test)]
mod tests {
    use rstest::rstest;

    use super::*;

    fn target(url: &str) -> Target {
        BackendUrl::parse(url).expect(url).target
    }

    fn namespace(url: &str) -> Option<String> {
        BackendUrl::parse(url).expect(url).namespace
    }

    #[rstest]
    #[case::sqlite_relative("sqlite:leases.db", Target::SqliteFile("leases.db".into()))]
    #[case::sqlite_triple_slash(
        "sqlite:///var/lib/app/leases.db",
        Target::SqliteFile("/var/lib/app/leases.db".into())
    )]
    #[case::sqlite_absolute("sqlite:/tmp/x.db", Target::SqliteFile("/tmp/x.db".into()))]
    #[case::sqlite_memory("sqlite::memory:", Target::SqliteMemory)]
    #[case::postgres(
        "postgres://postgres@127.0.0.1:5432/test",
        Target::Postgres("postgres://postgres@127.0.0.1:5432/test".into())
    )]
    #[case::postgresql("postgresql://h/db", Target::Postgres("postgresql://h/db".into()))]
    #[case::redis("redis://127.0.0.1:6379", Target::Redis("redis://127.0.0.1:6379".into()))]
    #[case::memory_with_spaces("  memory:  ", Target::Memory)]
    fn schemes(#[case] url: &str, #[case] expected: Target) {
        assert_eq!(target(url), expected);
        assert_eq!(namespace(url), None);
    }

    /// `namespace=` is taken out of the URL the driver sees; every other parameter stays.
    #[rstest]
    #[case::postgres_between_others(
        "postgres://h/db?sslmode=disable&namespace=billing&application_name=x",
        Target::Postgres("postgres://h/db?sslmode=disable&application_name=x".into()),
        "billing"
    )]
    #[case::redis_only_parameter(
        "redis://h:6379/0?namespace=shop",
        Target::Redis("redis://h:6379/0".into()),
        "shop"
    )]
    #[case::redis_cluster_before_another(
        "redis+cluster://a:7000,b:7001?namespace=shop&partitions=4",
        Target::Redis("redis+cluster://a:7000,b:7001?partitions=4".into()),
        "shop"
    )]
    #[case::sqlite_file(
        "sqlite:/tmp/a.db?namespace=t1",
        Target::SqliteFile("/tmp/a.db".into()),
        "t1"
    )]
    #[case::sqlite_memory("sqlite::memory:?namespace=t1", Target::SqliteMemory, "t1")]
    fn namespace_parameter_is_taken_out_of_the_driver_url(
        #[case] url: &str,
        #[case] expected: Target,
        #[case] expected_namespace: &str,
    ) {
        let parsed = BackendUrl::parse(url).expect(url);
        assert_eq!(parsed.target, expected);
        assert_eq!(parsed.namespace.as_deref(), Some(expected_namespace));
    }

    #[rstest]
    #[case::first_of_two(
        "rediss://h:1/0?sslrootcert=/ca.pem&x=1",
        "rediss://h:1/0?x=1",
        Some("/ca.pem")
    )]
    #[case::only_parameter("rediss://h:1?sslrootcert=/a", "rediss://h:1", Some("/a"))]
    #[case::other_parameter_only(
        "rediss://h:1?protocol=resp3",
        "rediss://h:1?protocol=resp3",
        None
    )]
    #[case::no_query("redis://h:1", "redis://h:1", None)]
    fn take_param_removes_only_the_named_parameter(
        #[case] url: &str,
        #[case] rest: &str,
        #[case] value: Option<&str>,
    ) {
        assert_eq!(
            take_param(url, ROOT_CERT_PARAM),
            (rest.to_owned(), value.map(str::to_owned))
        );
    }

    #[rstest]
    #[case::mysql("mysql://h/db", "mysql")]
    #[case::memory_with_a_path("memory:x", "memory")]
    fn unknown_schemes_are_typed_errors(#[case] url: &str, #[case] expected: &str) {
        let err = BackendUrl::parse(url).expect_err(url);
        assert!(
            matches!(&err, OpenError::UnknownScheme { scheme } if scheme == expected),
            "{err:?}"
        );
    }

    #[rstest]
    #[case::no_scheme("leases.db")]
    #[case::sqlite_without_path("sqlite:")]
    #[case::sqlite_empty_authority("sqlite://")]
    #[case::sqlite_only_namespace("sqlite:?namespace=a")]
    #[case::sqlite_other_parameter("sqlite:a.db?mode=ro")]
    #[case::empty_namespace("postgres://h/db?namespace=")]
    #[case::namespace_twice("postgres://h/db?namespace=a&namespace=b")]
    #[case::memory_namespace("memory:?namespace=a")]
    fn bad_urls_are_typed_errors(#[case] url: &str) {
        let err = BackendUrl::parse(url).expect_err(url);
        assert!(
            matches!(err, OpenError::InvalidUrl { .. }),
            "{url}: {err:?}"
        );
    }

    /// Neither the error of a bad URL nor a parsed URL's `Debug` repeats
    /// its password.
    #[rstest]
    #[case::postgres_bad_namespace("postgres://u:hunter2@h/db?namespace=")]
    #[case::redis_namespace_twice("redis://:hunter2@h?namespace=a&namespace=b")]
    #[case::cluster_bad_namespace("redis+cluster://u:hunter2@a:1,b:2?namespace=")]
    fn errors_do_not_repeat_the_password(#[case] url: &str) {
        let err = BackendUrl::parse(url).expect_err(url);
        for shown in [err.to_string(), format!("{err:?}")] {
            assert!(!shown.contains("hunter2"), "{shown}");
            assert!(shown.contains(":***@"), "{shown}");
        }
    }

    #[rstest]
    #[case::postgres("postgres://u:hunter2@h/db?namespace=x")]
    #[case::redis("rediss://:hunter2@h:6380")]
    fn debug_does_not_show_the_password(#[case] url: &str) {
        let parsed = BackendUrl::parse(url).expect(url);
        let shown = format!("{parsed:?}");
        assert!(
            !shown.contains("hunter2") && shown.contains(":***@"),
            "{shown}"
        );
    }

    #[rstest]
    #[case::sqlite(Target::SqliteMemory, "sqlite")]
    #[case::postgres(Target::Postgres(String::new()), "postgres")]
    #[case::redis(Target::Redis(String::new()), "redis")]
    #[case::memory(Target::Memory, "memory")]
    fn features(#[case] target: Target, #[case] feature: &str) {
        let url = BackendUrl {
            target,
            namespace: None,
        };
        assert_eq!(url.feature(), feature);
    }

    #[test]
    fn names() {
        let url = BackendUrl {
            target: Target::Memory,
            namespace: None,
        };
        assert_eq!(url.backend_name(), "in-memory");
    }
}
