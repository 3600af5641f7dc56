//! Keeping freed memory in the process. A training step frees and reallocates the same tensors
//! every step, and glibc by default hands large blocks back to the OS (mmap/munmap, heap
//! trimming), so every step pays the page faults of zeroed fresh pages again: 10-15% of a CPU
//! step of the dptrain CLI under `perf`, and half the time of the `residual_fashion` example
//! (130.6 s, 96 s of it in the kernel, against 59.2 s with this; docs/BENCHMARKS.md). The heap is
//! never trimmed: with a threshold of 1 GiB it still was when a wrn-16-4 DP lot followed a plain
//! one, and the DP lots paid 1.6 to 2.8 million page faults and 1,300-1,600 ms, against 0.4
//! million and 980 ms.
//!
//! A program linking dp-engine needs to do nothing: the setting is made when the program is
//! loaded, before `main` (an `.init_array` entry, as C's constructors), where glibc's `mallopt`
//! is safe to call, and only while the process has one thread (a library loaded later by
//! `dlopen`, beside running threads, leaves glibc's defaults). `DP_ENGINE_KEEP_FREED_MEMORY=0`
//! in the environment leaves them too: memory the process freed is then returned to the OS, as
//! a program that trains once and then runs on may want.

/// The environment variable that, set to `0`, leaves glibc's allocator as it is.
pub const OPT_OUT: &str = "DP_ENGINE_KEEP_FREED_MEMORY";

/// The loader's call of [`at_load`] (linked in by rustc, which keeps every `#[used]` static of a
/// linked library).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[used]
#[unsafe(link_section = ".init_array")]
static AT_LOAD: extern "C" fn() = at_load;

/// Tells glibc's allocator to serve blocks up to 1 GiB from its heap and never to trim it, so
/// that a training loop reuses the memory it freed; unless opted out, or another thread runs.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
extern "C" fn at_load() {
    if std::env::var_os(OPT_OUT).is_some_and(|v| v == "0") || !alone() {
        return;
    }
    // SAFETY: mallopt only sets allocator parameters, and no other thread runs to allocate
    // meanwhile: this is the loader's thread and the process has no other.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 1 << 30);
        // -1 is glibc's "never" (the threshold is unsigned).
        libc::mallopt(libc::M_TRIM_THRESHOLD, -1);
    }
}

/// True when the process has one thread (/proc/self/status says so).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn alone() -> bool {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status.lines().any(|line| line.split_whitespace().eq(["Threads:", "1"]))
}
