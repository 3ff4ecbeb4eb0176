//! The cases, one plain async function per RFC row or design rule, grouped by table.

pub mod leases;
