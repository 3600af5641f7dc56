//! The library entry point as a Burn user meets it: their own module, their own loss (a squared
//! error on real-valued targets, not a u8 class) and their own burn-optim optimiser, wrapped by
//! `PrivacyEngine::make_private`.
//! - One step with negligible noise and no effective clipping (q = 1) equals plain gradient
//!   descent on the mean loss, computed by hand (the oracle: d/dw (w.x + b - y)^2).
//! - A run calibrated to a target epsilon spends at most that epsilon, certified, over exactly
//!   its planned steps, and refuses a step beyond them.
//! - A user's own accountant (a dp_accounting `Accountant` in a few lines) is what the run
//!   reports and calibrates against, and certifies only what its `supports` accepts.
//! - The usual mistakes are one-line errors at `make_private`: a loss that is not one per example,
//!   (the batch's mean), a forward pass that does not fit the data (Burn panics: caught), and a burn-nn layer.

// Shared by several test binaries, each using a part of it.
use crate::oracle;

use burn::data::dataloader::batcher::Batcher;
use burn::data::dataset::{Dataset, DatasetError};
use burn::module::Module;
use burn::optim::AdamConfig;
use burn::optim::SgdConfig;
use burn::tensor::{Device, Tensor, TensorData};
use dp_accounting::{Accountant, DpEvent, Guarantee, PrivacyLedger, PrivacyReport, RdpAccountant};
use dp_engine::backend;
use dp_engine::checkpoint::values_digest;
use dp_engine::checkpoint::{DpCheckpoint, StreamKeys};
use dp_engine::engine::DpOptimizer;
use dp_engine::engine::PrivacyEngine;
use dp_engine::grad_sample::params::ParamTable;
use dp_engine::lots::DatasetLots;
use dp_engine::lots::{ExampleLosses, LotSource, evaluate};
use dp_engine::nn::{Linear, LinearConfig};
use dp_engine::privacy::PrivacyConfig;
use dp_engine::privacy::PrivacySettings;
use dp_engine::privacy::mechanism::Mechanism;
use dp_engine::privacy::mechanism::allocation::{NoiseAllocation, Uniform};
use dp_engine::privacy::mechanism::gaussian::Gaussian;
use dp_engine::privacy::mechanism::laplacian_smoothing::LaplacianSmoothed;
use dp_engine::privacy::mechanism::optimized::Optimized;
use dp_engine::{EngineError, SelectedDevice};
use oracle::{assert_close, param_value};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

const FEATURES: usize = 3;

/// A user's regression model.
#[derive(Module, Debug)]
struct Regressor {
    fc: Linear,
}

/// A burn-nn layer where a DP layer belongs.
#[derive(Module, Debug)]
struct PlainRegressor {
    fc: burn::nn::Linear,
}

/// A user's data with a squared-error loss; `width` is what the rows are cut to (a mismatch
/// with the model is a mistake), `reduction` what the user does to the examples' losses.
struct Squares {
    x: Vec<[f32; FEATURES]>,
    y: Vec<f32>,
    width: usize,
    reduction: Reduction,
}

/// What a user's loss does to each example's squared error `e` of a batch of B.
#[derive(Clone, Copy, PartialEq)]
enum Reduction {
    /// `e`: each example's own loss (right).
    PerExample,
    /// The batch's mean, one value (not one per example).
    MeanOnly,
    /// `e * mean(e)`: each loss scaled by the others' (not DP).
    TimesMean,
    /// `e + mean(e)^2 - detach(mean(e)^2)`: the same values, gradients mixed (not DP).
    GradientMixed,
    /// `e / B`: benign, a note.
    DividedByBatch,
}

impl Squares {
    fn new(n: usize) -> Self {
        let x = (0..n).map(|i| [i as f32 / n as f32, (i % 3) as f32 - 1.0, 0.5]).collect();
        let y = (0..n).map(|i| (i as f32 * 0.7).sin()).collect();
        Self { x, y, width: FEATURES, reduction: Reduction::PerExample }
    }
}

impl<M: Forward> LotSource<M> for Squares {
    fn len(&self) -> usize {
        self.x.len()
    }

    fn losses(&self, model: &M, indices: &[usize], device: &Device) -> dp_engine::Result<ExampleLosses> {
        let rows: Vec<f32> = indices.iter().flat_map(|&i| self.x[i][..self.width].to_vec()).collect();
        let x = Tensor::<2>::from_data(TensorData::new(rows, [indices.len(), self.width]), device);
        let y: Vec<f32> = indices.iter().map(|&i| self.y[i]).collect();
        let y = Tensor::<2>::from_data(TensorData::new(y, [indices.len(), 1]), device);
        let err = (model.predict(x) - y).powi_scalar(2);
        let err = err.flatten::<1>(0, 1);
        let losses = match self.reduction {
            Reduction::PerExample => err,
            Reduction::MeanOnly => err.mean(),
            Reduction::TimesMean => err.clone() * err.mean(),
            Reduction::GradientMixed => {
                let mean = err.clone().mean();
                let square = mean.clone() * mean;
                err + (square.clone() - square.detach())
            }
            Reduction::DividedByBatch => err.div_scalar(indices.len() as f64),
        };
        Ok(ExampleLosses { losses, correct: None })
    }
}

/// What the loss needs from a model.
trait Forward: Module {
    fn predict(&self, x: Tensor<2>) -> Tensor<2>;
}

impl Forward for Regressor {
    fn predict(&self, x: Tensor<2>) -> Tensor<2> {
        self.fc.forward(x)
    }
}

impl Forward for PlainRegressor {
    fn predict(&self, x: Tensor<2>) -> Tensor<2> {
        self.fc.forward(x)
    }
}

fn regressor(device: &SelectedDevice) -> Regressor {
    Regressor { fc: LinearConfig::new(FEATURES, 1).init(&device.device) }
}

#[test]
fn one_step_without_noise_or_clipping_is_gradient_descent_on_the_users_loss() {
    let device = backend::cpu();
    let data = Squares::new(6);
    let model = regressor(&device);
    let table = ParamTable::of(&model).expect("DP layers");
    let before: Vec<Vec<f64>> = table.params().iter().map(|p| param_value(&model, p)).collect();
    // q = 1 (lot = N), noise std 1e6 * 1e-12 = 1e-6, clip norm far above any gradient.
    let privacy = PrivacyConfig::new(Gaussian)
        .with_noise_multiplier(1e-12)
        .with_clip_norm(1e6)
        .with_lot_size(6)
        .with_epochs(1.0)
        .with_seed(7);
    let mut dp = PrivacyEngine::new(privacy)
        .make_private(&model, SgdConfig::new().init(), &data, &device.device)
        .expect("a valid run");
    assert_eq!(dp.planned_steps(), 1);
    let lr = 0.1;
    let (model, metrics) = dp.step(model, &data, lr).expect("one step");
    assert_eq!(metrics.examples, 6, "q = 1 draws every example");
    // The oracle: the mean over examples of 2 (w.x + b - y) [x, 1].
    let (w, b) = (&before[0], before[1][0]);
    let mut grad_w = [0.0f64; FEATURES];
    let mut grad_b = 0.0f64;
    for (x, &y) in data.x.iter().zip(&data.y) {
        let r = 2.0 * ((0..FEATURES).map(|j| w[j] * f64::from(x[j])).sum::<f64>() + b - f64::from(y)) / 6.0;
        (0..FEATURES).for_each(|j| grad_w[j] += r * f64::from(x[j]));
        grad_b += r;
    }
    let after: Vec<Vec<f64>> = table.params().iter().map(|p| param_value(&model, p)).collect();
    for j in 0..FEATURES {
        assert_close(after[0][j], w[j] - lr * grad_w[j], "weight");
    }
    assert_close(after[1][0], b - lr * grad_b, "bias");
    assert_eq!(dp.ledger().total_steps(), 1, "the step is on the ledger");
}

#[test]
fn a_calibrated_run_spends_its_target_certified_and_stops_at_its_plan() {
    let device = backend::cpu();
    let data = Squares::new(200);
    let mut model = regressor(&device);
    let privacy =
        PrivacyConfig::new(Gaussian).with_target_epsilon(2.0).with_delta(1e-3).with_lot_size(20).with_epochs(2.0);
    let mut dp = PrivacyEngine::new(privacy)
        .make_private(&model, SgdConfig::new().init(), &data, &device.device)
        .expect("a valid run");
    assert_eq!(dp.planned_steps(), 20);
    let z = dp.noise_multiplier().expect("calibrated");
    assert!(z > 0.3 && z < 10.0, "z = {z}");
    while !dp.is_done() {
        model = dp.step(model, &data, 0.05).expect("a step").0;
    }
    let spent = dp.privacy().expect("accounted");
    let eps = spent.epsilon;
    assert!(eps <= 2.0 * (1.0 + 1e-9) && eps > 1.9, "epsilon {eps}");
    assert_eq!(spent.guarantee, Guarantee::Certified);
    assert_eq!(dp.ledger().total_steps(), 20);
    let err = dp.step(model, &data, 0.05).expect_err("beyond the plan");
    assert!(matches!(err, EngineError::Privacy { .. }), "{err}");
    assert_eq!(dp.ledger().total_steps(), 20, "no noise released beyond the plan");
}

/// A user's accountant: RDP's epsilon under its own name, counting its calls, certifying only
/// when `certifies` (a user's accountant can be stricter than the engine's).
struct Mine {
    certifies: bool,
    calls: AtomicUsize,
}

impl Accountant for Mine {
    fn name(&self) -> &'static str {
        "mine"
    }

    fn supports(&self, event: &DpEvent) -> bool {
        self.certifies && RdpAccountant::default().supports(event)
    }

    fn epsilon(&self, ledger: &PrivacyLedger, delta: f64) -> dp_accounting::Result<PrivacyReport> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        let rdp = RdpAccountant::default().epsilon(ledger, delta)?;
        Ok(PrivacyReport::new(rdp.epsilon, delta, self.name(), self.guarantee(&ledger.event())))
    }
}

/// A mechanism defined with one optimiser family refuses the other, however the optimiser was
/// built (burn-optim's configs or dp-engine's `optimizer`), and accepts its own.
#[test]
fn ls_adam_refuses_sgd_and_ls_sgd_refuses_adam() {
    let device = backend::cpu();
    let data = Squares::new(200);
    let model = regressor(&device);
    let run = |mechanism: LaplacianSmoothed, optimizer: burn::optim::ModuleOptimizer| {
        let privacy = PrivacyConfig::new(mechanism).with_noise_multiplier(1.0).with_lot_size(20).with_epochs(1.0);
        PrivacyEngine::new(privacy).make_private(&model, optimizer, &data, &device.device).map(|_| ())
    };
    let adam = || LaplacianSmoothed::adam(1.0).expect("a smoothing");
    let sgd = || LaplacianSmoothed::sgd(1.0).expect("a smoothing");
    let err = run(adam(), SgdConfig::new().init()).expect_err("ls-adam with SGD").to_string();
    assert!(err.contains("ls-adam is DP-LSAdam") && err.lines().count() == 1, "{err}");
    let momentum = dp_engine::optim::optimizer(dp_engine::optim::OptimizerName::Sgd, 0.9, 1e-4);
    assert!(run(adam(), momentum).is_err(), "SGD with momentum and weight decay is still SGD");
    let err = run(sgd(), AdamConfig::new().init()).expect_err("ls-sgd with Adam").to_string();
    assert!(err.contains("ls-sgd is DP-LSSGD"), "{err}");
    run(adam(), AdamConfig::new().init()).expect("ls-adam with Adam");
    run(sgd(), SgdConfig::new().init()).expect("ls-sgd with SGD");
}

#[test]
fn a_users_own_accountant_reports_calibrates_and_certifies_only_what_it_supports() {
    let device = backend::cpu();
    let data = Squares::new(200);
    let model = regressor(&device);
    let run = |privacy: PrivacyConfig| {
        let privacy = privacy.with_target_epsilon(2.0).with_delta(1e-3).with_lot_size(20).with_epochs(0.5).with_seed(5);
        let mut dp = PrivacyEngine::new(privacy)
            .make_private(&model, SgdConfig::new().init(), &data, &device.device)
            .expect("a valid run");
        dp.step(model.clone(), &data, 0.05).expect("a step");
        (dp.noise_multiplier().expect("calibrated"), dp.privacy().expect("accounted"))
    };
    let (rdp_z, rdp) = run(PrivacyConfig::new(Gaussian));
    for certifies in [true, false] {
        let mine = Arc::new(Mine { certifies, calls: AtomicUsize::new(0) });
        let (z, report) = run(PrivacyConfig::new(Gaussian).with_own_accountant(mine.clone()));
        assert!(mine.calls.load(Ordering::Relaxed) > 3, "calibrated and reported by the user's accountant");
        assert_eq!(z, rdp_z, "RDP's numbers under another name calibrate to the same z");
        assert_eq!((report.accountant.as_str(), report.epsilon), ("mine", rdp.epsilon));
        let label = if certifies { Guarantee::Certified } else { Guarantee::None };
        assert_eq!(report.guarantee, label, "certified only where its supports accepts");
    }
}

/// The error `make_private` gives for `model` on `data`, checked to be one line.
fn refusal<M: Forward>(model: &M, data: &Squares) -> String {
    let device = backend::cpu();
    let err = PrivacyEngine::new(PrivacyConfig::new(Gaussian).with_noise_multiplier(1.0).with_lot_size(4))
        .make_private(model, SgdConfig::new().init(), data, &device.device)
        .err()
        .expect("a mistake")
        .to_string();
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    err
}

#[test]
fn mistakes_in_the_model_or_the_loss_are_one_line_errors_before_the_run() {
    let device = backend::cpu();
    let model = regressor(&device);
    let not_per_example = Squares { reduction: Reduction::MeanOnly, ..Squares::new(8) };
    let err = refusal(&model, &not_per_example);
    assert!(err.contains("one per example") && err.contains("dp_engine::lots::cross_entropy"), "{err}");
    // Losses that mix the examples of a batch, in value or in gradient only: not DP, refused.
    for mixing in [Reduction::TimesMean, Reduction::GradientMixed] {
        let err = refusal(&model, &Squares { reduction: mixing, ..Squares::new(8) });
        assert!(err.contains("mixes the examples of a batch") && err.contains("cross_entropy"), "{err}");
    }
    let narrow = Squares { width: 2, ..Squares::new(8) };
    assert!(refusal(&model, &narrow).contains("forward pass"));
    let plain = PlainRegressor { fc: burn::nn::LinearConfig::new(FEATURES, 1).init(&device.device) };
    let err = refusal(&plain, &Squares::new(8));
    assert!(err.contains("`fc.weight`") && err.contains("Linear"), "{err}");
    // The same model and data without the mistake are accepted, with no note about the loss;
    // a loss divided by the batch's size is accepted with a note that names its cost.
    let loss_notes = |reduction| {
        let dp = PrivacyEngine::new(PrivacyConfig::new(Gaussian).with_noise_multiplier(1.0).with_lot_size(4))
            .make_private(&model, SgdConfig::new().init(), &Squares { reduction, ..Squares::new(8) }, &device.device)
            .expect("accepted");
        dp.notes().iter().filter(|n| n.contains("loss")).cloned().collect::<Vec<_>>()
    };
    assert!(loss_notes(Reduction::PerExample).is_empty());
    // A model moved to another device after make_private: one line, not Burn's panic.
    let data = Squares::new(8);
    let mut dp = PrivacyEngine::new(PrivacyConfig::new(Gaussian).with_noise_multiplier(1.0).with_lot_size(4))
        .make_private(&model, SgdConfig::new().init(), &data, &device.device)
        .expect("accepted");
    let moved = model.clone().to_device(&backend::ndarray().device);
    let err = dp.step(moved, &data, 0.1).expect_err("another device").to_string();
    assert!(err.contains("make_private set the run up on") && err.lines().count() == 1, "{err}");
    assert_eq!(dp.steps_taken(), 0, "no noise released");
    let notes = loss_notes(Reduction::DividedByBatch);
    assert!(
        notes.len() == 1
            && notes[0].contains("divided by the physical batch's size")
            && notes[0].contains("utility, not privacy"),
        "{notes:?}"
    );
}

/// A mechanism defined outside dp-engine, in one place: the Gaussian mechanism at twice the
/// configured noise multiplier, through its own noise allocation. The ledger records what the
/// allocation released (2z), not what the configuration said, and the epsilon follows.
struct TwiceTheNoise;

impl Mechanism for TwiceTheNoise {
    fn name(&self) -> &'static str {
        "twice-the-noise"
    }

    fn allocation(&self, z: f64, config: &PrivacySettings, _table: &ParamTable) -> Box<dyn NoiseAllocation> {
        Box::new(Uniform { noise_multiplier: 2.0 * z, clip_norm: config.clip_norm })
    }
}

#[test]
fn a_users_own_mechanism_is_one_type_and_its_ledger_records_its_noise() {
    let device = backend::cpu();
    let data = Squares::new(40);
    let model = regressor(&device);
    let run = |mechanism: PrivacyConfig| {
        let privacy = mechanism.with_noise_multiplier(1.0).with_lot_size(10).with_epochs(0.25).with_seed(3);
        let mut dp = PrivacyEngine::new(privacy)
            .make_private(&model, SgdConfig::new().init(), &data, &device.device)
            .expect("a valid run");
        dp.step(model.clone(), &data, 0.1).expect("one step");
        let z: Vec<f64> = dp.ledger().grouped().expect("Gaussian").iter().map(|g| g.noise_multiplier).collect();
        (z, dp.privacy().expect("accounted").epsilon)
    };
    let (own_z, own_eps) = run(PrivacyConfig::new(TwiceTheNoise));
    let (gauss_z, gauss_eps) = run(PrivacyConfig::new(Gaussian));
    assert_eq!(own_z, vec![2.0]);
    assert_eq!(gauss_z, vec![1.0]);
    assert!(own_eps < gauss_eps, "twice the noise spends less: {own_eps} vs {gauss_eps}");
    // A built-in mechanism's options are its own type's: a bad one is refused where it is built.
    let err = LaplacianSmoothed::sgd(-1.0).err().expect("refused").to_string();
    assert!(err.contains("ls-sigma") && err.lines().count() == 1, "{err}");
}

/// A library run checkpointed mid-run (to a Burn record file and back, the optimiser's Adam
/// moments, the optimized mechanism's allocation state and the parameter average included) and resumed from fresh
/// objects ends bit-identical to the uninterrupted seeded run: the same parameters, ledger and
/// epsilon, and the same average. Truncated or foreign bytes are refused in one line.
#[test]
fn a_checkpointed_and_resumed_library_run_ends_bit_identical_to_the_whole_run() {
    let device = backend::cpu();
    let data = Squares::new(200);
    let model = regressor(&device);
    let privacy = optimized_run;
    let adam = || AdamConfig::new().init();
    let start = || {
        let mut dp = PrivacyEngine::new(privacy()).make_private(&model, adam(), &data, &device.device).expect("valid");
        dp.set_parameter_averaging(0.9).expect("before the first step");
        dp
    };
    let run_to_end = |mut dp: DpOptimizer<Regressor>, mut m: Regressor| {
        while !dp.is_done() {
            m = dp.step(m, &data, 0.05).expect("a step").0;
        }
        let average = values_digest(dp.averaged().expect("averaged"));
        assert_ne!(average, values_digest(&m), "the average is not the last iterate");
        (values_digest(&m), average, dp.ledger().clone(), dp.privacy().expect("accounted").epsilon)
    };
    let whole = run_to_end(start(), model.clone());

    let mut dp = start();
    let mut m = model.clone();
    for _ in 0..8 {
        m = dp.step(m, &data, 0.05).expect("a step").0;
    }
    let dir = tempfile::tempdir().expect("a temporary folder");
    let file = dir.path().join("run.bpk");
    let ckpt = dp.checkpoint(&m).expect("checkpoint");
    ckpt.save(&file).expect("saved");
    let bytes = ckpt.to_bytes().expect("bytes");
    assert_eq!(std::fs::read(&file).expect("the file"), bytes, "one format on disk and in memory");
    // The keys kept as the library's key file (owner-only), read back for the resume.
    let key_file = dir.path().join("stream.key");
    dp.keys().save(&key_file).expect("key file");
    let keys = StreamKeys::load(&key_file).expect("read back");
    drop((dp, m, ckpt));
    let (m, dp) = resumed(&file, privacy(), &keys).expect("resumed");
    assert_eq!(dp.steps_taken(), 8);
    assert_eq!(run_to_end(dp, m), whole, "resumed = uninterrupted, bit for bit");

    assert_refused_by_other_runs(&file, &keys, &bytes);
}

/// The seeded optimized run of the checkpoint test, on `Squares::new(200)`.
fn optimized_run() -> PrivacyConfig {
    PrivacyConfig::new(Optimized).with_noise_multiplier(1.1).with_lot_size(20).with_epochs(2.0).with_seed(11)
}

/// The run of `privacy` resumed from the checkpoint in `file` with `keys`, into a fresh
/// regressor and Adam, on `Squares::new(200)` on the CPU.
fn resumed(
    file: &std::path::Path,
    privacy: PrivacyConfig,
    keys: &StreamKeys,
) -> dp_engine::Result<(Regressor, DpOptimizer<Regressor>)> {
    let device = backend::cpu();
    let ckpt = DpCheckpoint::load(file).expect("read back");
    PrivacyEngine::new(privacy).with_keys(keys.clone()).resume(
        (regressor(&device), AdamConfig::new().init()),
        &Squares::new(200),
        &device.device,
        ckpt,
    )
}

/// The checkpoint in `file` (`bytes`) of [`optimized_run`], written with `keys`, refused by
/// another run (another plan, keys, seed, model) and when cut or foreign, in one line.
fn assert_refused_by_other_runs(file: &std::path::Path, keys: &StreamKeys, bytes: &[u8]) {
    let device = backend::cpu();
    let data = Squares::new(200);
    let privacy = optimized_run;
    let adam = || AdamConfig::new().init();
    let resume = |privacy: PrivacyConfig, keys: &StreamKeys| resumed(file, privacy, keys);
    // The checkpoint refused by another run: another lot size, another seed's keys.
    let err = resume(privacy().with_lot_size(25), keys).err().expect("another plan").to_string();
    assert!(err.contains("cannot resume") && err.lines().count() == 1, "{err}");
    assert!(err.contains("the lot size or the training set changed"), "the setting is named: {err}");
    let err = resume(privacy().with_epochs(3.0), keys).err().expect("another length").to_string();
    assert!(err.contains("its epochs (3) changed"), "the setting is named: {err}");
    let err = resume(privacy(), &StreamKeys::for_run(Some(12))).err().expect("other keys").to_string();
    assert!(err.contains("seed"), "{err}");
    // Another seed with its own keys, or fresh keys: the checkpoint's fingerprint refuses them
    // (both used to resume and go on with other streams).
    let err = resume(privacy().with_seed(12), &StreamKeys::for_run(Some(12))).err().expect("another seed").to_string();
    assert!(err.contains("fingerprints differ") && err.lines().count() == 1, "{err}");
    let unseeded = || PrivacyConfig::new(Optimized).with_noise_multiplier(1.1).with_lot_size(20).with_epochs(2.0);
    let err = resume(unseeded(), &StreamKeys::for_run(None)).err().expect("fresh keys").to_string();
    assert!(err.contains("fingerprints differ"), "{err}");
    // Without keys or seed: told what to give (not that the run is unseeded).
    let err = PrivacyEngine::new(unseeded())
        .resume((regressor(&device), adam()), &data, &device.device, DpCheckpoint::load(file).expect("read"))
        .err()
        .expect("no keys")
        .to_string();
    assert!(err.contains("StreamKeys::load") && err.contains("seed"), "{err}");
    // Another model's shape: named as such, not as a noise stream position.
    let wide = Regressor { fc: LinearConfig::new(FEATURES, 2).init(&device.device) };
    let err = PrivacyEngine::new(privacy())
        .with_keys(keys.clone())
        .resume((wide, adam()), &data, &device.device, DpCheckpoint::load(file).expect("read"))
        .err()
        .expect("another model")
        .to_string();
    assert!(err.contains("model record does not fit") && err.lines().count() == 1, "{err}");
    for cut in (0..bytes.len()).step_by(97).chain([bytes.len() - 1]) {
        let err = DpCheckpoint::from_bytes(&bytes[..cut]).expect_err("a truncated checkpoint").to_string();
        assert_eq!(err.lines().count(), 1, "{err}");
    }
    let model_record = regressor(&device).into_record().into_bytes().expect("a Burn record");
    let err = DpCheckpoint::from_bytes(&model_record).expect_err("a model record").to_string();
    assert!(err.contains("not a dp-engine checkpoint"), "{err}");
}

/// A Burn dataset whose rows from index 5 on cannot be read (a file behind it that fails).
struct FailingRows;

impl Dataset<[f32; FEATURES]> for FailingRows {
    fn get(&self, index: usize) -> Result<[f32; FEATURES], DatasetError> {
        if index < 5 {
            Ok([index as f32, 1.0, -1.0])
        } else {
            Err(DatasetError::new(std::io::Error::other("disk read failed")))
        }
    }

    fn len(&self) -> usize {
        8
    }
}

/// Rows into a [B, FEATURES] tensor.
struct RowBatcher;

impl Batcher<[f32; FEATURES], Tensor<2>> for RowBatcher {
    fn batch(&self, items: Vec<[f32; FEATURES]>, device: &Device) -> Tensor<2> {
        let n = items.len();
        Tensor::from_data(TensorData::new(items.concat(), [n, FEATURES]), device)
    }
}

/// A Burn Dataset through `DatasetLots`: a row it cannot read stops the step with a one-line
/// error (no panic, no noise released for that lot), where the dry run's first rows are fine.
#[test]
fn a_dataset_that_fails_to_give_a_row_is_an_error_not_a_panic() {
    let device = backend::cpu();
    let model = regressor(&device);
    let loss = |m: &Regressor, x: Tensor<2>| ExampleLosses {
        losses: m.predict(x).powi_scalar(2).flatten(0, 1),
        correct: None,
    };
    let lots = DatasetLots::new(FailingRows, RowBatcher, loss);
    let privacy = PrivacyConfig::new(Gaussian).with_noise_multiplier(1.0).with_lot_size(8).with_seed(5);
    let mut dp = PrivacyEngine::new(privacy)
        .make_private(&model, SgdConfig::new().init(), &lots, &device.device)
        .expect("the first two rows read fine");
    let err = dp.step(model, &lots, 0.1).expect_err("row 5 fails").to_string();
    assert!(err.contains("disk read failed") && err.lines().count() == 1, "{err}");
    assert_eq!(dp.ledger().total_steps(), 0, "nothing released for the failed lot");
}

/// A test set given as a `LotSource` is evaluated with the user's own loss, in any batch size:
/// the mean over every example, as computed one example at a time.
#[test]
fn a_lot_source_evaluates_a_model_with_its_own_loss() {
    let device = backend::cpu();
    let model = regressor(&device);
    let data = Squares::new(7);
    let one_by_one: f64 = (0..7)
        .map(|i| f64::from(data.losses(&model, &[i], &device.device).expect("rows").losses.into_scalar::<f32>()))
        .sum::<f64>()
        / 7.0;
    for batch in [1, 3, 7, 100] {
        let (loss, accuracy) = evaluate(&model, &data, batch, &device.device).expect("rows").read().expect("examples");
        assert!((loss - one_by_one).abs() <= 1e-6 * (1.0 + one_by_one), "batch {batch}: {loss} vs {one_by_one}");
        assert_eq!(accuracy, None, "a regression has no accuracy");
    }
}

/// Rows of a Burn `InMemDataset`: `n` of them, offset by `shift`, in the order `reverse` says.
fn burn_rows(n: usize, shift: f32, reverse: bool) -> burn::data::dataset::InMemDataset<[f32; FEATURES]> {
    let mut rows: Vec<[f32; FEATURES]> = (0..n).map(|i| [i as f32 / n as f32 + shift, (i % 3) as f32, 1.0]).collect();
    if reverse {
        rows.reverse();
    }
    burn::data::dataset::InMemDataset::new(rows)
}

/// A model moved with `to_device` between two steps (to the run's own device) steps on: the move
/// no longer leaves parameters that Burn refuses to track.
#[test]
fn a_model_moved_between_steps_to_the_runs_device_steps_on() {
    let device = backend::cpu();
    let data = Squares::new(40);
    let privacy = PrivacyConfig::new(Gaussian).with_noise_multiplier(1.0).with_lot_size(8).with_seed(3);
    let mut model = regressor(&device);
    let mut dp =
        PrivacyEngine::new(privacy).make_private(&model, SgdConfig::new().init(), &data, &device.device).unwrap();
    for _ in 0..3 {
        model = dp.step(model, &data, 0.1).unwrap().0.to_device(&device.device);
    }
    assert_eq!(dp.ledger().total_steps(), 3);
}

/// A run resumed on a Burn dataset of other rows (as many), or of the same rows in another order,
/// is refused; on its own rows it continues.
#[test]
fn a_run_resumed_on_another_training_set_is_refused() {
    let device = backend::cpu();
    let loss = |m: &Regressor, x: Tensor<2>| ExampleLosses {
        losses: m.predict(x).powi_scalar(2).flatten(0, 1),
        correct: None,
    };
    let privacy = PrivacyConfig::new(Gaussian).with_noise_multiplier(1.0).with_lot_size(8).with_seed(4);
    let own = DatasetLots::new(burn_rows(40, 0.0, false), RowBatcher, loss);
    let model = regressor(&device);
    let mut dp = PrivacyEngine::new(privacy.clone())
        .make_private(&model, SgdConfig::new().init(), &own, &device.device)
        .unwrap();
    let model = dp.step(model, &own, 0.1).unwrap().0;
    let ckpt = dp.checkpoint(&model).unwrap();
    let resume = |lots: &dyn LotSource<Regressor>| {
        PrivacyEngine::new(privacy.clone()).resume(
            (regressor(&device), SgdConfig::new().init()),
            lots,
            &device.device,
            ckpt.clone(),
        )
    };
    for (what, other) in [("other rows", burn_rows(40, 0.5, false)), ("the rows reversed", burn_rows(40, 0.0, true))] {
        let e = resume(&DatasetLots::new(other, RowBatcher, loss)).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(e.contains("not the ones the run started on"), "{what}: {e}");
    }
    assert!(resume(&DatasetLots::new(burn_rows(40, 0.0, false), RowBatcher, loss)).is_ok(), "its own rows");
}
