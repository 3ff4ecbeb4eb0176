//! Turns on the two deliberately broken test-only code paths as cfgs (not cargo features, so
//! the published crate advertises neither), from environment variables:
//!
//! - `LEASE_POSTGRES_UNLOCKED_COMMIT_EXPERIMENT=1`: cfg `lease_postgres_unlocked_commit_experiment`
//!   adds `FencedTx::commit_with_unlocked_check_for_race_test`, so `tests/fenced_tx.rs` can
//!   show the race test catches a non-atomic fenced commit. This workspace sets it in
//!   `.cargo/config.toml` (`[env]`); a build of the crate elsewhere has neither.
//! - `LEASE_POSTGRES_NONATOMIC_FENCING_EXPERIMENT=1`: cfg
//!   `lease_postgres_nonatomic_fencing_experiment` swaps in a non-atomic step write and
//!   acknowledgement, for running `tests/race.rs` by hand to see it fail. Never set it
//!   elsewhere.

const SWITCHES: [(&str, &str); 2] = [
    (
        "LEASE_POSTGRES_UNLOCKED_COMMIT_EXPERIMENT",
        "lease_postgres_unlocked_commit_experiment",
    ),
    (
        "LEASE_POSTGRES_NONATOMIC_FENCING_EXPERIMENT",
        "lease_postgres_nonatomic_fencing_experiment",
    ),
];

fn main() {
    for (var, cfg) in SWITCHES {
        println!("cargo::rerun-if-env-changed={var}");
        println!("cargo::rustc-check-cfg=cfg({cfg})");
        if std::env::var(var).is_ok_and(|v| v == "1") {
            println!("cargo::rustc-cfg={cfg}");
        }
    }
}
