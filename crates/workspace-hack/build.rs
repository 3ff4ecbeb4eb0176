//! Empty: the build-dependencies only pin the features of the proc macros' own
//! dependencies (host builds) to one set across test-all's rows.

fn main() {}
