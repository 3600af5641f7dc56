//! `BURN_DEVICE`, the variable that overrides Burn's default device, on which Burn 0.22 restores
//! an optimiser's state at a resume: a name that no backend of this build answers to made Burn
//! panic there (`Unknown BURN_DEVICE override`), so it is checked before a device opens and
//! refused in one line.

/// The variable.
pub const VARIABLE: &str = "BURN_DEVICE";

/// The names `BURN_DEVICE` may take in this build (Burn compares them without case).
pub fn built() -> Vec<&'static str> {
    let backends = [
        ("flex", true),
        ("wgpu", cfg!(feature = "wgpu")),
        ("cuda", cfg!(feature = "cuda")),
        ("ndarray", cfg!(feature = "ndarray")),
    ];
    backends.into_iter().filter(|(_, on)| *on).map(|(name, _)| name).collect()
}

/// Refuses a `BURN_DEVICE` that names no backend of this build (empty, misspelt, not UTF-8, or
/// a backend left out of it), saying which it may name; unset is Burn's own choice.
pub fn check() -> Result<(), String> {
    let Some(value) = std::env::var_os(VARIABLE) else { return Ok(()) };
    let names = built();
    match value.to_str().map(str::to_lowercase) {
        Some(name) if names.contains(&name.as_str()) => Ok(()),
        _ => Err(format!(
            "{VARIABLE}={:?} names no backend of this build: set it to one of {} (flex is the CPU), or unset it",
            value.to_string_lossy(),
            names.join(", ")
        )),
    }
}
