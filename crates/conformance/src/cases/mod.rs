//! The cases, one plain async function per RFC row or design rule, grouped by table.
//!
//! Every case is `pub async fn name<H: Harness>(ctx: Arc<Ctx<H>>)` and is listed once, in
//! its own module's `__<module>_cases!` macro (beside the functions), which
//! [`crate::conformance_tests!`] expands. Test names are global to the invoking file, so a
//! case's name must be unique across these modules.

pub mod attempts;
pub mod backlog;
pub mod bad_input;
pub mod browse;
pub mod cancel;
pub mod combined;
pub mod counts;
pub mod declared;
pub mod differential;
pub mod dispatcher;
pub mod effects;
pub mod fencing;
pub mod history;
pub mod leases;
pub mod limits;
pub mod live;
pub mod ordering;
pub mod pause;
pub mod pickup;
pub mod priority;
pub mod rates;
pub mod redelivery;
pub mod retention;
pub mod schedules;
pub mod semantics;
pub mod store;
pub mod traces;
pub mod workflow_redelivery;
