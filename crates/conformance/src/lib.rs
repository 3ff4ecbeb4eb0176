//! The RFC 002 conformance suite.
//!
//! An adapter proves itself with one line in a test file, given a [`Harness`]:
//!
//! ```text
//! lease_conformance::conformance_tests!(my_crate::MyHarness);
//! ```
//!
//! It expands to one `#[test]` per row of the RFC's tables and per rule of design.md
//! section 2, each named after its row, each on a fresh store.
#![cfg_attr(docsrs, feature(doc_cfg))]

pub mod cases;
pub mod context;
pub mod harness;
pub mod history;

pub use context::{Ctx, run_case};
pub use harness::Harness;
/// The test-table crate [`conformance_tests!`] expands to (built without its `crate-name`
/// feature, so its macros name it `rstest` and find this re-export): an adapter's test crate
/// needs no rstest dependency of its own, and may write its own tables with
/// `use lease_conformance::rstest::rstest;`.
pub use rstest;

/// Expands to one named test per conformance case for the harness type `$harness`.
///
/// Invoke it at the top level of an integration-test file; `$harness` must be a path that
/// resolves there.
#[macro_export]
macro_rules! conformance_tests {
    ($harness:ty) => {
        // leases.rs
        $crate::__case!(
            $harness,
            leases,
            two_peers_claim_concurrently_exactly_one_lease
        );
        $crate::__case!($harness, leases, claim_sets_status_running);
        $crate::__case!($harness, leases, expired_lease_claimable_with_higher_token);
        $crate::__case!(
            $harness,
            leases,
            expiry_after_suspended_delivery_returns_to_suspended
        );
        $crate::__case!($harness, leases, expiry_before_any_ack_returns_to_admitted);
        $crate::__case!($harness, leases, renewal_keeps_lease_past_original_expiry);
        $crate::__case!($harness, leases, renewal_with_stale_token_is_lost);
        $crate::__case!(
            $harness,
            leases,
            released_lease_claimable_after_delay_with_higher_token
        );
        $crate::__case!($harness, leases, ack_suspended_with_wake_due_at_wake);
        $crate::__case!($harness, leases, ack_suspended_without_wake_not_due);
        $crate::__case!($harness, leases, crashed_worker_redelivered_after_expiry);
        $crate::__case!($harness, leases, peers_claim_batch_each_leased_once);
        $crate::__case!($harness, leases, claim_with_records_returns_what_get_reads);
        // fencing.rs
        $crate::__case!($harness, fencing, stale_step_write_after_reclaim_is_lost);
        $crate::__case!($harness, fencing, stale_ack_after_reclaim_is_lost);
        $crate::__case!($harness, fencing, paused_holder_every_fenced_write_lost);
        $crate::__case!(
            $harness,
            fencing,
            current_holder_rewrite_keeps_recorded_value
        );
        $crate::__case!($harness, fencing, stale_store_update_applies_once);
        $crate::__case!($harness, fencing, stale_start_returns_same_target);
        $crate::__case!(
            $harness,
            fencing,
            stale_wake_causes_at_most_one_extra_delivery
        );
        $crate::__case!($harness, fencing, stale_wake_does_not_change_outcome);
        $crate::__case!($harness, fencing, stale_writes_race_reclaim_atomically);
        $crate::__case!(
            $harness,
            fencing,
            stale_renew_and_release_race_reclaim_atomically
        );
        $crate::__case!($harness, fencing, ack_batch_fences_each_item);
        // redelivery.rs
        $crate::__case!($harness, redelivery, release_increments_unacked_and_delays);
        $crate::__case!($harness, redelivery, repeated_release_delays_never_shrink);
        $crate::__case!($harness, redelivery, expiry_after_release_counts_both);
        $crate::__case!($harness, redelivery, ack_after_releases_resets_unacked);
        // semantics.rs
        $crate::__case!($harness, semantics, admit_is_idempotent);
        $crate::__case!($harness, semantics, admit_while_running_changes_nothing);
        $crate::__case!(
            $harness,
            semantics,
            get_effective_view_after_expiry_admitted
        );
        $crate::__case!(
            $harness,
            semantics,
            get_effective_view_after_expiry_suspended
        );
        $crate::__case!($harness, semantics, wake_during_lease_deferred_to_ack);
        $crate::__case!($harness, semantics, wake_during_lease_kept_by_release);
        $crate::__case!($harness, semantics, wake_during_lease_kept_by_expiry);
        $crate::__case!($harness, semantics, wake_outside_lease_makes_due);
        $crate::__case!($harness, semantics, wake_on_terminal_is_noop);
        $crate::__case!(
            $harness,
            semantics,
            renew_after_expiry_without_reclaim_succeeds
        );
        $crate::__case!(
            $harness,
            semantics,
            write_step_after_expiry_without_reclaim_accepted
        );
        $crate::__case!($harness, semantics, fenced_writes_after_release_lost);
        $crate::__case!($harness, semantics, fenced_writes_after_ack_lost);
        $crate::__case!($harness, semantics, ack_completed_is_terminal);
        $crate::__case!($harness, semantics, ack_failed_is_terminal);
        $crate::__case!($harness, semantics, claim_respects_limit_and_order);
        $crate::__case!(
            $harness,
            semantics,
            claim_with_future_now_uses_backend_clock
        );
        $crate::__case!($harness, semantics, claim_with_past_now_uses_request_now);
        $crate::__case!($harness, semantics, tokens_unique_and_increasing);
        $crate::__case!($harness, semantics, list_failing_most_failing_first);
        $crate::__case!($harness, semantics, renew_extends_from_backend_now);
        $crate::__case!($harness, semantics, backend_now_reads_injected_clock);
        $crate::__case!($harness, semantics, write_step_records_and_reads_back);
        $crate::__case!(
            $harness,
            semantics,
            claim_does_not_end_unclaimed_expired_leases
        );
        $crate::__case!(
            $harness,
            semantics,
            end_after_expiry_without_reclaim_counts_once
        );
        $crate::__case!(
            $harness,
            semantics,
            list_steps_page_returns_every_step_once_in_order
        );
        // store.rs
        $crate::__case!($harness, store, get_or_create_idempotent_by_identity);
        $crate::__case!($harness, store, store_put);
        $crate::__case!($harness, store, store_delete);
        $crate::__case!($harness, store, store_compare_and_set_match);
        $crate::__case!($harness, store, store_compare_and_set_mismatch);
        $crate::__case!($harness, store, store_compare_and_set_expected_absent);
        $crate::__case!($harness, store, store_take_if_matches_match);
        $crate::__case!($harness, store, store_take_if_matches_mismatch);
        $crate::__case!($harness, store, store_repeated_receipt_replays_outcome);
        $crate::__case!($harness, store, store_receipt_is_store_execution_step);
        $crate::__case!($harness, store, store_update_unknown_store);
        $crate::__case!($harness, store, start_idempotent_by_request_id);
        $crate::__case!($harness, store, store_concurrent_same_receipt_applies_once);
        $crate::__case!($harness, store, start_concurrent_same_request_one_target);
        $crate::__case!($harness, store, get_or_create_concurrent_one_initial_state);
        // bad_input.rs
        $crate::__case!($harness, bad_input, names_empty_or_over_255_bytes_rejected);
        $crate::__case!($harness, bad_input, names_of_255_bytes_round_trip);
        $crate::__case!(
            $harness,
            bad_input,
            list_steps_page_limit_out_of_range_rejected
        );
        $crate::__case!($harness, bad_input, claim_duration_out_of_range_rejected);
        $crate::__case!($harness, bad_input, renew_duration_out_of_range_rejected);
        $crate::__case!($harness, bad_input, claim_limit_out_of_range_rejected);
        $crate::__case!(
            $harness,
            bad_input,
            list_failing_limit_out_of_range_rejected
        );
        $crate::__case!($harness, bad_input, unknown_execution_lease_rejected);
        $crate::__case!($harness, bad_input, foreign_token_rejected);
        $crate::__case!($harness, bad_input, token_zero_rejected);
        $crate::__case!($harness, bad_input, payload_too_large_rejected);
        $crate::__case!($harness, bad_input, malformed_json_rejected);
        $crate::__case!($harness, bad_input, request_wake_unknown_execution_rejected);
        $crate::__case!($harness, bad_input, start_existing_target_rejected);
        $crate::__case!($harness, bad_input, ack_batch_bad_input_changes_nothing);
        // pickup.rs (issue 10)
        $crate::__case!($harness, pickup, pickup_admission_by_peer_is_claimed);
        $crate::__case!($harness, pickup, pickup_wake_by_peer_is_claimed);
        $crate::__case!($harness, pickup, pickup_expired_lease_is_reclaimed);
        $crate::__case!($harness, pickup, pickup_survives_a_killed_listener);
        $crate::__case!(
            $harness,
            pickup,
            pickup_idle_dispatchers_claim_once_per_admission
        );
        $crate::__case!(
            $harness,
            pickup,
            scheduled_admission_claimable_from_its_time
        );
        $crate::__case!(
            $harness,
            pickup,
            scheduled_admission_past_due_and_idempotent
        );
        $crate::__case!($harness, pickup, scheduled_admission_out_of_range_rejected);
        $crate::__case!(
            $harness,
            pickup,
            claim_horizon_is_the_earliest_claimable_instant
        );
        $crate::__case!($harness, pickup, admit_batch_admits_each_like_admit);
        $crate::__case!($harness, pickup, admit_batch_bad_input_admits_nothing);
        // combined.rs (issue 12)
        $crate::__case!(
            $harness,
            combined,
            ack_and_claim_acknowledges_then_claims_next
        );
        $crate::__case!(
            $harness,
            combined,
            ack_and_claim_stale_ack_is_lost_and_still_claims
        );
        $crate::__case!(
            $harness,
            combined,
            ack_and_claim_sees_its_own_acknowledgement
        );
        $crate::__case!($harness, combined, ack_and_claim_bad_input_changes_nothing);
        // retention.rs (issue 12)
        $crate::__case!(
            $harness,
            retention,
            purge_removes_old_terminal_executions_and_what_names_them
        );
        $crate::__case!($harness, retention, purge_respects_its_limit);
        $crate::__case!($harness, retention, purged_id_is_unknown_then_new);
        $crate::__case!($harness, retention, purge_limit_out_of_range_rejected);
        // counts.rs (issue 15)
        $crate::__case!($harness, counts, status_counts_by_effective_status);
        $crate::__case!(
            $harness,
            counts,
            status_counts_change_nothing_and_follow_purge
        );
        // effects.rs (issue 16: effects and store waiters)
        $crate::__case!($harness, effects, effect_begin_repeat_returns_current_state);
        $crate::__case!(
            $harness,
            effects,
            effect_settle_keeps_first_result_reports_conflicts
        );
        $crate::__case!(
            $harness,
            effects,
            effect_bad_input_is_typed_and_changes_nothing
        );
        $crate::__case!(
            $harness,
            effects,
            stale_and_current_holders_race_begin_and_settle
        );
        $crate::__case!($harness, effects, effect_wait_is_woken_by_the_settle);
        $crate::__case!(
            $harness,
            effects,
            stale_effect_wait_causes_at_most_one_extra_delivery
        );
        $crate::__case!($harness, effects, store_waiter_is_woken_once_by_a_change);
        $crate::__case!(
            $harness,
            effects,
            stale_store_waiter_causes_at_most_one_extra_delivery
        );
        $crate::__case!($harness, effects, purge_removes_effects_and_waiters);
        // differential.rs (issue 11: every harness runs the differential test)
        // One rstest case per seed (tests `differential::case_N_seed_N`), through the
        // re-exported rstest, so the adapter's crate needs no rstest dependency of its own.
        #[$crate::rstest::rstest]
        #[case::seed_1(1)]
        #[case::seed_2(2)]
        #[case::seed_3(3)]
        #[case::seed_4(4)]
        fn differential(#[case] seed: u64) {
            $crate::run_case::<$harness, _, _>(move |ctx| {
                $crate::cases::differential::differential_seed::<$harness>(ctx, seed)
            });
        }
        // dispatcher.rs lists its own cases.
        $crate::__dispatcher_cases!($harness);
    };
}

/// One test; an implementation detail of [`conformance_tests!`].
#[doc(hidden)]
#[macro_export]
macro_rules! __case {
    ($harness:ty, $table:ident, $case:ident) => {
        #[test]
        fn $case() {
            $crate::run_case::<$harness, _, _>($crate::cases::$table::$case::<$harness>);
        }
    };
}

#[cfg(test)]
mod tests {
    /// Every case in the table modules is listed in [`conformance_tests!`], so none is
    /// silently skipped. (`dispatcher.rs` lists its cases in its own macro.)
    #[test]
    fn every_case_is_listed_in_the_macro() {
        let lib = include_str!("lib.rs");
        let modules = [
            ("leases", include_str!("cases/leases.rs")),
            ("fencing", include_str!("cases/fencing.rs")),
            ("redelivery", include_str!("cases/redelivery.rs")),
            ("semantics", include_str!("cases/semantics.rs")),
            ("store", include_str!("cases/store.rs")),
            ("bad_input", include_str!("cases/bad_input.rs")),
            ("pickup", include_str!("cases/pickup.rs")),
            ("differential", include_str!("cases/differential.rs")),
            ("combined", include_str!("cases/combined.rs")),
            ("retention", include_str!("cases/retention.rs")),
            ("counts", include_str!("cases/counts.rs")),
            ("effects", include_str!("cases/effects.rs")),
        ];
        let mut count = 0;
        for (module, source) in modules {
            for line in source.lines() {
                let Some(rest) = line.strip_prefix("pub async fn ") else {
                    continue;
                };
                let name = rest.split('<').next().unwrap_or_default();
                count += 1;
                let listed = lib
                    .split(|c: char| !(c.is_alphanumeric() || c == '_'))
                    .any(|word| word == name);
                assert!(listed, "{module}::{name} is not in conformance_tests!");
            }
        }
        assert!(count >= 45, "only {count} cases");
    }
}
