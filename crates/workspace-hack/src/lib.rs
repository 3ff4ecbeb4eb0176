//! Build-time only: see this crate's manifest. Nothing to link against.
