//! The replication barrier of [`crate::RedisConfig::wait_for_replicas`] (decision
//! record 0034 in docs/decisions/: a failover must not take back an answer a caller already
//! acted on): every operation's command is sent as one pipeline
//! `<command>; INCR <prefix>barrier; WAIT <replicas> <timeout>` on the slot of its prefix.
//!
//! Why one pipeline: redis-rs's cluster client sends a pipeline on one connection to one
//! node and retries it only as a whole (a connection error, or any reply asking for a
//! redirect or a retry, re-sends every command of it), so the `WAIT` reply accepted always
//! comes from the connection, and so the node, that ran the accepted command, right after
//! it. A `WAIT` sent as a command of its own (as before) could be re-sent after its
//! connection dropped to another node of the shard or any connected node, which answered
//! for its own replicas: a write the replica never had was reported as acknowledged.
//!
//! Why the barrier write: `WAIT` waits for the connection's last write. The `INCR` makes
//! that write come after the command and after everything the node had applied before it,
//! so a reply is accepted only once a replica has every write the command could have seen,
//! whoever made it: a read, or a write script that wrote nothing (e.g. `begin_effect`
//! answering `Settled` with another holder's result), is covered as a write is. Without
//! it such an answer could rest on another client's write whose own `WAIT` failed.

use std::time::Duration;

use lease_core::{LeaseError, Result};
use redis::aio::ConnectionLike;
use redis::{Cmd, Pipeline, RedisResult, Script, Value};

use crate::conn::{Conn, NOSCRIPT_RETRIES, is_noscript};
use crate::error::{Access, BACKEND};

/// The barrier key of `prefix`'s slot: `<prefix>barrier`, a counter every operation in
/// `wait` mode increments (its value means nothing).
pub(crate) fn barrier_key(prefix: &str) -> String {
    format!("{prefix}barrier")
}

/// The prefix `lease:{<tag>}:` a library key starts with (up to its hash tag's `}:`).
pub(crate) fn prefix_of(key: &[u8]) -> Option<&str> {
    let key = std::str::from_utf8(key).ok()?;
    let end = key.find("}:")?;
    key.starts_with("lease:{").then(|| &key[..end + 2])
}

/// `WAIT replicas timeout` after every operation, so a success survives the failover of
/// the primary that gave it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Barrier {
    replicas: u32,
    timeout_ms: u64,
}

impl Barrier {
    /// The barrier of [`crate::RedisConfig::wait_for_replicas`].
    pub(crate) fn new(replicas: u32, timeout: Duration) -> Self {
        Barrier {
            replicas,
            timeout_ms: u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX),
        }
    }

    /// `command`, the barrier write on `prefix`'s slot and `WAIT`, as one pipeline whose
    /// replies are not turned into errors (each is read by [`Self::confirm`]).
    fn pipeline(&self, command: Cmd, prefix: &str) -> Pipeline {
        let mut pipe = redis::pipe();
        pipe.add_command(command)
            .cmd("INCR")
            .arg(barrier_key(prefix))
            .cmd("WAIT")
            .arg(self.replicas)
            .arg(self.timeout_ms);
        pipe.ignore_errors();
        pipe
    }

    /// Sends `command` with the barrier on `prefix`'s slot: the command's own reply (an
    /// error reply as the inner `Err`, for the caller to map), or `Err` when the command
    /// answered but fewer than `replicas` replicas acknowledged it in time: `OutcomeUnknown`
    /// for a write, `Unavailable` for a read (nothing of the caller's was written, but the
    /// answer may rest on a write a failover takes back).
    pub(crate) async fn send(
        &self,
        conn: &mut Conn,
        op: &'static str,
        access: Access,
        command: Cmd,
        prefix: &str,
    ) -> Result<RedisResult<Value>> {
        let pipe = self.pipeline(command, prefix);
        let mut replies = conn.req_packed_commands(&pipe, 0, 3).await;
        if access == Access::Read && replies.as_ref().is_err_and(crate::conn::retry_read) {
            replies = conn.req_packed_commands(&pipe, 0, 3).await;
        }
        match replies {
            Ok(replies) => self.confirm(op, access, replies),
            Err(e) => Ok(Err(e)),
        }
    }

    /// Runs `script` (`EVALSHA`, loaded on every primary after `NOSCRIPT` and sent again)
    /// with `keys` (the prefix first) and `args` under the barrier.
    pub(crate) async fn invoke(
        &self,
        conn: &mut Conn,
        op: &'static str,
        access: Access,
        script: &Script,
        keys: &[&str],
        args: &[&[u8]],
    ) -> Result<RedisResult<Value>> {
        let prefix = keys.first().copied().unwrap_or_default();
        let mut evalsha = redis::cmd("EVALSHA");
        evalsha.arg(script.get_hash()).arg(keys.len()).arg(keys);
        for arg in args {
            evalsha.arg(*arg);
        }
        let mut reply = self.send(conn, op, access, evalsha.clone(), prefix).await?;
        // A flush landing between the load and the next send answers `NOSCRIPT` again; the
        // script never ran, so a few more tries are safe (as on a handle without a barrier).
        for _ in 0..=NOSCRIPT_RETRIES {
            if !reply.as_ref().is_err_and(is_noscript) {
                break;
            }
            if let Err(e) = script.load_async(conn).await {
                return Ok(Err(e));
            }
            reply = self.send(conn, op, access, evalsha.clone(), prefix).await?;
        }
        Ok(reply)
    }

    /// Reads the pipeline's three replies: the command's reply stands only when `WAIT`
    /// counted enough replicas after the barrier write.
    fn confirm(
        &self,
        op: &'static str,
        access: Access,
        replies: Vec<Value>,
    ) -> Result<RedisResult<Value>> {
        let mut replies = replies.into_iter();
        let (Some(reply), Some(barrier), Some(wait)) =
            (replies.next(), replies.next(), replies.next())
        else {
            return Err(self.refused(op, access, "a pipeline reply is missing".into()));
        };
        if let Value::ServerError(e) = reply {
            return Ok(Err(e.into()));
        }
        if let Value::ServerError(e) = barrier {
            return Err(self.refused(op, access, format!("barrier write: {e:?}")));
        }
        match wait {
            Value::Int(n) if n >= i64::from(self.replicas) => Ok(Ok(reply)),
            Value::Int(n) => Err(self.refused(
                op,
                access,
                format!(
                    "WAIT {} {}: {n} replicas acknowledged",
                    self.replicas, self.timeout_ms
                ),
            )),
            other => Err(self.refused(
                op,
                access,
                format!("WAIT {} {}: {other:?}", self.replicas, self.timeout_ms),
            )),
        }
    }

    /// The error of an answer no replica is known to have.
    fn refused(&self, op: &'static str, access: Access, reason: String) -> LeaseError {
        let source = format!(
            "not confirmed on {} replica(s): {reason} (the answer may be undone by a failover)",
            self.replicas
        )
        .into();
        match access {
            Access::Write => LeaseError::OutcomeUnknown {
                backend: BACKEND,
                operation: op,
                source,
            },
            Access::Read => LeaseError::Unavailable {
                backend: BACKEND,
                operation: op,
                source,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn barrier() -> Barrier {
        Barrier::new(1, Duration::from_millis(500))
    }

    /// A server error reply as the parser makes it.
    fn server_error(line: &str) -> Value {
        redis::parse_redis_value(format!("-{line}\r\n").as_bytes()).expect("an error reply")
    }

    #[test]
    fn prefixes_come_from_library_keys() {
        assert_eq!(prefix_of(b"lease:{ns#2}:steps:a"), Some("lease:{ns#2}:"));
        assert_eq!(prefix_of(b"lease:{ns}:exec:x}:y"), Some("lease:{ns}:"));
        assert_eq!(prefix_of(b"app:{ns}:rows"), None);
        assert_eq!(prefix_of(b"lease:{ns"), None);
        assert_eq!(barrier_key("lease:{ns}:"), "lease:{ns}:barrier");
    }

    #[test]
    fn an_answer_stands_only_with_enough_replicas() {
        let b = barrier();
        let write = |wait: Value| {
            b.confirm(
                "op",
                Access::Write,
                vec![Value::Int(7), Value::Int(1), wait],
            )
        };
        assert!(matches!(write(Value::Int(1)), Ok(Ok(Value::Int(7)))));
        assert!(matches!(
            write(Value::Int(0)),
            Err(LeaseError::OutcomeUnknown {
                operation: "op",
                ..
            })
        ));
        // WAIT refused (e.g. by a replica): not confirmed.
        assert!(matches!(
            write(server_error(
                "ERR WAIT cannot be used with replica instances"
            )),
            Err(LeaseError::OutcomeUnknown { .. })
        ));
        let read = b.confirm(
            "get",
            Access::Read,
            vec![Value::Nil, Value::Int(1), Value::Int(0)],
        );
        assert!(matches!(
            read,
            Err(LeaseError::Unavailable {
                operation: "get",
                ..
            })
        ));
    }

    #[test]
    fn the_barrier_must_be_written_and_errors_are_the_commands() {
        let b = barrier();
        let failed_barrier = b.confirm(
            "op",
            Access::Write,
            vec![Value::Int(7), server_error("OOM no room"), Value::Int(1)],
        );
        assert!(matches!(
            failed_barrier,
            Err(LeaseError::OutcomeUnknown { .. })
        ));
        // The command's own error is handed back for the caller to map, whatever WAIT says.
        let refused = b.confirm(
            "op",
            Access::Write,
            vec![server_error("LEASETOKEN end"), Value::Int(1), Value::Int(0)],
        );
        match refused {
            Ok(Err(e)) => assert_eq!(e.code(), Some("LEASETOKEN")),
            other => panic!("{other:?}"),
        }
        let short = b.confirm("op", Access::Write, vec![Value::Int(7)]);
        assert!(matches!(short, Err(LeaseError::OutcomeUnknown { .. })));
    }
}
