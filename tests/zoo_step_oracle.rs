//! The zoo's models and both training steps against the naive loop (one backward per example,
//! `oracle`), on ndarray and on wgpu (lavapipe in CI, where DPTRAIN_REQUIRE_WGPU=1 turns a missing
//! adapter into a failure):
//! - `lot_sum` over a lot of 7 cut into physical batches of 5 and 2, the second padded to 4
//!   rows: the flat-clipped sum equals the loop's, and the metrics count the 7 real examples only;
//! - the DP step (`PrivateStep` through `step::for_run`, q = 1, seeded): the model after one SGD
//!   step is theta - lr (clipped sum + sigma xi) / qN, with xi the seed's noise drawn by a twin
//!   stream, and the ledger holds exactly that release;
//! - the baseline's plain Burn step: theta - lr * mean gradient;
//! - `make_private`'s independence check accepts every zoo model's cross-entropy, and its check of
//!   every layer's per-example rule against autodiff finds them far inside its tolerance.

use crate::oracle;

use burn::module::Module;
use burn::tensor::{Device, Tensor, TensorData};
use dp_accounting::{DpEvent, LotSampling};
use dp_data::image_dataset::{ImageDataset, Normalization as PixelNormalization};
use dp_data::{ChaChaState, LotSampler, Sampling};
use dp_engine::backend;
use dp_engine::grad_sample::batch::ClipSpec;
use dp_engine::grad_sample::params::ParamTable;
use dp_engine::lots::Batching;
use dp_engine::lots::{CrossEntropyLots, ImageClassifier};
use dp_engine::lots::{LotSource, lot_sum};
use dp_engine::nn::activation::Activation;
use dp_engine::optim::OptimizerName;
use dp_engine::optim::optimizer;
use dp_engine::privacy::Clipping;
use dp_engine::privacy::PrivacyConfig;
use dp_engine::privacy::mechanism;
use dp_engine::privacy::mechanism::MechanismName;
use dp_engine::step::independence::independence;
use dp_engine::step::layer_rules::{TOLERANCE, check_layer_rules};
use dp_engine::step::{self, LotStep, StepState};
use dp_kernels::NoiseScale;
use dp_kernels::noise::{GaussianNoise, NOISE_STREAM};
use dp_kernels::tensor_io::vector;
use dptrain::zoo::{ModelName, ModelSpec, Normalization, ZooModel, build};
use oracle::{assert_close, host, naive_gradients, param_value, sq};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;

const CLASSES: usize = 10;
const N: usize = 7;

fn model(name: ModelName, shape: [usize; 3], rng: &mut ChaCha20Rng, device: &Device) -> ZooModel {
    let spec = ModelSpec { name, activation: Activation::Tanh, hidden: None, normalization: Normalization::None };
    build(spec, shape, CLASSES, rng, device).expect("a zoo model").train()
}

/// N random images whose labels `model` gets right on even examples and wrong on odd ones, so
/// that the padded batch below starts with a right one: a pad counted like a real row would show.
fn data(model: &ZooModel, shape: [usize; 3], rng: &mut ChaCha20Rng, device: &Device) -> ImageDataset {
    let pixels: Vec<u8> = (0..N * shape.iter().product::<usize>()).map(|_| rng.random()).collect();
    let normalization = PixelNormalization { mean: vec![0.5; shape[0]], std: vec![0.25; shape[0]] };
    let unlabelled = ImageDataset::new(pixels.clone(), vec![0; N], shape, CLASSES, normalization.clone()).unwrap();
    let (x, _) = unlabelled.batch(&(0..N).collect::<Vec<_>>());
    let x = Tensor::<4>::from_data(TensorData::new(x, [N, shape[0], shape[1], shape[2]]), device);
    let logits = host(model.valid().logits(x));
    let guessed: Vec<usize> = logits
        .chunks(CLASSES)
        .map(|row| (0..CLASSES).max_by(|&a, &b| row[a].total_cmp(&row[b])).expect("classes"))
        .collect();
    let labels = (0..N).map(|e| ((guessed[e] + e % 2) % CLASSES) as u8).collect();
    ImageDataset::new(pixels, labels, shape, CLASSES, normalization).unwrap()
}

/// Each example's gradient and its total norm, from the naive loop.
fn naive(model: &ZooModel, table: &ParamTable, data: &ImageDataset, device: &Device) -> (Vec<Vec<Vec<f64>>>, Vec<f64>) {
    let source = CrossEntropyLots { data };
    let grads = naive_gradients(model, table, N, |m, e| source.losses(m, &[e], device).unwrap().losses);
    let norms = grads.iter().map(|g| g.iter().map(|t| sq(t)).sum::<f64>().sqrt()).collect();
    (grads, norms)
}

/// sum_e weight[e] * g_e for parameter k.
fn weighted(grads: &[Vec<Vec<f64>>], k: usize, weight: &[f64]) -> Vec<f64> {
    (0..grads[0][k].len()).map(|j| (0..N).map(|e| weight[e] * grads[e][k][j]).sum()).collect()
}

fn assert_all_close(got: &[f64], want: &[f64], what: &str) {
    let scale = want.iter().map(|w| w.abs()).fold(0.0, f64::max).max(1e-6);
    for (g, w) in got.iter().zip(want) {
        assert!((g - w).abs() <= 1e-4 * scale, "{what}: {g} vs naive {w}");
    }
}

fn clip_factors(norms: &[f64], clip: f64) -> Vec<f64> {
    norms.iter().map(|n| (clip / (n + 1e-6)).min(1.0)).collect()
}

/// `lot_sum` with padding against the loop, and its metrics.
fn check_lot_sum(name: ModelName, shape: [usize; 3], device: &Device) {
    let mut rng = ChaCha20Rng::seed_from_u64(5);
    let model = model(name, shape, &mut rng, device);
    let data = data(&model, shape, &mut rng, device);
    let table = ParamTable::of(&model).unwrap();
    let (grads, norms) = naive(&model, &table, &data, device);
    let mut sorted = norms.clone();
    sorted.sort_by(f64::total_cmp);
    let clip = sorted[N / 2];
    let batching = Batching { size: 5, granule: 4 };
    assert_eq!((batching.padded(5), batching.padded(2)), (5, 4));
    let lot = [6, 0, 3, 5, 1, 2, 4];
    let spec = ClipSpec { clip_norm: clip, clipping: Clipping::Flat, layers: table.layers().len() };
    let source = CrossEntropyLots { data: &data };
    let (sums, metrics) = lot_sum(&model.valid(), &source, &lot, batching, &table, Some(spec), device).unwrap();
    let factors = clip_factors(&norms, clip);
    for (k, (sum, p)) in sums.into_iter().zip(table.params()).enumerate() {
        assert_all_close(&host(sum), &weighted(&grads, k, &factors), &format!("{name:?} {}", p.path));
    }
    let (loss, accuracy) = metrics.read().unwrap();
    let want_loss: f64 = host(source.losses(&model.valid(), &lot, device).unwrap().losses).iter().sum();
    assert_close(loss, want_loss / N as f64, "mean loss");
    assert_eq!(accuracy, Some(4.0 / N as f64), "accuracy over the 7 real examples (4 right)");
    // The dry run's check that each example's loss and gradient are its own: no false refusal.
    assert_eq!(independence(&model.valid(), &source, &[], device).unwrap(), None, "{name:?}: independent examples");
    // And its check of each layer's per-example rule against autodiff: far inside its tolerance.
    let worst = check_layer_rules(&model.valid(), &source, &table).unwrap();
    println!("{name:?}: the layers' per-example rules within {worst:.1e} of autodiff");
    // WRN-16-4's 256-channel ghost norms are the farthest, at 1.0e-5; the others within 3e-7.
    assert!(worst < TOLERANCE / 5.0, "{name:?}: {worst:e}");
}

/// One step of `name` (q = 1, seed 1, SGD at lr 0.1), and the model before and after.
fn one_step(
    name: MechanismName,
    clip: f64,
    z: f64,
    model: &ZooModel,
    data: &ImageDataset,
    device: &Device,
) -> (ZooModel, Box<dyn LotStep<ZooModel>>) {
    let config = PrivacyConfig::with_shared(mechanism::named(name, &mechanism::MechanismOptions::default()).unwrap())
        .with_clip_norm(clip)
        .with_seed(1);
    let z = config.mechanism.is_private().then_some(z);
    let sampler = LotSampler::new(Sampling::Poisson { rate: 1.0 }, N, Some(1)).unwrap();
    let state = StepState::fresh(sampler, ChaChaState::new(Some(1), NOISE_STREAM));
    let table = ParamTable::of(model).unwrap();
    let mut step = step::for_run(&config, z, &table, Batching { size: 5, granule: 4 }, state).unwrap();
    let mut sgd = optimizer(OptimizerName::Sgd, 0.0, 0.0);
    let (after, _) = step.step(model.clone(), &mut sgd, 0.1, &CrossEntropyLots { data }, device).unwrap();
    (after, step)
}

/// The DP step and the plain step against the loop.
fn check_steps(device: &Device) {
    let shape = [1, 16, 16];
    let mut rng = ChaCha20Rng::seed_from_u64(8);
    let model = model(ModelName::MnistCnn, shape, &mut rng, device);
    let data = data(&model, shape, &mut rng, device);
    let table = ParamTable::of(&model).unwrap();
    let (grads, norms) = naive(&model, &table, &data, device);
    // z C = 1 exactly, so that the twin stream draws with the step's sigma.
    let (clip, z) = (0.5, 2.0);
    let (after, private) = one_step(MechanismName::Gaussian, clip, z, &model, &data, device);
    let mut twin = GaussianNoise::new(Some(1));
    let factors = clip_factors(&norms, clip);
    for (k, p) in table.params().iter().enumerate() {
        let sum = weighted(&grads, k, &factors).into_iter().map(|x| x as f32).collect();
        let released = twin.perturb(vector(sum, device), &NoiseScale::Uniform(1.0), 1.0 / N as f32).unwrap();
        let want: Vec<f64> =
            param_value(&model, p).iter().zip(host(released)).map(|(theta, g)| theta - 0.1 * g).collect();
        assert_all_close(&param_value(&after, p), &want, &format!("DP step {}", p.path));
    }
    let entries = private.ledger().entries();
    assert_eq!(entries.len(), 1);
    assert_eq!(entries[0], (1, DpEvent::sampled_gaussian(z, 1.0, LotSampling::Poisson).unwrap()));

    let (after, plain) = one_step(MechanismName::None, clip, z, &model, &data, device);
    let released = plain.ledger().entries();
    assert!(
        matches!(released, [(1, DpEvent::NonPrivate { .. })]),
        "the baseline releases its gradient without privacy: {released:?}"
    );
    let mean = vec![1.0 / N as f64; N];
    for (k, p) in table.params().iter().enumerate() {
        let want: Vec<f64> =
            param_value(&model, p).iter().zip(weighted(&grads, k, &mean)).map(|(theta, g)| theta - 0.1 * g).collect();
        assert_all_close(&param_value(&after, p), &want, &format!("plain step {}", p.path));
    }
}

/// Every zoo model on `device`, and the steps.
fn check_zoo(device: &Device) {
    check_lot_sum(ModelName::MnistCnn, [1, 16, 16], device);
    check_lot_sum(ModelName::XiangMnist, [2, 8, 8], device);
    check_lot_sum(ModelName::Cifar10Cnn, [3, 8, 8], device);
    check_lot_sum(ModelName::Logreg, [1, 4, 5], device);
    check_lot_sum(ModelName::Mlp, [1, 3, 3], device);
    check_lot_sum(ModelName::Wrn16x4, [1, 4, 4], device);
    check_steps(device);
}

#[test]
fn ndarray_zoo_and_steps_match_the_naive_loop() {
    check_zoo(&backend::ndarray().device);
}

/// flex is what `--device cpu` runs.
#[test]
fn flex_zoo_and_steps_match_the_naive_loop() {
    check_zoo(&backend::cpu().device);
}

/// Lavapipe compiles a shader per shape and is slow: one model and the steps.
#[test]
fn wgpu_zoo_and_steps_match_the_naive_loop() {
    if let Some(device) = dp_kernels::wgpu_probe::wgpu_for_tests() {
        check_lot_sum(ModelName::MnistCnn, [1, 16, 16], &device);
        check_steps(&device);
    }
}
