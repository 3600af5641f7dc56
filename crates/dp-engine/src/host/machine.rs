//! The machine a CPU figure was measured on, as the engine sees it: the CPU's model, the vector
//! instruction set the host kernels run with (what `pulp`, the gemm crate's dispatcher, detects:
//! the GEMMs and the `vectorised` loops take the same path), its caches and the threads the CPU
//! backend computes on. A ratio of two CPU step times holds for one machine; every benchmark
//! prints this beside its figures.

use serde::Serialize;
use std::fmt;

/// One level of the CPU's cache hierarchy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Cache {
    /// 1, 2, 3...
    pub level: u8,
    /// Data, Instruction or Unified.
    pub kind: String,
    /// Bytes of one instance.
    pub bytes: u64,
}

/// The host a figure was measured on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Machine {
    /// The CPU's model name (`/proc/cpuinfo`), or the architecture where it says none.
    pub cpu: String,
    /// The vector instruction set the host kernels dispatch to.
    pub isa: &'static str,
    /// The caches of the first CPU (`/sys/devices/system/cpu/cpu0/cache`), data and unified.
    pub caches: Vec<Cache>,
    /// Threads of the CPU backend's pool.
    pub threads: usize,
}

/// The instruction set `pulp` dispatches to on this CPU.
fn isa() -> &'static str {
    #[cfg(target_arch = "x86_64")]
    {
        if pulp::x86::V4::try_new().is_some() {
            return "x86-64-v4 (AVX-512)";
        }
        if pulp::x86::V3::try_new().is_some() {
            return "x86-64-v3 (AVX2, FMA)";
        }
        "x86-64 baseline (SSE2)"
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        std::env::consts::ARCH
    }
}

/// The CPU's model name.
fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|text| {
            text.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, name)| name.trim().to_string())
        })
        .unwrap_or_else(|| std::env::consts::ARCH.to_string())
}

/// A cache size as sysfs writes it ("48K", "2048K", "32M").
fn parse_size(text: &str) -> Option<u64> {
    let text = text.trim();
    let (digits, unit) = text.split_at(text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len()));
    let scale = match unit {
        "" => 1,
        "K" => 1 << 10,
        "M" => 1 << 20,
        "G" => 1 << 30,
        _ => return None,
    };
    digits.parse::<u64>().ok().map(|n| n * scale)
}

/// The data and unified caches of the first CPU, by level.
fn caches() -> Vec<Cache> {
    let root = std::path::Path::new("/sys/devices/system/cpu/cpu0/cache");
    let read = |dir: &std::path::Path, name: &str| std::fs::read_to_string(dir.join(name)).ok();
    let mut found: Vec<Cache> = (0..8)
        .filter_map(|i| {
            let dir = root.join(format!("index{i}"));
            let kind = read(&dir, "type")?.trim().to_string();
            let level = read(&dir, "level")?.trim().parse().ok()?;
            let bytes = parse_size(&read(&dir, "size")?)?;
            (kind != "Instruction").then_some(Cache { level, kind, bytes })
        })
        .collect();
    found.sort_by_key(|c| c.level);
    found
}

/// The data and unified caches of the first CPU, read once.
fn known_caches() -> &'static [Cache] {
    static CACHES: std::sync::OnceLock<Vec<Cache>> = std::sync::OnceLock::new();
    CACHES.get_or_init(caches)
}

/// Bytes of the largest data or unified cache of the first CPU (the last level, as sysfs lists
/// it); None where the system does not say.
pub fn last_level_cache() -> Option<u64> {
    known_caches().iter().map(|c| c.bytes).max()
}

/// Bytes of the first CPU's second-level cache (a core's own on x86), which the host kernels
/// size their working sets by; None where the system does not say.
pub(crate) fn second_level_cache() -> Option<u64> {
    known_caches().iter().find(|c| c.level == 2).map(|c| c.bytes)
}

impl Machine {
    /// This machine.
    pub fn this() -> Self {
        Self { cpu: cpu_model(), isa: isa(), caches: known_caches().to_vec(), threads: rayon::current_num_threads() }
    }
}

impl fmt::Display for Machine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let caches: Vec<String> = self.caches.iter().map(|c| format!("L{} {} KiB", c.level, c.bytes >> 10)).collect();
        write!(f, "{}, {}, {} threads", self.cpu, self.isa, self.threads)?;
        if !caches.is_empty() {
            write!(f, ", caches {}", caches.join(" / "))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_as_sysfs_writes_them() {
        assert_eq!(parse_size("48K\n"), Some(48 << 10));
        assert_eq!(parse_size("32M"), Some(32 << 20));
        assert_eq!(parse_size("512"), Some(512));
        assert_eq!(parse_size("1X"), None);
    }

    #[test]
    fn this_machine_names_its_cpu_and_threads() {
        let m = Machine::this();
        assert!(!m.cpu.is_empty() && m.threads >= 1);
        let line = m.to_string();
        assert!(line.contains(m.isa) && line.contains("threads"), "{line}");
    }
}
