//! The build script's switches: no environment variable swaps the fencing for the
//! non-atomic experiment, and a release build refuses its `--cfg`.

#[allow(dead_code)]
#[path = "../build.rs"]
mod build_script;

#[test]
fn no_environment_variable_turns_on_the_nonatomic_fencing() {
    for (var, cfg) in build_script::SWITCHES {
        assert_ne!(
            cfg, "lease_postgres_nonatomic_fencing_experiment",
            "{var} swaps the fencing"
        );
    }
}

#[test]
fn a_release_build_refuses_the_nonatomic_fencing() {
    assert!(build_script::refusal("release", true).is_some());
    assert_eq!(build_script::refusal("debug", true), None);
    assert_eq!(build_script::refusal("release", false), None);
}
