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
/// Most payload bytes (admission inputs, acknowledged outcomes, as canonical JSON text) one
/// `admit_batch` or `acknowledge_batch` carries: 16 x [`MAX_PAYLOAD_BYTES`].
///
/// The count caps alone let one call carry 1,000 payloads of 1 MiB: a gigabyte in one Redis
/// script call (the server runs nothing else meanwhile, and its default query buffer limit
/// is 1 GiB) or one PostgreSQL statement, copied again by each encoding on the way. 16 MiB
/// still takes a full batch of 16 KiB payloads, or sixteen at the largest size; ids are not
/// counted, since the count cap and [`MAX_ID_BYTES`] already bound them.
pub const MAX_BATCH_PAYLOAD_BYTES: usize = 16 * MAX_PAYLOAD_BYTES;
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

/// Validates the payload bytes of a batch (`sizes`, one per payload it carries):
/// at most [`MAX_BATCH_PAYLOAD_BYTES`] in all.
pub fn check_batch_bytes(
    field: &'static str,
    sizes: impl IntoIterator<Item = usize>,
) -> crate::Result<()> {
    let total = sizes.into_iter().fold(0usize, usize::saturating_add);
    if total > MAX_BATCH_PAYLOAD_BYTES {
        return Err(crate::LeaseError::invalid(
            field,
            format!(
                "{total} bytes of payloads, over the limit of {MAX_BATCH_PAYLOAD_BYTES} for \
                 one batch: split it"
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batch_payloads_are_capped_in_total() {
        let full = MAX_BATCH_PAYLOAD_BYTES / MAX_PAYLOAD_BYTES;
        assert!(check_batch_bytes("batch", vec![MAX_PAYLOAD_BYTES; full]).is_ok());
        assert!(check_batch_bytes("batch", [MAX_BATCH_PAYLOAD_BYTES]).is_ok());
        assert!(check_batch_bytes("batch", std::iter::empty()).is_ok());
        for over in [
            vec![MAX_PAYLOAD_BYTES; full + 1],
            vec![MAX_BATCH_PAYLOAD_BYTES, 1],
            vec![usize::MAX, usize::MAX],
        ] {
            let r = check_batch_bytes("batch", over);
            assert!(
                matches!(r, Err(crate::LeaseError::InvalidInput { .. })),
                "{r:?}"
            );
        }
    }
}
