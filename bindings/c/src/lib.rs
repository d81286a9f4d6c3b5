//! C ABI for botspace (in progress).
