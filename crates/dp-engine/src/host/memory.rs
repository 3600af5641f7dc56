//! Keeping freed memory in the process, for a program that asks. A training step frees and
//! reallocates the same tensors every step, and glibc by default hands large blocks back to the
//! OS (mmap/munmap, heap trimming), so every step pays the page faults of zeroed fresh pages
//! again: 10-15% of a CPU step under `perf`, and half the time of the `residual_fashion` example
//! (docs/BENCHMARKS.md, "The allocator and the build"). Nothing is set when the library is
//! loaded: the allocator is the program's choice, and `dptrain` makes this one as the first line
//! of its `main` (mimalloc and jemalloc, measured as the alternative, were slower on the DP step).

/// Tells glibc's allocator to serve blocks up to 1 GiB from its heap and never to trim it, so
/// that a training loop reuses the memory it freed. glibc allows the change only before other
/// threads run, so it is made only while the process has one thread: call it first in `main`.
/// True when it was made (false elsewhere than glibc, or once threads run).
pub fn keep_freed_memory() -> bool {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    if alone() {
        // SAFETY: mallopt only sets allocator parameters, and no other thread exists to allocate
        // meanwhile (checked above; this thread is in this call, so none can have been started
        // since).
        unsafe {
            libc::mallopt(libc::M_MMAP_THRESHOLD, 1 << 30);
            // -1 is glibc's "never" (the threshold is unsigned).
            libc::mallopt(libc::M_TRIM_THRESHOLD, -1);
        }
        return true;
    }
    false
}

/// True when the process has one thread (/proc/self/status says so).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn alone() -> bool {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status.lines().any(|line| line.split_whitespace().eq(["Threads:", "1"]))
}
