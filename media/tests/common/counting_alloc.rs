//! A global allocator that counts the allocations a test watches and passes every call on
//! to the system allocator. The test says what is watched (a thread, a stretch of code) by
//! the function it gives: `#[global_allocator] static GLOBAL: Counting = Counting(watched);`
//! counts an allocation in [`ALLOCATIONS`] whenever `watched()` is true. Included by path
//! in the allocation tests (`#[path = "common/counting_alloc.rs"] mod counting_alloc;`).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

/// Allocations counted so far.
pub static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);

/// Counts the allocations for which its function says true.
pub struct Counting(pub fn() -> bool);

impl Counting {
    fn count(&self) {
        if (self.0)() {
            ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        }
    }
}

// SAFETY: every call is passed on to the system allocator unchanged.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        self.count();
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        self.count();
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        self.count();
        unsafe { System.realloc(ptr, layout, new_size) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
}
