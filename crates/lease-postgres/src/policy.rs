//! Per-key policies beyond the concurrency limit for [`PostgresBackend`]: start rates and
//! ordered keys ([`lease_core::keyed`]), one statement each (`policy/*.sql`). The claim
//! enforces them in the keyed statement (`execution/claim_keyed.sql`, `gate.rs`).
//!
//! Storage (schema v16): one row of `key_policies` per scope (`key` NULL for the namespace
//! default) holding whether it is ordered and its rate; a row with neither is deleted, so
//! an empty table means no policy. The claim instants of rate-limited keys are rows of
//! `key_starts`.

use lease_core::{ConcurrencyKey, KeyOrdering, LimitScope, RateLimit, RateLimits, Result};
use sqlx::postgres::PgRow;

use crate::backend::PostgresBackend;
use crate::error::Effect;
use crate::rows::{col, stored_name};
use crate::statements::{PolicySql, Renderer};

const SET_RATE: &str = include_str!("policy/set_rate.sql");
const REMOVE_RATE: &str = include_str!("policy/remove_rate.sql");
const MARK_ORDERED: &str = include_str!("policy/mark_ordered.sql");
const UNMARK_ORDERED: &str = include_str!("policy/unmark_ordered.sql");
const POLICIES: &str = include_str!("policy/policies.sql");

/// This module's statements, rendered for one schema.
pub(crate) fn statements(r: &Renderer) -> PolicySql {
    PolicySql {
        set_rate: r.render(SET_RATE),
        remove_rate: r.render(REMOVE_RATE),
        mark_ordered: r.render(MARK_ORDERED),
        unmark_ordered: r.render(UNMARK_ORDERED),
        policies: r.render(POLICIES),
    }
}

/// A scope as the statements take it: the key, NULL for the namespace default.
fn scope_key(scope: &LimitScope) -> Option<&str> {
    match scope {
        LimitScope::Default => None,
        LimitScope::Key(k) => Some(k.as_str()),
    }
}

/// One stored row of `key_policies`.
struct PolicyRow {
    key: Option<ConcurrencyKey>,
    ordered: bool,
    rate: Option<RateLimit>,
}

impl PostgresBackend {
    /// This module's statements.
    fn policy_sql(&self) -> &PolicySql {
        let sql = &self.inner.sql;
        sql.policy.get(&sql.renderer, statements)
    }

    /// `set_rate_limit`: upserts or clears the scope's rate; a change notifies "now".
    pub(crate) async fn set_rate(
        &self,
        scope: &LimitScope,
        limit: Option<RateLimit>,
    ) -> Result<()> {
        const OP: &str = "set_rate_limit";
        let sql = self.policy_sql();
        let key = scope_key(scope);
        let _: PgRow = match limit {
            Some(limit) => {
                let starts = i64::from(limit.starts());
                let period = limit.period_ms();
                self.run_statement(OP, Effect::IdempotentWrite, &sql.set_rate, |q| {
                    q.bind(key)
                        .bind(starts)
                        .bind(period)
                        .bind(self.clock_param())
                })
                .await?
            }
            None => {
                self.run_statement(OP, Effect::IdempotentWrite, &sql.remove_rate, |q| {
                    q.bind(key).bind(self.clock_param())
                })
                .await?
            }
        };
        Ok(())
    }

    /// `set_key_ordering`: marks or unmarks the scope; unmarking notifies "now".
    pub(crate) async fn set_ordering(&self, scope: &LimitScope, ordered: bool) -> Result<()> {
        const OP: &str = "set_key_ordering";
        let sql = self.policy_sql();
        let key = scope_key(scope);
        let _: PgRow = if ordered {
            self.run_statement(OP, Effect::IdempotentWrite, &sql.mark_ordered, |q| {
                q.bind(key)
            })
            .await?
        } else {
            self.run_statement(OP, Effect::IdempotentWrite, &sql.unmark_ordered, |q| {
                q.bind(key).bind(self.clock_param())
            })
            .await?
        };
        Ok(())
    }

    /// Every stored policy row, the default first, then keys by name.
    async fn policy_rows(&self, op: &'static str) -> Result<Vec<PolicyRow>> {
        let sql = &self.policy_sql().policies;
        let found: Vec<PgRow> = self.run_statement(op, Effect::Read, sql, |q| q).await?;
        found
            .iter()
            .map(|row| {
                let key: Option<String> = col(row, 0, op)?;
                let starts: Option<i64> = col(row, 2, op)?;
                let period: Option<i64> = col(row, 3, op)?;
                Ok(PolicyRow {
                    key: key
                        .map(|k| stored_name(k, op, ConcurrencyKey::new))
                        .transpose()?,
                    ordered: col(row, 1, op)?,
                    rate: starts
                        .zip(period)
                        .map(|(s, p)| RateLimit::from_stored(s, p)),
                })
            })
            .collect()
    }

    /// `rate_limits`: the default and the keys with a rate of their own, by key.
    pub(crate) async fn rates(&self) -> Result<RateLimits> {
        let mut rates = RateLimits::default();
        for row in self.policy_rows("rate_limits").await? {
            match (row.key, row.rate) {
                (None, rate) => rates.default = rate,
                (Some(key), Some(rate)) => rates.keys.push((key, rate)),
                (Some(_), None) => {}
            }
        }
        Ok(rates)
    }

    /// `key_ordering`: whether every key is ordered, and the keys marked one by one.
    pub(crate) async fn ordering(&self) -> Result<KeyOrdering> {
        let mut ordering = KeyOrdering::default();
        for row in self.policy_rows("key_ordering").await? {
            match row.key {
                None => ordering.default = row.ordered,
                Some(key) if row.ordered => ordering.keys.push(key),
                Some(_) => {}
            }
        }
        Ok(ordering)
    }
}
