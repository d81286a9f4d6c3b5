//! botspace-runtime: what only a host that owns sockets and threads needs,
//! beside the sans-IO core (`botspace`), as quinn is beside quinn-proto.
//!
//! The core answers requests, keeps the rules and the store, and drives
//! its state machines from the bytes and the clock its host gives it; it
//! starts no thread, sleeps nowhere and prints nothing. This crate is the
//! socket owner's policy, once for every such host (the Rust example
//! server through `botspace-hyper`, the C server through the C ABI):
//!
//! | module | what | who calls it |
//! |---|---|---|
//! | [`workers`] | the batch queue and its threads ([`CoreWorkers`]) | `botspace-hyper` |
//! | [`admission`] | which connection is served, evicted or refused at the limit; the notification loop | both servers |
//! | [`webhook_pump`] | the waiting for the store's part of webhook deliveries, around the core's pump | both servers, the C ABI |
//! | [`options`] | the servers' flags, environment and config file, and their start-up lines | both servers |
//! | [`output`] | operator lines: threshold, stream, text or JSON | both servers |
//! | [`demo`] | the tour's demo bot, only when asked for | both servers |
//! | [`host`] | the numbers of a server's connection handling | both servers |
//!
//! WebAssembly builds carry none of it.

pub mod admission;
pub mod demo;
pub mod host;
pub mod options;
pub mod output;
pub mod webhook_pump;
#[cfg(not(target_arch = "wasm32"))]
pub mod workers;

pub use webhook_pump::Pump;
#[cfg(not(target_arch = "wasm32"))]
pub use workers::{CoreGate, CoreWorkers, QueuedRequest, Received, ReplyTo};
