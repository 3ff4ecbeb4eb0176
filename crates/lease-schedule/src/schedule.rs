//! A schedule's definition, its validation and its occurrences (docs/decisions/0035-schedules.md).
//!
//! Occurrences are computed by `croner` in the schedule's IANA time zone (`chrono-tz`), on
//! the absolute time line: across a DST gap a fixed-time job fires at the first valid time
//! after the gap and an interval job skips the times that do not exist; across an overlap
//! a fixed-time job fires once (the first pass) and an interval job fires on both passes
//! (croner's documented OCPS / Vixie-cron behaviour).

use std::str::FromStr as _;
use std::time::Duration;

use chrono::DateTime;
use chrono_tz::Tz;
use croner::Cron;
use lease_core::limits::{MAX_ADMIT_BATCH, MAX_ID_BYTES};
use lease_core::{Admission, ExecutionId, Json, StoreKey, Timestamp, WorkflowName};
use serde::{Deserialize, Serialize};

use crate::error::{Result, ScheduleError};

/// The prefix of every occurrence's execution id: `schedule:<name>:<unix ms>`.
pub const ID_PREFIX: &str = "schedule:";
/// Digits of the largest occurrence instant in ms (year 9999,
/// [`lease_core::limits::MAX_SCHEDULED_MS`]).
const MAX_INSTANT_DIGITS: usize = 15;
/// Longest schedule name in bytes: what leaves room in [`MAX_ID_BYTES`] for the derived
/// execution id `schedule:<name>:<unix ms>` (230).
pub const MAX_NAME_BYTES: usize = MAX_ID_BYTES - ID_PREFIX.len() - 1 - MAX_INSTANT_DIGITS;
/// The default grace window: an occurrence is *missed* when it is more than this old at the
/// tick that first considers it.
pub const DEFAULT_GRACE: Duration = Duration::from_secs(60);
/// The longest grace window: one day.
pub const MAX_GRACE: Duration = Duration::from_secs(24 * 60 * 60);
/// The default bound on occurrences one tick admits for one schedule.
pub const DEFAULT_MAX_PER_TICK: usize = 100;

/// What a tick does with *missed* occurrences (older than the grace window), chosen per
/// schedule. Occurrences within the grace window are always admitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CatchUp {
    /// Admit only the latest missed occurrence (the default).
    #[default]
    Last,
    /// Admit every missed occurrence, oldest first, at most the schedule's `max_per_tick`
    /// per tick (a tick that stops at the bound says `more`, and the next one continues).
    All,
    /// Admit no missed occurrence.
    None,
}

impl CatchUp {
    /// The lowercase name (`last`, `all`, `none`).
    pub fn as_str(self) -> &'static str {
        match self {
            CatchUp::Last => "last",
            CatchUp::All => "all",
            CatchUp::None => "none",
        }
    }
}

/// What is stored and compared for a schedule: two registrations under one name conflict
/// unless their definitions are equal (docs/decisions/0035-schedules.md: definitions).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Definition {
    /// The cron expression as given (5 to 7 fields, croner's syntax).
    pub cron: String,
    /// The IANA time zone the expression is read in.
    pub zone: String,
    /// The workflow each occurrence's execution runs.
    pub workflow: Option<WorkflowName>,
    /// Its input.
    pub input: Option<Json>,
    /// The catch-up policy.
    pub catch_up: CatchUp,
    /// The grace window in milliseconds.
    pub grace_ms: u64,
    /// The most occurrences one tick admits for this schedule.
    pub max_per_tick: usize,
}

/// A validated schedule: a name, a cron expression in a time zone, and what each
/// occurrence admits.
#[derive(Debug, Clone)]
pub struct Schedule {
    name: String,
    definition: Definition,
    cron: Cron,
    zone: Tz,
}

/// Validates a schedule name: non-empty, at most [`MAX_NAME_BYTES`], no control characters.
pub fn check_name(name: &str) -> Result<()> {
    let refuse = |reason: String| {
        Err(ScheduleError::InvalidName {
            name: name.to_owned(),
            reason,
        })
    };
    if name.is_empty() {
        return refuse("must not be empty".into());
    }
    if name.len() > MAX_NAME_BYTES {
        return refuse(format!(
            "{} bytes, over the limit of {MAX_NAME_BYTES}",
            name.len()
        ));
    }
    if name.chars().any(char::is_control) {
        return refuse("must not contain control characters".into());
    }
    Ok(())
}

impl Schedule {
    /// A schedule `name` firing at `cron` read in time zone `zone` (an IANA name), catch-up
    /// [`CatchUp::Last`], grace [`DEFAULT_GRACE`], no workflow or input.
    ///
    /// Errors, nothing written: [`ScheduleError::InvalidName`], [`ScheduleError::InvalidCron`],
    /// [`ScheduleError::NeverFires`] (no occurrence after the Unix epoch),
    /// [`ScheduleError::UnknownZone`].
    pub fn new(name: &str, cron: &str, zone: &str) -> Result<Self> {
        Self::from_definition(
            name,
            Definition {
                cron: cron.to_owned(),
                zone: zone.to_owned(),
                workflow: None,
                input: None,
                catch_up: CatchUp::default(),
                grace_ms: millis(DEFAULT_GRACE),
                max_per_tick: DEFAULT_MAX_PER_TICK,
            },
        )
    }

    /// Validates a whole definition (the stored form read back, or one built by hand).
    pub fn from_definition(name: &str, definition: Definition) -> Result<Self> {
        check_name(name)?;
        let cron = Cron::from_str(&definition.cron).map_err(|e| ScheduleError::InvalidCron {
            expression: definition.cron.clone(),
            reason: e.to_string(),
        })?;
        let zone = Tz::from_str(&definition.zone).map_err(|_| ScheduleError::UnknownZone {
            zone: definition.zone.clone(),
        })?;
        check_grace(definition.grace_ms)?;
        check_max_per_tick(definition.max_per_tick)?;
        let schedule = Schedule {
            name: name.to_owned(),
            definition,
            cron,
            zone,
        };
        schedule.check_fires_after(Timestamp::from_millis(0))?;
        Ok(schedule)
    }

    /// Names the workflow each occurrence runs.
    pub fn workflow(mut self, workflow: WorkflowName) -> Self {
        self.definition.workflow = Some(workflow);
        self
    }

    /// Sets the input each occurrence gets.
    pub fn input(mut self, input: Json) -> Self {
        self.definition.input = Some(input);
        self
    }

    /// Sets the catch-up policy.
    pub fn catch_up(mut self, catch_up: CatchUp) -> Self {
        self.definition.catch_up = catch_up;
        self
    }

    /// Sets the grace window (0 to [`MAX_GRACE`], whole milliseconds); out of range is
    /// [`ScheduleError::InvalidOption`].
    pub fn grace(mut self, grace: Duration) -> Result<Self> {
        let ms = millis(grace);
        check_grace(ms)?;
        self.definition.grace_ms = ms;
        Ok(self)
    }

    /// Sets the most occurrences one tick admits (1 to
    /// [`lease_core::limits::MAX_ADMIT_BATCH`]); out of range is
    /// [`ScheduleError::InvalidOption`].
    pub fn max_per_tick(mut self, n: usize) -> Result<Self> {
        check_max_per_tick(n)?;
        self.definition.max_per_tick = n;
        Ok(self)
    }

    /// The name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The definition (what is stored and compared).
    pub fn definition(&self) -> &Definition {
        &self.definition
    }

    /// The store key of this schedule's entry: its name.
    pub(crate) fn key(&self) -> Result<StoreKey> {
        Ok(StoreKey::new(self.name.clone())?)
    }

    /// The execution id of the occurrence at `at`: `schedule:<name>:<unix ms>`. The name
    /// holds no part that could be read as the instant (the instant is the text after the
    /// last `:`), so distinct (name, instant) pairs never share an id.
    pub fn execution_id(&self, at: Timestamp) -> Result<ExecutionId> {
        Ok(ExecutionId::new(format!(
            "{ID_PREFIX}{}:{}",
            self.name,
            at.as_millis()
        ))?)
    }

    /// What the occurrence at `at` admits: its id, the workflow and input, and
    /// `not_before(at)`, so claims follow the occurrences' order.
    pub fn admission(&self, at: Timestamp) -> Result<Admission> {
        let mut admission = Admission::new(self.execution_id(at)?).not_before(at);
        admission.workflow.clone_from(&self.definition.workflow);
        admission.input.clone_from(&self.definition.input);
        Ok(admission)
    }

    /// [`ScheduleError::NeverFires`] unless some occurrence lies after `t`.
    pub(crate) fn check_fires_after(&self, t: Timestamp) -> Result<()> {
        match self.next_after(t) {
            Some(_) => Ok(()),
            None => Err(ScheduleError::NeverFires {
                expression: self.definition.cron.clone(),
            }),
        }
    }

    /// The grace window.
    pub fn grace_window(&self) -> Duration {
        Duration::from_millis(self.definition.grace_ms)
    }

    /// The first occurrence strictly after `t` (occurrences are whole seconds), or `None`.
    pub fn next_after(&self, t: Timestamp) -> Option<Timestamp> {
        let from = self.at(whole_second(t.as_millis()))?;
        let next = self.cron.find_next_occurrence(&from, false).ok()?;
        Some(Timestamp::from_millis(next.timestamp_millis()))
    }

    /// The last occurrence strictly before `t`, or `None`.
    pub fn prev_before(&self, t: Timestamp) -> Option<Timestamp> {
        let from = self.at(whole_second(t.as_millis().checked_sub(1)?))?;
        let prev = self.cron.find_previous_occurrence(&from, true).ok()?;
        Some(Timestamp::from_millis(prev.timestamp_millis()))
    }

    /// The instant `ms` in the schedule's zone.
    fn at(&self, ms: i64) -> Option<DateTime<Tz>> {
        DateTime::from_timestamp_millis(ms).map(|d| d.with_timezone(&self.zone))
    }
}

/// `ms` rounded down to a whole second.
fn whole_second(ms: i64) -> i64 {
    ms.div_euclid(1000) * 1000
}

/// A duration in whole milliseconds, saturating.
fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

fn check_grace(ms: u64) -> Result<()> {
    if ms > millis(MAX_GRACE) {
        return Err(ScheduleError::InvalidOption {
            field: "grace window",
            reason: format!("{ms} ms is longer than {MAX_GRACE:?}"),
        });
    }
    Ok(())
}

fn check_max_per_tick(n: usize) -> Result<()> {
    if n == 0 || n > MAX_ADMIT_BATCH {
        return Err(ScheduleError::InvalidOption {
            field: "max_per_tick",
            reason: format!("{n} is outside 1..={MAX_ADMIT_BATCH}"),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_inputs_are_typed_errors() {
        let long = "n".repeat(MAX_NAME_BYTES + 1);
        let cases: [(&str, &str, &str); 6] = [
            ("", "* * * * *", "UTC"),
            (&long, "* * * * *", "UTC"),
            ("a\nb", "* * * * *", "UTC"),
            ("n", "not cron", "UTC"),
            ("n", "0 0 30 2 *", "UTC"),
            ("n", "* * * * *", "Mars/Olympus"),
        ];
        let errors: Vec<_> = cases
            .iter()
            .map(|(n, c, z)| Schedule::new(n, c, z).expect_err("refused"))
            .collect();
        assert!(matches!(errors[0], ScheduleError::InvalidName { .. }));
        assert!(matches!(errors[1], ScheduleError::InvalidName { .. }));
        assert!(matches!(errors[2], ScheduleError::InvalidName { .. }));
        assert!(matches!(errors[3], ScheduleError::InvalidCron { .. }));
        assert!(
            matches!(errors[4], ScheduleError::NeverFires { .. }),
            "{:?}",
            errors[4]
        );
        assert!(matches!(errors[5], ScheduleError::UnknownZone { .. }));
    }

    #[test]
    fn the_longest_name_gives_a_valid_id_at_the_latest_instant() {
        let s = Schedule::new(&"n".repeat(MAX_NAME_BYTES), "* * * * *", "UTC").expect("ok");
        let id = s
            .execution_id(Timestamp::from_millis(lease_core::limits::MAX_SCHEDULED_MS))
            .expect("fits");
        assert_eq!(id.as_str().len(), MAX_ID_BYTES);
    }

    #[test]
    fn berlin_fires_at_its_local_time_on_both_sides_of_a_dst_change() {
        let s = Schedule::new("b", "0 9 * * *", "Europe/Berlin").expect("ok");
        // 2026-03-28 09:00 CET = 08:00Z; 2026-03-29 09:00 CEST = 07:00Z.
        let before = Timestamp::from_millis(1_774_656_000_000 - 1);
        let first = s.next_after(before).expect("fires");
        assert_eq!(first.as_millis(), 1_774_684_800_000);
        let second = s.next_after(first).expect("fires");
        assert_eq!(second.as_millis() - first.as_millis(), 23 * 3_600_000);
        assert_eq!(s.prev_before(second), Some(first));
    }
}
