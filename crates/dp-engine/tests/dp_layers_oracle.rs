//! The DP layers as Burn modules against the oracle: a naive loop that gives every example its
//! own forward and backward pass with Burn's autodiff on the parameters (`Module::train`). Three
//! user-style models defined here: one with every DP layer kind and norm method (convolutions
//! with stride, padding, dilation, with and without bias, materialised and ghost norms; GroupNorm;
//! dense layers with and without bias; LayerNorm), a residual network with GroupNorm and
//! weight-standardised convolutions (the gradient through the standardisation's Jacobian), and an
//! embedding model over sequences. Per-example squared norms per layer, and clipped sums (flat and
//! per layer), must equal the loop's to 1e-4 relative, on ndarray and on wgpu (lavapipe in CI).

use burn::module::{Module, ParamId};
use burn::optim::SgdConfig;
use burn::tensor::activation::{log_softmax, relu, tanh};
use burn::tensor::{Device, Int, Tensor, TensorData};
use dp_engine::backend;
use dp_engine::clipping::Clipping;
use dp_engine::grad_sample::affine::NormMethod;
use dp_engine::grad_sample::batch::{BatchGrads, ClipSpec, gradients_params};
use dp_engine::grad_sample::params::ParamTable;
use dp_engine::nn::{
    DpConv2d, DpConv2dConfig, DpEmbedding, DpEmbeddingConfig, DpGroupNorm, DpGroupNormConfig, DpLayerNorm,
    DpLayerNormConfig, DpLinear, DpLinearConfig,
};
use oracle::{assert_close, host, naive_gradients, param_grad, param_value, sq};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;
use std::ops::Range;

mod oracle;

const CLASSES: usize = 3;

/// Every DP layer kind: conv1 materialises its norms (P = 25), conv2 (rectangular kernel,
/// dilation, asymmetric stride and padding, no bias) uses the ghost norm (P = 10).
#[derive(Module, Debug)]
struct EveryLayer {
    conv1: DpConv2d,
    conv2: DpConv2d,
    norm: DpGroupNorm,
    fc1: DpLinear,
    ln: DpLayerNorm,
    fc2: DpLinear,
}

impl EveryLayer {
    fn new(device: &Device) -> Self {
        Self {
            conv1: DpConv2dConfig::new([2, 4], [3, 3]).with_stride([2, 2]).with_padding([1, 1]).init(device),
            conv2: DpConv2dConfig::new([4, 6], [2, 3])
                .with_stride([1, 2])
                .with_padding([1, 0])
                .with_dilation([2, 1])
                .with_bias(false)
                .init(device),
            norm: DpGroupNormConfig::new(3, 6).init(device),
            fc1: DpLinearConfig::new(60, 8).with_bias(false).init(device),
            ln: DpLayerNormConfig::new(8).init(device),
            fc2: DpLinearConfig::new(8, CLASSES).init(device),
        }
    }

    fn forward(&self, x: Tensor<4>) -> Tensor<2> {
        let h = tanh(self.conv1.forward(x));
        let h = relu(self.norm.forward(self.conv2.forward(h)));
        let h = self.ln.forward(self.fc1.forward(h.flatten(1, 3)));
        self.fc2.forward(tanh(h))
    }
}

/// A residual block of weight-standardised convolutions with GroupNorm after each (WRN-16-4's
/// block, De et al. 2022; their norms materialised), a strided standardised convolution with a
/// bias (its norms by the standardised ghost norm), global average pooling, a head.
#[derive(Module, Debug)]
struct Residual {
    stem: DpConv2d,
    conv1: DpConv2d,
    gn1: DpGroupNorm,
    conv2: DpConv2d,
    gn2: DpGroupNorm,
    down: DpConv2d,
    head: DpLinear,
}

impl Residual {
    fn new(device: &Device) -> Self {
        let conv = |c_in| DpConv2dConfig::new([c_in, 4], [3, 3]).with_padding([1, 1]);
        Self {
            stem: conv(1).init(device),
            conv1: conv(4).with_bias(false).with_standardize(true).init(device),
            gn1: DpGroupNormConfig::new(2, 4).init(device),
            conv2: conv(4).with_bias(false).with_standardize(true).init(device),
            gn2: DpGroupNormConfig::new(2, 4).init(device),
            down: conv(4).with_stride([2, 2]).with_standardize(true).init(device),
            head: DpLinearConfig::new(4, CLASSES).init(device),
        }
    }

    fn forward(&self, x: Tensor<4>) -> Tensor<2> {
        let h = relu(self.stem.forward(x));
        let r = relu(self.gn1.forward(self.conv1.forward(h.clone())));
        let h = relu(h + self.gn2.forward(self.conv2.forward(r)));
        let h = relu(self.down.forward(h));
        let [b, c, _, _] = h.dims();
        self.head.forward(h.mean_dim(3).mean_dim(2).reshape([b, c]))
    }
}

/// Tokens [B, T] through an embedding, a dense layer on the sequence (ghost norm: T^2 < 40),
/// LayerNorm, mean pooling and a head.
#[derive(Module, Debug)]
struct Tokens {
    embed: DpEmbedding,
    mix: DpLinear,
    ln: DpLayerNorm,
    head: DpLinear,
}

impl Tokens {
    fn new(device: &Device) -> Self {
        Self {
            embed: DpEmbeddingConfig::new(7, 4).init(device),
            mix: DpLinearConfig::new(4, 10).init(device),
            ln: DpLayerNormConfig::new(10).init(device),
            head: DpLinearConfig::new(10, CLASSES).init(device),
        }
    }

    fn forward(&self, tokens: Tensor<2, Int>) -> Tensor<2> {
        let h = self.ln.forward(tanh(self.mix.forward(self.embed.forward(tokens))));
        let [b, _, d] = h.dims();
        self.head.forward(h.mean_dim(1).reshape([b, d]))
    }
}

/// Each example's cross-entropy [B].
fn losses(logits: Tensor<2>, labels: &[usize]) -> Tensor<1> {
    let b = labels.len();
    let mut one_hot = vec![0f32; b * CLASSES];
    for (i, &l) in labels.iter().enumerate() {
        one_hot[i * CLASSES + l] = 1.0;
    }
    let one_hot = Tensor::<2>::from_data(TensorData::new(one_hot, [b, CLASSES]), &logits.device());
    (log_softmax(logits, 1) * one_hot).sum_dim(1).reshape([b]).neg()
}

/// Checks `model` on a batch of `b` examples whose logits `forward` computes for a range of them.
fn check<M: Module>(model: &M, b: usize, labels: &[usize], forward: impl Fn(&M, Range<usize>) -> Tensor<2>) {
    let table = ParamTable::of(model).expect("a model of DP layers");
    // The oracle: example e's gradient of every parameter from its own backward pass.
    let naive = naive_gradients(model, &table, b, |m, e| losses(forward(m, e..e + 1), &labels[e..=e]));
    let layers = table.layers().len();
    let layer_sq = |e: usize, layer: usize| -> f64 {
        table.params().iter().zip(&naive[e]).filter(|(p, _)| p.layer == layer).map(|(_, g)| sq(g)).sum()
    };
    let position = |id: ParamId| table.params().iter().position(|p| p.id == id).expect("known parameter");

    let run = || BatchGrads::compute(|| (losses(forward(model, 0..b), labels), ())).expect("recorded").0;
    let mut batch = run();
    let layer_ids: Vec<Vec<ParamId>> = batch.layer_params().map(<[ParamId]>::to_vec).collect();
    assert_eq!(layer_ids.len(), layers, "one record per DP layer");
    // checked[e][layer]: the engine's squared norms, once checked against the naive loop's.
    let mut checked = vec![vec![0.0; layers]; b];
    for (ids, norms) in layer_ids.iter().zip(batch.sq_norms()) {
        let layer = table.params()[position(ids[0])].layer;
        for (e, got) in host(norms).into_iter().enumerate() {
            assert_close(got, layer_sq(e, layer), &format!("{} example {e} squared norm", table.layers()[layer]));
            checked[e][layer] = got;
        }
    }

    // Clipped sums with a bound that clips some examples and not others. The factors come from
    // the norms just checked: a weight-standardised layer's norms are raised by a deliberate
    // margin (up to 1e-4 here, inside the check above), and a sum over examples whose
    // contributions cancel would compound that with the sum's own error; this way each sum is
    // held to 1e-4 of the naive per-example gradients on its own.
    let totals: Vec<f64> = checked.iter().map(|norms| norms.iter().sum::<f64>().sqrt()).collect();
    let mut sorted = totals.clone();
    sorted.sort_by(f64::total_cmp);
    let clip_norm = sorted[b / 2];
    for clipping in [Clipping::Flat, Clipping::PerLayer] {
        let factor = |e: usize, layer: usize| match clipping {
            Clipping::Flat => (clip_norm / (totals[e] + 1e-6)).min(1.0),
            Clipping::PerLayer => {
                let bound = clip_norm / (layers as f64).sqrt();
                (bound / (checked[e][layer].sqrt() + 1e-6)).min(1.0)
            }
        };
        let sums = run().clipped_sum(Some(ClipSpec { clip_norm, clipping, layers }));
        assert_eq!(sums.len(), table.params().len(), "one sum per parameter");
        let grads = gradients_params(sums, &table).expect("known parameters");
        for (k, p) in table.params().iter().enumerate() {
            let got = param_grad(&grads, p);
            let want: Vec<f64> =
                (0..got.len()).map(|j| (0..b).map(|e| factor(e, p.layer) * naive[e][k][j]).sum()).collect();
            let scale = want.iter().map(|w| w.abs()).fold(0.0, f64::max).max(1e-6);
            for (g, w) in got.iter().zip(&want) {
                assert!((g - w).abs() <= 1e-4 * scale, "{clipping:?} {}: {g} vs naive {w}", p.path);
            }
        }
        // Burn's optimiser takes the privatised gradient as it is: theta - lr * g (it updates a
        // module in its training state; the DP forward pass runs on `valid()`, without
        // parameter gradients).
        let before: Vec<Vec<f64>> = table.params().iter().map(|p| param_value(model, p)).collect();
        let stepped = SgdConfig::new().init().step(0.5, model.clone().train(), grads);
        let grads = gradients_params(run().clipped_sum(Some(ClipSpec { clip_norm, clipping, layers })), &table)
            .expect("known parameters");
        for (p, old) in table.params().iter().zip(&before) {
            let (new, g) = (param_value(&stepped, p), param_grad(&grads, p));
            for j in 0..old.len() {
                assert!((new[j] - (old[j] - 0.5 * g[j])).abs() <= 1e-5 * (1.0 + old[j].abs()), "{} step", p.path);
            }
        }
    }
}

fn images(rng: &mut ChaCha20Rng, b: usize, shape: [usize; 3], device: &Device) -> Tensor<4> {
    let n = b * shape.iter().product::<usize>();
    let x: Vec<f32> = (0..n).map(|_| rng.random_range(-1.5..1.5)).collect();
    Tensor::from_data(TensorData::new(x, [b, shape[0], shape[1], shape[2]]), device)
}

fn labels(rng: &mut ChaCha20Rng, b: usize) -> Vec<usize> {
    (0..b).map(|_| rng.random_range(0..CLASSES)).collect()
}

fn check_all(device: &Device) {
    let mut rng = ChaCha20Rng::seed_from_u64(3);
    let b = 5;

    // conv1: P = 5 x 5 outputs, N = 4, K = 2 x 3 x 3; conv2: P = 5 x 2, N = 6, K = 4 x 2 x 3.
    assert_eq!(NormMethod::cheapest(25, 4, 18), NormMethod::Materialize);
    assert_eq!(NormMethod::cheapest(10, 6, 24), NormMethod::Ghost);
    let every = EveryLayer::new(device);
    let x = images(&mut rng, b, [2, 9, 9], device);
    let y = labels(&mut rng, b);
    check(&every, b, &y, |m, r| m.forward(x.clone().narrow(0, r.start, r.len())));

    // The residual block's convolutions: P = 6 x 6, N = 4, K = 4 x 3 x 3; the strided one: P = 3 x 3.
    assert_eq!(NormMethod::cheapest(36, 4, 36), NormMethod::Materialize);
    assert_eq!(NormMethod::cheapest(9, 4, 36), NormMethod::Ghost);
    let residual = Residual::new(device);
    let x = images(&mut rng, b, [1, 6, 6], device);
    let y = labels(&mut rng, b);
    check(&residual, b, &y, |m, r| m.forward(x.clone().narrow(0, r.start, r.len())));

    let tokens = Tokens::new(device);
    // Six tokens of a vocabulary of seven: repeats within an example exercise the masked Gram.
    let ids: Vec<i64> = (0..b * 6).map(|_| rng.random_range(0..7)).collect();
    let x = Tensor::<2, Int>::from_data(TensorData::new(ids, [b, 6]), device);
    let y = labels(&mut rng, b);
    check(&tokens, b, &y, |m, r| m.forward(x.clone().narrow(0, r.start, r.len())));
}

#[test]
fn ndarray_dp_layers_match_the_naive_loop() {
    check_all(&backend::ndarray().device);
}

/// flex is what `--device cpu` runs.
#[test]
fn flex_dp_layers_match_the_naive_loop() {
    check_all(&backend::cpu().device);
}

#[test]
fn wgpu_dp_layers_match_the_naive_loop() {
    if let Some(device) = dp_kernels::wgpu_probe::wgpu_for_tests() {
        check_all(&device);
    }
}

/// A burn-nn layer with parameters inside a model.
#[derive(Module, Debug)]
struct WithPlainLinear {
    body: DpLinear,
    fc: burn::nn::Linear,
}

/// BatchNorm inside a model.
#[derive(Module, Debug)]
struct WithBatchNorm {
    conv: DpConv2d,
    bn: burn::nn::BatchNorm,
}

#[test]
fn a_layer_without_per_example_gradients_is_refused_by_name() {
    let device = backend::cpu().device;
    let model = WithPlainLinear {
        body: DpLinearConfig::new(3, 3).init(&device),
        fc: burn::nn::LinearConfig::new(3, 2).init(&device),
    };
    let err = ParamTable::of(&model).expect_err("burn-nn's Linear has no per-example gradient").to_string();
    assert!(err.contains("`fc.weight`") && err.contains("Linear") && err.contains("DpLinear"), "{err}");
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    let model = WithBatchNorm {
        conv: DpConv2dConfig::new([1, 2], [3, 3]).init(&device),
        bn: burn::nn::BatchNormConfig::new(2).init(&device),
    };
    let err = ParamTable::of(&model).expect_err("BatchNorm mixes examples").to_string();
    assert!(err.contains("`bn.") && err.contains("BatchNorm") && err.contains("DpGroupNorm"), "{err}");
    // The same layers converted from burn-nn are accepted.
    let converted = DpLinear::from(burn::nn::LinearConfig::new(3, 2).init(&device));
    assert_eq!(ParamTable::of(&converted).expect("a DP layer").num_params(), 8);
}

#[test]
fn weight_sharing_is_refused() {
    let device = backend::cpu().device;
    let layer = DpLinearConfig::new(4, 4).init(&device);
    let x = Tensor::<2>::ones([2, 4], &device);
    let err = BatchGrads::compute(|| (layer.forward(layer.forward(x.clone())).sum_dim(1).reshape([2]), ()))
        .err()
        .expect("one layer used twice")
        .to_string();
    assert!(err.contains("used twice") && err.contains("DpLinear"), "{err}");
    // The tape is released: the next recording works.
    let (mut ok, ()) = BatchGrads::compute(|| (layer.forward(x.clone()).sum_dim(1).reshape([2]), ())).expect("fine");
    assert_eq!(ok.sq_norms().len(), 1);
    // Outside a recording a DP layer is a plain Burn layer.
    assert_eq!(layer.forward(x).dims(), [2, 4]);
}
