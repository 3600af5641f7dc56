//! The memory a CSV table takes while it is read, measured by counting every allocation of this
//! test binary, against the budget `load_csv` checks it under: a table it accepts under a budget
//! never takes more than that budget (600 MiB of one-character fields once passed an estimate of
//! 4.7 GiB and then aborted, each field its own `String`).

use dp_data::memory::BUDGET_VARIABLE;
use dp_data::{CsvOptions, load_csv};
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

/// Bytes allocated now, and the most since the last reset.
static CURRENT: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

/// The system allocator, counting.
struct Counting;

impl Counting {
    fn grew(by: usize) {
        let now = CURRENT.fetch_add(by, Ordering::SeqCst) + by;
        PEAK.fetch_max(now, Ordering::SeqCst);
    }
}

// SAFETY: every call is forwarded to the system allocator unchanged; only counters are added.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        Self::grew(layout.size());
        // SAFETY: the caller's layout, as GlobalAlloc requires.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        CURRENT.fetch_sub(layout.size(), Ordering::SeqCst);
        // SAFETY: `ptr` was allocated by `alloc` with `layout`.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        Self::grew(new_size);
        CURRENT.fetch_sub(layout.size(), Ordering::SeqCst);
        // SAFETY: as for `realloc` of the system allocator.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

#[test]
fn a_table_read_under_a_budget_never_takes_more_than_the_budget() {
    // 2,000 rows of 999 one-digit features and a label: 4 MB of text, 2 M fields.
    let row: String = (0..999).map(|j| format!("{},", j % 10)).collect::<String>() + "0\n";
    let text = row.repeat(2000);
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), &text).unwrap();
    let options = CsvOptions { classes: Some(vec!["0".into(), "1".into()]), ..CsvOptions::default() };
    let mb = 1u64 << 20;
    let mut accepted = Vec::new();
    for budget in [8, 16, 24, 32, 40, 48, 64, 96, 128, 512].map(|m| m * mb) {
        // SAFETY: this binary's one test; no other thread reads the environment.
        unsafe { std::env::set_var(BUDGET_VARIABLE, budget.to_string()) };
        let before = CURRENT.load(Ordering::SeqCst);
        PEAK.store(before, Ordering::SeqCst);
        let read = load_csv(file.path(), &options);
        let peak = (PEAK.load(Ordering::SeqCst) - before) as u64;
        match read {
            Ok(table) => {
                assert_eq!((table.len(), table.dim), (2000, 999));
                assert!(peak <= budget, "accepted under {} MiB, took {} MiB", budget / mb, peak / mb);
                accepted.push(budget / mb);
            }
            Err(e) => assert!(e.to_string().contains(BUDGET_VARIABLE), "{e}"),
        }
    }
    assert!(accepted.len() >= 3 && accepted[0] <= 64, "accepted only under {accepted:?} MiB");
}
