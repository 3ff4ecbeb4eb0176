//! The `failover` fault: the server's primary dies and its replica takes
//! over, while the runtimes keep claiming and writing through a URL that names every node
//! (PostgreSQL `h1,h2?target_session_attrs=read-write`, a `redis+cluster://` URL).
//!
//! The controller runs `--failover-cmd` (a throwaway pair's or cluster's script, started by
//! `cargo xtask torture`) with the lag in ms as its one argument: the script first holds
//! the replica back for that long (as a slow link would), then kills the primary, promotes
//! the replica and rebuilds a new replica. What replication promises decides whether the
//! history checker finds anything:
//!
//! | `--replication` | PostgreSQL | Redis Cluster |
//! |---|---|---|
//! | `sync` (default on PostgreSQL) | `synchronous_standby_names = '*'`: a commit returns once the standby has it: 0 violations | - |
//! | `async` (default on Redis) | `synchronous_standby_names = ''`: NEGATIVE CONTROL, acknowledged commits of the lag are lost | plain asynchronous replication |
//! | `min-replicas` | - | `min-replicas-to-write 1`, `min-replicas-max-lag 1` on every node |
//! | `wait` | - | the runtimes' backends send `WAIT 1 500` after every write ([`WAIT_ENV`]), and the controller's too |
//!
//! The mode is set on the current primary (`ALTER SYSTEM`, `pg_reload_conf()`) or on every
//! cluster node (`CONFIG SET`) at the start and again after every failover (the promoted
//! standby still has the pair's own setting; a restarted Redis node has its defaults).
//!
//! [`modes`] holds the modes and the fault, [`wait`] the one variable the backends read,
//! [`spread`] the namespace of a partitioned cluster run (its partitions on every primary)
//! and the keys the failover script takes in turn.

mod modes;
mod spread;
mod wait;

pub use modes::{Options, Replication, apply, inject};
pub use spread::spread_namespace;
pub use wait::WAIT_ENV;
