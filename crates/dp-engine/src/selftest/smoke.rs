//! The smoke run `auto` proves a GPU with before it uses it: the self-test's noise suite (the
//! fused noise kernel's ChaCha20 words and normals, and its draws against the normal law) and its
//! DP step (one clipped step of a small model of DP layers against the naive per-example loop on
//! the CPU). A device that opens but computes something else, or fails to compile or load a
//! kernel, is passed over for the next one instead of ending a run halfway.

use super::{Check, SUITES, Tap, run_suite};
use burn::tensor::Device;

/// The suites a smoke run runs.
const SMOKE: [&str; 2] = ["noise", "dp-step"];

/// Ok when `device` passes the smoke run (every output seen through `tap`), else the first
/// check it failed, in one line.
pub fn smoke_run(device: &Device, tap: &dyn Tap) -> Result<(), String> {
    for suite in SUITES.iter().filter(|s| SMOKE.contains(&s.name)) {
        if let Some(failed) = run_suite(suite, device, tap).into_iter().find(|c| !c.passed()) {
            return Err(described(&failed));
        }
    }
    Ok(())
}

/// A failed check in one line.
fn described(c: &Check) -> String {
    let what = match (&c.error, c.measured) {
        (Some(error), _) => error.clone(),
        (None, Some(m)) => format!("deviation {m:e} over its tolerance {:e}", c.tolerance),
        (None, None) => "no value".into(),
    };
    format!("{}: {}", c.name, what).replace('\n', " ")
}
