//! Facade (work in progress).
