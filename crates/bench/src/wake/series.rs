//! How the latency series of the pickup rows are paced and trimmed, shared by the library
//! rows and their raw bounds (the `signal` module).

use std::time::Duration;

/// Pickup: one admission this often.
pub const PICKUP_EVERY: Duration = Duration::from_millis(20);
/// Samples left out at the start of a latency series (connections warming up).
pub const WARMUP: usize = 5;
