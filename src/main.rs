//! `dptrain`: differentially private training with honest privacy accounting.

mod cli;

fn main() -> std::process::ExitCode {
    // Die quietly on a closed pipe (`dptrain ... | head`), as command-line tools do, instead of
    // panicking inside println!.
    #[cfg(unix)]
    // SAFETY: restoring the default disposition of one signal before any thread starts.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    // Probing for a GPU loads the Vulkan loader, whose window-system code prints "error:
    // XDG_RUNTIME_DIR is invalid or not set" on every run without a session (ssh, containers,
    // CI). dptrain opens no window: pointing it at the temporary folder quietens it.
    if std::env::var_os("XDG_RUNTIME_DIR").is_none() {
        // SAFETY: no other thread exists yet to read the environment concurrently.
        unsafe { std::env::set_var("XDG_RUNTIME_DIR", std::env::temp_dir()) }
    }
    keep_freed_memory();
    cli::run()
}

/// Keeps freed memory in the process instead of returning it to the OS: a training step frees
/// and reallocates the same tensors every step, and glibc by default hands large blocks back
/// (mmap/munmap, heap trimming), so every step paid the page faults of zeroed fresh pages again
/// (10-15% of a CPU step under `perf`). The heap is never trimmed: with a threshold of 1 GiB it
/// still was when a wrn-16-4 DP lot followed a plain one (the benchmark's interleaving), and the
/// DP lots paid 1.6 to 2.8 million page faults and 1,300-1,600 ms, against 0.4 million and 980 ms.
fn keep_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets allocator parameters; called before any thread starts.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 1 << 30);
        // -1 is glibc's "never" (the threshold is unsigned).
        libc::mallopt(libc::M_TRIM_THRESHOLD, -1);
    }
}
