//! Raw Redis: the backend's own assembled Lua scripts (`lease_redis::raw`, the very
//! `redis::Script` values the backend runs, so they share its SHA1s) over one multiplexed
//! connection.

use async_trait::async_trait;
use lease_core::RedeliveryPolicy;
use redis::aio::MultiplexedConnection;
use redis::{Script, Value};

use super::{LEASE_MS, Raw, RawLease};
use crate::error::{Result, raw};

/// Separator of a step record's hash field (`<key>\x1f<attempt>`), as the backend writes it.
const SEP: char = '\u{1f}';

/// The raw Redis client of one namespace.
pub struct RawRedis {
    conn: MultiplexedConnection,
    prefix: String,
    policy: String,
    claim_due: &'static Script,
    renew: &'static Script,
    write_step: &'static Script,
    acknowledge: &'static Script,
    ack_and_claim: &'static Script,
    admit_batch: Script,
    purge: Script,
    clone: Script,
}

/// The bare bound of `purge_terminal`: the first `ARGV[1]` members of the `done` index
/// (terminal executions by end time, as the library walks it), each execution's record,
/// step records and receipt set unlinked, the members removed from `done`. No re-checks,
/// receipts or start records. `KEYS[1]` prefix.
const PURGE: &str = r"
local P = KEYS[1]
local ids = redis.call('ZRANGE', P .. 'done', 0, tonumber(ARGV[1]) - 1)
if #ids == 0 then return 0 end
local keys = {}
for _, id in ipairs(ids) do
  keys[#keys + 1] = P .. 'exec:' .. id
  keys[#keys + 1] = P .. 'steps:' .. id
  keys[#keys + 1] = P .. 'rcpt:' .. id
end
redis.call('UNLINK', unpack(keys))
redis.call('ZREM', P .. 'done', unpack(ids))
return #ids
";

/// Setup only: copies of the terminal execution `ARGV[1]` (its record, its step records,
/// its `done` entry) as ids `ARGV[2] .. %09d` of `ARGV[3]` up to `ARGV[4]` (excluded),
/// counted in the namespace's status counters as the library counts a record (each copy
/// carries the template's counting generation `cg`, so the counters add them).
/// Each copy takes the next admission sequence `sq` and is listed in the browse sets of
/// its status, workflow and key, as an admission and the transitions list a record
/// (`ls:<status>`, `\31w\31<workflow>`, `\31k\31<key>`, `\31wk\31<workflow>\31<key>`),
/// so `list_executions` pages through the copies.
const CLONE: &str = r"
local P = KEYS[1]
local rec = redis.call('HGETALL', P .. 'exec:' .. ARGV[1])
local steps = redis.call('HGETALL', P .. 'steps:' .. ARGV[1])
local score = redis.call('ZSCORE', P .. 'done', ARGV[1])
if #rec == 0 or not score then return redis.error_reply('template is not terminal') end
local field = {}
for i = 1, #rec, 2 do field[rec[i]] = i + 1 end
if not field['sq'] then
  rec[#rec + 1] = 'sq'
  rec[#rec + 1] = '0'
  field['sq'] = #rec
end
local st, wf, ck = rec[field['st']], field['wf'] and rec[field['wf']], field['ck'] and rec[field['ck']]
local base = P .. 'ls:' .. st
local sets = {base}
if wf then sets[#sets + 1] = base .. '\31w\31' .. wf end
if ck then sets[#sets + 1] = base .. '\31k\31' .. ck end
if wf and ck then sets[#sets + 1] = base .. '\31wk\31' .. wf .. '\31' .. ck end
local from, to = tonumber(ARGV[3]), tonumber(ARGV[4])
for i = from, to - 1 do
  local id = ARGV[2] .. string.format('%09d', i)
  local sq = string.format('%.0f', redis.call('INCR', P .. 'seq'))
  rec[field['sq']] = sq
  redis.call('HSET', P .. 'exec:' .. id, unpack(rec))
  if #steps > 0 then redis.call('HSET', P .. 'steps:' .. id, unpack(steps)) end
  redis.call('ZADD', P .. 'done', score, id)
  for _, key in ipairs(sets) do redis.call('ZADD', key, sq, id) end
end
local v = redis.call('HMGET', P .. 'exec:' .. ARGV[1], 'st', 'cg')
if v[2] and v[2] == redis.call('HGET', P .. 'counts', 'g') then
  redis.call('HINCRBY', P .. 'counts', v[1], to - from)
end
return 1
";

/// The bare bound of `admit_batch`: one script creating each new execution as the
/// backend's `create` does (`HSET` of the record, `ZADD` to the ready index) at Redis
/// `TIME`, skipping ids that exist. `KEYS[1]` prefix, ARGV ids.
const ADMIT_BATCH: &str = r"
local P = KEYS[1]
local t = redis.call('TIME')
local now = string.format('%d', tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000))
local created = 0
for i = 1, #ARGV do
  local key = P .. 'exec:' .. ARGV[i]
  if redis.call('EXISTS', key) == 0 then
    redis.call('HSET', key, 'st', 'admitted', 'tk', '0', 'un', '0', 'es', '0', 'du', now)
    redis.call('ZADD', P .. 'ready', now, ARGV[i])
    created = created + 1
  end
end
return created
";

/// The first element of a script's reply as text (`ok`, `new`, `lost`, ...).
fn status(v: &Value) -> Option<&[u8]> {
    match v {
        Value::Array(items) => match items.first()? {
            Value::BulkString(b) => Some(b),
            Value::SimpleString(s) => Some(s.as_bytes()),
            _ => None,
        },
        _ => None,
    }
}

fn text(v: Value) -> Option<String> {
    match v {
        Value::BulkString(b) => String::from_utf8(b).ok(),
        Value::SimpleString(s) => Some(s),
        Value::Int(i) => Some(i.to_string()),
        _ => None,
    }
}

impl RawRedis {
    /// Connects to `url` for the namespace `namespace` (created by the library).
    pub async fn connect(url: &str, namespace: &str, policy: &RedeliveryPolicy) -> Result<Self> {
        let client = redis::Client::open(url).map_err(|e| raw("redis", "connect", e))?;
        let conn = client
            .get_multiplexed_async_connection()
            .await
            .map_err(|e| raw("redis", "connect", e))?;
        Ok(RawRedis {
            conn,
            prefix: format!("lease:{{{namespace}}}:"),
            policy: policy
                .table_ms()
                .iter()
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join(","),
            claim_due: lease_redis::raw::claim_due(),
            renew: lease_redis::raw::renew(),
            write_step: lease_redis::raw::write_step(),
            acknowledge: lease_redis::raw::acknowledge(),
            ack_and_claim: lease_redis::raw::acknowledge_and_claim(),
            admit_batch: Script::new(ADMIT_BATCH),
            purge: Script::new(PURGE),
            clone: Script::new(CLONE),
        })
    }

    async fn eval(&self, op: &'static str, script: &Script, args: &[&str]) -> Result<Value> {
        let mut invocation = script.prepare_invoke();
        // KEYS[1] prefix, ARGV[1] clock ('' = Redis TIME), ARGV[2] redelivery table.
        invocation.key(&self.prefix).arg("").arg(&self.policy);
        for a in args {
            invocation.arg(*a);
        }
        let mut conn = self.conn.clone();
        invocation
            .invoke_async::<Value>(&mut conn)
            .await
            .map_err(|e| raw("redis", op, e))
    }

    async fn expect(
        &self,
        op: &'static str,
        script: &Script,
        args: &[&str],
        ok: &[u8],
    ) -> Result<()> {
        let v = self.eval(op, script, args).await?;
        match status(&v) {
            Some(s) if s == ok => Ok(()),
            _ => Err(raw("redis", op, format!("not accepted: {v:?}"))),
        }
    }
}

#[async_trait]
impl Raw for RawRedis {
    async fn claim(&self, limit: usize) -> Result<Vec<RawLease>> {
        let limit = limit.to_string();
        let lease_ms = LEASE_MS.to_string();
        let v = self
            .eval("claim_due", self.claim_due, &["", &limit, &lease_ms])
            .await?;
        let Value::Array(items) = v else {
            return Err(raw("redis", "claim_due", format!("reply {v:?}")));
        };
        let mut out = Vec::with_capacity(items.len() / 3);
        let mut it = items.into_iter();
        while let (Some(id), Some(token), Some(_expiry)) = (it.next(), it.next(), it.next()) {
            let id = text(id).ok_or_else(|| raw("redis", "claim_due", "id"))?;
            let token = text(token)
                .and_then(|t| t.parse().ok())
                .ok_or_else(|| raw("redis", "claim_due", "token"))?;
            out.push(RawLease { id, token });
        }
        Ok(out)
    }

    async fn renew(&self, lease: &RawLease) -> Result<()> {
        let token = lease.token.to_string();
        let lease_ms = LEASE_MS.to_string();
        self.expect("renew", self.renew, &[&lease.id, &token, &lease_ms], b"ok")
            .await
    }

    async fn write_step(&self, lease: &RawLease, step_key: &str, response: &str) -> Result<()> {
        let token = lease.token.to_string();
        let field = format!("{step_key}{SEP}1");
        let value = format!("{}|1|{response}", lease.token);
        self.expect(
            "write_step",
            self.write_step,
            &[&lease.id, &token, &field, &value],
            b"new",
        )
        .await
    }

    async fn acknowledge(&self, lease: &RawLease, outcome: &str) -> Result<()> {
        let token = lease.token.to_string();
        self.expect(
            "acknowledge",
            self.acknowledge,
            &[&lease.id, &token, "completed", outcome],
            b"ok",
        )
        .await
    }

    async fn admit_batch(&self, ids: &[String]) -> Result<()> {
        let mut invocation = self.admit_batch.prepare_invoke();
        invocation.key(&self.prefix);
        for id in ids {
            invocation.arg(id);
        }
        let mut conn = self.conn.clone();
        let created: i64 = invocation
            .invoke_async(&mut conn)
            .await
            .map_err(|e| raw("redis", "admit_batch", e))?;
        if usize::try_from(created).ok() == Some(ids.len()) {
            Ok(())
        } else {
            Err(raw(
                "redis",
                "admit_batch",
                format!("created {created} of {}", ids.len()),
            ))
        }
    }

    /// The library's own `acknowledge_and_claim` script (no wake publish, as the raw
    /// acknowledge), claiming at the clock's now.
    async fn ack_and_claim(
        &self,
        lease: &RawLease,
        outcome: &str,
        limit: usize,
    ) -> Result<Vec<RawLease>> {
        const OP: &str = "acknowledge_and_claim";
        let token = lease.token.to_string();
        let limit = limit.to_string();
        let lease_ms = LEASE_MS.to_string();
        let v = self
            .eval(
                OP,
                self.ack_and_claim,
                &[
                    &lease.id,
                    &token,
                    "completed",
                    outcome,
                    "",
                    "",
                    &limit,
                    &lease_ms,
                ],
            )
            .await?;
        if status(&v) != Some(b"ok") {
            return Err(raw("redis", OP, format!("not accepted: {v:?}")));
        }
        let Value::Array(mut items) = v else {
            return Err(raw("redis", OP, "reply"));
        };
        let Some(Value::Array(claim)) = items.pop() else {
            return Err(raw("redis", OP, "claim reply"));
        };
        // {now, next, then id, token, expiry, record per lease}.
        let mut out = Vec::new();
        let mut it = claim.into_iter().skip(2);
        while let (Some(id), Some(token), Some(_expiry), Some(_record)) =
            (it.next(), it.next(), it.next(), it.next())
        {
            let id = text(id).ok_or_else(|| raw("redis", OP, "id"))?;
            let token = text(token)
                .and_then(|t| t.parse().ok())
                .ok_or_else(|| raw("redis", OP, "token"))?;
            out.push(RawLease { id, token });
        }
        Ok(out)
    }

    async fn purge(&self, limit: usize) -> Result<usize> {
        let mut invocation = self.purge.prepare_invoke();
        invocation.key(&self.prefix).arg(limit);
        let mut conn = self.conn.clone();
        let n: i64 = invocation
            .invoke_async(&mut conn)
            .await
            .map_err(|e| raw("redis", "purge", e))?;
        Ok(usize::try_from(n).unwrap_or(0))
    }

    async fn clone_terminal(&self, template: &str, prefix: &str, from: u64, n: u64) -> Result<()> {
        let mut at = from;
        while at < from + n {
            let end = (at + CLONE_CHUNK).min(from + n);
            let mut invocation = self.clone.prepare_invoke();
            invocation
                .key(&self.prefix)
                .arg(template)
                .arg(prefix)
                .arg(at)
                .arg(end);
            let mut conn = self.conn.clone();
            let _: i64 = invocation
                .invoke_async(&mut conn)
                .await
                .map_err(|e| raw("redis", "clone_terminal", e))?;
            at = end;
        }
        Ok(())
    }
}

/// Copies per clone script: small enough that one script stays well inside the client's
/// response timeout on a loaded machine (10,000 per script timed out at load 12).
const CLONE_CHUNK: u64 = 2_000;
