//! A program linking dp-engine keeps the memory it frees without calling anything (the
//! allocator is set when it is loaded): a 64 MiB block comes from glibc's heap, not from its own
//! mmap (glibc's default for any block over 32 MiB), unless the environment opts out. The
//! opted-out case runs in a child process (this program again), since the setting is made
//! before `main`.

use std::process::Command;

/// The child's marker.
const CHILD: &str = "FREED_MEMORY_CHILD";

/// Blocks glibc serves by mmap while a 64 MiB vector is alive.
fn mmapped_blocks() -> usize {
    let block = vec![1u8; 64 << 20];
    // SAFETY: mallinfo2 only reads the allocator's statistics.
    let info = unsafe { libc::mallinfo2() };
    std::hint::black_box(&block);
    info.hblks
}

fn main() {
    if std::env::var_os(CHILD).is_some() {
        println!("{}", mmapped_blocks());
        return;
    }
    assert!(!cfg!(all(target_os = "linux", target_env = "gnu")) || mmapped_blocks() == 0, "kept in the heap");
    let child = Command::new(std::env::current_exe().unwrap())
        .env(CHILD, "1")
        .env(dp_engine::host_memory::OPT_OUT, "0")
        .output()
        .unwrap();
    let blocks: usize = String::from_utf8_lossy(&child.stdout).trim().parse().unwrap();
    assert!(blocks >= 1, "opted out: glibc mmaps the block ({blocks} mmapped blocks)");
    println!("a 64 MiB block: from the heap by default, mmapped when opted out");
}
