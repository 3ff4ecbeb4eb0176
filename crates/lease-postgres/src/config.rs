//! [`PostgresConfig`]: where the store lives and how the backend behaves.

use std::fmt;
use std::time::Duration;

use lease_core::{LeaseError, RedeliveryPolicy, Result, SharedClock};

/// The schema used when none is configured.
pub const DEFAULT_SCHEMA: &str = "lease";
/// Pool size used when none is configured.
pub const DEFAULT_MAX_CONNECTIONS: u32 = 10;
/// How long an operation waits for a pooled connection before it fails with
/// [`LeaseError::Unavailable`] (pool exhausted, server unreachable).
pub const DEFAULT_ACQUIRE_TIMEOUT: Duration = Duration::from_secs(5);

/// How long each step of a migration waits for a lock before it fails with
/// [`LeaseError::Unavailable`], when none is configured.
pub const DEFAULT_LOCK_TIMEOUT: Duration = Duration::from_secs(5);

/// Longest schema name PostgreSQL keeps without truncating (NAMEDATALEN - 1).
const MAX_SCHEMA_BYTES: usize = 63;

/// Configuration of a [`crate::PostgresBackend`]: an owned-self builder.
///
/// Every table, the token sequence and the helper functions live in one schema, chosen per
/// instance, so tests and tenants are isolated. All processes sharing a schema share one
/// fencing-token counter and, unless a clock is injected, one clock: the database's
/// `clock_timestamp()`.
#[derive(Clone)]
pub struct PostgresConfig {
    pub(crate) url: String,
    pub(crate) schema: String,
    pub(crate) clock: Option<SharedClock>,
    pub(crate) policy: RedeliveryPolicy,
    pub(crate) max_connections: u32,
    pub(crate) acquire_timeout: Duration,
    pub(crate) statement_timeout: Option<Duration>,
    pub(crate) migrate: bool,
    pub(crate) lock_timeout: Duration,
}

impl PostgresConfig {
    /// A configuration for the database at `url` (`postgres://user@host:port/db`), schema
    /// [`DEFAULT_SCHEMA`], the database clock and the default redelivery policy.
    pub fn new(url: impl Into<String>) -> Self {
        PostgresConfig {
            url: url.into(),
            schema: DEFAULT_SCHEMA.to_owned(),
            clock: None,
            policy: RedeliveryPolicy::default(),
            max_connections: DEFAULT_MAX_CONNECTIONS,
            acquire_timeout: DEFAULT_ACQUIRE_TIMEOUT,
            statement_timeout: None,
            migrate: true,
            lock_timeout: DEFAULT_LOCK_TIMEOUT,
        }
    }

    /// The schema holding this store's tables: ASCII letters, digits and `_`, not starting
    /// with a digit, at most 63 bytes (checked by `connect`). Created on first connect.
    pub fn schema(mut self, schema: impl Into<String>) -> Self {
        self.schema = schema.into();
        self
    }

    /// Replaces the database clock (`clock_timestamp()`) by `clock`, for tests with a
    /// [`lease_core::ManualClock`]. Every process sharing the schema must use the same
    /// clock (one clock for every runtime process, so a process whose own clock runs fast
    /// cannot take live leases early).
    pub fn clock(mut self, clock: SharedClock) -> Self {
        self.clock = Some(clock);
        self
    }

    /// The redelivery policy (RFC 002 "Redelivery delay"). Its delay table is passed to the
    /// SQL that ends a delivery or grants a lease; processes sharing a schema should agree.
    pub fn policy(mut self, policy: RedeliveryPolicy) -> Self {
        self.policy = policy;
        self
    }

    /// Most connections the pool opens (at least 1).
    pub fn max_connections(mut self, max: u32) -> Self {
        self.max_connections = max;
        self
    }

    /// How long an operation waits for a free connection before failing with
    /// [`LeaseError::Unavailable`].
    pub fn acquire_timeout(mut self, timeout: Duration) -> Self {
        self.acquire_timeout = timeout;
        self
    }

    /// A server-side `statement_timeout` for every connection; a statement that runs longer
    /// is cancelled, rolled back, and reported as [`LeaseError::Unavailable`].
    pub fn statement_timeout(mut self, timeout: Duration) -> Self {
        self.statement_timeout = Some(timeout);
        self
    }

    /// Whether `connect` creates or upgrades the schema (the default, `true`). With `false` it
    /// only verifies that the schema exists at this library's version and changes nothing;
    /// otherwise it fails with [`LeaseError::SchemaMismatch`] (read-only tools: an old or
    /// mistyped schema is refused rather than migrated or created).
    pub fn migrate(mut self, migrate: bool) -> Self {
        self.migrate = migrate;
        self
    }

    /// How long each step of a migration (`connect` with [`PostgresConfig::migrate`] on, or
    /// `lease migrate`) waits for a lock (PostgreSQL `lock_timeout`, default
    /// [`DEFAULT_LOCK_TIMEOUT`], at least 1 ms): an `ALTER TABLE` or index build waiting
    /// behind a long transaction would hold every later statement on the table behind it,
    /// so it gives up instead with [`LeaseError::Unavailable`], that step changing nothing.
    /// The migration lock another process holds is waited for as long.
    pub fn lock_timeout(mut self, timeout: Duration) -> Self {
        self.lock_timeout = timeout;
        self
    }

    /// The configured schema name.
    pub fn schema_name(&self) -> &str {
        &self.schema
    }

    /// Checks the settings that cannot be checked by the type system.
    pub(crate) fn validate(&self) -> Result<()> {
        if !(self.url.starts_with("postgres://") || self.url.starts_with("postgresql://")) {
            return Err(LeaseError::invalid(
                "postgres url",
                "must start with postgres:// or postgresql://",
            ));
        }
        check_schema_name(&self.schema)?;
        if self.max_connections == 0 {
            return Err(LeaseError::invalid("max_connections", "must be at least 1"));
        }
        if self.acquire_timeout.is_zero() {
            return Err(LeaseError::invalid("acquire_timeout", "must be non-zero"));
        }
        if self.lock_timeout.as_millis() == 0 {
            return Err(LeaseError::invalid("lock_timeout", "must be at least 1 ms"));
        }
        if self.statement_timeout.is_some_and(|t| t.as_millis() == 0) {
            return Err(LeaseError::invalid(
                "statement_timeout",
                "must be at least 1 ms",
            ));
        }
        Ok(())
    }
}

impl fmt::Debug for PostgresConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The URL may carry a password: show only what identifies the store.
        f.debug_struct("PostgresConfig")
            .field("schema", &self.schema)
            .field("clock", &self.clock)
            .field("policy", &self.policy)
            .field("max_connections", &self.max_connections)
            .field("acquire_timeout", &self.acquire_timeout)
            .field("statement_timeout", &self.statement_timeout)
            .field("migrate", &self.migrate)
            .field("lock_timeout", &self.lock_timeout)
            .finish_non_exhaustive()
    }
}

/// Validates a schema name so it can be quoted into SQL without escaping concerns.
pub(crate) fn check_schema_name(name: &str) -> Result<()> {
    let mut chars = name.chars();
    let first_ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
    if !first_ok || !chars.all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return Err(LeaseError::invalid(
            "schema",
            format!("{name:?} must be ASCII letters, digits or '_', not starting with a digit"),
        ));
    }
    if name.len() > MAX_SCHEMA_BYTES {
        return Err(LeaseError::invalid(
            "schema",
            format!("{} bytes, over the limit of {MAX_SCHEMA_BYTES}", name.len()),
        ));
    }
    Ok(())
}

/// The schema name as a quoted SQL identifier (the name is validated, so no escaping).
pub(crate) fn quoted(name: &str) -> String {
    format!("\"{name}\"")
}

#[cfg(test)]
mod tests {
    use rstest::rstest;

    use super::*;

    #[rstest]
    #[case::default_schema("lease")]
    #[case::underscore_and_digits("_t_0123")]
    #[case::longest(&"x".repeat(MAX_SCHEMA_BYTES))]
    fn good_schema_names_are_accepted(#[case] name: &str) {
        assert!(check_schema_name(name).is_ok(), "{name:?} refused");
    }

    /// ASCII letters, digits and `_`, not starting with a digit, at most 63 bytes.
    #[rstest]
    #[case::empty("")]
    #[case::leading_digit("0abc")]
    #[case::dash("a-b")]
    #[case::quote("a\"b")]
    #[case::space("a b")]
    #[case::non_ascii("é")]
    #[case::too_long(&"x".repeat(MAX_SCHEMA_BYTES + 1))]
    fn bad_schema_names_are_refused(#[case] bad: &str) {
        assert!(
            matches!(check_schema_name(bad), Err(LeaseError::InvalidInput { .. })),
            "{bad:?} accepted"
        );
    }

    #[test]
    fn zero_pool_is_rejected() {
        let c = PostgresConfig::new("postgres://x").max_connections(0);
        assert!(matches!(c.validate(), Err(LeaseError::InvalidInput { .. })));
        let c = PostgresConfig::new("mysql://x");
        assert!(matches!(c.validate(), Err(LeaseError::InvalidInput { .. })));
        assert!(PostgresConfig::new("postgresql://x").validate().is_ok());
    }

    #[test]
    fn debug_hides_the_url() {
        let c = PostgresConfig::new("postgres://user:secret@host/db");
        assert!(!format!("{c:?}").contains("secret"));
    }
}
