//! Every CubeCL kernel of this crate writes its output by linear index, so each output must be
//! allocated contiguously (`cube_output::contiguous_output`). Burn's `empty_device_dtype` takes
//! the runtime's `Optimized` layout, which on CUDA pads rows: a kernel writing into it scrambles
//! its output (seen on an H100: im2col and the DP step's norms wrong, docs/KERNELS.md). wgpu
//! never pads, so no kernel test on lavapipe can see it: this test reads the sources instead.

use std::fs;
use std::path::{Path, PathBuf};

/// The allocations that may lay a tensor out with padded rows.
const PADDED: [&str; 4] = ["empty_device_dtype(", "empty_device(", "empty_tensor(", "empty_device_optimized"];

/// The lines of `source` that allocate through a layout that may pad rows.
fn padded_allocations(source: &str) -> Vec<String> {
    source
        .lines()
        .filter(|line| !line.trim_start().starts_with("//"))
        .filter(|line| PADDED.iter().any(|call| line.contains(call)))
        .map(|line| line.trim().to_string())
        .collect()
}

/// The Rust files under `dir`, its folders included.
fn sources(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files.extend(sources(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
    files
}

#[test]
fn every_kernel_output_is_allocated_contiguously() {
    // Cargo names the checkout under test when it runs the tests; the path compiled in is the
    // one that built them, which a target folder shared by several checkouts may outlive.
    let crate_dir =
        std::env::var_os("CARGO_MANIFEST_DIR").map_or_else(|| env!("CARGO_MANIFEST_DIR").into(), PathBuf::from);
    let src = crate_dir.join("src");
    let mut found = Vec::new();
    let mut kernels = 0;
    for path in sources(&src) {
        let source = fs::read_to_string(&path).unwrap();
        kernels += usize::from(source.contains("#[cube(launch"));
        found.extend(padded_allocations(&source).into_iter().map(|line| format!("{}: {line}", path.display())));
    }
    assert!(kernels >= 4, "the crate's kernel files were not found under {}", src.display());
    assert!(found.is_empty(), "allocations that may pad rows on CUDA:\n{}", found.join("\n"));
}

#[test]
fn a_padded_allocation_is_caught() {
    let planted = "    let out = empty_device_dtype(x.client.clone(), x.device.clone(), shape, DType::F32);";
    assert_eq!(padded_allocations(planted).len(), 1);
    assert!(padded_allocations("// empty_device_dtype( in a comment").is_empty());
    assert!(padded_allocations("let out = contiguous_output(&x, shape, DType::F32);").is_empty());
}
