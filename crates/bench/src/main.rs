//! Placeholder until the bench binary lands.

fn main() {}
