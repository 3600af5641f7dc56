//! Choosing the device at run time: Burn's flex CPU backend (`cpu`), the deprecated ndarray
//! backend kept as the oracle tests' reference (`ndarray`), wgpu (a real GPU, or Mesa's
//! lavapipe software rasteriser where there is none, which is how CI tests the wgpu path), or
//! CUDA in a build with the `cuda` feature (an NVIDIA GPU; `auto` prefers it there). Opening a
//! device is not running on it: a GPU is taken only once it passed a smoke run of the engine's
//! own kernels (the prover given to [`DeviceChoice::open_with`]; dp-engine's `OpenDevice::open`
//! gives its self-test's); `auto` then goes on to the next device, a named GPU is refused.

use burn::backend::DispatchDevice;
use burn::tensor::Device;
use serde::{Deserialize, Serialize};

/// The device a user asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DeviceChoice {
    /// CUDA where this build has it and an NVIDIA device opens and passes its smoke run, else
    /// wgpu where a real GPU adapter does, else the CPU.
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
#[derive(thiserror::Error)]
#[error("device: {0}")]
pub struct DeviceError(pub String);

/// Shown as its message, as the engine's errors are: a program's `fn main() -> Result` that
/// returns it ends in that one line.
impl std::fmt::Debug for DeviceError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(self, f)
    }
}

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
    /// How `auto` came to this device: each device it tried, in order (empty for a device named).
    pub tried: Vec<Trial>,
}

/// A device `auto` tried, and what became of it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Trial {
    /// The device, as `auto` names it.
    pub device: String,
    /// True when it opened (a device that does not open is no news: most machines have no GPU).
    pub opened: bool,
    /// `chosen`, or why it was passed over.
    pub outcome: String,
}

impl Trial {
    /// True for a device that opened and was passed over: the one line a run prints about it.
    pub fn passed_over(&self) -> bool {
        self.opened && self.outcome != CHOSEN
    }

    /// The line a run prints about a device passed over.
    pub fn line(&self) -> String {
        format!("device {} passed over: {}", self.device, self.outcome)
    }
}

/// The outcome of the device `auto` took.
pub const CHOSEN: &str = "chosen";

/// A device `auto` may take: its name and how it opens.
#[derive(Debug, Clone, Copy)]
pub struct AutoCandidate {
    /// Its name in the report.
    pub name: &'static str,
    /// Opens it, or says why not.
    pub open: fn() -> Result<SelectedDevice, DeviceError>,
}

/// `auto`'s candidates in order: CUDA, then a hardware wgpu adapter. The CPU is taken when none
/// opens and passes its smoke run.
pub const AUTO: [AutoCandidate; 2] =
    [AutoCandidate { name: "cuda", open: open_cuda }, AutoCandidate { name: "wgpu", open: || open_wgpu()?.hardware() }];

/// The first of `candidates` that opens and passes `prove` (a smoke run of the engine's kernels
/// on it), else the CPU; with every device tried and why it was taken or passed over.
pub fn auto(candidates: &[AutoCandidate], prove: &dyn Fn(&SelectedDevice) -> Result<(), String>) -> SelectedDevice {
    let mut tried = Vec::new();
    for candidate in candidates {
        let (opened, outcome) = match (candidate.open)() {
            Err(e) => (false, format!("not taken: {}", e.0)),
            Ok(device) => match prove(&device) {
                Ok(()) => {
                    tried.push(Trial { device: candidate.name.into(), opened: true, outcome: CHOSEN.into() });
                    return SelectedDevice { tried, ..device };
                }
                Err(why) => (true, format!("{} failed its smoke run: {why}", device.name)),
            },
        };
        tried.push(Trial { device: candidate.name.into(), opened, outcome });
    }
    tried.push(Trial { device: "cpu".into(), opened: true, outcome: CHOSEN.into() });
    SelectedDevice { tried, ..cpu() }
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
    Err(DeviceError(format!(
        "this dptrain was built without CUDA: build it with `cargo build --release --features cuda` \
         (needs an NVIDIA GPU and driver to run), or use the {} device",
        if cfg!(feature = "wgpu") { "wgpu" } else { "cpu" }
    )))
}

/// A CubeCL device of `backend` ("wgpu" or "cuda") with its adapter's name and whether it is
/// physical hardware, as far as the adapter says.
fn cube(device: Device, backend: &'static str, identity: Option<(String, bool)>) -> SelectedDevice {
    let (name, hardware) = identity.unwrap_or_else(|| ("unknown adapter".into(), false));
    SelectedDevice { device, backend, name, hardware, tried: Vec::new() }
}

/// "cuda" for a CUDA device, else "wgpu" (the build's only other CubeCL runtime).
#[cfg(feature = "wgpu")]
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
        tried: Vec::new(),
    }
}

/// Burn's ndarray backend, deprecated in Burn 0.22 and kept as the reference the oracle tests
/// run on (the `ndarray` feature, on in every test build).
#[cfg(feature = "ndarray")]
#[allow(deprecated)]
pub fn ndarray() -> SelectedDevice {
    ndarray_on(Device::ndarray())
}

/// `device`, a device of Burn's ndarray backend, as the engine names it.
fn ndarray_on(device: Device) -> SelectedDevice {
    SelectedDevice {
        device,
        backend: "ndarray",
        name: format!("ndarray on {} threads", threads()),
        hardware: false,
        tried: Vec::new(),
    }
}

/// Opens the ndarray backend, or says that this build has none.
fn open_ndarray() -> Result<SelectedDevice, DeviceError> {
    #[cfg(feature = "ndarray")]
    return Ok(ndarray());
    #[cfg(not(feature = "ndarray"))]
    Err(DeviceError(
        "this build has no ndarray backend (Burn's deprecated one, the oracle tests' reference; the \
         `ndarray` feature): use the cpu device, Burn's flex backend"
            .into(),
    ))
}

/// The CPU backend a device's outputs are checked against (the self-test's naive loop): ndarray,
/// an implementation apart from flex, where this build has it, else flex.
pub fn reference() -> SelectedDevice {
    open_ndarray().unwrap_or_else(|_| cpu())
}

impl DeviceChoice {
    /// Opens the chosen device: a named GPU (wgpu, cuda) once it passes `prove`, else an error
    /// that says which check it failed (as one that does not open says why); `auto` the first
    /// of [`AUTO`] that opens and passes `prove`, else the CPU. The CPU backends are the
    /// references the proof compares against, so they open as they are.
    pub fn open_with(
        self,
        prove: &dyn Fn(&SelectedDevice) -> Result<(), String>,
    ) -> Result<SelectedDevice, DeviceError> {
        crate::burn_device::check().map_err(DeviceError)?;
        match self {
            DeviceChoice::Cpu => Ok(cpu()),
            DeviceChoice::Ndarray => open_ndarray(),
            DeviceChoice::Wgpu => proven(open_wgpu()?, prove),
            DeviceChoice::Cuda => proven(open_cuda()?, prove),
            DeviceChoice::Auto => Ok(auto(&AUTO, prove)),
        }
    }
}

/// A named GPU, refused where it fails `prove`: a device that computes something other than
/// the noise and clipping the privacy analysis assumes is not run on, named or not.
fn proven(
    device: SelectedDevice,
    prove: &dyn Fn(&SelectedDevice) -> Result<(), String>,
) -> Result<SelectedDevice, DeviceError> {
    match prove(&device) {
        Ok(()) => Ok(device),
        Err(why) => Err(DeviceError(format!(
            "{} ({}) failed its smoke run, so nothing runs on it: {why} (its self-test reports every check)",
            device.backend, device.name
        ))),
    }
}

impl SelectedDevice {
    /// The run's view of a Burn `device` a library user already has (with or without autodiff):
    /// its backend decides how batches are shaped (on wgpu padded so that shapes repeat).
    pub fn of(device: &Device) -> Self {
        let device = device.clone().without_autodiff();
        match device.as_dispatch() {
            DispatchDevice::Flex(_) => cpu(),
            #[cfg(feature = "wgpu")]
            DispatchDevice::Cube(_) => {
                let backend = cube_backend(device.as_dispatch());
                let identity = device.identity().map(|id| (id.name, id.physical.is_some()));
                cube(device, backend, identity)
            }
            // The only other backend the engine's builds enable.
            _ => ndarray_on(device),
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

    #[test]
    fn auto_takes_the_first_device_that_opens_and_passes_its_smoke_run() {
        let closed = AutoCandidate { name: "closed", open: || Err(DeviceError("no driver".into())) };
        let failing = AutoCandidate { name: "failing", open: || Ok(ndarray()) };
        let proving = AutoCandidate { name: "proving", open: || Ok(ndarray()) };
        let prove = |d: &SelectedDevice| match d.backend {
            "ndarray" => Err("the noise's mean is off".to_string()),
            _ => Ok(()),
        };
        let chosen = auto(&[closed, failing], &prove);
        assert_eq!(chosen.backend, "cpu", "neither proved itself: the CPU");
        let outcomes: Vec<(&str, bool, &str)> =
            chosen.tried.iter().map(|t| (t.device.as_str(), t.opened, t.outcome.as_str())).collect();
        assert_eq!(outcomes[0], ("closed", false, "not taken: no driver"));
        assert!(outcomes[1].2.ends_with("failed its smoke run: the noise's mean is off"), "{outcomes:?}");
        assert_eq!(outcomes[2], ("cpu", true, CHOSEN));
        let printed: Vec<&str> = chosen.tried.iter().filter(|t| t.passed_over()).map(|t| t.device.as_str()).collect();
        assert_eq!(printed, ["failing"], "only a device that opened and failed is told of");
        let chosen = auto(&[closed, proving], &|_| Ok(()));
        assert_eq!((chosen.backend, chosen.tried.last().map(|t| t.device.as_str())), ("ndarray", Some("proving")));
    }

    /// A named GPU that fails its smoke run is refused in a line that says which check, and one
    /// that passes is taken; the CPU backends are the references and open unproven.
    #[test]
    fn a_named_gpu_is_taken_only_once_proven() {
        let planted = |_: &SelectedDevice| Err("dp-step: norms off by 1.65".to_string());
        assert_eq!(DeviceChoice::Cpu.open_with(&planted).map(|d| d.backend).ok(), Some("cpu"));
        assert_eq!(DeviceChoice::Ndarray.open_with(&planted).map(|d| d.backend).ok(), Some("ndarray"));
        if crate::wgpu_probe::wgpu_for_tests().is_some() {
            let refused = DeviceChoice::Wgpu.open_with(&planted).expect_err("a failing GPU was taken").to_string();
            assert!(refused.starts_with("device: wgpu ("), "{refused}");
            assert!(
                refused.contains("failed its smoke run, so nothing runs on it: dp-step: norms off by 1.65"),
                "{refused}"
            );
            assert_eq!(DeviceChoice::Wgpu.open_with(&|_| Ok(())).map(|d| d.backend).ok(), Some("wgpu"));
        }
    }

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
