//! The global allocator: mimalloc (cargo feature `mimalloc`, on by default), committing its
//! arena memory as it is used.
//!
//! mimalloc rather than glibc's malloc: the call path allocates many small, short-lived
//! buffers across threads. Under call load it cut the engine's CPU per live call by about a
//! fifth (bench/reports/call_load.md), and where short calls churn, glibc's RSS
//! grows two to five times as much per live call.
//!
//! On Linux mimalloc commits each arena it reserves up front by default
//! (`arena_eager_commit = 2`: "on systems that overcommit"). With that default the engine
//! idled at 66–85 MB RSS and held 55–65 KiB per added live call at 500 live; committing on
//! demand it idles at 41–45 MB and holds 46–51 KiB (bench/reports/call_load.md),
//! at the same CPU. So `on_demand::commit_on_demand` sets `arena_eager_commit = 0` before the first
//! allocation, unless `MIMALLOC_ARENA_EAGER_COMMIT` is set in the environment, which then
//! decides as mimalloc documents.

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The `.init_array` constructor is ELF-only; elsewhere mimalloc's own default stands.
#[cfg(target_os = "linux")]
mod on_demand {
    use std::ffi::{c_char, c_int, c_long};

    /// `mi_option_arena_eager_commit` in `mimalloc.h` (the same in mimalloc 2 and 3).
    const MI_OPTION_ARENA_EAGER_COMMIT: c_int = 4;

    unsafe extern "C" {
        /// mimalloc's `void mi_option_set(mi_option_t option, long value)`, linked in by
        /// `libmimalloc-sys` (which declares it only with its `extended` feature).
        fn mi_option_set(option: c_int, value: c_long);
        /// libc's `getenv`: reading the environment through `std::env` would allocate, and the
        /// first allocation reserves mimalloc's first arena with the option as it then stands.
        fn getenv(name: *const c_char) -> *const c_char;
    }

    /// Runs from `.init_array`, before `main` and before Rust's runtime allocates: an arena is
    /// committed up front or not when it is reserved, which the first allocation does.
    extern "C" fn commit_on_demand() {
        // SAFETY: `getenv` reads a NUL-terminated name; nothing else runs this early, so no
        // thread is changing the environment or mimalloc's options at the same time.
        unsafe {
            if getenv(c"MIMALLOC_ARENA_EAGER_COMMIT".as_ptr()).is_null() {
                mi_option_set(MI_OPTION_ARENA_EAGER_COMMIT, 0);
            }
        }
    }

    #[used]
    #[unsafe(link_section = ".init_array")]
    static COMMIT_ON_DEMAND: extern "C" fn() = commit_on_demand;

    #[cfg(test)]
    mod tests {
        unsafe extern "C" {
            fn mi_option_get(option: std::ffi::c_int) -> std::ffi::c_long;
        }

        #[test]
        fn arenas_are_committed_on_demand_unless_the_environment_says_otherwise() {
            // SAFETY: reads an option; mimalloc's options are plain reads after init.
            let value = unsafe { mi_option_get(super::MI_OPTION_ARENA_EAGER_COMMIT) };
            match std::env::var("MIMALLOC_ARENA_EAGER_COMMIT") {
                Ok(v) => assert_eq!(value.to_string(), v.trim()),
                Err(_) => assert_eq!(value, 0, "the constructor ran before the first allocation"),
            }
        }
    }
}
