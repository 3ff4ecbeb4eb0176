//! Decoding script replies. Every shape this library does not produce is a
//! [`lease_core::LeaseError::Protocol`], never a panic.

use std::str::FromStr;

use lease_core::{
    AttemptLimit, CancelReason, ConcurrencyKey, ExecutionId, ExecutionOutcome, ExecutionRecord,
    ExecutionStatus, FencingToken, Json, LastError, Priority, RedeliveryPolicy, Result, Timestamp,
    TraceContext, WorkflowName,
};
use redis::Value;

use crate::error::protocol;

/// A reply being taken apart for one operation.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Reply {
    /// The operation, for error messages.
    pub(crate) op: &'static str,
}

impl Reply {
    /// Decoder for `op`.
    pub(crate) fn new(op: &'static str) -> Self {
        Reply { op }
    }

    /// The elements of an array reply.
    pub(crate) fn array(self, v: Value) -> Result<Vec<Value>> {
        match v {
            Value::Array(items) | Value::Set(items) => Ok(items),
            other => Err(protocol(
                self.op,
                format!("expected an array, got {other:?}"),
            )),
        }
    }

    /// A string reply (bulk or simple) as UTF-8.
    pub(crate) fn string(self, v: Value) -> Result<String> {
        match v {
            Value::BulkString(bytes) => String::from_utf8(bytes)
                .map_err(|_| protocol(self.op, "a string reply is not UTF-8")),
            Value::SimpleString(s) => Ok(s),
            Value::VerbatimString { text, .. } => Ok(text),
            other => Err(protocol(
                self.op,
                format!("expected a string, got {other:?}"),
            )),
        }
    }

    /// A string reply, or `None` for nil.
    pub(crate) fn opt_string(self, v: Value) -> Result<Option<String>> {
        match v {
            Value::Nil => Ok(None),
            other => self.string(other).map(Some),
        }
    }

    /// A decimal number carried as a string (or an integer reply).
    pub(crate) fn number<T: FromStr>(self, v: Value, what: &str) -> Result<T> {
        let text = match v {
            Value::Int(i) => i.to_string(),
            other => self.string(other)?,
        };
        text.parse()
            .map_err(|_| protocol(self.op, format!("{what} {text:?} is not a number")))
    }

    /// Splits an array reply into its leading status word and the rest.
    pub(crate) fn status(self, v: Value) -> Result<(String, std::vec::IntoIter<Value>)> {
        let mut items = self.array(v)?.into_iter();
        let status = items
            .next()
            .ok_or_else(|| protocol(self.op, "empty reply"))
            .and_then(|s| self.string(s))?;
        Ok((status, items))
    }

    /// The next element of a reply, which must exist.
    pub(crate) fn next(self, items: &mut impl Iterator<Item = Value>, what: &str) -> Result<Value> {
        items
            .next()
            .ok_or_else(|| protocol(self.op, format!("reply ends before {what}")))
    }

    /// A reply word this operation does not expect.
    pub(crate) fn unexpected(self, status: &str) -> lease_core::LeaseError {
        protocol(self.op, format!("unexpected reply {status:?}"))
    }

    /// Field/value pairs (an `HGETALL` reply: a flat array, or a map under RESP3) as strings.
    pub(crate) fn pairs(self, v: Value) -> Result<Vec<(String, String)>> {
        if let Value::Map(entries) = v {
            return entries
                .into_iter()
                .map(|(f, v)| Ok((self.string(f)?, self.string(v)?)))
                .collect();
        }
        let items = self.array(v)?;
        if items.len() % 2 != 0 {
            return Err(protocol(self.op, "odd number of hash field elements"));
        }
        let mut out = Vec::with_capacity(items.len() / 2);
        let mut it = items.into_iter();
        while let (Some(f), Some(v)) = (it.next(), it.next()) {
            out.push((self.string(f)?, self.string(v)?));
        }
        Ok(out)
    }

    /// Field/value pairs of an `HGETALL` reply, undecoded.
    fn raw_pairs(self, v: Value) -> Result<Vec<(Value, Value)>> {
        if let Value::Map(entries) = v {
            return Ok(entries);
        }
        let items = self.array(v)?;
        if items.len() % 2 != 0 {
            return Err(protocol(self.op, "odd number of hash field elements"));
        }
        let mut out = Vec::with_capacity(items.len() / 2);
        let mut it = items.into_iter();
        while let (Some(f), Some(v)) = (it.next(), it.next()) {
            out.push((f, v));
        }
        Ok(out)
    }

    /// A listing script's reply: its clock, then `id, record` pairs (`list_failing.lua`,
    /// `list_live_leases.lua`); an empty record is a protocol error (the scripts list only
    /// stored ones).
    pub(crate) fn clocked_records(self, v: Value) -> Result<(Timestamp, Vec<ExecutionRecord>)> {
        let mut items = self.array(v)?.into_iter();
        let now: i64 = self.number(self.next(&mut items, "now")?, "now")?;
        let mut out = Vec::new();
        while let Some(id) = items.next() {
            let id = self.execution_id(id)?;
            let record = self
                .record(id, self.next(&mut items, "record")?)?
                .ok_or_else(|| self.unexpected("empty record"))?;
            out.push(record);
        }
        Ok((Timestamp::from_millis(now), out))
    }

    /// The stored execution record of `id` from its hash fields; `None` for no fields.
    /// Fields this library does not write are ignored, whatever they hold.
    pub(crate) fn record(self, id: ExecutionId, v: Value) -> Result<Option<ExecutionRecord>> {
        let pairs = self.raw_pairs(v)?;
        if pairs.is_empty() {
            return Ok(None);
        }
        let mut f = Fields::default();
        for (name, value) in pairs {
            let Value::BulkString(name) = name else {
                return Err(protocol(self.op, "a hash field name is not a string"));
            };
            if !KNOWN_FIELDS.contains(&name.as_slice()) {
                continue;
            }
            let value = self.string(value)?;
            match std::str::from_utf8(&name).unwrap_or_default() {
                "st" => f.status = Some(value),
                "tk" => f.token = Some(value),
                "un" => f.unacknowledged = Some(value),
                "es" => f.ever_suspended = Some(value),
                "du" => f.due_at = Some(value),
                "le" => f.lease_expires_at = Some(value),
                "wk" => f.wake_after_claim = Some(value),
                "ld" => f.last_delivery_ended_at = Some(value),
                "wf" => f.workflow = Some(value),
                "in" => f.input = Some(value),
                "oc" => f.outcome_kind = Some(value),
                "ov" => f.outcome_value = Some(value),
                "pr" => f.priority = Some(value),
                "ck" => f.concurrency_key = Some(value),
                "tc" => f.trace_context = Some(value),
                "al" => f.attempt_limit = Some(value),
                "rp" => f.redelivery_policy = Some(value),
                "ek" => f.last_error[0] = Some(value),
                "em" => f.last_error[1] = Some(value),
                "ea" => f.last_error[2] = Some(value),
                "et" => f.last_error[3] = Some(value),
                _ => {}
            }
        }
        self.build(id, f).map(Some)
    }

    /// The priority (absent: the default) and concurrency key fields.
    fn controls(
        self,
        id: &ExecutionId,
        priority: Option<String>,
        key: Option<String>,
    ) -> Result<(Priority, Option<ConcurrencyKey>)> {
        let priority = match priority {
            None => Priority::DEFAULT,
            Some(p) => p
                .parse::<i32>()
                .ok()
                .and_then(|n| Priority::new(n).ok())
                .ok_or_else(|| protocol(self.op, format!("execution {id}: priority {p:?}")))?,
        };
        let key = key
            .map(|k| {
                ConcurrencyKey::new(k)
                    .map_err(|e| protocol(self.op, format!("execution {id}: {e}")))
            })
            .transpose()?;
        Ok((priority, key))
    }

    fn build(self, id: ExecutionId, mut f: Fields) -> Result<ExecutionRecord> {
        let (priority, concurrency_key) =
            self.controls(&id, f.priority.take(), f.concurrency_key.take())?;
        let what = |field: &str| format!("execution {id}: {field}");
        let required = |v: Option<String>, field: &str| {
            v.ok_or_else(|| protocol(self.op, format!("{} is missing", what(field))))
        };
        let parse_ts = |v: Option<String>, field: &str| -> Result<Option<Timestamp>> {
            v.map(|s| {
                s.parse::<i64>()
                    .map(Timestamp::from_millis)
                    .map_err(|_| protocol(self.op, format!("{} {s:?}", what(field))))
            })
            .transpose()
        };
        let status_text = required(f.status, "status")?;
        let status = ExecutionStatus::from_str(&status_text)
            .map_err(|_| protocol(self.op, format!("{} {status_text:?}", what("status"))))?;
        let token_text = required(f.token, "token")?;
        let token = token_text
            .parse::<u64>()
            .map_err(|_| protocol(self.op, format!("{} {token_text:?}", what("token"))))?;
        let un_text = required(f.unacknowledged, "unacknowledged deliveries")?;
        let unacknowledged_deliveries = un_text.parse::<u32>().map_err(|_| {
            protocol(
                self.op,
                format!("{} {un_text:?}", what("unacknowledged deliveries")),
            )
        })?;
        let ever_suspended = match required(f.ever_suspended, "ever_suspended")?.as_str() {
            "0" => false,
            "1" => true,
            other => {
                return Err(protocol(
                    self.op,
                    format!("{} {other:?}", what("ever_suspended")),
                ));
            }
        };
        let workflow = f
            .workflow
            .map(|w| WorkflowName::new(w).map_err(|e| protocol(self.op, what(&e.to_string()))))
            .transpose()?;
        let outcome = self.outcome(&id, f.outcome_kind.as_deref(), f.outcome_value)?;
        Ok(ExecutionRecord {
            workflow,
            input: f.input.map(Json::from_stored),
            status,
            token: FencingToken::new(token),
            lease_expires_at: parse_ts(f.lease_expires_at, "lease_expires_at")?,
            due_at: parse_ts(f.due_at, "due_at")?,
            wake_after_claim: parse_ts(f.wake_after_claim, "wake_after_claim")?,
            unacknowledged_deliveries,
            last_delivery_ended_at: parse_ts(f.last_delivery_ended_at, "last_delivery_ended_at")?,
            ever_suspended,
            outcome,
            priority,
            concurrency_key,
            trace_context: TraceContext::from_stored_lenient(f.trace_context.as_deref()),
            attempt_limit: f
                .attempt_limit
                .map(|a| {
                    a.parse::<i64>()
                        .map(AttemptLimit::from_stored)
                        .map_err(|_| protocol(self.op, format!("{} {a:?}", what("attempt limit"))))
                })
                .transpose()?,
            last_error: self.last_error(&id, f.last_error)?,
            redelivery_policy: f
                .redelivery_policy
                .map(|p| {
                    parse_policy(&p).ok_or_else(|| {
                        protocol(self.op, format!("{} {p:?}", what("redelivery policy")))
                    })
                })
                .transpose()?,
            id,
        })
    }

    /// The terminal outcome from its kind and value fields, both present or none.
    fn outcome(
        self,
        id: &ExecutionId,
        kind: Option<&str>,
        value: Option<String>,
    ) -> Result<Option<ExecutionOutcome>> {
        Ok(match (kind, value) {
            (None, None) => None,
            (Some("completed"), Some(v)) => Some(ExecutionOutcome::Completed(Json::from_stored(v))),
            (Some("failed"), Some(v)) => Some(ExecutionOutcome::Failed(Json::from_stored(v))),
            (Some("cancelled"), Some(v)) => {
                Some(ExecutionOutcome::Cancelled(CancelReason::from_stored(v)))
            }
            (kind, _) => {
                return Err(protocol(
                    self.op,
                    format!("execution {id}: outcome {kind:?}"),
                ));
            }
        })
    }

    /// The last error from its fields (`ek` kind, `em` message, `ea` attempt, `et` at),
    /// all present or none.
    fn last_error(self, id: &ExecutionId, f: [Option<String>; 4]) -> Result<Option<LastError>> {
        let [kind, message, attempt, at] = f;
        let (Some(kind), Some(message), Some(attempt), Some(at)) = (kind, message, attempt, at)
        else {
            return Ok(None);
        };
        let bad = || protocol(self.op, format!("execution {id}: last error"));
        Ok(Some(LastError {
            kind,
            message,
            attempt: attempt.parse().map_err(|_| bad())?,
            at: Timestamp::from_millis(at.parse().map_err(|_| bad())?),
        }))
    }

    /// An execution id read back from Redis.
    pub(crate) fn execution_id(self, v: Value) -> Result<ExecutionId> {
        let s = self.string(v)?;
        ExecutionId::new(s).map_err(|e| protocol(self.op, format!("stored execution id: {e}")))
    }
}

/// The hash fields of an execution record this library writes.
const KNOWN_FIELDS: [&[u8]; 21] = [
    b"st", b"tk", b"un", b"es", b"du", b"le", b"wk", b"ld", b"wf", b"in", b"oc", b"ov", b"pr",
    b"ck", b"tc", b"al", b"ek", b"em", b"ea", b"et", b"rp",
];

/// A redelivery policy as the namespace's `redelivery` hash and a record's `rp` field keep
/// it, `base_ms,factor,cap_ms`; `None` when it is not one `RedeliveryPolicy::from_parts`
/// accepts.
pub(crate) fn parse_policy(text: &str) -> Option<RedeliveryPolicy> {
    let mut parts = text.split(',');
    let base = parts.next()?.parse().ok()?;
    let factor = parts.next()?.parse().ok()?;
    let cap = parts.next()?.parse().ok()?;
    if parts.next().is_some() {
        return None;
    }
    RedeliveryPolicy::from_parts(base, factor, cap).ok()
}

/// The stored text of `policy` ([`parse_policy`] reads it back).
pub(crate) fn policy_text(policy: &RedeliveryPolicy) -> String {
    format!(
        "{},{},{}",
        policy.base_ms(),
        policy.factor(),
        policy.cap_ms()
    )
}

#[derive(Default)]
struct Fields {
    status: Option<String>,
    token: Option<String>,
    unacknowledged: Option<String>,
    ever_suspended: Option<String>,
    due_at: Option<String>,
    lease_expires_at: Option<String>,
    wake_after_claim: Option<String>,
    last_delivery_ended_at: Option<String>,
    workflow: Option<String>,
    input: Option<String>,
    outcome_kind: Option<String>,
    outcome_value: Option<String>,
    priority: Option<String>,
    concurrency_key: Option<String>,
    trace_context: Option<String>,
    attempt_limit: Option<String>,
    redelivery_policy: Option<String>,
    /// `ek`, `em`, `ea`, `et`.
    last_error: [Option<String>; 4],
}

#[cfg(test)]
mod tests {
    use lease_core::LeaseError;

    use super::*;

    fn bulk(s: &str) -> Value {
        Value::BulkString(s.as_bytes().to_vec())
    }

    fn id() -> ExecutionId {
        ExecutionId::new("x").expect("valid")
    }

    fn is_protocol<T: std::fmt::Debug>(r: Result<T>) -> bool {
        matches!(r, Err(LeaseError::Protocol { .. }))
    }

    #[test]
    fn decodes_a_stored_record() {
        let v = Value::Array(
            [
                "st", "running", "tk", "7", "un", "2", "es", "1", "du", "100", "le", "200", "ld",
                "50", "wf", "wf", "in", "{}",
            ]
            .into_iter()
            .map(bulk)
            .collect(),
        );
        let r = Reply::new("t").record(id(), v).expect("ok").expect("some");
        assert_eq!(r.status, ExecutionStatus::Running);
        assert_eq!(r.token.get(), 7);
        assert_eq!(r.unacknowledged_deliveries, 2);
        assert!(r.ever_suspended);
        assert_eq!(r.due_at, Some(Timestamp::from_millis(100)));
        assert_eq!(r.wake_after_claim, None);
        assert_eq!(r.input.as_ref().map(Json::as_str), Some("{}"));
        let empty = Reply::new("t")
            .record(id(), Value::Array(vec![]))
            .expect("ok");
        assert!(empty.is_none());
        // RESP3 returns HGETALL as a map.
        let map = Value::Map(vec![(bulk("a"), bulk("1")), (bulk("b"), bulk("2"))]);
        let pairs = Reply::new("t").pairs(map).expect("pairs");
        assert_eq!(pairs, [("a".into(), "1".into()), ("b".into(), "2".into())]);
        let bad = Value::Map(vec![(bulk("a"), Value::Int(1)), (Value::Nil, bulk("2"))]);
        assert!(is_protocol(Reply::new("t").pairs(bad)));
    }

    #[test]
    fn decodes_the_attempt_limit_and_last_error() {
        let fields = [
            "st", "dead", "tk", "3", "un", "2", "es", "0", "al", "2", "ek", "error", "em", "boom",
            "ea", "2", "et", "90",
        ];
        let v = Value::Array(fields.into_iter().map(bulk).collect());
        let r = Reply::new("t").record(id(), v).expect("ok").expect("some");
        assert_eq!(r.status, ExecutionStatus::Dead);
        assert_eq!(r.attempt_limit.map(AttemptLimit::get), Some(2));
        let last = r.last_error.expect("last error");
        assert_eq!(
            (last.kind.as_str(), last.message.as_str()),
            ("error", "boom")
        );
        assert_eq!((last.attempt, last.at), (2, Timestamp::from_millis(90)));
        let mut bad = fields.map(bulk).to_vec();
        bad[15] = bulk("two");
        assert!(is_protocol(Reply::new("t").record(id(), Value::Array(bad))));
    }

    #[test]
    fn unexpected_shapes_are_protocol_errors() {
        let r = Reply::new("t");
        let shapes = [
            Value::Nil,
            Value::Int(3),
            Value::Okay,
            Value::Double(1.5),
            Value::Boolean(true),
            bulk("x"),
            Value::Array(vec![bulk("st")]),
            Value::Array(vec![Value::Int(1), Value::Int(2)]),
            Value::Array(vec![bulk("st"), bulk("bogus"), bulk("tk"), bulk("1")]),
            Value::Array(vec![
                bulk("st"),
                bulk("admitted"),
                bulk("tk"),
                bulk("-1"),
                bulk("un"),
                bulk("0"),
                bulk("es"),
                bulk("0"),
            ]),
            Value::Array(vec![
                bulk("st"),
                bulk("admitted"),
                bulk("tk"),
                bulk("1"),
                bulk("un"),
                bulk("0"),
                bulk("es"),
                bulk("2"),
            ]),
            Value::Array(vec![
                bulk("st"),
                bulk("completed"),
                bulk("tk"),
                bulk("1"),
                bulk("un"),
                bulk("0"),
                bulk("es"),
                bulk("0"),
                bulk("oc"),
                bulk("completed"),
            ]),
            Value::Array(vec![Value::BulkString(vec![0xff, 0xfe]), bulk("x")]),
        ];
        for shape in shapes {
            assert!(is_protocol(r.record(id(), shape.clone())), "{shape:?}");
        }
        assert!(is_protocol(r.status(Value::Array(vec![]))));
        assert!(is_protocol(r.status(Value::Array(vec![Value::Nil]))));
        assert!(is_protocol(r.status(bulk("ok"))));
        assert!(is_protocol(r.number::<u64>(bulk("1.5"), "n")));
        assert!(is_protocol(r.number::<u64>(Value::Nil, "n")));
        assert!(is_protocol(r.execution_id(bulk(""))));
        assert!(is_protocol(r.pairs(Value::Array(vec![bulk("a")]))));
        let mut empty = std::iter::empty();
        assert!(is_protocol(r.next(&mut empty, "token")));
    }
}
