//! `admit_batch`: every admission of a batch in one script (one round trip, and one
//! wake-up for the batch instead of one per admission), each exactly as
//! `admit` would (created unless its id exists, due now or at its `not_before`).

use lease_core::execution::check_admit_batch;
use lease_core::{Admission, ExecutionRecord, LeaseError, Result, Timestamp};
use redis::Value;

use crate::backend::RedisBackend;
use crate::error::{Access, BACKEND};
use crate::partitioned::by_partition;
use crate::reply::Reply;
use crate::scripts::operation_script;

// The operation scripts this module runs, each compiled once per process.
/// `admit_batch`'s script body (also the admitting part of an [`crate::AdmitScript`]).
pub(crate) const ADMIT_BATCH_BODY: &str = include_str!("admit/admit_batch.lua");
operation_script!(ADMIT_BATCH = script(ADMIT_BATCH_BODY));

/// An admission as the admitting scripts take it, in their argument order: id, workflow
/// (`""` = none), input JSON (`""` = none), not_before ms (`""` = due now; validated by the
/// caller), priority (`""` = the default 0), concurrency key (`""` = none) and W3C trace
/// context (`""` = none).
pub(crate) struct AdmissionArgs<'a> {
    id: &'a str,
    workflow: &'a str,
    input: &'a str,
    not_before: String,
    priority: String,
    key: &'a str,
    trace: String,
}

impl<'a> AdmissionArgs<'a> {
    /// The arguments of `admission`.
    pub(crate) fn new(admission: &'a Admission) -> Self {
        let priority = admission.priority.get();
        AdmissionArgs {
            id: admission.id.as_str(),
            workflow: admission.workflow.as_ref().map_or("", |w| w.as_str()),
            input: admission.input.as_ref().map_or("", |j| j.as_str()),
            not_before: admission
                .not_before
                .map_or(String::new(), |t| t.as_millis().to_string()),
            priority: if priority == 0 {
                String::new()
            } else {
                priority.to_string()
            },
            key: admission
                .concurrency_key
                .as_ref()
                .map_or("", |k| k.as_str()),
            trace: admission
                .trace_context
                .as_ref()
                .map_or(String::new(), |c| c.to_stored()),
        }
    }

    /// The id, workflow, input and not_before arguments.
    pub(crate) fn head(&self) -> [&[u8]; 4] {
        [
            self.id.as_bytes(),
            self.workflow.as_bytes(),
            self.input.as_bytes(),
            self.not_before.as_bytes(),
        ]
    }

    /// The priority and concurrency key arguments.
    pub(crate) fn controls(&self) -> [&[u8]; 2] {
        [self.priority.as_bytes(), self.key.as_bytes()]
    }

    /// The trace context argument.
    pub(crate) fn trace(&self) -> &[u8] {
        self.trace.as_bytes()
    }
}

/// Admissions as the application's admitting scripts take them ([`crate::AdmitScript`] and
/// the admitting variants of [`crate::FencedScript`]), after the script's own arguments:
/// the publish command, their number, their admission sequences, then seven arguments each.
pub(crate) struct ScriptAdmissions<'a> {
    items: &'a [Admission],
    encoded: Vec<AdmissionArgs<'a>>,
    count: String,
}

impl<'a> ScriptAdmissions<'a> {
    /// The arguments of `items` (already checked).
    pub(crate) fn new(items: &'a [Admission]) -> Self {
        ScriptAdmissions {
            items,
            encoded: items.iter().map(AdmissionArgs::new).collect(),
            count: items.len().to_string(),
        }
    }

    /// The admissions.
    pub(crate) fn items(&self) -> &'a [Admission] {
        self.items
    }

    /// The script arguments, with admission sequences `seqs` (see
    /// [`RedisBackend::reserve_sequences`]).
    pub(crate) fn args<'s>(&'s self, backend: &RedisBackend, seqs: &'s str) -> Vec<&'s [u8]> {
        let mut all = backend.admission_args(&self.encoded, seqs);
        all.insert(1, self.count.as_bytes());
        all
    }
}

/// Refuses, on a namespace split into partitions, admissions with a concurrency key
/// (`Unsupported`, as its capabilities declare; nothing admitted): a key's live leases are
/// counted inside one claim script, which touches one partition (see
/// docs/decisions/0021-concurrency-limits.md).
pub(crate) fn refuse_split_keys(split: bool, admissions: &[Admission]) -> Result<()> {
    if split && admissions.iter().any(|a| a.concurrency_key.is_some()) {
        return Err(LeaseError::Unsupported {
            backend: crate::error::BACKEND,
            operation: "concurrency keys on a namespace split into partitions",
        });
    }
    Ok(())
}

impl RedisBackend {
    /// Admits `admissions` in one script after `check_admit_batch` (too many items, an id
    /// twice or a scheduled instant out of range: `InvalidInput`, nothing sent). Records come
    /// back in the items' order: a created one as `ExecutionRecord::admitted` at the script's
    /// clock, an existing one as stored (effective at that clock).
    ///
    /// An existing record that does not decode is `Protocol` when the batch created nothing,
    /// and `OutcomeUnknown` (saying which items were created) when it did, so that an error
    /// other than `OutcomeUnknown` always means nothing was admitted.
    ///
    /// With partitions (each in its own cluster slot, so no script can touch two), each
    /// partition's admissions are one script (in the order
    /// of each partition's first item), each atomic, after the whole batch was validated: a
    /// failure after an earlier partition's script ran is `OutcomeUnknown` naming the ids
    /// that batch created (the failed partition's items and any later ones may or may not
    /// be admitted); a retry of the same batch is idempotent (an existing id is returned as
    /// stored, never admitted twice).
    pub(crate) async fn admit_many(
        &self,
        admissions: &[Admission],
    ) -> Result<Vec<ExecutionRecord>> {
        check_admit_batch(admissions)?;
        if admissions.is_empty() {
            return Ok(Vec::new());
        }
        let reserved = self.reserve_sequences(admissions.len()).await?;
        let seqs: Vec<&str> = reserved.split(',').collect();
        let mut results: Vec<Option<(bool, Result<ExecutionRecord>)>> =
            admissions.iter().map(|_| None).collect();
        for (n, (prefix, members)) in by_partition(self, admissions, |a| &a.id)
            .into_iter()
            .enumerate()
        {
            let group: Vec<&Admission> = members.iter().map(|&i| &admissions[i]).collect();
            let group_seqs = match reserved.is_empty() {
                true => String::new(),
                false => members
                    .iter()
                    .map(|&i| seqs[i])
                    .collect::<Vec<_>>()
                    .join(","),
            };
            let decoded = match self.admit_group(prefix, &group, &group_seqs).await {
                Ok(decoded) => decoded,
                Err(e) if n == 0 => return Err(e),
                Err(e) => return Err(partial(half_way(admissions, &results, &e))),
            };
            for (i, result) in members.into_iter().zip(decoded) {
                results[i] = Some(result);
            }
        }
        let results: Vec<_> = results.into_iter().flatten().collect();
        let created = results.iter().filter(|(created, _)| *created).count();
        let mut records = Vec::with_capacity(results.len());
        for (i, (_, record)) in results.into_iter().enumerate() {
            match record {
                Ok(r) => records.push(r),
                Err(e) if created == 0 => return Err(e),
                Err(e) => {
                    return Err(partial(format!(
                        "{created} of {} items were admitted, but the existing record of \
                         item {i} cannot be read: {e}",
                        admissions.len()
                    )));
                }
            }
        }
        Ok(records)
    }

    /// Admits one partition's `admissions` in one script, with admission sequences `seqs`
    /// (see [`RedisBackend::reserve_sequences`]); each item's `(created, record)`.
    async fn admit_group(
        &self,
        prefix: &str,
        admissions: &[&Admission],
        seqs: &str,
    ) -> Result<Vec<(bool, Result<ExecutionRecord>)>> {
        let encoded: Vec<_> = admissions.iter().map(|a| AdmissionArgs::new(a)).collect();
        let args = self.admission_args(&encoded, seqs);
        let v = self
            .eval(OP, Access::Write, prefix, &ADMIT_BATCH, &args)
            .await?;
        decode_admitted(Reply::new(OP), admissions, v)
    }

    /// `admit_batch.lua`'s arguments after the clock and policy: the publish command, the
    /// admission sequences `seqs`, then seven per item.
    pub(crate) fn admission_args<'a>(
        &self,
        encoded: &'a [AdmissionArgs<'a>],
        seqs: &'a str,
    ) -> Vec<&'a [u8]> {
        let mut args: Vec<&[u8]> = Vec::with_capacity(2 + 7 * encoded.len());
        args.push(self.publish_word());
        args.push(seqs.as_bytes());
        for item in encoded {
            args.extend(item.head());
            args.extend(item.controls());
            args.push(item.trace());
        }
        args
    }
}

/// `admit_batch.lua`'s reply `{now, r1, r2, ...}`: each item's `(created, record)`.
pub(crate) fn decode_admitted(
    reply: Reply,
    admissions: &[&Admission],
    v: Value,
) -> Result<Vec<(bool, Result<ExecutionRecord>)>> {
    let mut items = reply.array(v)?.into_iter();
    let now: i64 = reply.number(reply.next(&mut items, "now")?, "now")?;
    let now = Timestamp::from_millis(now);
    if items.len() != admissions.len() {
        return Err(reply.unexpected(&format!("{} results", items.len())));
    }
    Ok(admissions
        .iter()
        .zip(items)
        .map(|(admission, v)| decode_item(reply, admission, now, v))
        .collect())
}

const OP: &str = "admit_batch";

/// The `OutcomeUnknown` of a batch some of whose items were admitted.
fn partial(reason: String) -> LeaseError {
    LeaseError::OutcomeUnknown {
        backend: BACKEND,
        operation: OP,
        source: reason.into(),
    }
}

/// What a split batch's error says when a partition's script failed after earlier ones
/// ran: which items this call created (by id), and that a retry is idempotent.
fn half_way(
    admissions: &[Admission],
    results: &[Option<(bool, Result<ExecutionRecord>)>],
    e: &LeaseError,
) -> String {
    let created: Vec<&str> = admissions
        .iter()
        .zip(results)
        .filter(|(_, r)| matches!(r, Some((true, _))))
        .map(|(a, _)| a.id.as_str())
        .collect();
    format!(
        "a partition's admissions failed ({e}) after others ran; admitted by this call: \
         {created:?}; the other items may or may not be admitted: retry the same batch (an \
         admission is idempotent by id)"
    )
}

/// One item of the reply: `(created, record)`; the integer 1 marks a record the script
/// created, anything else is the existing record's `HGETALL`.
fn decode_item(
    reply: Reply,
    admission: &Admission,
    now: Timestamp,
    v: Value,
) -> (bool, Result<ExecutionRecord>) {
    match v {
        Value::Int(1) => (true, Ok(ExecutionRecord::admitted(admission, now))),
        fields => (
            false,
            reply
                .record(admission.id.clone(), fields)
                .and_then(|r| r.ok_or_else(|| reply.unexpected("an empty record")))
                .map(|r| r.effective(now)),
        ),
    }
}
