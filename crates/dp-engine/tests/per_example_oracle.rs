//! Per-example norms and clipped sums against the oracle: a naive loop that gives every example
//! its own forward and backward pass with Burn's autodiff on the parameters. Runs on ndarray and
//! on wgpu (lavapipe in CI, where DPTRAIN_REQUIRE_WGPU=1 turns a missing adapter into a failure).

use burn::tensor::{Device, Tensor, TensorData};
use dp_engine::activation::Activation;
use dp_engine::backend;
use dp_engine::clipping::{Clipping, clip_factors};
use dp_engine::features::Features;
use dp_engine::loss::{one_hot, summed_cross_entropy};
use dp_engine::model::Model;
use dp_engine::per_example::{ConvNormMethod, PerExampleGrad};
use dp_engine::tape::Tape;
use dp_engine::tensor_io::to_host;
use dp_engine::zoo::{ModelName, ModelSpec, Normalization, build};
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
        let factors = clip_factors(norms.clone(), clip, clipping);
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
}

/// Lavapipe compiles a shader per shape and is slow: the layer kinds only.
#[test]
fn wgpu_matches_naive_loop() {
    if let Some(device) = dp_kernels::wgpu_probe::wgpu_for_tests() {
        check_every_layer_kind(&device);
    }
}
