//! Choosing the device at run time: Burn's flex CPU backend (`cpu`), the deprecated ndarray
//! backend kept as the oracle tests' reference (`ndarray`), wgpu (a real GPU, or Mesa's
//! lavapipe software rasteriser where there is none, which is how CI tests the wgpu path), or
//! CUDA in a build with the `cuda` feature (an NVIDIA GPU; `auto` prefers it there).

use burn::backend::DispatchDevice;
use burn::tensor::Device;
use serde::{Deserialize, Serialize};

/// The device a user asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DeviceChoice {
    /// CUDA where this build has it and an NVIDIA device opens, else wgpu when a real GPU adapter
    /// exists, else the CPU.
    Auto,
    /// The CPU through Burn's flex backend (im2col + the `gemm` crate, SIMD, rayon).
    Cpu,
    /// The CPU through Burn's ndarray backend (deprecated by Burn; the oracle tests' reference).
    Ndarray,
    /// wgpu on its default adapter (a GPU, or lavapipe).
    Wgpu,
    /// The first CUDA device, in a build with the `cuda` feature (refused in one line without).
    Cuda,
}

/// A device that could not be opened (the message says why).
#[derive(Debug, thiserror::Error)]
#[error("device: {0}")]
pub struct DeviceError(pub String);

/// The device a run uses, with the name printed at start.
#[derive(Debug, Clone)]
pub struct SelectedDevice {
    /// The Burn device (without autodiff).
    pub device: Device,
    /// "cpu", "ndarray", "wgpu" or "cuda".
    pub backend: &'static str,
    /// The adapter's name.
    pub name: String,
    /// True when wgpu runs on real GPU hardware (not a software rasteriser).
    pub hardware: bool,
}

/// Opens the default wgpu adapter and reports whether it is a physical GPU.
fn open_wgpu() -> Result<SelectedDevice, DeviceError> {
    let (device, identity) = crate::wgpu_probe::open_wgpu().map_err(DeviceError)?;
    Ok(cube(device, "wgpu", identity))
}

/// Opens the first CUDA device, or says why not (a build without the `cuda` feature, or no
/// NVIDIA driver).
fn open_cuda() -> Result<SelectedDevice, DeviceError> {
    #[cfg(feature = "cuda")]
    return crate::wgpu_probe::open_cuda()
        // A CUDA device is a physical GPU, whatever its identity reports.
        .map(|(device, identity)| SelectedDevice { hardware: true, ..cube(device, "cuda", identity) })
        .map_err(DeviceError);
    #[cfg(not(feature = "cuda"))]
    Err(DeviceError(
        "this dptrain was built without CUDA: build it with `cargo build --release --features cuda` \
         (needs an NVIDIA GPU and driver to run), or use --device wgpu"
            .into(),
    ))
}

/// A CubeCL device of `backend` ("wgpu" or "cuda") with its adapter's name and whether it is
/// physical hardware, as far as the adapter says.
fn cube(device: Device, backend: &'static str, identity: Option<(String, bool)>) -> SelectedDevice {
    let (name, hardware) = identity.unwrap_or_else(|| ("unknown adapter".into(), false));
    SelectedDevice { device, backend, name, hardware }
}

/// "cuda" for a CUDA device, else "wgpu" (the build's only other CubeCL runtime).
fn cube_backend(device: &DispatchDevice) -> &'static str {
    #[cfg(feature = "cuda")]
    if let DispatchDevice::Cube(burn_cubecl::CubeDevice::Cuda(_)) = device {
        return "cuda";
    }
    let _ = device;
    "wgpu"
}

/// The number of threads a CPU backend runs on.
fn threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// The CPU device: Burn's flex backend, the fastest maintained CPU backend of Burn 0.22
/// (docs/BENCHMARKS.md).
pub fn cpu() -> SelectedDevice {
    SelectedDevice {
        device: Device::flex(),
        backend: "cpu",
        name: format!("flex on {} threads", threads()),
        hardware: false,
    }
}

/// Burn's ndarray backend, deprecated in Burn 0.22 and kept as the reference the oracle tests
/// run on.
#[allow(deprecated)]
pub fn ndarray() -> SelectedDevice {
    SelectedDevice {
        device: Device::ndarray(),
        backend: "ndarray",
        name: format!("ndarray on {} threads", threads()),
        hardware: false,
    }
}

impl DeviceChoice {
    /// Opens the chosen device.
    pub fn open(self) -> Result<SelectedDevice, DeviceError> {
        match self {
            DeviceChoice::Cpu => Ok(cpu()),
            DeviceChoice::Ndarray => Ok(ndarray()),
            DeviceChoice::Wgpu => open_wgpu(),
            DeviceChoice::Cuda => open_cuda(),
            DeviceChoice::Auto => Ok(open_cuda().or_else(|_| open_wgpu()?.hardware()).unwrap_or_else(|_| cpu())),
        }
    }
}

impl SelectedDevice {
    /// The run's view of a Burn `device` a library user already has (with or without autodiff):
    /// its backend decides how batches are shaped (on wgpu padded so that shapes repeat).
    #[allow(deprecated)] // NdArray: the oracle tests' reference backend.
    pub fn of(device: &Device) -> Self {
        let device = device.clone().without_autodiff();
        match device.as_dispatch() {
            DispatchDevice::Flex(_) => cpu(),
            DispatchDevice::NdArray(_) => ndarray(),
            other => {
                let backend = cube_backend(other);
                let identity = device.identity().map(|id| (id.name, id.physical.is_some()));
                cube(device, backend, identity)
            }
        }
    }

    /// This device where it is physical hardware (not a software rasteriser such as lavapipe).
    fn hardware(self) -> Result<Self, DeviceError> {
        match self.hardware {
            true => Ok(self),
            false => Err(DeviceError(format!("{} is not a hardware GPU", self.name))),
        }
    }

    /// True on a CubeCL device (wgpu or cuda): the DP kernels run there, and every new tensor
    /// shape compiles kernels, so batches are padded to a few shapes.
    pub fn is_cube(&self) -> bool {
        matches!(self.backend, "wgpu" | "cuda")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A Burn device a user holds maps to the backend it runs on, autodiff or not.
    #[test]
    #[allow(deprecated)]
    fn a_burn_device_is_seen_as_its_backend() {
        for (device, backend) in [(Device::flex(), "cpu"), (Device::ndarray(), "ndarray")] {
            assert!(!SelectedDevice::of(&device).is_cube(), "{backend} pads batches");
            assert_eq!(SelectedDevice::of(&device).backend, backend);
            assert_eq!(SelectedDevice::of(&device.autodiff()).backend, backend);
        }
        if let Some(device) = crate::wgpu_probe::wgpu_for_tests() {
            let selected = SelectedDevice::of(&device.clone().autodiff());
            assert_eq!((selected.backend, selected.device.is_autodiff()), ("wgpu", false));
            assert!(selected.is_cube());
        }
    }
}
