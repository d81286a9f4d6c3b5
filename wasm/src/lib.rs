//! WASM face of botspace (in progress).
