//! Ctrl-C and SIGTERM during a run, as a hook the program installs (`dptrain train` does): the
//! first asks the run to stop after the current step, write its checkpoint and say how to
//! resume (or, before the first step, to stop the program's own preparation with nothing
//! written); a second ends the process at once.

use std::sync::atomic::{AtomicBool, Ordering};

/// Set by the first SIGINT or SIGTERM.
static INTERRUPTED: AtomicBool = AtomicBool::new(false);

/// What the first signal prints (write(2) is async-signal-safe; println! is not).
const NOTICE: &[u8] =
    b"\ninterrupted: stopping at the next safe point (after this step, with its checkpoint; or before training starts) (press Ctrl-C again to quit now)\n";

extern "C" fn on_signal(_: libc::c_int) {
    if INTERRUPTED.swap(true, Ordering::SeqCst) {
        // SAFETY: _exit is async-signal-safe; the last checkpoint on disk stays as it was.
        unsafe { libc::_exit(130) }
    }
    // SAFETY: write(2) on stderr with a static buffer is async-signal-safe.
    unsafe {
        libc::write(2, NOTICE.as_ptr().cast(), NOTICE.len());
    }
}

/// Installs the handlers and returns the flag a run polls between steps ([`crate::RunOptions::interrupt`]).
pub fn install() -> &'static AtomicBool {
    #[cfg(unix)]
    for signal in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: the handler only touches an atomic and calls async-signal-safe functions.
        unsafe {
            libc::signal(signal, on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t);
        }
    }
    &INTERRUPTED
}
