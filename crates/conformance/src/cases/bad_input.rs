//! Bad input: each gets a typed error and changes nothing (project brief; limits.rs).

use std::sync::Arc;
use std::time::Duration;

use lease_core::limits::{
    MAX_ACK_BATCH, MAX_BATCH_PAYLOAD_BYTES, MAX_CLAIM_LIMIT, MAX_ID_BYTES, MAX_LEASE,
    MAX_PAYLOAD_BYTES, MIN_LEASE,
};
use lease_core::{
    Acknowledgement, Admission, ExecutionClient, ExecutionId, ExecutionLease, ExecutionOutcome,
    Fenced, FencingToken, HeapClient, Json, LeaseError, MAX_STEP_PAGE, RequestId, Result,
    StartClient, StartRequest, StepKey, StoreClient, StoreId, StoreKey, StoreOp, StoreReceipt,
    WorkflowName, WorkflowRunOutcome,
};

use crate::context::{Ctx, LEASE, json, plus, step};
use crate::harness::Harness;

/// Lists this module's cases for [`crate::conformance_tests!`] (one `#[test]` each); an
/// implementation detail of that macro. A new case is added here, beside its function.
#[doc(hidden)]
#[macro_export]
macro_rules! __bad_input_cases {
    ($harness:ty) => {
        $crate::__cases! { $harness, bad_input, [
            names_empty_or_over_255_bytes_rejected, names_of_255_bytes_round_trip,
            list_steps_page_limit_out_of_range_rejected, claim_duration_out_of_range_rejected,
            renew_duration_out_of_range_rejected, claim_limit_out_of_range_rejected,
            list_failing_limit_out_of_range_rejected, unknown_execution_lease_rejected,
            foreign_token_rejected, token_zero_rejected, payload_too_large_rejected,
            malformed_json_rejected, request_wake_unknown_execution_rejected,
            start_existing_target_rejected, ack_batch_bad_input_changes_nothing,
            batch_payloads_over_the_byte_cap_rejected,
        ] }
    };
}

fn assert_invalid<T: std::fmt::Debug>(r: Result<T>, what: &str) {
    assert!(
        matches!(r, Err(LeaseError::InvalidInput { .. })),
        "{what}: expected InvalidInput, got {r:?}"
    );
}

/// Checks one name constructor: empty, 256 bytes (ASCII or multi-byte) and control
/// characters are `InvalidInput`; exactly 255 bytes is accepted.
fn check_name<T: std::fmt::Debug>(what: &str, new: impl Fn(String) -> Result<T>) {
    assert_invalid(new(String::new()), &format!("empty {what}"));
    assert_invalid(
        new("x".repeat(MAX_ID_BYTES + 1)),
        &format!("256-byte {what}"),
    );
    assert_invalid(new("é".repeat(128)), &format!("128 two-byte chars {what}"));
    assert_invalid(
        new("a\nb".to_owned()),
        &format!("{what} with a control char"),
    );
    assert!(new("x".repeat(MAX_ID_BYTES)).is_ok(), "255-byte {what}");
    assert!(
        new(format!("{}a", "é".repeat(127))).is_ok(),
        "255-byte multi-byte {what}"
    );
}

/// Limit "ids, step keys, store ids and keys, request ids, workflow names: non-empty, at
/// most 255 bytes": the constructors reject empty and over-long names with InvalidInput.
pub async fn names_empty_or_over_255_bytes_rejected<H: Harness>(ctx: Arc<Ctx<H>>) {
    check_name("execution id", ExecutionId::new);
    check_name("step key", StepKey::new);
    check_name("store id", StoreId::new);
    check_name("store key", StoreKey::new);
    check_name("request id", RequestId::new);
    check_name("workflow name", WorkflowName::new);
    // Nothing reached the backend.
    assert!(
        ctx.backend()
            .list_failing(0, 10)
            .await
            .expect("list")
            .is_empty()
    );
}

/// Limit "255 bytes is accepted": names of exactly 255 bytes (multi-byte UTF-8) round-trip
/// through the backend unchanged (no truncation to 255 characters or bytes).
pub async fn names_of_255_bytes_round_trip<H: Harness>(ctx: Arc<Ctx<H>>) {
    let long = |c: &str| format!("{}{c}", "é".repeat(127));
    let b = ctx.backend();
    let id = ExecutionId::new(long("a")).expect("255 bytes");
    let workflow = WorkflowName::new(long("w")).expect("255 bytes");
    let record = b
        .admit(&Admission::new(id.clone()).workflow(workflow.clone()))
        .await
        .expect("admit");
    assert_eq!(record.id, id);
    assert_eq!(record.workflow, Some(workflow));
    let lease = ctx.claim_one(id.as_str()).await;
    assert_eq!(lease.execution_id, id);
    let step_key = long("k");
    let written = b
        .write_step(&lease, &step(&step_key, "1"))
        .await
        .expect("write_step");
    assert!(matches!(written, Fenced::Accepted(ref r) if r.step_key.as_str() == step_key));
    assert_eq!(
        b.list_steps(&id).await.expect("list")[0].step_key.as_str(),
        step_key
    );
    let store = StoreId::new(long("s")).expect("255 bytes");
    let skey = StoreKey::new(long("e")).expect("255 bytes");
    b.get_or_create(&store, &[(skey.clone(), json("1"))])
        .await
        .expect("store");
    assert_eq!(
        b.read_entry(&store, &skey).await.expect("read"),
        Some(json("1"))
    );
    let receipt = StoreReceipt {
        store: store.clone(),
        execution_id: id.clone(),
        step_key: StepKey::new(step_key).expect("255 bytes"),
    };
    let op = StoreOp::Delete { key: skey.clone() };
    assert!(
        b.update(&receipt, &op)
            .await
            .expect("update")
            .outcome
            .applied
    );
    assert!(b.update(&receipt, &op).await.expect("update").replayed);
    let mut start = StartRequest::new(
        RequestId::new(long("r")).expect("255 bytes"),
        WorkflowName::new("w").expect("name"),
        json("null"),
    );
    start.target = ExecutionId::new(long("t")).expect("255 bytes");
    assert!(b.start(&start).await.expect("start").created);
    let again = b.start(&start).await.expect("start");
    assert!(!again.created);
    assert_eq!(again.target, start.target);
}

/// Limit "lease duration 1 ms..=24 h" on claim_due: zero, sub-millisecond and over-maximum
/// durations are InvalidInput and claim nothing; the bounds themselves are accepted.
pub async fn claim_duration_out_of_range_rejected<H: Harness>(ctx: Arc<Ctx<H>>) {
    ctx.admit("order-42").await;
    let b = ctx.backend();
    let before = ctx.snapshot("order-42").await;
    for d in [
        Duration::ZERO,
        Duration::from_micros(999),
        MAX_LEASE + Duration::from_millis(1),
        Duration::from_secs(u64::MAX / 2),
    ] {
        assert_invalid(
            ctx.try_claim(&b, ctx.now(), 10, d).await,
            &format!("claim for {d:?}"),
        );
        assert_eq!(
            ctx.snapshot("order-42").await,
            before,
            "claim for {d:?} changed something"
        );
    }
    let min = ctx
        .try_claim(&b, ctx.now(), 10, MIN_LEASE)
        .await
        .expect("1 ms lease");
    assert_eq!(min.len(), 1);
    assert_eq!(min[0].expires_at, plus(ctx.now(), MIN_LEASE));
    ctx.set_clock(plus(min[0].expires_at, ctx.policy.delay(1)));
    let max = ctx
        .try_claim(&b, ctx.now(), 10, MAX_LEASE)
        .await
        .expect("24 h lease");
    assert_eq!(max.len(), 1);
    assert_eq!(max[0].expires_at, plus(ctx.now(), MAX_LEASE));
}

/// Limit "renewal duration 1 ms..=24 h": zero and over-maximum renewals are InvalidInput and
/// leave the lease as it was.
pub async fn renew_duration_out_of_range_rejected<H: Harness>(ctx: Arc<Ctx<H>>) {
    ctx.admit("order-42").await;
    let b = ctx.backend();
    let lease = ctx.claim_one("order-42").await;
    ctx.advance(Duration::from_secs(1));
    let before = ctx.snapshot("order-42").await;
    for d in [
        Duration::ZERO,
        Duration::from_nanos(1),
        MAX_LEASE + Duration::from_secs(1),
    ] {
        assert_invalid(b.renew(&lease, d).await, &format!("renew for {d:?}"));
        assert_eq!(
            ctx.snapshot("order-42").await,
            before,
            "renew for {d:?} changed something"
        );
    }
    let ok = b.renew(&lease, MAX_LEASE).await.expect("renew");
    assert!(matches!(ok, Fenced::Accepted(ref l) if l.expires_at == plus(ctx.now(), MAX_LEASE)));
}

/// Limit "claim limit 1..=1000": 0 and 1001 are InvalidInput and claim nothing.
pub async fn claim_limit_out_of_range_rejected<H: Harness>(ctx: Arc<Ctx<H>>) {
    ctx.admit("order-42").await;
    let b = ctx.backend();
    let before = ctx.snapshot("order-42").await;
    for limit in [0, MAX_CLAIM_LIMIT + 1, usize::MAX] {
        assert_invalid(
            ctx.try_claim(&b, ctx.now(), limit, LEASE).await,
            &format!("limit {limit}"),
        );
        assert_eq!(
            ctx.snapshot("order-42").await,
            before,
            "limit {limit} changed something"
        );
    }
    let got = ctx
        .try_claim(&b, ctx.now(), MAX_CLAIM_LIMIT, LEASE)
        .await
        .expect("limit 1000");
    assert_eq!(got.len(), 1);
}

/// Limit "list_failing limit 1..=1000": 0 (and 1001) are InvalidInput.
pub async fn list_failing_limit_out_of_range_rejected<H: Harness>(ctx: Arc<Ctx<H>>) {
    ctx.admit("order-42").await;
    let lease = ctx.claim_one("order-42").await;
    assert!(
        !ctx.backend()
            .release(&lease)
            .await
            .expect("release")
            .is_lost()
    );
    let b = ctx.backend();
    assert_invalid(b.list_failing(1, 0).await, "list_failing limit 0");
    assert_invalid(
        b.list_failing(1, MAX_CLAIM_LIMIT + 1).await,
        "list_failing limit 1001",
    );
    assert_eq!(
        b.list_failing(1, MAX_CLAIM_LIMIT)
            .await
            .expect("list")
            .len(),
        1
    );
}

/// Calls every fenced operation with `lease`, asserting each error with `check`.
async fn every_fenced_op<H: Harness>(
    ctx: &Ctx<H>,
    lease: &ExecutionLease,
    check: impl Fn(&LeaseError) -> bool,
    what: &str,
) {
    let b = ctx.backend();
    let w = b.write_step(lease, &step("s", "1")).await;
    assert!(
        matches!(w, Err(ref e) if check(e)),
        "{what}: write_step gave {w:?}"
    );
    let r = b.renew(lease, LEASE).await;
    assert!(
        matches!(r, Err(ref e) if check(e)),
        "{what}: renew gave {r:?}"
    );
    let r = b.release(lease).await;
    assert!(
        matches!(r, Err(ref e) if check(e)),
        "{what}: release gave {r:?}"
    );
    for outcome in [
        WorkflowRunOutcome::Suspended,
        WorkflowRunOutcome::Completed(json("1")),
        WorkflowRunOutcome::Failed(json("2")),
    ] {
        let r = b.acknowledge(lease, &outcome).await;
        assert!(
            matches!(r, Err(ref e) if check(e)),
            "{what}: acknowledge gave {r:?}"
        );
    }
}

/// Bad input "a lease for an unknown execution": renew, release, acknowledge and write_step
/// are UnknownExecution and create nothing.
pub async fn unknown_execution_lease_rejected<H: Harness>(ctx: Arc<Ctx<H>>) {
    ctx.admit("real").await;
    let real = ctx.claim_one("real").await;
    let before = ctx.snapshot("real").await;
    let ghost = ExecutionLease {
        execution_id: ctx.id("ghost"),
        token: real.token,
        expires_at: real.expires_at,
    };
    every_fenced_op(
        &ctx,
        &ghost,
        |e| matches!(e, LeaseError::UnknownExecution(id) if id.as_str() == "ghost"),
        "unknown execution",
    )
    .await;
    assert_eq!(ctx.try_get("ghost").await, None, "nothing created");
    assert!(ctx.steps("ghost").await.is_empty());
    assert_eq!(ctx.snapshot("real").await, before);
}

/// Bad input "a token of another execution": a token issued to B, used on A's lease while
/// higher than A's own token, is ForeignToken on every fenced operation and changes
/// nothing (a foreign token below A's own is simply stale: Lost).
pub async fn foreign_token_rejected<H: Harness>(ctx: Arc<Ctx<H>>) {
    ctx.admit("a").await;
    let la = ctx.claim_one("a").await;
    ctx.admit("b").await;
    let lb = ctx.claim_one("b").await;
    assert!(lb.token > la.token);
    let (before_a, before_b) = (ctx.snapshot("a").await, ctx.snapshot("b").await);
    let forged = ExecutionLease {
        execution_id: ctx.id("a"),
        token: lb.token,
        expires_at: lb.expires_at,
    };
    every_fenced_op(
        &ctx,
        &forged,
        |e| {
            matches!(e, LeaseError::ForeignToken { execution, token }
                if execution.as_str() == "a" && *token == lb.token)
        },
        "foreign token",
    )
    .await;
    assert_eq!(ctx.snapshot("a").await, before_a);
    assert_eq!(ctx.snapshot("b").await, before_b);
    // A's token on B's lease is lower than B's own: stale, so Lost, nothing changed.
    let lower = ExecutionLease {
        execution_id: ctx.id("b"),
        token: la.token,
        expires_at: la.expires_at,
    };
    let b = ctx.backend();
    assert_eq!(ctx.write(&b, &lower, "s", "1").await, Fenced::Lost);
    assert_eq!(b.renew(&lower, LEASE).await.expect("renew"), Fenced::Lost);
    assert_eq!(b.release(&lower).await.expect("release"), Fenced::Lost);
    let ack = b
        .acknowledge(&lower, &WorkflowRunOutcome::Completed(json("1")))
        .await
        .expect("ack");
    assert_eq!(ack, Fenced::Lost);
    assert_eq!(ctx.snapshot("a").await, before_a);
    assert_eq!(ctx.snapshot("b").await, before_b);
    // The genuine leases still hold.
    assert!(!b.renew(&la, LEASE).await.expect("renew").is_lost());
    assert!(!b.renew(&lb, LEASE).await.expect("renew").is_lost());
}

/// Bad input "token 0" (never issued): InvalidInput on every fenced operation, also on a
/// never-claimed execution whose own token is 0; nothing changes.
pub async fn token_zero_rejected<H: Harness>(ctx: Arc<Ctx<H>>) {
    ctx.admit("claimed").await;
    let lease = ctx.claim_one("claimed").await;
    ctx.admit("fresh").await;
    let (before_c, before_f) = (ctx.snapshot("claimed").await, ctx.snapshot("fresh").await);
    for id in ["claimed", "fresh"] {
        let zero = ExecutionLease {
            execution_id: ctx.id(id),
            token: FencingToken::NONE,
            expires_at: lease.expires_at,
        };
        every_fenced_op(
            &ctx,
            &zero,
            |e| matches!(e, LeaseError::InvalidInput { .. }),
            &format!("token 0 on {id}"),
        )
        .await;
    }
    assert_eq!(ctx.snapshot("claimed").await, before_c);
    assert_eq!(ctx.snapshot("fresh").await, before_f);
}

/// Limit "JSON payloads at most MAX_PAYLOAD_BYTES": one byte over is PayloadTooLarge (parse
/// and from_value); exactly the limit is accepted and stored byte for byte by write_step
/// and acknowledge.
pub async fn payload_too_large_rejected<H: Harness>(ctx: Arc<Ctx<H>>) {
    ctx.admit("order-42").await;
    let lease = ctx.claim_one("order-42").await;
    let before = ctx.snapshot("order-42").await;
    let at_limit = format!("\"{}\"", "x".repeat(MAX_PAYLOAD_BYTES - 2));
    let over = format!("\"{}\"", "x".repeat(MAX_PAYLOAD_BYTES - 1));
    let r = Json::parse("step response", &over);
    assert!(
        matches!(r, Err(LeaseError::PayloadTooLarge { size, max, .. })
            if size == MAX_PAYLOAD_BYTES + 1 && max == MAX_PAYLOAD_BYTES),
        "parse: {r:?}"
    );
    let value = serde_json::Value::String("x".repeat(MAX_PAYLOAD_BYTES - 1));
    let r = Json::from_value("step response", &value);
    assert!(
        matches!(r, Err(LeaseError::PayloadTooLarge { .. })),
        "from_value: {r:?}"
    );
    assert_eq!(ctx.snapshot("order-42").await, before);
    let big = Json::parse("step response", &at_limit).expect("exactly the limit");
    assert_eq!(big.as_str().len(), MAX_PAYLOAD_BYTES);
    let b = ctx.backend();
    let mut w = step("big", "1");
    w.response = big.clone();
    let written = b.write_step(&lease, &w).await.expect("write_step");
    assert!(matches!(written, Fenced::Accepted(ref r) if r.response == big));
    assert_eq!(ctx.steps("order-42").await[0].response, big);
    let ack = b
        .acknowledge(&lease, &WorkflowRunOutcome::Completed(big.clone()))
        .await
        .expect("ack");
    assert!(matches!(ack, Fenced::Accepted(_)));
    assert_eq!(
        ctx.get("order-42").await.outcome,
        Some(ExecutionOutcome::Completed(big))
    );
}

/// Bad input "malformed JSON": MalformedJson from the parser, before anything is written.
pub async fn malformed_json_rejected<H: Harness>(ctx: Arc<Ctx<H>>) {
    ctx.admit("order-42").await;
    let lease = ctx.claim_one("order-42").await;
    let before = ctx.snapshot("order-42").await;
    for text in [
        "",
        "{",
        r#"{"a":}"#,
        "nope",
        r#"{"a":1}}"#,
        "[1,]",
        "'x'",
        "NaN",
    ] {
        let r = Json::parse("step response", text);
        assert!(
            matches!(
                r,
                Err(LeaseError::MalformedJson {
                    field: "step response",
                    ..
                })
            ),
            "{text:?}: {r:?}"
        );
    }
    assert_eq!(ctx.snapshot("order-42").await, before);
    // The lease is untouched and usable.
    assert!(
        ctx.write(&ctx.backend(), &lease, "s", "1")
            .await
            .accepted()
            .is_some()
    );
}

/// Bad input "request_wake on an unknown execution": UnknownExecution, nothing created.
pub async fn request_wake_unknown_execution_rejected<H: Harness>(ctx: Arc<Ctx<H>>) {
    let b = ctx.backend();
    let r = b.request_wake(&ctx.id("ghost"), ctx.now()).await;
    assert!(
        matches!(r, Err(LeaseError::UnknownExecution(ref id)) if id.as_str() == "ghost"),
        "{r:?}"
    );
    assert_eq!(ctx.try_get("ghost").await, None);
    assert!(ctx.claim(&b, 10).await.is_empty(), "nothing became due");
}

/// Bad input "start with a new request id whose target already exists": InvalidInput, the
/// existing execution is unchanged and the request id stays unrecorded.
pub async fn start_existing_target_rejected<H: Harness>(ctx: Arc<Ctx<H>>) {
    ctx.admit("taken").await;
    let before = ctx.snapshot("taken").await;
    let b = ctx.backend();
    let mut request = StartRequest::new(
        RequestId::new("req-1").expect("request id"),
        WorkflowName::new("w").expect("workflow"),
        json("1"),
    );
    request.target = ctx.id("taken");
    assert_invalid(b.start(&request).await, "start onto an existing execution");
    assert_eq!(ctx.snapshot("taken").await, before);
    request.target = ctx.id("free");
    let started = b.start(&request).await.expect("start");
    assert!(started.created, "the failed start recorded nothing");
    assert_eq!(started.target, ctx.id("free"));
}

/// Bad input in `acknowledge_batch`: one execution twice, more than
/// [`lease_core::limits::MAX_ACK_BATCH`] items, and a foreign token or unknown execution
/// after a valid item are typed errors, and the valid items are not applied either.
pub async fn ack_batch_bad_input_changes_nothing<H: Harness>(ctx: Arc<Ctx<H>>) {
    ctx.admit("a").await;
    let la = ctx.claim_one("a").await;
    ctx.admit("b").await;
    let lb = ctx.claim_one("b").await;
    let b = ctx.backend();
    let before = (ctx.snapshot("a").await, ctx.snapshot("b").await);
    let ack = |lease: &ExecutionLease| Acknowledgement {
        lease: lease.clone(),
        outcome: WorkflowRunOutcome::Completed(json("1")),
    };
    assert_invalid(
        b.acknowledge_batch(&[ack(&la), ack(&lb), ack(&la)]).await,
        "one execution twice",
    );
    let many = vec![ack(&la); MAX_ACK_BATCH + 1];
    assert_invalid(b.acknowledge_batch(&many).await, "over MAX_ACK_BATCH");
    let forged = ExecutionLease {
        execution_id: ctx.id("a"),
        token: lb.token,
        expires_at: lb.expires_at,
    };
    let r = b.acknowledge_batch(&[ack(&lb), ack(&forged)]).await;
    assert!(
        matches!(&r, Err(LeaseError::ForeignToken { execution, .. }) if execution.as_str() == "a"),
        "foreign token: {r:?}"
    );
    let unknown = ExecutionLease {
        execution_id: ctx.id("never-admitted"),
        token: la.token,
        expires_at: la.expires_at,
    };
    let r = b.acknowledge_batch(&[ack(&lb), ack(&unknown)]).await;
    assert!(
        matches!(&r, Err(LeaseError::UnknownExecution(id)) if id.as_str() == "never-admitted"),
        "unknown execution: {r:?}"
    );
    assert_eq!(ctx.snapshot("a").await, before.0, "a changed");
    assert_eq!(ctx.snapshot("b").await, before.1, "b changed");
    // Both leases still hold and a valid batch goes through.
    let ok = b
        .acknowledge_batch(&[ack(&la), ack(&lb)])
        .await
        .expect("valid batch");
    assert!(ok.iter().all(|r| !r.is_lost()), "{ok:?}");
}

/// Batches whose payloads add up to more than [`MAX_BATCH_PAYLOAD_BYTES`] (each payload
/// within [`MAX_PAYLOAD_BYTES`]): `admit_batch` admits none and `acknowledge_batch`
/// acknowledges none, each with `InvalidInput`, before anything reaches the store.
pub async fn batch_payloads_over_the_byte_cap_rejected<H: Harness>(ctx: Arc<Ctx<H>>) {
    let b = ctx.backend();
    let largest = json(&format!("\"{}\"", "x".repeat(MAX_PAYLOAD_BYTES - 2)));
    let n = MAX_BATCH_PAYLOAD_BYTES / MAX_PAYLOAD_BYTES + 1;
    let names: Vec<String> = (0..n).map(|i| format!("big-{i:02}")).collect();
    let heavy: Vec<Admission> = names
        .iter()
        .map(|name| Admission::new(ctx.id(name)).input(largest.clone()))
        .collect();
    // The length only: a failure must not print the payloads.
    let admitted = b.admit_batch(&heavy).await.map(|records| records.len());
    assert_invalid(admitted, "admissions over the byte cap");
    for name in &names {
        assert!(ctx.try_get(name).await.is_none(), "{name} admitted");
    }
    for name in &names {
        ctx.admit(name).await;
    }
    let leases = ctx.claim(&b, n).await;
    assert_eq!(leases.len(), n, "every execution claimed");
    let mut before = Vec::new();
    for name in &names {
        before.push(ctx.snapshot(name).await);
    }
    let acks: Vec<Acknowledgement> = leases
        .iter()
        .map(|lease| Acknowledgement {
            lease: lease.clone(),
            outcome: WorkflowRunOutcome::Completed(largest.clone()),
        })
        .collect();
    let acked = b
        .acknowledge_batch(&acks)
        .await
        .map(|results| results.len());
    assert_invalid(acked, "outcomes over the byte cap");
    for (name, before) in names.iter().zip(&before) {
        assert_eq!(&ctx.snapshot(name).await, before, "{name} changed");
    }
    // Within the cap (one payload fewer), the same leases are acknowledged.
    let results = b
        .acknowledge_batch(&acks[1..])
        .await
        .expect("within the cap");
    let lost = results.iter().filter(|r| r.is_lost()).count();
    assert_eq!(lost, 0, "acknowledgements lost");
}

/// `list_steps_page` limits: 0 and over [`MAX_STEP_PAGE`] are `InvalidInput` (a page is
/// bounded, so one call never loads every step of a long execution); the bounds themselves
/// are accepted.
pub async fn list_steps_page_limit_out_of_range_rejected<H: Harness>(ctx: Arc<Ctx<H>>) {
    let b = ctx.backend();
    let id = ctx.id("order-42");
    for bad in [0, MAX_STEP_PAGE + 1, u32::MAX] {
        let err = b
            .list_steps_page(&id, None, bad)
            .await
            .expect_err("bad limit accepted");
        assert!(
            matches!(err, LeaseError::InvalidInput { .. }),
            "limit {bad}: {err:?}"
        );
    }
    for good in [1, MAX_STEP_PAGE] {
        b.list_steps_page(&id, None, good).await.expect("limit");
    }
}
