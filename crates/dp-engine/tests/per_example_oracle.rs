//! Per-example norms and clipped sums against the oracle: a naive loop that gives every example
//! its own forward and backward pass with Burn's autodiff on the parameters. Runs on ndarray and
//! on wgpu (lavapipe in CI, where DPTRAIN_REQUIRE_WGPU=1 turns a missing adapter into a failure).
//! The whole step (`lot_gradient`: physical batches padded with inert rows, clipping, the noise
//! pass, the division by the expected lot size, the metrics) is checked against the same loop.

use burn::tensor::{Device, Tensor, TensorData};
use dp_data::image_dataset::{ImageDataset, Normalization as PixelNormalization};
use dp_engine::activation::Activation;
use dp_engine::backend;
use dp_engine::clipping::{Clipping, clip_factors};
use dp_engine::features::Features;
use dp_engine::loss::{one_hot, summed_cross_entropy};
use dp_engine::model::Model;
use dp_engine::noise::GaussianNoise;
use dp_engine::per_example::{ConvNormMethod, PerExampleGrad};
use dp_engine::step::{Batching, ExampleSource, Privatizer, StepDraw, lot_gradient};
use dp_engine::tape::Tape;
use dp_engine::tensor_io::to_host;
use dp_engine::zoo::{ModelName, ModelSpec, Normalization, build};
use dp_kernels::NoiseScale;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;

const CLASSES: usize = 10;

fn inputs(rng: &mut ChaCha20Rng, b: usize, shape: [usize; 3], device: &Device) -> (Tensor<4>, Vec<u8>) {
    let n = b * shape.iter().product::<usize>();
    let x: Vec<f32> = (0..n).map(|_| rng.random_range(-1.5..1.5)).collect();
    let labels = (0..b).map(|_| rng.random_range(0..CLASSES as u8)).collect();
    (Tensor::from_data(TensorData::new(x, [b, shape[0], shape[1], shape[2]]), device), labels)
}

/// Each example's gradient (per parameter tensor, flattened) from its own backward pass.
fn naive_gradients(model: &Model, x: &Tensor<4>, labels: &[u8], device: &Device) -> Vec<Vec<Vec<f32>>> {
    (0..labels.len())
        .map(|i| {
            let mut m = model.clone();
            let params: Vec<Tensor<2>> = m.params().into_iter().map(|p| p.autodiff().require_grad()).collect();
            m.set_params(params.clone());
            let xi = x.clone().narrow(0, i, 1);
            let logits = m.forward(Features::Image(xi), None).unwrap();
            let loss = summed_cross_entropy(logits, one_hot(&labels[i..=i], CLASSES, device).autodiff());
            let grads = loss.backward();
            params.iter().map(|p| to_host(&p.grad(&grads).unwrap())).collect()
        })
        .collect()
}

fn sq(v: &[f32]) -> f64 {
    v.iter().map(|&x| f64::from(x) * f64::from(x)).sum()
}

fn assert_close(got: f64, want: f64, what: &str) {
    let scale = want.abs().max(1e-3);
    assert!((got - want).abs() <= 1e-4 * scale, "{what}: got {got}, naive loop {want}");
}

/// Checks one model; returns the convolution norm methods its layers used.
fn check_model(name: ModelName, shape: [usize; 3], device: &Device) -> Vec<ConvNormMethod> {
    let mut rng = ChaCha20Rng::seed_from_u64(11);
    let spec = ModelSpec { name, activation: Activation::Tanh, hidden: Some(12), normalization: Normalization::None };
    let model = build(spec, shape, CLASSES, &mut rng, device).unwrap();
    let b = 5;
    let (x, labels) = inputs(&mut rng, b, shape, device);
    let naive = naive_gradients(&model, &x, &labels, device);
    let layers = naive[0].len() / 2;

    // Per-example squared norms, layer by layer.
    let mut tape = Tape::new(device);
    let logits = model.forward(Features::Image(x.clone()), Some(&mut tape)).unwrap();
    let loss = summed_cross_entropy(logits, one_hot(&labels, CLASSES, device));
    let grads = loss.backward();
    let mut per_example = model.per_example(tape.layer_gradients(&grads).unwrap());
    assert_eq!(per_example.len(), layers);
    let methods = per_example
        .iter()
        .filter_map(|p| match p {
            PerExampleGrad::Conv { method, .. } => Some(*method),
            PerExampleGrad::Linear { .. } => None,
        })
        .collect();
    let norms: Vec<Tensor<1>> = per_example.iter_mut().map(|p| p.sq_norms()).collect();
    for (l, n) in norms.iter().enumerate() {
        for (e, got) in to_host(n).into_iter().enumerate() {
            let want = sq(&naive[e][2 * l]) + sq(&naive[e][2 * l + 1]);
            assert_close(got.into(), want, &format!("{name:?} layer {l} example {e} squared norm"));
        }
    }

    // Clipped sums with a bound that clips some examples and not others.
    let totals: Vec<f64> = (0..b).map(|e| naive[e].iter().map(|g| sq(g)).sum::<f64>().sqrt()).collect();
    let mut sorted = totals.clone();
    sorted.sort_by(f64::total_cmp);
    let clip = sorted[b / 2];
    for clipping in [Clipping::Flat, Clipping::PerLayer] {
        let factors = clip_factors(norms.clone(), clip, clipping, layers);
        for (l, (layer, s)) in per_example.iter().zip(&factors).enumerate() {
            let s_host = to_host(s);
            // The oracle's factors: min(1, bound / norm) of the naive gradients.
            for e in 0..b {
                let (norm, bound) = match clipping {
                    Clipping::Flat => (totals[e], clip),
                    Clipping::PerLayer => {
                        ((sq(&naive[e][2 * l]) + sq(&naive[e][2 * l + 1])).sqrt(), clip / (layers as f64).sqrt())
                    }
                };
                let want = (bound / (norm + 1e-6)).min(1.0);
                assert_close(s_host[e].into(), want, &format!("{name:?} {clipping:?} layer {l} factor {e}"));
                // No example's clipped contribution exceeds its bound.
                assert!(f64::from(s_host[e]) * norm <= bound * (1.0 + 1e-5), "example {e} exceeds {bound}");
            }
            let sums = layer.weighted_sum(Some(s));
            for (k, sum) in sums.iter().enumerate() {
                let got = to_host(sum);
                let want: Vec<f64> = (0..got.len())
                    .map(|j| (0..b).map(|e| f64::from(s_host[e]) * f64::from(naive[e][2 * l + k][j])).sum())
                    .collect();
                let scale = want.iter().map(|w| w.abs()).fold(0.0, f64::max).max(1e-6);
                for (g, w) in got.iter().zip(&want) {
                    assert!(
                        (f64::from(*g) - w).abs() <= 1e-4 * scale,
                        "{name:?} {clipping:?} layer {l} param {k}: {g} vs naive {w}"
                    );
                }
            }
        }
    }
    methods
}

/// The largest entry's column of each row of a row-major [rows, CLASSES] matrix.
fn argmax_rows(logits: &[f32]) -> Vec<usize> {
    logits
        .chunks(CLASSES)
        .map(|row| (0..CLASSES).max_by(|&a, &b| row[a].total_cmp(&row[b])).expect("classes"))
        .collect()
}

/// One step over a lot of 7 cut into batches of 5 and 2, the second padded to 4 rows: the clipped
/// sum over the expected lot size (noise of sigma 0) and the unclipped mean equal the naive loop's,
/// and the metrics count the 7 real examples only.
fn check_padded_lot_step(device: &Device) {
    let mut rng = ChaCha20Rng::seed_from_u64(5);
    let shape = [1, 16, 16];
    let spec = ModelSpec {
        name: ModelName::MnistCnn,
        activation: Activation::Tanh,
        hidden: None,
        normalization: Normalization::None,
    };
    let model = build(spec, shape, CLASSES, &mut rng, device).unwrap();
    let n = 7;
    let pixels: Vec<u8> = (0..n * 256).map(|_| rng.random()).collect();
    let normalization = PixelNormalization { mean: vec![0.5], std: vec![0.25] };
    // Labels the model gets right on even examples and wrong on odd ones, so that the padded
    // batch ([2, 4] below) starts with a right one: a pad counted like a real row would show.
    let unlabelled = ImageDataset::new(pixels.clone(), vec![0; n], shape, CLASSES, normalization.clone()).unwrap();
    let (all, _) = ExampleSource::batch(&unlabelled, &(0..n).collect::<Vec<_>>(), device);
    let guessed = argmax_rows(&to_host(&model.forward(all, None).unwrap()));
    let labels: Vec<u8> = (0..n).map(|e| ((guessed[e] + e % 2) % CLASSES) as u8).collect();
    let data = ImageDataset::new(pixels, labels, shape, CLASSES, normalization).unwrap();
    let lot = [6, 0, 3, 5, 1, 2, 4];
    let (x, lot_labels) = ExampleSource::batch(&data, &lot, device);
    let Features::Image(x) = x else { panic!("images give image features") };
    let naive = naive_gradients(&model, &x, &lot_labels, device);
    let totals: Vec<f64> = naive.iter().map(|g| g.iter().map(|t| sq(t)).sum::<f64>().sqrt()).collect();
    let mut sorted = totals.clone();
    sorted.sort_by(f64::total_cmp);
    let clip = sorted[n / 2];
    let expected_lot_size = 10.0;
    let batching = Batching { size: 5, granule: 4 };
    assert_eq!((batching.padded(5), batching.padded(2)), (5, 4));
    let private =
        Privatizer::Gaussian { clip_norm: clip, clipping: Clipping::Flat, expected_lot_size, smoothing: None };
    for (privatizer, weight) in [
        (private, (0..n).map(|e| (clip / (totals[e] + 1e-6)).min(1.0) / expected_lot_size).collect::<Vec<_>>()),
        (Privatizer::None, vec![1.0 / n as f64; n]),
    ] {
        let mut noise = GaussianNoise::new(Some(1));
        let zero = vec![NoiseScale::Uniform(0.0); model.params().len()];
        let draw = matches!(privatizer, Privatizer::Gaussian { .. }).then_some(StepDraw {
            noise: &mut noise,
            scales: &zero,
            canaries: None,
        });
        let (grads, metrics) = lot_gradient(&model, &data, &lot, batching, privatizer, draw, device).unwrap();
        for (k, g) in grads.iter().enumerate() {
            let got = to_host(g);
            let want: Vec<f64> =
                (0..got.len()).map(|j| (0..n).map(|e| weight[e] * f64::from(naive[e][k][j])).sum()).collect();
            let scale = want.iter().map(|w| w.abs()).fold(0.0, f64::max).max(1e-6);
            for (g, w) in got.iter().zip(&want) {
                assert!((f64::from(*g) - w).abs() <= 1e-4 * scale, "{privatizer:?} param {k}: {g} vs naive {w}");
            }
        }
        let logits = model.forward(Features::Image(x.clone()), None).unwrap();
        let want_loss = to_host(&summed_cross_entropy(logits.clone(), one_hot(&lot_labels, CLASSES, device)))[0];
        let predicted = argmax_rows(&to_host(&logits));
        let want_correct = (0..n).filter(|&e| predicted[e] == usize::from(lot_labels[e])).count();
        assert_eq!(want_correct, 4, "the even examples are right, the odd ones wrong");
        let (loss, accuracy) = metrics.read().unwrap();
        assert_close(loss, f64::from(want_loss) / n as f64, "mean loss");
        assert_eq!(accuracy, want_correct as f64 / n as f64, "accuracy over the real examples");
    }
}

/// The MNIST tutorial CNN on 16x16 inputs has one materialised and one ghost-norm convolution
/// and two dense layers: every DP layer and norm method.
fn check_every_layer_kind(device: &Device) {
    let methods = check_model(ModelName::MnistCnn, [1, 16, 16], device);
    assert_eq!(methods, [ConvNormMethod::Materialize, ConvNormMethod::Ghost]);
}

#[test]
fn ndarray_matches_naive_loop() {
    let device = backend::cpu().device;
    check_every_layer_kind(&device);
    check_model(ModelName::XiangMnist, [2, 8, 8], &device);
    check_model(ModelName::Cifar10Cnn, [3, 8, 8], &device);
    check_model(ModelName::Logreg, [1, 4, 5], &device);
    check_model(ModelName::Mlp, [1, 3, 3], &device);
    check_padded_lot_step(&device);
}

/// Lavapipe compiles a shader per shape and is slow: the layer kinds only.
#[test]
fn wgpu_matches_naive_loop() {
    if let Some(device) = dp_kernels::wgpu_probe::wgpu_for_tests() {
        check_every_layer_kind(&device);
        check_padded_lot_step(&device);
    }
}
