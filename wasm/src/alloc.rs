//! The global allocator of the module: std's (dlmalloc) with geometric
//! growth of the WebAssembly memory.
//!
//! dlmalloc asks for more memory 64 KiB at a time, and an in-memory database
//! keeps asking as it grows. Each `memory.grow` costs V8 a new ArrayBuffer
//! and counts as external allocation, which triggers garbage collections:
//! measured, sendMessage fell from 29k/s to 12k/s by 250k messages, with a
//! third of the time in growing and collecting. So whenever dlmalloc has just
//! grown the memory, this grows it once more by an eighth of its size (1 MiB
//! at least) by allocating and freeing a block; dlmalloc keeps the freed
//! block as its free top and serves later requests from it. Growth becomes
//! logarithmic in the database size, for at most an eighth of memory unused.

use std::alloc::{GlobalAlloc, Layout, System};
use std::arch::wasm32::memory_size;

const PAGE: usize = 64 * 1024;
const MIN_STEP: usize = 1 << 20;

pub struct GrowingAlloc;

impl GrowingAlloc {
    /// Called after an allocation that grew memory from `before` pages.
    #[cold]
    unsafe fn reserve_more(&self, before: usize) {
        let bytes = before * PAGE;
        let step = (bytes / 8).max(MIN_STEP);
        let layout = Layout::from_size_align_unchecked(step, 16);
        let p = System.alloc(layout);
        if !p.is_null() {
            System.dealloc(p, layout);
        }
    }
}

/// Runs `f` (one call into std's allocator) and reserves more when it grew
/// the memory.
#[inline]
unsafe fn watching<T>(f: impl FnOnce() -> T) -> T {
    let before = memory_size(0);
    let r = f();
    if memory_size(0) != before {
        GrowingAlloc.reserve_more(before);
    }
    r
}

unsafe impl GlobalAlloc for GrowingAlloc {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        watching(|| System.alloc(layout))
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        watching(|| System.alloc_zeroed(layout))
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        watching(|| System.realloc(ptr, layout, new_size))
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout)
    }
}
