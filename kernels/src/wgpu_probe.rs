//! Opening a GPU device without a panic trace: wgpu panics where no adapter exists at all (no
//! Vulkan driver), and CUDA where no driver library loads; that becomes an error the caller can
//! report or skip on. Before the first device opens, CubeCL's caches (autotune results, compiled
//! kernels) are turned on and pointed at the user's cache directory, so that a second run on a
//! machine starts from them wherever it runs (CubeCL's default is a `target/` folder above the
//! current directory, or none).

use burn::tensor::Device;
#[cfg(feature = "wgpu")]
use std::panic::{AssertUnwindSafe, catch_unwind};

/// A GPU device with its adapter's name and whether it is physical hardware (None when the
/// adapter says nothing).
type Opened = (Device, Option<(String, bool)>);

/// The default wgpu device, or an error saying how to get one.
#[cfg(feature = "wgpu")]
pub fn open_wgpu() -> Result<Opened, String> {
    open_quietly(|| Device::wgpu(burn::tensor::DeviceKind::DefaultDevice)).ok_or_else(|| {
        "no wgpu adapter could be opened (install a Vulkan driver, e.g. Debian's mesa-vulkan-drivers, or use the cpu device)"
            .to_string()
    })
}

/// The default wgpu device: none in a build without the `wgpu` feature.
#[cfg(not(feature = "wgpu"))]
pub fn open_wgpu() -> Result<Opened, String> {
    Err("this build has no wgpu backend (the `wgpu` feature, on by default; built without default features \
         for a machine without a GPU): build with the default features, or use the cpu device"
        .into())
}

/// The first CUDA device, or an error saying how to get one.
#[cfg(feature = "cuda")]
pub fn open_cuda() -> Result<Opened, String> {
    let opened = open_quietly(|| Device::cuda(0)).ok_or_else(|| {
        "no CUDA device could be opened (an NVIDIA GPU and its driver are needed; or use the wgpu device)".to_string()
    })?;
    libdevice()?;
    Ok(opened)
}

/// The toolkit folders Burn's CUDA compiler (cubecl-llvm 0.11) searches for libdevice when
/// CUDA_PATH is unset.
#[cfg(feature = "cuda")]
const CUDA_ROOTS: [&str; 4] = ["/usr/local/cuda", "/opt/cuda", "/usr/lib/cuda", "/usr"];

/// libdevice, the CUDA toolkit's math functions (the noise kernel's ln, sin and cos) that Burn's
/// CUDA compiler links into kernels, looked for where cubecl-llvm looks (CUDA_PATH, else
/// [`CUDA_ROOTS`]): without it the first such kernel would fail mid-run.
#[cfg(feature = "cuda")]
fn libdevice() -> Result<(), String> {
    use std::path::{Path, PathBuf};
    let root = std::env::var_os("CUDA_PATH").map(PathBuf::from).or_else(|| {
        CUDA_ROOTS.iter().map(Path::new).find(|r| r.join("nvvm/libdevice").is_dir()).map(Path::to_path_buf)
    });
    match root.map(|r| r.join("nvvm/libdevice/libdevice.10.bc")) {
        Some(file) if file.is_file() => Ok(()),
        _ => Err("the CUDA device opened, but libdevice.10.bc (the math functions of a CUDA toolkit) was not \
                  found: install a CUDA toolkit or pip's nvidia-cuda-nvcc, and set CUDA_PATH to the folder \
                  holding nvvm/libdevice"
            .into()),
    }
}

/// Burn's default device opens here, or why not. Burn's optimisers restore their state on it
/// (`BURN_DEVICE`, else the first of CUDA, wgpu and the CPU that the build has) before moving it
/// to each parameter's device at the next step: a CUDA build without a driver, or a wgpu one
/// without a Vulkan adapter, cannot.
#[cfg(feature = "wgpu")]
pub fn default_device_opens() -> Result<(), String> {
    crate::burn_device::check()?;
    open_quietly(Device::default).map(|_| ()).ok_or_else(|| {
        "Burn restores an optimiser's state on its default device (BURN_DEVICE, else CUDA, then wgpu, as built), \
         which cannot be opened here: set BURN_DEVICE=flex (the CPU)"
            .to_string()
    })
}

/// Burn's default device opens here: in a build without the `wgpu` feature it is the CPU's (flex),
/// unless `BURN_DEVICE` names a backend the build has not.
#[cfg(not(feature = "wgpu"))]
pub fn default_device_opens() -> Result<(), String> {
    crate::burn_device::check()
}

/// The device `open` gives, with its identity (which opens it), or None where that panicked.
#[cfg(feature = "wgpu")]
fn open_quietly(open: impl Fn() -> Device) -> Option<Opened> {
    persistent_caches();
    // Silence the panic message while probing: the caller reports a missing device as an error.
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let opened = catch_unwind(AssertUnwindSafe(|| {
        let device = open();
        let identity = device.identity().map(|id| (id.name, id.physical.is_some()));
        (device, identity)
    }));
    std::panic::set_hook(hook);
    opened.ok()
}

/// CubeCL's configuration (a `cubecl.toml` found above the current directory, and its environment
/// overrides) with its caches in the user's cache directory: the autotune results, and the
/// compiled kernels (CUDA's PTX), so that a second process neither tunes nor compiles again;
/// kept as it is when already set.
#[cfg(feature = "wgpu")]
fn persistent_caches() {
    use burn_cubecl::cubecl::config::{CubeClRuntimeConfig, RuntimeConfig, cache::CacheConfig};
    let mut config = CubeClRuntimeConfig::from_current_dir().override_from_env();
    config.environment.path = CacheConfig::Global;
    config.compilation.cache = true;
    CubeClRuntimeConfig::try_set(config);
}

/// The wgpu device for a test, or None (with a note) where there is none and
/// `DPTRAIN_REQUIRE_WGPU` is unset; with it set (CI, on lavapipe) a missing adapter panics.
pub fn wgpu_for_tests() -> Option<Device> {
    match open_wgpu() {
        Ok((device, _)) => Some(device),
        Err(e) if std::env::var_os("DPTRAIN_REQUIRE_WGPU").is_none() => {
            eprintln!("skipped: {e}");
            None
        }
        Err(e) => panic!("{e}"),
    }
}
