//! Batch-time benchmark (Xiang et al.'s Table I): milliseconds per lot of the unperturbed baseline
//! (plain Burn training of the same module: autodiff parameter gradients and a burn-optim step),
//! DP-SGD, the optimized mechanism (sound and as in the paper) and DP-LSSGD, every one through
//! the same `LotStep` the trainer runs, on the same model, lot and device, interleaved in one
//! run after warm-up so all see the same machine state. On a CubeCL device (wgpu) it also counts
//! the device kernels each mechanism's step launches. It names the kernel that ran each pass of
//! each layer (the engine's `KernelLog`), so that a figure says what it measured.

use crate::scattered::feature_shape;
use crate::zoo::{ModelSpec, ZooModel, build, footprint};
use burn::module::Module;
use burn::optim::ModuleOptimizer;
use burn::tensor::Device;
use dp_data::{ChaChaState, ImageDataset, LotSampler, Normalization, Sampling};
use dp_engine::backend::{DeviceError, SelectedDevice};
use dp_engine::error::{EngineError, Result};
use dp_engine::grad_sample::params::ParamTable;
use dp_engine::host::{Kernel, KernelLog, KernelUse, Pass, Phase, PhaseClock};
use dp_engine::lots::Batching;
use dp_engine::lots::CrossEntropyLots;
use dp_engine::optim::{OptimizerName, optimizer};
use dp_engine::privacy::PrivacyConfig;
use dp_engine::privacy::mechanism;
use dp_engine::privacy::mechanism::MechanismName;
use dp_engine::step::{self, LotStep, StepState};
use dp_kernels::launches::LaunchCount;
use dp_kernels::noise::NOISE_STREAM;
use rand::Rng;
use serde::Serialize;
use std::time::Instant;

/// The most pixel bytes of a benchmark lot (4 GiB): larger lots are refused from arithmetic
/// before anything is allocated.
const MAX_LOT_BYTES: usize = 1 << 32;

/// The most warm-up or timed lots per mechanism (a benchmark that long measures nothing more).
pub const MAX_LOTS: usize = 100_000;

/// Refuses a number of lots that is zero (timed) or beyond [`MAX_LOTS`].
fn check_lots(warmup: usize, iterations: usize) -> Result<()> {
    if iterations == 0 || iterations > MAX_LOTS || warmup > MAX_LOTS {
        return Err(EngineError::invalid(
            "bench",
            format!(
                "{iterations} timed and {warmup} warm-up lots: give 1 to {MAX_LOTS} timed and at most {MAX_LOTS} warm-up"
            ),
        ));
    }
    Ok(())
}

/// What to time.
#[derive(Debug, Clone)]
pub struct BenchConfig {
    /// The model.
    pub model: ModelSpec,
    /// Input shape [C, H, W] (random inputs of the dataset's shape).
    pub input: [usize; 3],
    /// Classes.
    pub classes: usize,
    /// Examples per lot.
    pub lot_size: usize,
    /// Examples per physical batch.
    pub batch_size: usize,
    /// Untimed lots per mechanism first.
    pub warmup: usize,
    /// Timed lots per mechanism.
    pub iterations: usize,
    /// The mechanisms timed, in order (by default [`BENCHED`]).
    pub mechanisms: Vec<MechanismName>,
    /// Also time each phase of the steps (`dp_engine::host`), synchronising the device
    /// at every phase boundary.
    pub phases: bool,
}

impl BenchConfig {
    /// Refuses counts and sizes that cannot be benchmarked: no lot, absurd counts, or a step
    /// beyond the memory budget (from arithmetic, before anything is allocated).
    pub fn check(&self) -> Result<()> {
        check_lots(self.warmup, self.iterations)?;
        if self.mechanisms.is_empty() {
            return Err(EngineError::invalid("bench", "no mechanism to time"));
        }
        if self.lot_size == 0 || self.batch_size == 0 {
            return Err(EngineError::invalid("bench", "lot size and batch size must be at least 1"));
        }
        let batch = self.batch_size.min(self.lot_size);
        let [c, h, w] = self.model_input()?;
        dp_data::memory::check(
            &format!(
                "a benchmark step of {} (lot size {}, batches of {batch} images of {c}x{h}x{w})",
                self.model.name.as_str(),
                self.lot_size
            ),
            footprint(self.model, self.model_input()?, self.classes)?.step_bytes(batch),
        )
        .map_err(EngineError::from)
    }

    /// What the model reads: the images, or their ScatterNet features' shape.
    fn model_input(&self) -> Result<[usize; 3]> {
        if self.model.name.reads_scattering() { feature_shape(self.input) } else { Ok(self.input) }
    }
}

/// The mechanisms timed, in order: `optimized-paper` recomputes its w over the benchmark's data
/// (one lot) every lot, as Algorithm 1 does over the training set; `ls-sgd` smooths with s = 1 per
/// tensor. Every private one runs at z = 1, C = 1.
pub const BENCHED: [MechanismName; 5] = [
    MechanismName::None,
    MechanismName::Gaussian,
    MechanismName::Optimized,
    MechanismName::OptimizedPaper,
    MechanismName::LsSgd,
];

/// Median milliseconds per lot of each mechanism timed.
#[derive(Debug, Clone, Serialize)]
pub struct BenchResult {
    /// (mechanism, median ms per lot), in the order they were asked for.
    pub ms_per_lot: Vec<(MechanismName, f64)>,
    /// (mechanism, device kernels launched per lot; 0 on the CPU backends, which launch none).
    pub launches_per_lot: Vec<(MechanismName, usize)>,
    /// (mechanism, median ms per lot of each phase of `Phase::ALL`) when the phases were timed.
    pub phases_ms: Vec<(MechanismName, [f64; Phase::ALL.len()])>,
    /// The kernels that ran each layer's passes, layer by layer in the order first run.
    pub kernels: Vec<LayerKernels>,
}

/// The kernels that ran the passes of one layer (of the layers of its shapes).
#[derive(Debug, Clone, Serialize)]
pub struct LayerKernels {
    /// The layer, as the engine's kernel log names it.
    pub layer: String,
    /// (pass, the kernels that ran it: one unless layers of the same shapes chose differently).
    pub passes: Vec<(Pass, Vec<Kernel>)>,
}

/// The kernel log's uses grouped by layer, layers and passes in the order first run.
fn by_layer(uses: Vec<KernelUse>) -> Vec<LayerKernels> {
    let mut layers: Vec<LayerKernels> = Vec::new();
    for KernelUse { layer, pass, kernel } in uses {
        let at = match layers.iter().position(|l| l.layer == layer) {
            Some(at) => at,
            None => {
                layers.push(LayerKernels { layer, passes: Vec::new() });
                layers.len() - 1
            }
        };
        let passes = &mut layers[at].passes;
        match passes.iter_mut().find(|(p, _)| *p == pass) {
            Some((_, kernels)) => kernels.push(kernel),
            None => passes.push((pass, vec![kernel])),
        }
    }
    layers
}

impl BenchResult {
    /// The median ms per lot of `mechanism`.
    pub fn ms(&self, mechanism: MechanismName) -> f64 {
        self.ms_per_lot.iter().find(|(m, _)| *m == mechanism).map_or(f64::NAN, |(_, t)| *t)
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 }
}

/// One benchmarked mechanism: its step, its own copy of the model and its optimiser.
struct Contender {
    step: Box<dyn LotStep<ZooModel>>,
    model: Option<ZooModel>,
    optimizer: ModuleOptimizer,
}

/// The step `name` takes in the benchmark: every lot is the whole benchmark set (q = 1).
fn contender(
    name: MechanismName,
    config: &BenchConfig,
    model: &ZooModel,
    table: &ParamTable,
    batching: Batching,
) -> Result<Contender> {
    let run = PrivacyConfig::with_shared(mechanism::named(name, &mechanism::MechanismOptions::default())?)
        .with_lot_size(config.lot_size);
    let z = run.mechanism.is_private().then_some(1.0);
    let sampler = LotSampler::new(Sampling::Poisson { rate: 1.0 }, config.lot_size, Some(0))?;
    let state = StepState::fresh(sampler, ChaChaState::new(Some(0), NOISE_STREAM));
    Ok(Contender {
        step: step::for_run(&run, z, table, batching, state)?,
        model: Some(model.clone()),
        optimizer: optimizer(OptimizerName::Sgd, 0.0, 0.0),
    })
}

/// A lot of random images (or ScatterNet-sized features) of `input`'s shape and random labels,
/// refused beyond [`MAX_LOT_BYTES`].
fn random_lot(config: &BenchConfig, input: [usize; 3], rng: &mut rand_chacha::ChaCha20Rng) -> Result<ImageDataset> {
    let size: usize = input.iter().product();
    let pixels = config.lot_size.checked_mul(size).filter(|&p| p <= MAX_LOT_BYTES).ok_or_else(|| {
        EngineError::invalid(
            "lot size",
            format!(
                "{} examples of {size} values are beyond the {MAX_LOT_BYTES} bytes a benchmark lot may hold",
                config.lot_size
            ),
        )
    })?;
    let pixels: Vec<u8> = (0..pixels).map(|_| rng.random()).collect();
    let labels: Vec<u8> = (0..config.lot_size).map(|_| rng.random_range(0..config.classes as u8)).collect();
    Ok(if config.model.name.reads_scattering() {
        let features = pixels.iter().map(|&p| f32::from(p) / 64.0).collect();
        ImageDataset::from_features(features, labels, input, config.classes)?
    } else {
        let normalization = Normalization { mean: vec![0.5; input[0]], std: vec![0.25; input[0]] };
        ImageDataset::new(pixels, labels, input, config.classes, normalization)?
    })
}

/// The clock of each step's phases when the configuration asks for them (the device
/// synchronised at each phase's end).
fn phase_clock(config: &BenchConfig, dev: &Device) -> Result<Option<PhaseClock>> {
    if !config.phases {
        return Ok(None);
    }
    let synced = dev.clone();
    let clock = PhaseClock::start(move || {
        let _ = synced.sync();
    });
    Ok(Some(clock.ok_or_else(|| EngineError::invalid("bench", "the phases are already being timed on this thread"))?))
}

/// Times every mechanism of the configuration; `progress` is told after every timed or warm-up
/// lot.
pub fn bench(config: &BenchConfig, device: &SelectedDevice, progress: &mut dyn FnMut()) -> Result<BenchResult> {
    config.check()?;
    // What make_private sets for a run: the steps timed here are set up without it.
    dp_engine::host::keep_freed_memory();
    let dev = &device.device;
    let mut rng = ChaChaState::new(Some(0), 0).restore();
    let input = config.model_input()?;
    let data = random_lot(config, input, &mut rng)?;
    let source = CrossEntropyLots { data: &data };
    let batching = Batching::for_device(config.batch_size, device);
    let model = build(config.model, input, config.classes, &mut rng, dev)?.train();
    let table = ParamTable::of(&model)?;
    let mut contenders = config
        .mechanisms
        .iter()
        .map(|&m| contender(m, config, &model, &table, batching))
        .collect::<Result<Vec<_>>>()?;
    let k = config.mechanisms.len();
    let mut times = vec![Vec::new(); k];
    let mut phase_times = vec![Vec::new(); k];
    let mut launches = vec![0; k];
    let clock = phase_clock(config, dev)?;
    // A log already running on this thread (a caller's) collects the notes instead.
    let log = KernelLog::start();
    for round in 0..config.warmup + config.iterations {
        // Rotate which mechanism goes first so that none always follows the same one.
        for i in (0..k).map(|j| (round + j) % k) {
            let c = &mut contenders[i];
            // The last lot counts its launches (the count is the same every lot after warm-up).
            let counting = (round + 1 == config.warmup + config.iterations).then(LaunchCount::start);
            let start = Instant::now();
            let model = c.model.take().ok_or_else(|| EngineError::invalid("bench", "a step lost its model"))?;
            let (model, _) = c.step.step(model, &mut c.optimizer, 0.01, &source, dev)?;
            c.model = Some(model);
            dev.sync().map_err(|e| EngineError::Device(DeviceError(format!("{e:?}"))))?;
            let phases = clock.as_ref().map(PhaseClock::lap);
            if round >= config.warmup {
                times[i].push(start.elapsed().as_secs_f64() * 1e3);
                phase_times[i].extend(phases);
            }
            if let Some(count) = counting {
                launches[i] = count.launched();
            }
            progress();
        }
    }
    let named = config.mechanisms.iter().copied();
    let phase_medians = |lots: Vec<[std::time::Duration; Phase::ALL.len()]>| {
        std::array::from_fn(|p| median(lots.iter().map(|lot| lot[p].as_secs_f64() * 1e3).collect()))
    };
    Ok(BenchResult {
        ms_per_lot: named.clone().zip(times.into_iter().map(median)).collect(),
        launches_per_lot: named.clone().zip(launches).collect(),
        phases_ms: match config.phases {
            true => named.zip(phase_times.into_iter().map(phase_medians)).collect(),
            false => Vec::new(),
        },
        kernels: log.map(|log| by_layer(log.uses())).unwrap_or_default(),
    })
}
