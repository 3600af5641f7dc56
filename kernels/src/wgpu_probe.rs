//! Opening wgpu's default adapter without a panic trace: wgpu panics where no adapter exists at
//! all (no Vulkan driver); that becomes an error the caller can report or skip on. Before the
//! first device opens, CubeCL's caches (autotune results, compiled kernels) are pointed at the
//! user's cache directory, so that a second run on a machine starts from them wherever it runs
//! (CubeCL's default is a `target/` folder above the current directory, or none).

use burn::tensor::{Device, DeviceKind};
use burn_cubecl::cubecl::config::cache::CacheConfig;
use burn_cubecl::cubecl::config::{CubeClRuntimeConfig, RuntimeConfig};
use std::panic::{AssertUnwindSafe, catch_unwind};

/// The default wgpu device with its adapter's name and whether it is physical hardware (None when
/// the adapter says nothing), or an error saying how to get one.
pub fn open_wgpu() -> Result<(Device, Option<(String, bool)>), String> {
    persistent_caches();
    // Silence the panic message while probing: a missing adapter is reported as an error below.
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let opened = catch_unwind(AssertUnwindSafe(|| {
        let device = Device::wgpu(DeviceKind::DefaultDevice);
        let identity = device.identity().map(|id| (id.name, id.physical.is_some()));
        (device, identity)
    }));
    std::panic::set_hook(hook);
    opened.map_err(|_| {
        "no wgpu adapter could be opened (install a Vulkan driver, e.g. Debian's mesa-vulkan-drivers, or use --device cpu)"
            .to_string()
    })
}

/// CubeCL's configuration (a `cubecl.toml` found above the current directory, and its environment
/// overrides) with its caches in the user's cache directory; kept as it is when already set.
fn persistent_caches() {
    let mut config = CubeClRuntimeConfig::from_current_dir().override_from_env();
    config.environment.path = CacheConfig::Global;
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
