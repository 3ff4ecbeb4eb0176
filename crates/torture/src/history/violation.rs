//! What the checker reports: one [`Violation`] per broken invariant.

use std::fmt;

use serde::{Deserialize, Serialize};

/// A broken invariant, with the operations that prove it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Violation {
    /// Two claims of one execution issued the same token, or a claim that began after another
    /// returned issued a lower token.
    TokenNotIncreasing {
        /// Execution.
        execution: String,
        /// The earlier claim's token.
        earlier: u64,
        /// The later claim's token.
        later: u64,
    },
    /// A claim was granted while another lease on the execution was still live.
    OverlappingLeases {
        /// Execution.
        execution: String,
        /// Token of the lease that was still live.
        live: u64,
        /// Token of the claim granted during it.
        claimed: u64,
    },
    /// A fenced operation was accepted although a higher token had been issued before it was
    /// invoked.
    StaleAccepted {
        /// Execution.
        execution: String,
        /// The stale token.
        token: u64,
        /// The higher token issued before the operation.
        newer: u64,
        /// Which operation.
        op: String,
    },
    /// A step record was reported with two different values.
    StepChanged {
        /// Execution.
        execution: String,
        /// Step key and attempt.
        step: String,
        /// First value seen.
        first: String,
        /// A different value seen later.
        other: String,
    },
    /// A step value is not the one the workflow derives for it.
    StepCorrupt {
        /// Execution.
        execution: String,
        /// Step key and attempt.
        step: String,
        /// The expected value.
        expected: String,
        /// The value found.
        found: String,
    },
    /// Two different terminal outcomes were accepted or read for one execution.
    OutcomeChanged {
        /// Execution.
        execution: String,
        /// First outcome.
        first: String,
        /// A different one.
        other: String,
    },
    /// The terminal outcome of an execution is not the one its workflow derives.
    OutcomeCorrupt {
        /// Execution.
        execution: String,
        /// The expected outcome.
        expected: String,
        /// The outcome found.
        found: String,
    },
    /// Two executions were issued the same token (tokens come from one counter per
    /// namespace, so every claim's token is unique: a reset counter shows up here).
    TokenReused {
        /// The token.
        token: u64,
        /// One execution it was issued to.
        first: String,
        /// Another execution it was issued to.
        other: String,
    },
    /// A delivery was ended twice: two accepted acknowledgements or releases with one token
    /// (the first ends the delivery, so a second must return `Lost`).
    EndedTwice {
        /// Execution.
        execution: String,
        /// The token of the delivery.
        token: u64,
    },
    /// Something was accepted with a token above the token of an accepted terminal
    /// acknowledgement: a terminal execution was claimed again (whatever the timing: a claim
    /// committed before the acknowledgement makes the acknowledgement stale, and one after
    /// it claims a terminal execution).
    AfterOutcome {
        /// Execution.
        execution: String,
        /// The token of the terminal acknowledgement.
        outcome_token: u64,
        /// The higher token.
        token: u64,
        /// Which operation.
        op: String,
    },
    /// Rule 6a: a fenced operation invoked after a cancel that returned `cancelled` had
    /// returned was accepted (any token: the cancel ended every delivery).
    AcceptedAfterCancel {
        /// Execution.
        execution: String,
        /// The operation's token.
        token: u64,
        /// Which operation.
        op: String,
    },
    /// Rule 6b: a claim invoked after a cancel that returned `cancelled` had returned was
    /// granted.
    ClaimedAfterCancel {
        /// Execution.
        execution: String,
        /// The claim's token.
        token: u64,
    },
    /// Rule 6c: the final outcome read of a cancelled execution is not `cancelled:<reason>`.
    NotReadCancelled {
        /// Execution.
        execution: String,
        /// The outcome read (`<missing>` when not terminal).
        found: String,
    },
    /// Rule 6d: a cancel returned `already_terminal` although no terminal acknowledgement
    /// had been invoked before it returned.
    TerminalWithoutAcknowledgement {
        /// Execution.
        execution: String,
    },
    /// Rule 7: a claim call took leases of a concurrency key while the key's leases certainly
    /// live at its commit, with the ones it took, exceeded every limit that may have been in
    /// force.
    TooManyLiveLeases {
        /// The concurrency key.
        key: String,
        /// The highest limit that may have been in force.
        limit: u32,
        /// The leases the call took (`execution#token`).
        claimed: Vec<String>,
        /// The earlier leases of the key certainly live at its commit (`execution#token`).
        live: Vec<String>,
    },
    /// Rule 8: a claim invoked after an accepted pause of the namespace had returned was
    /// granted, and no resume may have committed in between.
    ClaimedWhilePaused {
        /// Execution.
        execution: String,
        /// The claim's token.
        token: u64,
        /// When the pause returned (µs).
        paused_at_us: i64,
    },
    /// Rule 9: a claim took an execution while one of higher priority was certainly due and
    /// claimable at its commit.
    LowerPriorityClaimed {
        /// The claimed execution.
        execution: String,
        /// The claim's token.
        token: u64,
        /// Its priority.
        priority: i32,
        /// The execution of higher priority the claim passed over.
        passed_over: String,
        /// That execution's priority.
        passed_over_priority: i32,
    },
    /// Rule 10: an occurrence the schedule settled was never admitted.
    OccurrenceMissing {
        /// The occurrence's execution id.
        execution: String,
    },
    /// Rule 10: an occurrence was delivered first more than once (admitted again).
    OccurrenceAdmittedTwice {
        /// The occurrence's execution id.
        execution: String,
        /// Claims that each showed a first delivery.
        first_deliveries: usize,
    },
    /// Rule 11: a claim was granted after the execution's certain attempts had reached the
    /// highest attempt limit that may have been in force (it was dead).
    ClaimedAfterAttempts {
        /// Execution.
        execution: String,
        /// The claim's token.
        token: u64,
        /// Certain attempts before it.
        attempts: u32,
        /// The highest limit that may have been in force.
        limit: u32,
    },
    /// Rule 11: a fenced operation invoked after the execution was certainly dead was
    /// accepted.
    AcceptedAfterDead {
        /// Execution.
        execution: String,
        /// The operation's token.
        token: u64,
        /// Which operation.
        op: String,
    },
    /// Rule 12: more claims of a key in one window of its rate than the rate allows.
    RateExceeded {
        /// The concurrency key.
        key: String,
        /// The rate's claims per window.
        starts: u32,
        /// The rate's window, backend ms.
        period_ms: i64,
        /// The window's end (a claim's instant), backend ms.
        at_ms: i64,
        /// The claims in the window (`execution#token`).
        claims: Vec<String>,
    },
    /// Rule 13: a claim call took a lease of an ordered key while another of its leases
    /// was certainly live (or took two).
    OrderedKeyOverlap {
        /// The ordered key.
        key: String,
        /// The leases the call took (`execution#token`).
        claimed: Vec<String>,
        /// The key's leases certainly live at its commit (`execution#token`).
        live: Vec<String>,
    },
    /// Rule 13: an execution of an ordered key was claimed while one admitted before it
    /// was neither terminal nor dead.
    OrderedOutOfTurn {
        /// The ordered key.
        key: String,
        /// The claimed execution.
        execution: String,
        /// The claim's token.
        token: u64,
        /// The earlier admitted execution still waiting (claimed later).
        waiting: String,
    },
    /// An execution did not complete within the liveness bound.
    NotCompleted {
        /// Execution.
        execution: String,
    },
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match serde_json::to_string(self) {
            Ok(s) => f.write_str(&s),
            Err(_) => write!(f, "{self:?}"),
        }
    }
}

/// What a changed step or outcome reads as when it disappeared.
pub const MISSING: &str = "<missing>";
