//! Batch-time benchmark: milliseconds per lot of the unperturbed baseline, DP-SGD and DP-LSSGD on
//! the same model, lot and device, interleaved in one run after warm-up so all see the same
//! machine state, and their ratios (the time cost of privacy).

use crate::backend::SelectedDevice;
use crate::clipping::Clipping;
use crate::error::{EngineError, Result};
use crate::noise::GaussianNoise;
use crate::optimizer::{Optimizer, OptimizerKind};
use crate::smoothing::{Smoothing, SmoothingScope};
use crate::step::{Privatizer, lot_gradient};
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

/// Median milliseconds per lot for each mechanism, and their ratio.
#[derive(Debug, Clone, Serialize)]
pub struct BenchResult {
    /// Unperturbed baseline.
    pub none: f64,
    /// DP-SGD (per-example clipping and Gaussian noise).
    pub gaussian: f64,
    /// DP-LSSGD (DP-SGD plus Laplacian smoothing with s = 1 per tensor).
    pub ls_sgd: f64,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 }
}

/// Times both mechanisms; `progress` is told after every timed or warm-up lot.
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
    let model = build(config.model, config.input, config.classes, &mut rng, dev)?;
    let gaussian = |smoothing| Privatizer::Gaussian {
        clip_norm: 1.0,
        noise_multiplier: 1.0,
        clipping: Clipping::Flat,
        expected_lot_size: config.lot_size as f64,
        smoothing,
    };
    let operator = LaplacianSmoothing::new(1.0).map_err(|e| EngineError::invalid("ls-sigma", e))?;
    let privatizers =
        [Privatizer::None, gaussian(None), gaussian(Some(Smoothing { operator, scope: SmoothingScope::Tensor }))];
    let mut models = [model.clone(), model.clone(), model];
    let mut optimizers =
        (0..3).map(|_| Optimizer::new(OptimizerKind::Sgd { momentum: 0.0 })).collect::<Result<Vec<_>>>()?;
    let mut noise = GaussianNoise::new(None);
    let mut times = [Vec::new(), Vec::new(), Vec::new()];
    for round in 0..config.warmup + config.iterations {
        // Rotate which mechanism goes first so that none always follows another.
        let order = [round % 3, (round + 1) % 3, (round + 2) % 3];
        for i in order {
            let start = Instant::now();
            let (grads, _) = lot_gradient(&models[i], &data, &lot, config.batch_size, privatizers[i], &mut noise, dev)?;
            let params = optimizers[i].step(0.01, models[i].params(), grads);
            models[i].set_params(params);
            dev.sync().map_err(|e| EngineError::Device(format!("{e:?}")))?;
            if round >= config.warmup {
                times[i].push(start.elapsed().as_secs_f64() * 1e3);
            }
            progress();
        }
    }
    let [none, gaussian, ls_sgd] = times;
    Ok(BenchResult { none: median(none), gaussian: median(gaussian), ls_sgd: median(ls_sgd) })
}
