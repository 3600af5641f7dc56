//! Augmentation multiplicity against the naive loop, on ndarray and on wgpu (lavapipe in CI):
//! `lot_sum` over a lot of 7 examples with K = 3 augmented views each (random crops after reflect
//! padding, flips where asked), cut into physical batches of 5 and 2 examples (the second padded
//! to 4): each example's clipped contribution must equal the loop's, which takes one backward of
//! the mean of that example's own views' losses (the mean of their gradients), clips it once and
//! adds it up. The metrics count the 7 real examples, their views averaged.

use crate::oracle;

use burn::module::Module;
use burn::tensor::Device;
use dp_data::image_dataset::{ImageDataset, Normalization as PixelNormalization};
use dp_data::{CropFlip, SecretKey};
use dp_engine::backend;
use dp_engine::grad_sample::batch::ClipSpec;
use dp_engine::grad_sample::params::ParamTable;
use dp_engine::lots::AugmentedLots;
use dp_engine::lots::Batching;
use dp_engine::lots::CrossEntropyLots;
use dp_engine::lots::{LotSource, lot_sum};
use dp_engine::nn::activation::Activation;
use dp_engine::nn::scatter_net::ScatterNet;
use dp_engine::privacy::Clipping;
use dptrain::zoo::{ModelName, ModelSpec, Normalization, ZooModel, build};
use oracle::{assert_close, host, naive_gradients, sq};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;

const CLASSES: usize = 10;
const N: usize = 7;
const VIEWS: usize = 3;

/// N random images with random labels.
fn data(shape: [usize; 3], rng: &mut ChaCha20Rng) -> ImageDataset {
    let pixels: Vec<u8> = (0..N * shape.iter().product::<usize>()).map(|_| rng.random()).collect();
    let labels = (0..N).map(|_| rng.random_range(0..CLASSES as u8)).collect();
    let normalization = PixelNormalization { mean: vec![0.5; shape[0]], std: vec![0.25; shape[0]] };
    ImageDataset::new(pixels, labels, shape, CLASSES, normalization).unwrap()
}

/// The lots of `data` with VIEWS views, padding 2, at step 5; through ScatterNet when `scatter`.
fn lots(data: &ImageDataset, flip: bool, scatter: bool) -> AugmentedLots<'_> {
    let augmentation = CropFlip::new(2, flip, data.shape()).unwrap();
    let lots = AugmentedLots::new(data, augmentation, VIEWS, SecretKey::from_seed(9)).unwrap();
    LotSource::<ZooModel>::at_step(&lots, 5);
    if scatter { lots.with_features(ScatterNet::new(data.shape()).unwrap()).unwrap() } else { lots }
}

/// Each example's views are drawn from (key, step, example) alone: the same in any batch, new
/// at the next step, and not all alike.
fn check_views(model: &ZooModel, source: &AugmentedLots<'_>, device: &Device) {
    let losses = |indices: &[usize]| host(source.losses(model, indices, device).unwrap().losses);
    let alone = losses(&[3]);
    assert_eq!(alone.len(), VIEWS);
    let among = losses(&[1, 3, 0]);
    for (a, b) in alone.iter().zip(&among[VIEWS..2 * VIEWS]) {
        assert!((a - b).abs() <= 1e-5 * a.abs().max(1.0), "example 3's views depend on its batch: {alone:?} {among:?}");
    }
    let distinct = (0..N).filter(|&e| losses(&[e]).windows(2).any(|w| w[0] != w[1])).count();
    assert!(distinct >= N - 1, "only {distinct} of {N} examples have views that differ");
    LotSource::<ZooModel>::at_step(source, 6);
    assert_ne!(losses(&[3]), alone, "step 6 draws other views");
    LotSource::<ZooModel>::at_step(source, 5);
}

/// `lot_sum` of `name` on `shape` images with views, against the loop.
fn check(name: ModelName, shape: [usize; 3], flip: bool, device: &Device) {
    let mut rng = ChaCha20Rng::seed_from_u64(5);
    let data = data(shape, &mut rng);
    let scatter = name.reads_scattering();
    let source = lots(&data, flip, scatter);
    let input = if scatter { ScatterNet::new(shape).unwrap().output_shape() } else { shape };
    let spec = ModelSpec { name, activation: Activation::Tanh, hidden: None, normalization: Normalization::None };
    let model = build(spec, input, CLASSES, &mut rng, device).expect("a zoo model").train();
    let table = ParamTable::of(&model).unwrap();
    check_views(&model.valid(), &source, device);

    let mean_of_views =
        |m: &ZooModel, e: usize| source.losses(m, &[e], device).unwrap().losses.div_scalar(VIEWS as f64);
    let grads = naive_gradients(&model, &table, N, mean_of_views);
    let norms: Vec<f64> = grads.iter().map(|g| g.iter().map(|t| sq(t)).sum::<f64>().sqrt()).collect();
    let mut sorted = norms.clone();
    sorted.sort_by(f64::total_cmp);
    let clip = sorted[N / 2];
    let factors: Vec<f64> = norms.iter().map(|n| (clip / (n + 1e-6)).min(1.0)).collect();

    let lot = [6, 0, 3, 5, 1, 2, 4];
    let batching = Batching { size: 5 * VIEWS, granule: 4 * VIEWS };
    let clip_spec = ClipSpec { clip_norm: clip, clipping: Clipping::Flat, layers: table.layers().len() };
    let (sums, metrics) = lot_sum(&model.valid(), &source, &lot, batching, &table, Some(clip_spec), device).unwrap();
    for (k, (sum, p)) in sums.into_iter().zip(table.params()).enumerate() {
        let want: Vec<f64> =
            (0..grads[0][k].len()).map(|j| (0..N).map(|e| factors[e] * grads[e][k][j]).sum()).collect();
        let scale = want.iter().map(|w| w.abs()).fold(0.0, f64::max).max(1e-6);
        for (g, w) in host(sum).iter().zip(&want) {
            assert!((g - w).abs() <= 1e-4 * scale, "{name:?} {}: {g} vs naive {w}", p.path);
        }
    }
    let (loss, _) = metrics.read().unwrap();
    let want: f64 = (0..N).map(|e| host(mean_of_views(&model.valid(), e)).iter().sum::<f64>()).sum();
    assert_close(loss, want / N as f64, "mean over examples of their views' mean loss");
}

/// Views that are all the image itself (no padding, no mirror) give the lot's clipped sum
/// without views: the grouped path (views as positions, a [K, K] ghost norm for dense layers)
/// and the plain one agree.
fn check_identical_views(name: ModelName, shape: [usize; 3], device: &Device) {
    let mut rng = ChaCha20Rng::seed_from_u64(6);
    let data = data(shape, &mut rng);
    let spec = ModelSpec { name, activation: Activation::Tanh, hidden: None, normalization: Normalization::None };
    let model = build(spec, shape, CLASSES, &mut rng, device).expect("a zoo model").valid();
    let table = ParamTable::of(&model).unwrap();
    let lot = [6, 0, 3, 5, 1, 2, 4];
    let clip = Some(ClipSpec { clip_norm: 0.05, clipping: Clipping::Flat, layers: table.layers().len() });
    let copies =
        AugmentedLots::new(&data, CropFlip::new(0, false, shape).unwrap(), VIEWS, SecretKey::from_seed(1)).unwrap();
    let batching = Batching { size: 4 * VIEWS, granule: 1 };
    let (grouped, _) = lot_sum(&model, &copies, &lot, batching, &table, clip, device).unwrap();
    let plain = CrossEntropyLots { data: &data };
    let (single, _) = lot_sum(&model, &plain, &lot, Batching { size: 4, granule: 1 }, &table, clip, device).unwrap();
    for ((g, s), p) in grouped.into_iter().zip(single).zip(table.params()) {
        let (g, s) = (host(g), host(s));
        let scale = s.iter().map(|w| w.abs()).fold(0.0, f64::max).max(1e-6);
        let worst = g.iter().zip(&s).map(|(a, b)| (a - b).abs()).fold(0.0, f64::max);
        assert!(worst <= 1e-4 * scale, "{name:?} {}: {worst:e} apart (largest {scale:e})", p.path);
    }
}

#[test]
fn identical_views_give_the_sum_without_views() {
    let device = backend::ndarray().device;
    check_identical_views(ModelName::Mlp, [1, 3, 3], &device);
    check_identical_views(ModelName::MnistCnn, [1, 16, 16], &device);
    check_identical_views(ModelName::Wrn16x4, [1, 4, 4], &device);
}

/// Every zoo model the oracle covers, on `device`.
fn check_every_model(device: &Device) {
    check(ModelName::MnistCnn, [1, 16, 16], false, device);
    check(ModelName::Cifar10Cnn, [3, 8, 8], true, device);
    check(ModelName::Logreg, [1, 4, 5], true, device);
    check(ModelName::Wrn16x4, [1, 4, 4], true, device);
    check(ModelName::ScatnetLinear, [1, 16, 16], true, device);
}

#[test]
fn ndarray_views_are_averaged_then_clipped_as_the_naive_loop_does() {
    check_every_model(&backend::ndarray().device);
}

/// flex, what `--device cpu` runs: its per-example products are computed on the host
/// (`grad_sample::host_products`), over views merged into positions.
#[test]
fn flex_views_are_averaged_then_clipped_as_the_naive_loop_does() {
    check_every_model(&backend::cpu().device);
}

/// Lavapipe compiles a shader per shape and is slow: one model.
#[test]
fn wgpu_views_are_averaged_then_clipped_as_the_naive_loop_does() {
    if let Some(device) = dp_kernels::wgpu_probe::wgpu_for_tests() {
        check(ModelName::MnistCnn, [1, 16, 16], true, &device);
    }
}
