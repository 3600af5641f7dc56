//! Keeping freed memory in the process. A training step frees and reallocates the same tensors
//! every step, and glibc by default hands large blocks back to the OS (mmap/munmap, heap
//! trimming), so every step pays the page faults of zeroed fresh pages again: 10-15% of a CPU
//! step of the dptrain CLI under `perf`, and half the time of the `residual_fashion` example
//! (130.6 s, 96 s of it in the kernel, against 59.2 s with this; docs/BENCHMARKS.md). The heap is
//! never trimmed: with a threshold of 1 GiB it still was when a wrn-16-4 DP lot followed a plain
//! one, and the DP lots paid 1.6 to 2.8 million page faults and 1,300-1,600 ms, against 0.4
//! million and 980 ms.

/// Tells glibc's allocator to serve blocks up to 1 GiB from its heap and never to trim it, so
/// that a training loop reuses the memory it freed. A no-op off glibc. Memory the process freed
/// is not returned to the OS until it exits: call it in a program that trains, not in one that
/// trains once and then runs on.
///
/// # Safety
///
/// glibc's `mallopt` is not thread-safe: call this first thing in `main`, before any thread
/// (rayon's pool, a device runtime) starts.
pub unsafe fn keep_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets allocator parameters; the caller guarantees no other thread runs.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 1 << 30);
        // -1 is glibc's "never" (the threshold is unsigned).
        libc::mallopt(libc::M_TRIM_THRESHOLD, -1);
    }
}
