//! Choosing the device at run time: the ndarray CPU backend, or wgpu (a real GPU, or Mesa's
//! lavapipe software rasteriser where there is none, which is how CI tests the wgpu path).

use crate::error::{EngineError, Result};
use burn::tensor::{Device, DeviceKind};
use serde::{Deserialize, Serialize};
use std::panic::{AssertUnwindSafe, catch_unwind};

/// The device a user asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DeviceChoice {
    /// wgpu when a real GPU adapter exists, else the CPU.
    Auto,
    /// The ndarray CPU backend.
    Cpu,
    /// wgpu on its default adapter (a GPU, or lavapipe).
    Wgpu,
}

/// The device a run uses, with the name printed at start.
#[derive(Debug, Clone)]
pub struct SelectedDevice {
    /// The Burn device (without autodiff).
    pub device: Device,
    /// "cpu" or "wgpu".
    pub backend: &'static str,
    /// The adapter's name.
    pub name: String,
    /// True when wgpu runs on real GPU hardware (not a software rasteriser).
    pub hardware: bool,
}

/// Opens the default wgpu adapter and reports whether it is a physical GPU. wgpu panics where no
/// adapter exists at all; that is turned into an error.
fn open_wgpu() -> Result<SelectedDevice> {
    // Silence the panic message while probing: a missing adapter is reported as an error below.
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let opened = catch_unwind(AssertUnwindSafe(|| {
        let device = Device::wgpu(DeviceKind::DefaultDevice);
        let identity = device.identity();
        (device, identity)
    }));
    std::panic::set_hook(hook);
    match opened {
        Ok((device, Some(identity))) => Ok(SelectedDevice {
            device,
            backend: "wgpu",
            hardware: identity.physical.is_some(),
            name: identity.name,
        }),
        Ok((device, None)) => Ok(SelectedDevice { device, backend: "wgpu", name: "unknown adapter".into(), hardware: false }),
        Err(_) => Err(EngineError::Device(
            "no wgpu adapter could be opened (install a Vulkan driver, e.g. Debian's mesa-vulkan-drivers, or use --device cpu)"
                .into(),
        )),
    }
}

/// The CPU device: the ndarray backend, as the design asks (Burn 0.22 deprecates it in favour of
/// its new `flex` backend; switching is one line here once flex is proven on our kernels).
#[allow(deprecated)]
pub fn cpu() -> SelectedDevice {
    SelectedDevice {
        device: Device::ndarray(),
        backend: "cpu",
        name: format!("ndarray on {} threads", std::thread::available_parallelism().map_or(1, |n| n.get())),
        hardware: false,
    }
}

impl DeviceChoice {
    /// Opens the chosen device.
    pub fn open(self) -> Result<SelectedDevice> {
        match self {
            DeviceChoice::Cpu => Ok(cpu()),
            DeviceChoice::Wgpu => open_wgpu(),
            DeviceChoice::Auto => Ok(open_wgpu().ok().filter(|d| d.hardware).unwrap_or_else(cpu)),
        }
    }
}
