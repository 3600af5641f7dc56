//! The memory a run may plan to allocate. Sizes that come from files or flags (an IDX header's
//! dimensions, a lot of images, a physical batch, a model's parameters) are checked against it
//! by arithmetic before anything is allocated, so that an absurd size is a one-line error
//! instead of an allocation failure that aborts the process.

use crate::error::{DataError, Result};

/// The environment variable that sets the budget in bytes (default: 3/4 of physical memory).
pub const BUDGET_VARIABLE: &str = "DPTRAIN_MEMORY_BUDGET";

/// The budget when physical memory cannot be read.
const FALLBACK: u64 = 8 << 30;

/// This machine's physical memory in bytes.
fn physical_memory() -> Option<u64> {
    #[cfg(unix)]
    {
        // SAFETY: sysconf has no preconditions; it returns -1 when the value is unknown.
        let (pages, page) = unsafe { (libc::sysconf(libc::_SC_PHYS_PAGES), libc::sysconf(libc::_SC_PAGESIZE)) };
        u64::try_from(pages).ok()?.checked_mul(u64::try_from(page).ok()?)
    }
    #[cfg(not(unix))]
    None
}

/// Bytes a run may plan to allocate: [`BUDGET_VARIABLE`] when set to a number, else three
/// quarters of physical memory.
pub fn budget() -> u64 {
    #[cfg(test)]
    if let Some(b) = TEST_BUDGET.with(std::cell::Cell::get) {
        return b;
    }
    std::env::var(BUDGET_VARIABLE)
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| physical_memory().map_or(FALLBACK, |m| m / 4 * 3))
}

#[cfg(test)]
thread_local! {
    /// A budget set by a test on its own thread (the environment is shared by parallel tests).
    static TEST_BUDGET: std::cell::Cell<Option<u64>> = const { std::cell::Cell::new(None) };
}

/// Runs `f` with a budget of `bytes` on this thread (tests).
#[cfg(test)]
pub(crate) fn with_budget<T>(bytes: u64, f: impl FnOnce() -> T) -> T {
    TEST_BUDGET.with(|b| b.set(Some(bytes)));
    let out = f();
    TEST_BUDGET.with(|b| b.set(None));
    out
}

/// `bytes` in GiB, for messages.
fn gib(bytes: u128) -> String {
    format!("{:.1} GiB", bytes as f64 / f64::from(1u32 << 30))
}

/// Refuses `what` when it needs more than the budget (`None`: a size that overflowed).
pub fn check(what: &str, bytes: Option<u128>) -> Result<()> {
    let budget = budget();
    match bytes {
        Some(b) if b <= u128::from(budget) => Ok(()),
        _ => Err(DataError::OverBudget {
            what: what.to_string(),
            need: bytes.map_or("more than 2^128 bytes".into(), gib),
            budget: gib(u128::from(budget)),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_beyond_memory_are_refused_by_arithmetic() {
        assert!(check("a small array", Some(1 << 20)).is_ok());
        let e = check("one 65535x65535 image", Some(65535u128 * 65535 * 4 * 1024)).unwrap_err().to_string();
        assert!(e.contains("65535x65535") && e.contains(BUDGET_VARIABLE), "{e}");
        assert!(check("an overflow", None).is_err());
        assert!(budget() >= 1 << 20);
    }
}
