//! Batch-time benchmark (seed 004's Table I): milliseconds per lot of the unperturbed baseline,
//! DP-SGD, the optimized mechanism (sound and as in the paper) and DP-LSSGD on the same model, lot
//! and device, interleaved in one run after warm-up so all see the same machine state.

use crate::allocation::NoiseAllocation;
use crate::backend::SelectedDevice;
use crate::error::{EngineError, Result};
use crate::noise::GaussianNoise;
use crate::optimizer::{Optimizer, OptimizerKind};
use crate::smoothing::{Smoothing, SmoothingScope};
use crate::step::{Batching, Privatizer, StepDraw, lot_gradient, mean_gradient};
use crate::train_config::Mechanism;
use crate::zoo::{ModelSpec, build};
use dp_data::{ChaChaState, ImageDataset, Normalization};
use dp_kernels::LaplacianSmoothing;
use rand::Rng;
use serde::Serialize;
use std::time::Instant;

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
}

/// The mechanisms timed, in order: `optimized-paper` recomputes its w over the benchmark's data
/// (one lot) every lot, as Algorithm 1 does over the training set; `ls-sgd` smooths with s = 1 per
/// tensor.
pub const BENCHED: [Mechanism; 5] =
    [Mechanism::None, Mechanism::Gaussian, Mechanism::Optimized, Mechanism::OptimizedPaper, Mechanism::LsSgd];

/// Median milliseconds per lot of each of [`BENCHED`].
#[derive(Debug, Clone, Serialize)]
pub struct BenchResult {
    /// (mechanism, median ms per lot), in the order of [`BENCHED`].
    pub ms_per_lot: Vec<(Mechanism, f64)>,
}

impl BenchResult {
    /// The median ms per lot of `mechanism`.
    pub fn ms(&self, mechanism: Mechanism) -> f64 {
        self.ms_per_lot.iter().find(|(m, _)| *m == mechanism).map_or(f64::NAN, |(_, t)| *t)
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 }
}

/// The privatizer and noise allocation `mechanism` uses in the benchmark (z = 1, C = 1).
fn setup(mechanism: Mechanism, config: &BenchConfig, layers: usize) -> Result<(Privatizer, Option<NoiseAllocation>)> {
    if mechanism == Mechanism::None {
        return Ok((Privatizer::None, None));
    }
    let clipping = mechanism.default_clipping();
    let smoothing = match mechanism {
        Mechanism::LsSgd | Mechanism::LsAdam => {
            let operator = LaplacianSmoothing::new(1.0).map_err(|e| EngineError::invalid("ls-sigma", e))?;
            Some(Smoothing { operator, scope: SmoothingScope::Tensor })
        }
        _ => None,
    };
    let privatizer =
        Privatizer::Gaussian { clip_norm: 1.0, clipping, expected_lot_size: config.lot_size as f64, smoothing };
    Ok((privatizer, Some(NoiseAllocation::for_mechanism(mechanism, 1.0, 1.0, layers, 1, None))))
}

/// Times every mechanism of [`BENCHED`]; `progress` is told after every timed or warm-up lot.
pub fn bench(config: &BenchConfig, device: &SelectedDevice, progress: &mut dyn FnMut()) -> Result<BenchResult> {
    if config.lot_size == 0 || config.batch_size == 0 || config.iterations == 0 {
        return Err(EngineError::invalid("bench", "lot size, batch size and iterations must be at least 1"));
    }
    let dev = &device.device;
    let mut rng = ChaChaState::new(Some(0), 0).restore();
    let size: usize = config.input.iter().product();
    let pixels: Vec<u8> = (0..config.lot_size * size).map(|_| rng.random()).collect();
    let labels: Vec<u8> = (0..config.lot_size).map(|_| rng.random_range(0..config.classes as u8)).collect();
    let channels = config.input[0];
    let normalization = Normalization { mean: vec![0.5; channels], std: vec![0.25; channels] };
    let data = ImageDataset::new(pixels, labels, config.input, config.classes, normalization)
        .map_err(|e| EngineError::Data(e.to_string()))?;
    let lot: Vec<usize> = (0..config.lot_size).collect();
    let batching = Batching::for_backend(config.batch_size, device.backend);
    let model = build(config.model, config.input, config.classes, &mut rng, dev)?;
    let layers = model.params().len() / 2;
    let k = BENCHED.len();
    let mut setups = BENCHED.iter().map(|&m| setup(m, config, layers)).collect::<Result<Vec<_>>>()?;
    let mut models = vec![model; k];
    let mut optimizers =
        (0..k).map(|_| Optimizer::new(OptimizerKind::Sgd { momentum: 0.0 })).collect::<Result<Vec<_>>>()?;
    let mut noise = GaussianNoise::new(None);
    let mut times = vec![Vec::new(); k];
    for round in 0..config.warmup + config.iterations {
        // Rotate which mechanism goes first so that none always follows the same one.
        for i in (0..k).map(|j| (round + j) % k) {
            let start = Instant::now();
            let model = &models[i];
            let (privatizer, allocation) = &mut setups[i];
            let step_noise = match allocation.as_mut() {
                Some(a) => Some(a.step_noise(round as u64, &model.params(), &mut || {
                    mean_gradient(model, &data, &lot, batching, dev)
                })?),
                None => None,
            };
            let draw = step_noise.as_ref().map(|s| StepDraw { noise: &mut noise, scales: &s.scales, canaries: None });
            let (grads, _) = lot_gradient(model, &data, &lot, batching, *privatizer, draw, dev)?;
            if let Some(a) = allocation.as_mut() {
                a.observe(&grads);
            }
            let params = optimizers[i].step(0.01, models[i].params(), grads);
            models[i].set_params(params);
            dev.sync().map_err(|e| EngineError::Device(format!("{e:?}")))?;
            if round >= config.warmup {
                times[i].push(start.elapsed().as_secs_f64() * 1e3);
            }
            progress();
        }
    }
    Ok(BenchResult { ms_per_lot: BENCHED.iter().copied().zip(times.into_iter().map(median)).collect() })
}
