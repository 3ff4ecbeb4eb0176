//! Declares the two deliberately broken test-only code paths as cfgs (not cargo features, so
//! `--all-features` and docs.rs never turn them on):
//!
//! - `lease_postgres_unlocked_commit_experiment`, set here when the environment has
//!   `LEASE_POSTGRES_UNLOCKED_COMMIT_EXPERIMENT=1`: adds
//!   `FencedTx::commit_with_unlocked_check_for_race_test` (a method no other code calls), so
//!   `tests/fenced_tx.rs` can show the race test catches a non-atomic fenced commit. This
//!   workspace sets it in `.cargo/config.toml` (`[env]`); a build of the crate elsewhere has
//!   neither.
//! - `lease_postgres_nonatomic_fencing_experiment` swaps in a non-atomic step write and
//!   acknowledgement, for running `tests/race.rs` by hand to see it fail. It replaces the
//!   fencing itself, so no environment variable turns it on: only an explicit compiler
//!   flag, `RUSTFLAGS="--cfg lease_postgres_nonatomic_fencing_experiment"`, and this script
//!   refuses it in a release build.

/// The cfgs set from an environment variable of this name equal to `1`.
pub(crate) const SWITCHES: [(&str, &str); 1] = [(
    "LEASE_POSTGRES_UNLOCKED_COMMIT_EXPERIMENT",
    "lease_postgres_unlocked_commit_experiment",
)];

/// The cfg only an explicit `--cfg` sets (declared here so rustc knows the name).
const NONATOMIC_FENCING: &str = "lease_postgres_nonatomic_fencing_experiment";

/// Why this build must stop: the non-atomic fencing cfg in a release build (`profile` is
/// cargo's `PROFILE`, `nonatomic` whether the cfg is set).
pub(crate) fn refusal(profile: &str, nonatomic: bool) -> Option<String> {
    (nonatomic && profile == "release").then(|| {
        format!(
            "--cfg {NONATOMIC_FENCING} breaks fencing (a test-only experiment): \
             it is refused in a release build"
        )
    })
}

fn main() {
    for (var, cfg) in SWITCHES {
        println!("cargo::rerun-if-env-changed={var}");
        println!("cargo::rustc-check-cfg=cfg({cfg})");
        if std::env::var(var).is_ok_and(|v| v == "1") {
            println!("cargo::rustc-cfg={cfg}");
        }
    }
    println!("cargo::rustc-check-cfg=cfg({NONATOMIC_FENCING})");
    let nonatomic = std::env::var_os(format!(
        "CARGO_CFG_{}",
        NONATOMIC_FENCING.to_ascii_uppercase()
    ))
    .is_some();
    let profile = std::env::var("PROFILE").unwrap_or_default();
    if let Some(why) = refusal(&profile, nonatomic) {
        println!("cargo::error={why}");
    }
}
