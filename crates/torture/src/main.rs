//! Placeholder until the torture binary lands.

fn main() {}
