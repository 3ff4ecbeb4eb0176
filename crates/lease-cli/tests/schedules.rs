//! `lease schedules` as a process on a SQLite file: nothing stored, then two schedules a
//! scheduler registered and ticked; `--json`, the table, one by name, and the exit codes.

mod common;

use std::sync::Arc;

use lease::schedule::{CatchUp, Schedule, Scheduler};
use lease::{LeaseError, StoreKey, WorkflowName};

#[tokio::test(flavor = "multi_thread")]
async fn schedules_lists_what_the_scheduler_stored() {
    let dir = tempfile::tempdir().expect("temp dir");
    let url = format!("sqlite:{}", dir.path().join("leases.db").display());
    let backend = lease::open(&url).await.expect("open");
    assert_eq!(
        common::on(&url, &["schedules"]).await.stdout,
        "no schedules\n"
    );
    assert_eq!(
        common::on(&url, &["schedules", "--json"]).await.json(),
        serde_json::json!([])
    );
    let store = lease::StoreId::new(lease::schedule::STORE).expect("store");
    let probe = backend
        .read_entry(&store, &StoreKey::new("x").expect("key"))
        .await;
    assert!(
        matches!(probe, Err(LeaseError::UnknownStore(_))),
        "listing wrote the store: {probe:?}"
    );

    let scheduler = Scheduler::new(Arc::clone(&backend));
    let nightly = Schedule::new("nightly", "0 2 * * *", "Europe/Berlin")
        .expect("schedule")
        .workflow(WorkflowName::new("report").expect("workflow"));
    let minutely = Schedule::new("minutely", "* * * * *", "UTC")
        .expect("schedule")
        .catch_up(CatchUp::None);
    scheduler.register(&nightly).await.expect("register");
    scheduler.register(&minutely).await.expect("register");
    scheduler.tick().await.expect("tick");

    let listed = common::on(&url, &["schedules", "--json"]).await.json();
    let rows = listed.as_array().expect("array");
    assert_eq!(rows.len(), 2, "{listed}");
    assert_eq!(rows[0]["name"], "minutely");
    assert_eq!(rows[1]["name"], "nightly");
    assert_eq!(rows[1]["definition"]["zone"], "Europe/Berlin");
    assert_eq!(rows[1]["definition"]["catch_up"], "last");
    assert_eq!(rows[1]["definition"]["workflow"], "report");
    assert!(rows[1]["next_at"].is_i64(), "{listed}");
    assert_eq!(rows[0]["definition"]["catch_up"], "none");

    let table = common::on(&url, &["schedules"]).await;
    let lines = table.words();
    assert_eq!(lines[0][..4], ["NAME", "CRON", "ZONE", "CATCH-UP"]);
    assert_eq!(lines[2][..3], ["nightly", "0", "2"], "{table:?}");
    assert!(lines[2].contains(&"Europe/Berlin"), "{table:?}");

    let one = common::on(&url, &["schedules", "nightly", "--json"])
        .await
        .json();
    assert_eq!(one.as_array().map(Vec::len), Some(1), "{one}");
    common::on(&url, &["schedules", "weekly"])
        .await
        .assert_error(1, "no schedule \"weekly\"");
    common::on(&url, &["schedules", ""])
        .await
        .assert_error(2, "schedule name");
}
