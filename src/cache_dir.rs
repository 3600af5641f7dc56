//! Where dptrain keeps what it can recompute (ScatterNet features): `DPTRAIN_CACHE_DIR`, else
//! the XDG cache directory (`$XDG_CACHE_HOME/dptrain`, else `~/.cache/dptrain`).

use std::path::PathBuf;

/// The cache folder, when the environment names one.
pub fn cache_dir() -> Option<PathBuf> {
    let named = |var: &str| std::env::var_os(var).filter(|v| !v.is_empty()).map(PathBuf::from);
    named("DPTRAIN_CACHE_DIR")
        .or_else(|| named("XDG_CACHE_HOME").map(|d| d.join("dptrain")))
        .or_else(|| named("HOME").map(|d| d.join(".cache").join("dptrain")))
}
