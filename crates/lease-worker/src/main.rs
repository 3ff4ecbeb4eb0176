//! `lease-worker`: a runtime process of the project. It runs a dispatcher with the demo
//! order workflow on a shared backend (RFC 002: "Several runtime processes sharing one
//! backend will follow these semantics"), prints its events as JSON lines on stdout, and
//! shuts down gracefully when stdin closes. The process tests and the order-42 demo start
//! several of these, then kill, freeze and resume them.

// Shared with the order-42 demo and the process tests, which use parts this binary does not.
#[allow(dead_code)]
mod args;
#[allow(dead_code)]
mod backend;
#[allow(dead_code)]
mod charges;
mod events;
mod process;
#[allow(dead_code)]
mod provider;
mod workflow;

fn main() -> std::process::ExitCode {
    process::main_with(std::env::args().skip(1))
}
