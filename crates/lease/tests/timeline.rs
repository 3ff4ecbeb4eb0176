//! Runs the `timeline` example's scenario and asserts what RFC 002 requires of it: the
//! stale worker's step write and acknowledgement return `Lost` and change nothing.

#[allow(dead_code)]
#[path = "../examples/timeline.rs"]
mod timeline;

use lease::{ExecutionOutcome, ExecutionStatus, Json};

#[tokio::test]
async fn stale_worker_is_refused_after_a_reclaim() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut out = Vec::new();
    let report = timeline::scenario(&dir.path().join("timeline.db"), &mut out)
        .await
        .expect("scenario runs");
    let text = String::from_utf8(out).expect("utf-8");

    assert!(
        report.stale_write.is_lost(),
        "stale write_step accepted:\n{text}"
    );
    assert!(
        report.stale_ack.is_lost(),
        "stale acknowledge accepted:\n{text}"
    );
    assert!(report.lease_b.token > report.lease_a.token);
    assert!(timeline::fenced_as_specified(&report));

    let receipt_b = Json::parse("r", r#"{"receipt":"ch_B"}"#).expect("json");
    assert_eq!(report.record.status, ExecutionStatus::Completed);
    assert_eq!(report.record.token, report.lease_b.token);
    assert_eq!(report.record.unacknowledged_deliveries, 0);
    assert_eq!(
        report.record.outcome,
        Some(ExecutionOutcome::Completed(receipt_b.clone()))
    );
    let steps: Vec<_> = report
        .steps
        .iter()
        .map(|r| (r.step_key.as_str(), r.token, r.response.clone()))
        .collect();
    assert_eq!(steps.len(), 2, "{steps:?}");
    assert_eq!(steps[0].0, "charge");
    assert_eq!(steps[0].1, report.lease_b.token, "charge saved by B only");
    assert_eq!(steps[0].2, receipt_b);
    assert_eq!(steps[1].0, "load");
    assert_eq!(steps[1].1, report.lease_a.token);

    assert_eq!(text.matches("REFUSED: Lost").count(), 2, "{text}");
    assert!(!text.contains("ACCEPTED"), "{text}");
}
