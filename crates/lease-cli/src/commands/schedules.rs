//! `lease schedules`: the recurring admissions stored in the namespace
//! ([`lease::schedule::list`]), read without writing anything.

use lease::LeaseBackend;
use lease::schedule::{ScheduleInfo, check_name};

use crate::cli::SchedulesArgs;
use crate::connect::Limits;
use crate::failure::Failure;
use crate::output::{Output, instant, to_json};
use crate::table::Table;

/// Every schedule (or the one `NAME` names) with its cursor and next occurrence at the
/// backend clock. A bad name is a usage error; an unknown one a failure.
pub async fn run(
    backend: &dyn LeaseBackend,
    args: &SchedulesArgs,
    limits: &Limits,
) -> Result<Output, Failure> {
    if let Some(name) = &args.name {
        check_name(name).map_err(|e| Failure::Usage(e.to_string()))?;
    }
    let now = limits.call("now", backend.now()).await?;
    let mut schedules = limits
        .call("list schedules", lease::schedule::list(backend, now))
        .await?;
    if let Some(name) = &args.name {
        schedules.retain(|s| s.name == *name);
        if schedules.is_empty() {
            return Err(Failure::Failed(format!("no schedule {name:?}")));
        }
    }
    Ok(Output {
        text: table(&schedules),
        json: to_json(&schedules),
    })
}

/// One row per schedule; a line saying so when there is none.
fn table(schedules: &[ScheduleInfo]) -> String {
    if schedules.is_empty() {
        return "no schedules\n".to_owned();
    }
    let mut t = Table::new(&[
        "NAME",
        "CRON",
        "ZONE",
        "CATCH-UP",
        "WORKFLOW",
        "LAST ADMITTED",
        "NEXT",
    ]);
    for s in schedules {
        let d = &s.stored.definition;
        t.row(vec![
            s.name.clone(),
            d.cron.clone(),
            d.zone.clone(),
            d.catch_up.as_str().into(),
            d.workflow.as_ref().map_or("-".into(), ToString::to_string),
            instant(s.stored.last_admitted),
            instant(s.next_at),
        ]);
    }
    t.render()
}
