//! Linking dp-engine changes nothing process-wide, and `host::keep_freed_memory` does what it
//! says when a program asks: glibc's allocator keeps its defaults in a program that uses the
//! library (a 64 MiB block comes from its own mmap, glibc's default for any block over 32 MiB);
//! while another thread runs the setting is refused; alone again, it is made, and the same block
//! then comes from the heap (once the kernel has reaped the joined thread, which it does a
//! moment after join returns: the test waits for that rather than racing it). It runs alone
//! (`harness = false`): it reads its own process's allocator statistics and thread count.

/// Blocks glibc serves by mmap while a 64 MiB vector is alive, beyond those already mmapped.
fn mmapped_for_a_block() -> usize {
    // SAFETY: mallinfo2 only reads the allocator's statistics.
    let before = unsafe { libc::mallinfo2() }.hblks;
    let block = vec![1u8; 64 << 20];
    // SAFETY: as above.
    let during = unsafe { libc::mallinfo2() }.hblks;
    std::hint::black_box(&block);
    during - before
}

/// Waits until /proc/self/status counts one thread, at most `limit`; true when it does.
fn reaped_within(limit: std::time::Duration) -> bool {
    let start = std::time::Instant::now();
    loop {
        let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
        if status.lines().any(|line| line.split_whitespace().eq(["Threads:", "1"])) {
            return true;
        }
        if start.elapsed() > limit {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

fn main() {
    if !cfg!(all(target_os = "linux", target_env = "gnu")) {
        return;
    }
    // The library in use, so that whatever it would run at load is linked in.
    std::hint::black_box(dp_engine::privacy::PrivacySettings::default());
    assert_eq!(mmapped_for_a_block(), 1, "glibc's defaults were changed at load: the block came from the heap");

    let (stop, stopped) = std::sync::mpsc::channel::<()>();
    let other = std::thread::spawn(move || stopped.recv());
    assert!(!dp_engine::host::keep_freed_memory(), "the setting was made beside another thread");
    stop.send(()).unwrap();
    other.join().unwrap().unwrap();
    // The kernel counts a joined thread until it has reaped it, a moment after join returns.
    assert!(reaped_within(std::time::Duration::from_secs(10)), "the joined thread was never reaped");

    assert!(dp_engine::host::keep_freed_memory(), "the setting was refused in a process of one thread");
    assert_eq!(mmapped_for_a_block(), 0, "asked to keep freed memory, glibc still mmapped the block");
    println!("a 64 MiB block: mmapped by default, from the heap once asked; refused beside another thread");
}
