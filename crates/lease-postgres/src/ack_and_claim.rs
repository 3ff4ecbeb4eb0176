//! `acknowledge_and_claim`'s two prepared statements and the parameters they are executed
//! with; `execution.rs` runs them.

use std::sync::Arc;

use crate::literals::Literal;

/// `PREPARE {name}({types}) AS {statement}`.
const PREPARE: &str = include_str!("ack_and_claim/prepare.sql");
/// `EXECUTE {name}({args})`.
const EXECUTE: &str = include_str!("ack_and_claim/execute.sql");

/// The parameter types of `execution/acknowledge.sql` as `acknowledge_and_claim` prepares
/// it.
const ACK_PARAM_TYPES: &str = "text, bigint, bigint, text, text";

/// The parameter types of `execution/claim.sql` limited by
/// `execution/ack_and_claim_limit.sql`.
const CLAIM_AFTER_ACK_PARAM_TYPES: &str = "bigint, bigint, bigint, bigint, bigint[], text, bigint";

/// The parameters of `acknowledge_and_claim`: those of `execution/acknowledge.sql` and of
/// `execution/claim.sql`.
#[derive(Debug)]
pub(crate) struct AckThenClaim<'a> {
    pub(crate) id: &'a str,
    pub(crate) token: i64,
    pub(crate) clock: Option<i64>,
    pub(crate) status: &'a str,
    pub(crate) outcome: Option<&'a str>,
    pub(crate) requested: i64,
    pub(crate) limit: i64,
    pub(crate) lease_ms: i64,
    pub(crate) delays: &'a [i64],
}

/// `acknowledge_and_claim`'s statements: the acknowledgement and the claim (with its
/// summary row, limited by `execution/ack_and_claim_limit.sql`) as SQL-level prepared
/// statements, run as `EXECUTE a(...); EXECUTE c(...)` in ONE simple-query message. The
/// server runs the statements of one message as one implicit transaction: one round trip,
/// one commit, and an error in either rolls both back. Each statement takes its own
/// snapshot, so the claim sees the acknowledgement (an acknowledged row that is due again
/// is claimed again); the acknowledgement's row lock is held until the commit.
///
/// Why prepared (measured): sent with their values inlined, both statements were parsed and
/// planned on every call (about 1.2 ms of planning for the claim alone on the test
/// machine), which made the one round trip slower than `acknowledge` +
/// `claim_due_with_horizon` with sqlx's cached plans. A prepared statement lives in its
/// session, so each pooled connection prepares them on first use (an `EXECUTE` of a name
/// the connection lacks fails before anything ran, see `execution.rs`). The names carry a
/// hash of the statement text, so a connection can never run another text under a name.
#[derive(Debug)]
pub(crate) struct AckAndClaimStatements {
    /// `PREPARE <ack name>(...) AS <acknowledge>`.
    pub(crate) prepare_ack: Arc<str>,
    /// `PREPARE <claim name>(...) AS <claim>`.
    pub(crate) prepare_claim: Arc<str>,
    ack_name: String,
    claim_name: String,
}

impl AckAndClaimStatements {
    /// The two statements for the rendered `acknowledge` and `claim` (its limit already
    /// the acknowledgement-dependent one).
    pub(crate) fn new(acknowledge: &str, claim: &str) -> Self {
        let ack_name = format!("lease_ack_{:016x}", fnv1a(acknowledge.as_bytes()));
        let claim_name = format!("lease_claim_after_ack_{:016x}", fnv1a(claim.as_bytes()));
        AckAndClaimStatements {
            prepare_ack: prepare(&ack_name, ACK_PARAM_TYPES, acknowledge),
            prepare_claim: prepare(&claim_name, CLAIM_AFTER_ACK_PARAM_TYPES, claim),
            ack_name,
            claim_name,
        }
    }

    /// The names of the two prepared statements (acknowledge, claim).
    #[cfg(test)]
    pub(crate) fn names(&self) -> [&str; 2] {
        [&self.ack_name, &self.claim_name]
    }

    /// The one simple-query message running both prepared statements with `p`'s values as
    /// typed literals. `None`: a value cannot be sent.
    pub(crate) fn execute(&self, p: &AckThenClaim<'_>) -> Option<String> {
        use Literal::{BigInt, BigInts, Text};
        let ack = execute_literals(
            &self.ack_name,
            &[
                Text(Some(p.id)),
                BigInt(Some(p.token)),
                BigInt(p.clock),
                Text(Some(p.status)),
                Text(p.outcome),
            ],
        )?;
        let claim = execute_literals(
            &self.claim_name,
            &[
                BigInt(Some(p.requested)),
                BigInt(p.clock),
                BigInt(Some(p.limit)),
                BigInt(Some(p.lease_ms)),
                BigInts(p.delays),
                Text(Some(p.id)),
                BigInt(Some(p.token)),
            ],
        )?;
        Some(format!("{ack}; {claim}"))
    }
}

/// 64-bit FNV-1a: stable across processes and Rust versions, unlike `DefaultHasher`.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// `EXECUTE name(p1, ..., pn)` with every value a typed literal; `None` when a value cannot
/// be sent (see [`Literal::sendable`]).
fn execute_literals(name: &str, params: &[Literal<'_>]) -> Option<String> {
    if !params.iter().all(Literal::sendable) {
        return None;
    }
    let mut args = String::new();
    for (i, p) in params.iter().enumerate() {
        if i > 0 {
            args.push_str(", ");
        }
        p.write(&mut args);
    }
    Some(
        EXECUTE
            .trim()
            .replace("{name}", name)
            .replace("{args}", &args),
    )
}

/// `PREPARE name(types) AS statement`.
fn prepare(name: &str, types: &str, statement: &str) -> Arc<str> {
    PREPARE
        .trim()
        .replace("{name}", name)
        .replace("{types}", types)
        .replace("{statement}", statement)
        .into()
}
