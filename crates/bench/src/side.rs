//! Which side of a comparison a measurement runs: the library or its raw baseline.

/// One side of a comparison.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Side {
    /// The library's calls.
    Library,
    /// The raw baseline: the same statements issued directly.
    Raw,
}
