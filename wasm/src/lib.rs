//! WASM face of botspace: a thin wasm-bindgen layer over the core.
//!
//! The classes here (`RawService`, `RawGatewaySession`) are not meant to be
//! used directly: the npm package wraps them in a small JavaScript layer
//! (`wasm/js/`) that adds the `fetch` adapter, typed errors and the gateway
//! plumbing. See `docs/wasm.md`.
//!
//! Only `wasm32-unknown-unknown` builds the bindings; on other targets this
//! crate is empty so `cargo build --workspace` keeps working natively.

#[cfg(all(target_family = "wasm", target_os = "unknown"))]
mod alloc;
#[cfg(all(target_family = "wasm", target_os = "unknown"))]
mod imp;
#[cfg(all(target_family = "wasm", target_os = "unknown"))]
mod pages;

#[cfg(all(target_family = "wasm", target_os = "unknown"))]
#[global_allocator]
static ALLOC: alloc::GrowingAlloc = alloc::GrowingAlloc;

#[cfg(all(target_family = "wasm", target_os = "unknown"))]
pub use imp::*;
