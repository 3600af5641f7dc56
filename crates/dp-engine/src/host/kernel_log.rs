//! Which kernel ran each pass of each layer (`dptrain bench`'s JSON names them, so that a CPU
//! figure says what it measured): every pass that chooses among kernels ([`note`]s) what it
//! ran, at the point where it runs it, and a [`KernelLog`] collects the notes of its thread
//! while it lives (as a `PhaseClock` times it). Without a log a note costs a thread-local read.

use dp_kernels::Patches;
use serde::Serialize;
use std::cell::RefCell;
use std::fmt;

/// A pass of a layer that chooses its kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pass {
    /// The layer's output.
    Forward,
    /// The gradient of its input (the backward pass).
    InputGradient,
    /// The summed gradient of its weight (a plain step's backward pass).
    WeightGradient,
    /// Each example's squared weight-gradient norm (a DP step).
    Norms,
    /// The sum of the clipped per-example weight gradients (a DP step).
    ClippedSum,
}

impl Pass {
    /// The pass's name in tables and JSON.
    pub fn name(self) -> &'static str {
        match self {
            Pass::Forward => "forward",
            Pass::InputGradient => "input-gradient",
            Pass::WeightGradient => "weight-gradient",
            Pass::Norms => "norms",
            Pass::ClippedSum => "clipped-sum",
        }
    }
}

/// A kernel a pass may run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kernel {
    /// Winograd's F(2x2, 3x3) (`host::winograd`).
    WinogradF2x2_3x3,
    /// One GEMM per example over its unfolded patches (with col2im for an input gradient).
    Im2colGemm,
    /// One GEMM per example over its input read as its own patches (1x1, stride 1, no padding).
    PointwiseGemm,
    /// The patches unfolded by the im2col kernel and multiplied by Burn's batched matmul (a
    /// first layer, whose patches a DP step keeps).
    Im2colTensor,
    /// One GEMM per example of a dense layer on the host.
    Gemm,
    /// Burn's own operation on the device's backend.
    Burn,
    /// Norms from each example's two Gram matrices, GEMMs on the host.
    GhostGemm,
    /// The same with the patches' Gram from the input's own pixels, shifted per kernel tap
    /// (`host::patch_gram`).
    GhostPixelGram,
    /// Norms of each example's gradient, materialised by a GEMM on the host and kept for the sum.
    PerExampleGemm,
    /// The same, each example's gradient by Winograd's transform over its own tiles
    /// (`host::winograd::per_example`).
    PerExampleWinograd,
    /// The sum of the per-example gradients kept by the norms.
    KeptPerExample,
    /// A rank-one gradient's norm or sum (one position per example).
    RankOne,
    /// Ghost norms by Burn's tensor operations.
    GhostTensor,
    /// Materialised per-example gradients by Burn's tensor operations.
    PerExampleTensor,
    /// A sum by Burn's tensor operations.
    Tensor,
}

impl Kernel {
    /// The kernel's name in tables and JSON.
    pub fn name(self) -> &'static str {
        match self {
            Kernel::WinogradF2x2_3x3 => "winograd-f2x2-3x3",
            Kernel::Im2colGemm => "im2col-gemm",
            Kernel::PointwiseGemm => "pointwise-gemm",
            Kernel::Im2colTensor => "im2col-tensor",
            Kernel::Gemm => "gemm",
            Kernel::Burn => "burn",
            Kernel::GhostGemm => "ghost-gemm",
            Kernel::GhostPixelGram => "ghost-pixel-gram",
            Kernel::PerExampleGemm => "per-example-gemm",
            Kernel::PerExampleWinograd => "per-example-winograd",
            Kernel::KeptPerExample => "kept-per-example",
            Kernel::RankOne => "rank-one",
            Kernel::GhostTensor => "ghost-tensor",
            Kernel::PerExampleTensor => "per-example-tensor",
            Kernel::Tensor => "tensor",
        }
    }
}

/// Passes and kernels serialise as their names.
macro_rules! serialize_by_name {
    ($($t:ty),*) => {$(
        impl Serialize for $t {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.serialize_str(self.name())
            }
        }
    )*};
}
serialize_by_name!(Pass, Kernel);

/// A layer as the kernels see it: its shapes and geometry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Layer {
    /// A convolution of x [B, C, H, W] (`input`) to `outputs` channels.
    Conv {
        /// [B, C, H, W].
        input: [usize; 4],
        /// Output channels.
        outputs: usize,
        /// The kernel, stride, padding (the leading side's) and dilation.
        patches: Patches,
        /// Groups of channels.
        groups: usize,
    },
    /// An affine map of A [B, K, P] (P positions sharing the weight) to `outputs` features.
    Affine {
        /// [B, K, P].
        input: [usize; 3],
        /// Output features.
        outputs: usize,
    },
}

impl Layer {
    /// An ungrouped convolution of x [B, C, H, W] (`input`) to `outputs` channels by `patches`.
    pub(crate) fn conv(input: [usize; 4], outputs: usize, patches: Patches) -> Self {
        Layer::Conv { input, outputs, patches, groups: 1 }
    }
}

impl fmt::Display for Layer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // One number where both axes agree.
        let pair = |[a, b]: [usize; 2]| if a == b { a.to_string() } else { format!("{a}x{b}") };
        match *self {
            Layer::Conv { input, outputs, patches, groups } => {
                let [kh, kw] = patches.kernel;
                write!(f, "conv {kh}x{kw} {input:?} -> {outputs}, stride {}", pair(patches.stride))?;
                write!(f, ", padding {}", pair(patches.padding))?;
                if patches.dilation != [1, 1] {
                    write!(f, ", dilation {}", pair(patches.dilation))?;
                }
                if groups != 1 {
                    write!(f, ", groups {groups}")?;
                }
                Ok(())
            }
            Layer::Affine { input: [b, k, 1], outputs } => write!(f, "linear [{b}, {k}] -> {outputs}"),
            Layer::Affine { input, outputs } => write!(f, "affine {input:?} -> {outputs}"),
        }
    }
}

/// One pass of one layer and the kernel that ran it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct KernelUse {
    /// The layer's shapes and geometry, described (layers of the same shapes share it).
    pub layer: String,
    /// The pass.
    pub pass: Pass,
    /// The kernel.
    pub kernel: Kernel,
}

thread_local! {
    /// The running log's distinct uses on this thread, in the order first seen; None when no
    /// log runs.
    static USES: RefCell<Option<Vec<KernelUse>>> = const { RefCell::new(None) };
}

/// Notes that `kernel` ran `pass` of `layer`, if a [`KernelLog`] runs on this thread.
pub(crate) fn note(layer: &Layer, pass: Pass, kernel: Kernel) {
    USES.with(|uses| {
        if let Some(uses) = uses.borrow_mut().as_mut() {
            let used = KernelUse { layer: layer.to_string(), pass, kernel };
            if !uses.contains(&used) {
                uses.push(used);
            }
        }
    });
}

/// Collects the kernels that the steps run on this thread choose while it lives (the passes
/// choose on the thread that runs the step; their own threads only compute).
pub struct KernelLog(());

impl KernelLog {
    /// Starts collecting; None when a log already runs on this thread.
    pub fn start() -> Option<Self> {
        USES.with(|uses| {
            let mut uses = uses.borrow_mut();
            if uses.is_some() {
                return None;
            }
            *uses = Some(Vec::new());
            Some(KernelLog(()))
        })
    }

    /// The distinct (layer, pass, kernel) noted so far, in the order first seen.
    pub fn uses(&self) -> Vec<KernelUse> {
        USES.with(|uses| uses.borrow().clone().unwrap_or_default())
    }
}

impl Drop for KernelLog {
    fn drop(&mut self) {
        USES.with(|uses| uses.borrow_mut().take());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernels_are_noted_once_each_and_only_while_a_log_runs() {
        let patches = Patches { kernel: [3, 3], stride: [1, 1], padding: [1, 1], dilation: [1, 1] };
        let conv = Layer::conv([2, 16, 8, 8], 32, patches);
        let linear = Layer::Affine { input: [2, 10, 1], outputs: 3 };
        note(&conv, Pass::Forward, Kernel::Burn);
        let log = KernelLog::start().expect("no log yet");
        assert!(KernelLog::start().is_none(), "one log per thread");
        note(&conv, Pass::Forward, Kernel::WinogradF2x2_3x3);
        note(&linear, Pass::Norms, Kernel::RankOne);
        note(&conv, Pass::Forward, Kernel::WinogradF2x2_3x3);
        std::thread::spawn(move || note(&linear, Pass::Norms, Kernel::Gemm)).join().expect("noted");
        let uses: Vec<(String, Pass, Kernel)> = log.uses().into_iter().map(|u| (u.layer, u.pass, u.kernel)).collect();
        assert_eq!(
            uses,
            [
                (
                    "conv 3x3 [2, 16, 8, 8] -> 32, stride 1, padding 1".to_string(),
                    Pass::Forward,
                    Kernel::WinogradF2x2_3x3
                ),
                ("linear [2, 10] -> 3".to_string(), Pass::Norms, Kernel::RankOne),
            ]
        );
        drop(log);
        note(&conv, Pass::Forward, Kernel::Im2colGemm);
        let log = KernelLog::start().expect("a new log after the first was dropped");
        assert!(log.uses().is_empty(), "nothing noted between the logs was kept");
        let odd = Patches { kernel: [1, 3], stride: [2, 1], padding: [0, 1], dilation: [2, 2] };
        let layer = Layer::Conv { input: [1, 4, 9, 9], outputs: 4, patches: odd, groups: 2 };
        let shown = "conv 1x3 [1, 4, 9, 9] -> 4, stride 2x1, padding 0x1, dilation 2, groups 2";
        assert_eq!(layer.to_string(), shown);
        assert_eq!(Layer::Affine { input: [8, 5, 49], outputs: 6 }.to_string(), "affine [8, 5, 49] -> 6");
        let used = KernelUse { layer: "l".into(), pass: Pass::ClippedSum, kernel: Kernel::WinogradF2x2_3x3 };
        let json = serde_json::to_string(&used).expect("serialised");
        assert_eq!(json, r#"{"layer":"l","pass":"clipped-sum","kernel":"winograd-f2x2-3x3"}"#);
    }
}
