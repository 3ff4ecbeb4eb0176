//! Documented input limits. Anything outside them is a typed error before any write.

use std::time::Duration;

/// Longest id, step key, store id, store key, request id or workflow name, in bytes.
pub const MAX_ID_BYTES: usize = 255;
/// Largest JSON payload (step response, outcome, input, store value), in bytes of its
/// canonical text (what is stored and compared), not of the text the caller passed.
pub const MAX_PAYLOAD_BYTES: usize = 1024 * 1024;
/// Largest JSON text `Json::parse` reads, in bytes (4 x [`MAX_PAYLOAD_BYTES`]): room for
/// pretty-printing and escapes around a payload at the limit, while bounding the work done
/// on input that is refused anyway.
pub const MAX_JSON_INPUT_BYTES: usize = 4 * MAX_PAYLOAD_BYTES;
/// Deepest nesting of arrays and objects in a JSON payload (`[[1]]` is 2 deep). Half of
/// serde_json's recursion limit (128, which reads at most 127 levels), so a payload at the
/// limit still parses inside an envelope of up to 63 more levels.
pub const MAX_JSON_DEPTH: usize = 64;
/// Largest `limit` accepted by `claim_due`.
pub const MAX_CLAIM_LIMIT: usize = 1000;
/// Most acknowledgements accepted by one `acknowledge_batch`.
pub const MAX_ACK_BATCH: usize = 1000;
/// Most admissions accepted by one `admit_batch`.
pub const MAX_ADMIT_BATCH: usize = 1000;
/// Latest instant an admission may be scheduled at: the end of year 9999 UTC, in ms since
/// the Unix epoch (well inside the 2^52 ms every backend stores exactly).
pub const MAX_SCHEDULED_MS: i64 = 253_402_300_799_999;
/// Shortest lease (and renewal) duration.
pub const MIN_LEASE: Duration = Duration::from_millis(1);
/// Longest lease (and renewal) duration: one day.
pub const MAX_LEASE: Duration = Duration::from_secs(24 * 60 * 60);

/// Validates a result-count limit (`claim_due`, `list_failing`): 1..=[`MAX_CLAIM_LIMIT`].
pub fn check_limit(field: &'static str, limit: usize) -> crate::Result<()> {
    if limit == 0 || limit > MAX_CLAIM_LIMIT {
        return Err(crate::LeaseError::invalid(
            field,
            format!("{limit} is outside 1..={MAX_CLAIM_LIMIT}"),
        ));
    }
    Ok(())
}

/// Validates a scheduled instant (`Admission::not_before`): 0..=[`MAX_SCHEDULED_MS`].
pub fn check_scheduled(field: &'static str, at: crate::Timestamp) -> crate::Result<()> {
    if !(0..=MAX_SCHEDULED_MS).contains(&at.as_millis()) {
        return Err(crate::LeaseError::invalid(
            field,
            format!("{} ms is outside 0..={MAX_SCHEDULED_MS}", at.as_millis()),
        ));
    }
    Ok(())
}
