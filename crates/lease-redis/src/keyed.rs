//! Start rates and ordered keys on Redis (lease-core's `keyed`): the hashes `rates` and
//! `ordered` of the namespace's one partition (`keyed/policy.lua`), which every claim reads
//! at its first keyed candidate (`scripts/claim.lua`). A split namespace refuses concurrency
//! keys, so it refuses both (`Unsupported`) and reads as having none.

use lease_core::{ConcurrencyKey, KeyOrdering, LimitScope, RateLimit, RateLimits, Result};
use redis::Value;

use crate::backend::RedisBackend;
use crate::reply::Reply;
use crate::scripts::operation_script;

// The operation script this module runs, compiled once per process.
operation_script!(POLICY = script(include_str!("keyed/policy.lua")));

/// The field that holds the namespace default: a control character first, which no
/// concurrency key holds (`DEFAULT_LIMIT` in `scripts/claim.lua`).
const DEFAULT_FIELD: &str = "\u{1f}default";

/// The hash field of `scope`.
fn field_of(scope: &LimitScope) -> &str {
    match scope {
        LimitScope::Default => DEFAULT_FIELD,
        LimitScope::Key(k) => k.as_str(),
    }
}

impl RedisBackend {
    /// Runs `keyed/policy.lua` on hash `hash` (`rates` or `ordered`) with `verb` (set /
    /// remove / list) on the namespace's partition; a split namespace refuses set and
    /// remove (`what` names the refused setting).
    async fn policy_op(
        &self,
        op: &'static str,
        what: &'static str,
        hash: &str,
        verb: &str,
        field: &str,
        value: &str,
    ) -> Result<Value> {
        let access = self.key_setting_access(what, verb)?;
        let args = [
            hash.as_bytes(),
            verb.as_bytes(),
            field.as_bytes(),
            value.as_bytes(),
            self.publish_word(),
        ];
        self.eval(op, access, &self.keys().partitions()[0], &POLICY, &args)
            .await
    }

    /// `ExecutionClient::set_rate_limit`: sets or removes one field of `rates`; a changed
    /// rate publishes "now".
    pub(crate) async fn set_rate(
        &self,
        scope: &LimitScope,
        limit: Option<RateLimit>,
    ) -> Result<()> {
        const OP: &str = "set_rate_limit";
        let field = field_of(scope);
        let v = match limit {
            Some(l) => {
                let value = format!("{}:{}", l.starts(), l.period_ms());
                self.policy_op(OP, "rate limit", "rates", "set", field, &value)
                    .await?
            }
            None => {
                self.policy_op(OP, "rate limit", "rates", "remove", field, "")
                    .await?
            }
        };
        Reply::new(OP).array(v).map(drop)
    }

    /// `ExecutionClient::rate_limits`: the default and the keys' rates, by key.
    pub(crate) async fn read_rates(&self) -> Result<RateLimits> {
        const OP: &str = "rate_limits";
        let reply = Reply::new(OP);
        let v = self
            .policy_op(OP, "rate limit", "rates", "list", "", "")
            .await?;
        let mut out = RateLimits::default();
        for (field, value) in reply.pairs(v)? {
            let limit =
                parse_rate(&value).ok_or_else(|| reply.unexpected(&format!("rate {value:?}")))?;
            let scope = scope_of(reply, field)?;
            out.set(&scope, Some(limit));
        }
        Ok(out)
    }

    /// `ExecutionClient::set_key_ordering`: marks or unmarks one field of `ordered`;
    /// unmarking publishes "now".
    pub(crate) async fn set_ordering(&self, scope: &LimitScope, ordered: bool) -> Result<()> {
        const OP: &str = "set_key_ordering";
        let (verb, value) = if ordered {
            ("set", "1")
        } else {
            ("remove", "")
        };
        let v = self
            .policy_op(OP, "key ordering", "ordered", verb, field_of(scope), value)
            .await?;
        Reply::new(OP).array(v).map(drop)
    }

    /// `ExecutionClient::key_ordering`: whether the default is set and the marked keys.
    pub(crate) async fn read_ordering(&self) -> Result<KeyOrdering> {
        const OP: &str = "key_ordering";
        let reply = Reply::new(OP);
        let v = self
            .policy_op(OP, "key ordering", "ordered", "list", "", "")
            .await?;
        let mut out = KeyOrdering::default();
        for (field, _) in reply.pairs(v)? {
            out.set(&scope_of(reply, field)?, true);
        }
        Ok(out)
    }
}

/// The scope a stored field names.
fn scope_of(reply: Reply, field: String) -> Result<LimitScope> {
    if field == DEFAULT_FIELD {
        return Ok(LimitScope::Default);
    }
    ConcurrencyKey::new(field)
        .map(LimitScope::Key)
        .map_err(|e| reply.unexpected(&e.to_string()))
}

/// A stored rate, `<starts>:<period ms>`, validated again.
fn parse_rate(value: &str) -> Option<RateLimit> {
    let (starts, period) = value.split_once(':')?;
    let period = std::time::Duration::from_millis(period.parse().ok()?);
    RateLimit::new(starts.parse().ok()?, period).ok()
}
