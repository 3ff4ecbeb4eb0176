//! The rendered SQL of the hot-path operations, for the benchmark's raw baseline (`crates/bench`):
//! exactly the statements the library sends. Not a stable API.

use crate::config::quoted;
use crate::statements::Renderer;
use crate::wakeup::channel_name;

/// The startup options the library's connections carry (`-c name=value`): a baseline that
/// runs the library's statements should run them with these too (generic plans, no JIT, no
/// bitmap scans).
pub const SESSION_OPTIONS: [(&str, &str); 4] = crate::backend::SESSION_SETTINGS;

/// Statements rendered for one schema; parameters as documented on each in its `.sql` file.
#[derive(Debug, Clone)]
pub struct Statements {
    /// The claim statement of `claim_due`, `claim_due_with_records` and
    /// `claim_due_with_horizon` without its trailing summary row (clock and horizon,
    /// which the library reads and this baseline would have to skip): `$1 request now,
    /// $2 clock, $3 limit, $4 lease ms, $5 delays` -> rows (id, token, expires_at, the
    /// 20 execution columns, then columns the library uses). It notifies like the
    /// library's. It claims nothing when a picked row's key has a concurrency limit (the
    /// library then runs `claim_keyed`).
    pub claim: String,
    /// The whole claim statement of `claim_due_with_horizon`, its summary row included (here
    /// so a test can read the horizon's plan): `claim`'s parameters.
    pub claim_with_horizon: String,
    /// The keyed claim (concurrency limits counted after each key's lock): `claim`'s
    /// parameters -> the claim statement's rows, summary row included.
    pub claim_keyed: String,
    /// `renew`: `$1 id, $2 token, $3 clock, $4 lease ms, $5 delays`.
    pub renew: String,
    /// `acknowledge`: `$1 id, $2 token, $3 clock, $4 new status, $5 outcome`.
    pub acknowledge: String,
    /// `acknowledge_batch`: `$1 ids text[], $2 tokens bigint[], $3 new statuses text[],
    /// $4 outcomes text[] (NULL for suspended), $5 clock`; distinct ids -> one row per
    /// item in order (item number from 1, current token, status, acknowledged).
    pub acknowledge_batch: String,
    /// `write_step`: `$1 id, $2 token, $3 step key, $4 attempt, $5 done, $6 response, $7
    /// clock` (NULL: the database's).
    pub write_step: String,
    /// `read_step`: `$1 id, $2 step key, $3 attempt`.
    pub read_step: String,
    /// `get`: `$1 id, $2 clock`.
    pub get: String,
    /// `now`: no parameters.
    pub now: String,
    /// `list_live_leases` (the console's live leases, not a hot path; here so a test can
    /// read its plan): `$1 limit, $2 clock`.
    pub list_live_leases: String,
    /// `list_dead` (an operator's page, not a hot path; here so a test can read its plan):
    /// `$1 after (NULL: from the first), $2 limit, $3 clock`.
    pub list_dead: String,
    /// `list_executions` (an operator's page; here so a test can read its plans), one per
    /// filter shape: index `status | workflow << 1 | key << 2` (each 1 when filtered on).
    /// `$1 status, $2 workflow, $3 key (NULL: any; a NULL for a filtered field matches
    /// nothing), $4 the cursor's admission number (NULL: newest), $5 limit, $6 clock`.
    pub list_executions: Vec<String>,
}

/// Renders the statements for `schema` (unquoted, as given to
/// [`crate::PostgresConfig::schema`]).
pub fn statements(schema: &str) -> Statements {
    let r = Renderer::new(&quoted(schema), &channel_name(schema));
    let (execution, heap) = (
        crate::execution::statements(&r),
        crate::heap::statements(&r),
    );
    Statements {
        claim: execution.claim_leases_only.to_string(),
        claim_with_horizon: execution.claim.to_string(),
        claim_keyed: execution.claim_keyed.to_string(),
        renew: execution.renew.to_string(),
        acknowledge: execution.acknowledge.to_string(),
        acknowledge_batch: execution.acknowledge_batch.to_string(),
        write_step: heap.write_step.to_string(),
        read_step: heap.read_step.to_string(),
        get: execution.get.to_string(),
        now: crate::backend::statements(&r).now.to_string(),
        list_live_leases: execution.list_live_leases.to_string(),
        list_dead: crate::attempts::statements(&r).list_dead.to_string(),
        list_executions: crate::browse::statements(&r)
            .pages
            .iter()
            .map(|p| p.to_string())
            .collect(),
    }
}
