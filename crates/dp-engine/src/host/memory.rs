//! Keeping freed memory in the process, set by the engine for a run. A training step frees and
//! reallocates the same tensors every step, and glibc by default hands large blocks back to the
//! OS (mmap/munmap, heap trimming), so every step pays the page faults of zeroed fresh pages
//! again: a Burn user's CNN on Fashion-MNIST took 64 s for two epochs, 72 s of CPU in the kernel,
//! and 19.5 s with this setting (docs/BENCHMARKS.md, "A Burn user's CNN"). A setting a program
//! had to find and call first was a setting most programs missed, so the engine makes it when a
//! run is set up (`make_private` and `resume`, before their dry run; `dptrain bench`, which sets
//! its steps up itself, makes it too); nothing is set when the library is loaded.
//!
//! glibc lists `mallopt` as unsafe beside other threads ("const:mallopt": it writes allocator
//! parameters that other threads read without a lock). Those parameters are two machine words
//! that glibc's own `free` rewrites from any thread without a lock (its dynamic mmap threshold),
//! and `mallopt` takes the main arena's lock while it writes them: a thread reading the old value
//! meanwhile serves that one block as before. mimalloc and jemalloc, measured as the alternative,
//! were slower on the DP step; a program with its own global allocator is not affected.

/// Tells glibc's allocator to serve blocks up to 1 GiB from its heap and never to trim it, so
/// that a training loop reuses the memory it freed (the process keeps its peak). True when it was
/// made (false elsewhere than glibc). `make_private` and `resume` call it.
pub fn keep_freed_memory() -> bool {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: mallopt only sets two allocator parameters, under the main arena's lock (see
        // the module's comment on the threads that read them).
        unsafe {
            libc::mallopt(libc::M_MMAP_THRESHOLD, 1 << 30);
            // -1 is glibc's "never" (the threshold is unsigned).
            libc::mallopt(libc::M_TRIM_THRESHOLD, -1);
        }
        true
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    false
}
