//! The variable of the `wait` replication mode, which the runtimes' Redis backends read
//! (`crate::backend`) and the modes set.

/// The variable that makes a runtime's Redis backend call `WAIT <n> 500` after each write.
pub const WAIT_ENV: &str = "LEASE_TORTURE_REDIS_WAIT";
