//! The Redis bound: keys of their own under a unique prefix, two Lua scripts.

use super::protocol::{Claimed, LEASE_MS, check_acknowledged, check_drained, timed};
use crate::anchors::{self, Counters, Probe};
use crate::error::{BenchError, Result};

/// KEYS: due (sorted set, score = due ms), tokens (hash id -> token), leases (sorted set,
/// score = lease end). ARGV: batch, lease ms. The due jobs in order, moved to the leases
/// with their token raised; replies id, token, id, token, ...
const CLAIM: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, tonumber(ARGV[1]))
if #ids == 0 then return {} end
redis.call('ZREM', KEYS[1], unpack(ids))
local out, leases = {}, {}
local until_ms = now + tonumber(ARGV[2])
for i, id in ipairs(ids) do
  out[2 * i - 1] = id
  out[2 * i] = redis.call('HINCRBY', KEYS[2], id, 1)
  leases[2 * i - 1] = until_ms
  leases[2 * i] = id
end
redis.call('ZADD', KEYS[3], unpack(leases))
return out";

/// KEYS: tokens, leases, completed count. ARGV: id, token, id, token, ... Completes each
/// job whose token still matches and whose lease is live; replies how many.
const ACK: &str = r"
local n = 0
for i = 1, #ARGV, 2 do
  if redis.call('HGET', KEYS[1], ARGV[i]) == ARGV[i + 1]
     and redis.call('ZREM', KEYS[2], ARGV[i]) == 1 then
    n = n + 1
  end
end
redis.call('INCRBY', KEYS[3], n)
return n";

fn db(op: &str, e: impl std::fmt::Display) -> BenchError {
    BenchError::Setup(format!("bound redis {op}: {e}"))
}

struct Keys {
    prefix: String,
}

impl Keys {
    fn due(&self) -> String {
        format!("{}due", self.prefix)
    }
    fn tokens(&self) -> String {
        format!("{}tokens", self.prefix)
    }
    fn leases(&self) -> String {
        format!("{}leases", self.prefix)
    }
    fn done(&self) -> String {
        format!("{}done", self.prefix)
    }
}

/// One client on its own connection: claim, acknowledge, until a claim is empty.
async fn client(url: String, prefix: String, batch: usize) -> Result<()> {
    let mut conn = anchors::redis_connect(&url).await?;
    let keys = Keys { prefix };
    let (claim, ack) = (redis::Script::new(CLAIM), redis::Script::new(ACK));
    loop {
        let flat: Vec<i64> = claim
            .key(keys.due())
            .key(keys.tokens())
            .key(keys.leases())
            .arg(batch)
            .arg(LEASE_MS)
            .invoke_async(&mut conn)
            .await
            .map_err(|e| db("claim", e))?;
        if flat.is_empty() {
            return Ok(());
        }
        let claimed: Vec<Claimed> = flat.chunks(2).map(|p| (p[0], p[1])).collect();
        let mut call = ack.key(keys.tokens());
        call.key(keys.leases()).key(keys.done());
        for (id, token) in &claimed {
            call.arg(*id).arg(*token);
        }
        let n: u64 = call
            .invoke_async(&mut conn)
            .await
            .map_err(|e| db("acknowledge", e))?;
        check_acknowledged(n, claimed.len())?;
    }
}

/// Admits `jobs` due now (score 0), 1,000 per command.
async fn fill(conn: &mut redis::aio::MultiplexedConnection, keys: &Keys, jobs: u64) -> Result<()> {
    for start in (1..=jobs).step_by(1000) {
        let mut cmd = redis::cmd("ZADD");
        cmd.arg(keys.due());
        for id in start..(start + 1000).min(jobs + 1) {
            cmd.arg(0).arg(id);
        }
        let _: u64 = cmd.query_async(conn).await.map_err(|e| db("fill", e))?;
    }
    Ok(())
}

/// Admits `jobs`, drains them, wipes the keys: seconds and the probe's readings.
pub async fn run(
    url: &str,
    batch: usize,
    clients: usize,
    jobs: u64,
    probe: &Probe,
) -> Result<(f64, Counters, Counters)> {
    let id = uuid::Uuid::new_v4().simple().to_string();
    let keys = Keys {
        prefix: format!("lease-bound-{}:", &id[..12]),
    };
    let result = drain(url, &keys, batch, clients, jobs, probe).await;
    anchors::wipe_redis_prefix(url, &keys.prefix).await?;
    result
}

async fn drain(
    url: &str,
    keys: &Keys,
    batch: usize,
    clients: usize,
    jobs: u64,
    probe: &Probe,
) -> Result<(f64, Counters, Counters)> {
    let mut conn = anchors::redis_connect(url).await?;
    fill(&mut conn, keys, jobs).await?;
    let before = probe.read().await?;
    let secs = timed(clients, |_| {
        client(url.to_owned(), keys.prefix.clone(), batch)
    })
    .await?;
    let after = probe.read().await?;
    let done: Option<u64> = redis::cmd("GET")
        .arg(keys.done())
        .query_async(&mut conn)
        .await
        .map_err(|e| db("count", e))?;
    check_drained(done.unwrap_or(0), jobs)?;
    Ok((secs, before, after))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small bound run on the shared Redis drains every job and leaves no key.
    #[tokio::test]
    async fn a_small_bound_run_drains_every_job() {
        let url = lease_testserver::redis_url();
        let (secs, _, _) = run(&url, 32, 3, 500, &Probe::None)
            .await
            .expect("bound run");
        assert!(secs > 0.0);
    }
}
