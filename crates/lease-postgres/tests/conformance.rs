//! The RFC 002 conformance suite against real PostgreSQL: a fresh random schema per case
//! (over `LEASE_POSTGRES_URL`, default `postgres://postgres@127.0.0.1:5432/test`), peers on
//! separate pools, the schema dropped at teardown.

mod common;

pub use common::PostgresHarness;

lease_conformance::conformance_tests!(PostgresHarness);
