//! The test matrix: which `cargo test` runs for each backend, and the servers it needs.
//!
//! A backend whose crate is still the placeholder lib is left out; adding it is one line.

use crate::services::Service;

/// One row of the matrix.
#[derive(Debug, Clone, Copy)]
pub struct Backend {
    /// The name `--backend` selects and the summary shows.
    pub name: &'static str,
    /// Arguments after `cargo test`.
    pub cargo_test: &'static [&'static str],
    /// Servers its tests need; their URLs are passed as `LEASE_POSTGRES_URL` /
    /// `LEASE_REDIS_URL` / `LEASE_REDIS_CLUSTER_URL` (and the others' are unset).
    pub services: &'static [Service],
}

impl Backend {
    const fn new(
        name: &'static str,
        cargo_test: &'static [&'static str],
        services: &'static [Service],
    ) -> Self {
        Backend {
            name,
            cargo_test,
            services,
        }
    }
}

/// Every backend `cargo xtask test-all` runs, in order.
pub const MATRIX: &[Backend] = &[
    // lease-core's, lease-runtime's and lease-schedule's unit tests and the conformance
    // suite on the in-memory reference backend.
    Backend::new(
        "memory",
        &[
            "-p",
            "lease-core",
            "-p",
            "lease-runtime",
            "-p",
            "lease-schedule",
            "-p",
            "lease-conformance",
            "--features",
            "lease-core/memory",
        ],
        &[],
    ),
    // lease-core's JSON with the serde_json features Cargo may unify in from elsewhere in a
    // build (the canonical JSON text must not depend on them), with the `metrics`
    // export on (its recorder test, and every dispatcher test exporting) and
    // with `otel` (every dispatcher test through the OpenTelemetry bridge; the traces test
    // across processes is the facade row's).
    Backend::new(
        "json-features",
        &[
            "-p",
            "lease-core",
            "-p",
            "lease-runtime",
            "--features",
            "lease-core/memory,lease-core/test-preserve-order,lease-core/test-arbitrary-precision,lease-runtime/metrics,lease-runtime/otel",
        ],
        &[],
    ),
    Backend::new("sqlite", &["-p", "lease-sqlite"], &[]),
    // The worked example adapter over redb (examples/redb-adapter, docs/ADAPTERS.md): the
    // conformance suite on an embedded file, no server needed.
    Backend::new("example-adapter", &["-p", "lease-redb-example"], &[]),
    Backend::new("postgres", &["-p", "lease-postgres"], &[Service::Postgres]),
    Backend::new("redis", &["-p", "lease-redis"], &[Service::Redis]),
    // lease-redis on a throwaway Redis Cluster: the conformance suite and the race
    // tests on 3 partitions, one on each primary (tests/common `CLUSTER_PARTITIONS`
    // and `spread_namespace`, checked with CLUSTER KEYSLOT; LEASE_REDIS_PARTITIONS overrides),
    // tests/partitions.rs (cross-partition semantics) and tests/cluster.rs on 4 partitions
    // (spread, slot migration), and tests/failover_tokens.rs (a failover that lost counter
    // writes: the next token is still above every earlier one), tests/replication_barrier.rs
    // (`wait_for_replicas`: nothing resting on a write no replica has is a success).
    Backend::new(
        "redis-cluster",
        &[
            "-p",
            "lease-redis",
            "--test",
            "conformance",
            "--test",
            "race",
            "--test",
            "batch_race",
            "--test",
            "cluster",
            "--test",
            "partitions",
            "--test",
            "failover_tokens",
            "--test",
            "replication_barrier",
            // The cluster-only tests are `#[ignore]`d, so the plain redis row reports them
            // as not run; this row runs them. Gating them by a cargo feature instead rebuilt
            // lease-redis and every test target here, minutes of a cold CI run.
            "--",
            "--include-ignored",
        ],
        &[Service::RedisCluster],
    ),
    // The facade's tests, doc tests (the README, its OTLP example with `otel`) and examples,
    // every feature on (so `lease::open` reaches each server; the TLS tests start their own
    // servers; tests/traces.rs follows a trace across two processes, feature `otel`).
    Backend::new(
        "facade",
        &["-p", "execution-leases", "--all-features"],
        &[Service::Postgres, Service::Redis],
    ),
    // The `lease` operator command run as a process on SQLite, PostgreSQL and Redis.
    Backend::new(
        "cli",
        &["-p", "lease-cli"],
        &[Service::Postgres, Service::Redis],
    ),
    // `lease ui` in a real browser: Debian's headless Chromium through chromedriver (setup
    // installs chromium and chromium-driver; a missing one fails the row) against the console
    // on SQLite, PostgreSQL and Redis.
    Backend::new(
        "browser",
        &[
            "-p",
            "lease-cli",
            "--test",
            "browser",
            // Ignored by default (they need the browser), built by the cli row already.
            "--",
            "--include-ignored",
        ],
        &[Service::Postgres, Service::Redis],
    ),
    // The lease-worker runtime processes (SIGKILL, SIGSTOP) and the order-42 demo, on every
    // backend.
    Backend::new(
        "worker",
        &["-p", "lease-worker", "--all-features"],
        &[Service::Postgres, Service::Redis],
    ),
    // The short torture run: each backend under faults for 20 s, history-checked;
    // and the short failover runs on a PostgreSQL primary with a standby and on
    // a Redis Cluster.
    Backend::new(
        "torture",
        &["-p", "lease-torture"],
        &[
            Service::Postgres,
            Service::Redis,
            Service::PostgresStandby,
            Service::RedisClusterFailover,
        ],
    ),
    // What containers prove: the test-server crate's container tests
    // (each container answers on its loopback port only and is removed), and one
    // conformance case per backend against a container server, showing the adapter works
    // there. The full suites run in the postgres and redis rows; running them again here
    // counted the same bodies twice.
    Backend::new(
        "containers",
        &[
            "-p",
            "lease-postgres",
            "-p",
            "lease-redis",
            "-p",
            "lease-testserver",
            "--features",
            "lease-testserver/containers",
            "--test",
            "conformance",
            "--test",
            "containers",
            "--",
            "container",
            "two_peers_claim_concurrently_exactly_one_lease",
        ],
        &[Service::PostgresContainer, Service::RedisContainer],
    ),
    // The benchmark harness's own tests (argument parsing, report verdicts, the code of the
    // drain, ack_and_claim, stored and purge rows and the space rows on SQLite, the wake rows
    // on memory, a small run of each database-bound protocol): no timing asserted. The bound
    // runs use the shared PostgreSQL and Redis, so the row finds or starts them.
    Backend::new(
        "bench",
        &["-p", "lease-bench"],
        &[Service::Postgres, Service::Redis],
    ),
    // xtask's own tests: parsing, probes, a real throwaway redis-server and PostgreSQL cluster.
    Backend::new("xtask", &["-p", "xtask"], &[]),
    // The tree's own rules (xtask/tests/tidy): function lengths, no import circle inside a
    // crate, the adapters' one skeleton, wrappers forwarding every method. Parses the
    // sources only: no server needed.
    Backend::new("tidy", &["-p", "xtask", "--test", "tidy"], &[]),
];

/// The backends chosen by `--backend` names (all of them for none), in matrix order.
pub fn select(names: &[String]) -> Result<Vec<Backend>, String> {
    for name in names {
        if !MATRIX.iter().any(|b| b.name == name) {
            return Err(format!(
                "unknown backend {name:?}; the matrix has: {}",
                MATRIX.iter().map(|b| b.name).collect::<Vec<_>>().join(", ")
            ));
        }
    }
    Ok(MATRIX
        .iter()
        .filter(|b| names.is_empty() || names.iter().any(|n| n == b.name))
        .copied()
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The containers row runs the container tests and one conformance
    /// case per backend, not the whole suites again; the case it names exists.
    #[test]
    fn the_containers_row_runs_only_what_containers_prove() {
        let row = select(&["containers".into()]).expect("row")[0];
        let filters = row
            .cargo_test
            .split(|a| *a == "--")
            .nth(1)
            .expect("a test filter");
        assert_eq!(
            filters,
            [
                "container",
                "two_peers_claim_concurrently_exactly_one_lease"
            ]
        );
        let suite = include_str!("../../crates/conformance/src/cases/leases.rs");
        assert!(suite.contains(filters[1]));
    }

    /// The package name of the crate in `dir` (its manifest's first `name = "..."`).
    fn package_name(dir: &std::path::Path) -> String {
        let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap_or_default();
        manifest
            .lines()
            .find_map(|l| l.strip_prefix("name = \""))
            .and_then(|rest| rest.strip_suffix('"'))
            .unwrap_or_default()
            .to_owned()
    }

    /// (package, test target) of every integration test file below `crates/` holding an
    /// `#[ignore` attribute.
    fn targets_with_ignored_tests() -> Vec<(String, String)> {
        let crates = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../crates");
        let mut found = Vec::new();
        for krate in std::fs::read_dir(&crates).expect("crates/").flatten() {
            let Ok(tests) = std::fs::read_dir(krate.path().join("tests")) else {
                continue;
            };
            for file in tests.flatten() {
                let path = file.path();
                let text = std::fs::read_to_string(&path).unwrap_or_default();
                if path.extension().is_some_and(|e| e == "rs") && text.contains("#[ignore") {
                    let stem = path
                        .file_stem()
                        .expect("stem")
                        .to_string_lossy()
                        .into_owned();
                    found.push((package_name(&krate.path()), stem));
                }
            }
        }
        found
    }

    /// An ignored test is one some row runs: a row names its target and passes
    /// `--include-ignored`, or the test would silently never run anywhere.
    #[test]
    fn every_ignored_test_target_has_a_row_that_runs_it() {
        let targets = targets_with_ignored_tests();
        assert!(targets.iter().any(|(_, t)| t == "browser"), "{targets:?}");
        for (krate, target) in targets {
            let runs = MATRIX.iter().any(|row| {
                let args = row.cargo_test;
                let names = |flag: &str, value: &str| {
                    args.windows(2).any(|w| w[0] == flag && w[1] == value)
                };
                names("-p", &krate)
                    && names("--test", &target)
                    && args.contains(&"--include-ignored")
            });
            assert!(
                runs,
                "{krate}/tests/{target}.rs has ignored tests no row runs"
            );
        }
    }

    #[test]
    fn names_are_unique_and_select_keeps_matrix_order() {
        let mut names: Vec<_> = MATRIX.iter().map(|b| b.name).collect();
        names.dedup();
        assert_eq!(names.len(), MATRIX.len());
        assert_eq!(select(&[]).expect("all").len(), MATRIX.len());
        let picked = select(&["xtask".into(), "memory".into()]).expect("two");
        assert_eq!(
            picked.iter().map(|b| b.name).collect::<Vec<_>>(),
            ["memory", "xtask"]
        );
        assert!(
            select(&["nope".into()])
                .expect_err("unknown")
                .contains("memory")
        );
    }
}
