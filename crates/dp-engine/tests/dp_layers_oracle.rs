//! The DP layers as Burn modules against the oracle: a naive loop that gives every example its
//! own forward and backward pass with Burn's autodiff on the parameters (`Module::train`). Four
//! user-style models defined here: one with every DP layer kind and norm method (convolutions
//! with stride, padding, dilation, with and without bias, materialised and ghost norms; GroupNorm;
//! dense layers with and without bias; LayerNorm), a residual network with GroupNorm and
//! weight-standardised convolutions (the gradient through the standardisation's Jacobian),
//! convolutions wide enough for the CPU's Winograd transform, and an embedding model over
//! sequences; and a layer defined here, outside dp-engine, through the public tape
//! (`tape::observe` and `PerExampleGrads`), as a user adds one. Per-example squared norms per
//! layer, and clipped sums (flat and per layer), must equal the loop's to 1e-4 relative, on
//! ndarray, flex and wgpu (lavapipe in CI).

use burn::module::{Module, Param, ParamId};
use burn::optim::SgdConfig;
use burn::tensor::activation::{log_softmax, relu, tanh};
use burn::tensor::{Device, Int, Tensor, TensorData};
use dp_engine::backend;
use dp_engine::grad_sample::batch::{BatchGrads, ClipSpec, gradients_params};
use dp_engine::grad_sample::norm_method::NormMethod;
use dp_engine::grad_sample::params::ParamTable;
use dp_engine::grad_sample::tape::{Finish, observe};
use dp_engine::grad_sample::{ParamGrad, PerExampleGrads, sum_per_example, weighted_sum_examples};
use dp_engine::nn::{
    Conv2d, Conv2dConfig, Embedding, EmbeddingConfig, GroupNorm, GroupNormConfig, LayerNorm, LayerNormConfig, Linear,
    LinearConfig, PaddingConfig2d,
};
use dp_engine::privacy::Clipping;
use oracle::{assert_close, host, naive_gradients, param_grad, param_value, sq};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;
use std::ops::Range;

use crate::oracle;

const CLASSES: usize = 3;

/// Every DP layer kind: conv1 materialises its norms (P = 25), conv2 (rectangular kernel,
/// dilation, asymmetric stride and padding, no bias) uses the ghost norm (P = 4).
#[derive(Module, Debug)]
struct EveryLayer {
    conv1: Conv2d,
    conv2: Conv2d,
    norm: GroupNorm,
    fc1: Linear,
    ln: LayerNorm,
    fc2: Linear,
}

impl EveryLayer {
    fn new(device: &Device) -> Self {
        Self {
            conv1: Conv2dConfig::new([2, 4], [3, 3])
                .with_stride([2, 2])
                .with_padding(PaddingConfig2d::Explicit(1, 1, 1, 1))
                .init(device),
            conv2: Conv2dConfig::new([4, 12], [2, 3])
                .with_stride([3, 2])
                .with_padding(PaddingConfig2d::Explicit(1, 0, 1, 0))
                .with_dilation([2, 1])
                .with_bias(false)
                .init(device),
            norm: GroupNormConfig::new(3, 12).init(device),
            fc1: LinearConfig::new(48, 8).with_bias(false).init(device),
            ln: LayerNormConfig::new(8).init(device),
            fc2: LinearConfig::new(8, CLASSES).init(device),
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
    stem: Conv2d,
    conv1: Conv2d,
    gn1: GroupNorm,
    conv2: Conv2d,
    gn2: GroupNorm,
    down: Conv2d,
    head: Linear,
}

impl Residual {
    fn new(device: &Device) -> Self {
        let conv = |c_in| Conv2dConfig::new([c_in, 4], [3, 3]).with_padding(PaddingConfig2d::Explicit(1, 1, 1, 1));
        Self {
            stem: conv(1).init(device),
            conv1: conv(4).with_bias(false).with_standardize(true).init(device),
            gn1: GroupNormConfig::new(2, 4).init(device),
            conv2: conv(4).with_bias(false).with_standardize(true).init(device),
            gn2: GroupNormConfig::new(2, 4).init(device),
            down: conv(4).with_stride([3, 3]).with_standardize(true).init(device),
            head: LinearConfig::new(4, CLASSES).init(device),
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

/// Convolutions wide enough (16 channels and more, 3x3 at stride 1) for the CPU's Winograd
/// transform (`host::winograd`): the forward passes and input gradients that every per-example
/// gradient reads (a weight-standardised layer's and a plain one's materialised, two ghost
/// layers', one standardised), and the ghost layers' clipped sums, by the transform; the ghost
/// norms' patch Grams from the layers' pixels on flex (`host::patch_gram`); on larger images, each
/// example's materialised gradient by the transform over its own tiles (`host::winograd`).
#[derive(Module, Debug)]
struct Wide {
    stem: Conv2d,
    conv1: Conv2d,
    conv2: Conv2d,
    conv3: Conv2d,
    conv4: Conv2d,
    head: Linear,
}

impl Wide {
    fn new(device: &Device) -> Self {
        let conv = |c_in, c_out, padding| {
            Conv2dConfig::new([c_in, c_out], [3, 3])
                .with_padding(PaddingConfig2d::Explicit(padding, padding, padding, padding))
        };
        Self {
            stem: conv(1, 16, 1).init(device),
            conv1: conv(16, 16, 1).with_bias(false).with_standardize(true).init(device),
            conv2: conv(16, 17, 0).init(device),
            conv3: conv(17, 16, 0).with_bias(false).init(device),
            conv4: conv(16, 16, 1).with_standardize(true).init(device),
            head: LinearConfig::new(16, CLASSES).init(device),
        }
    }

    fn forward(&self, x: Tensor<4>) -> Tensor<2> {
        let h = tanh(self.stem.forward(x));
        let h = tanh(self.conv1.forward(h));
        let h = tanh(self.conv3.forward(tanh(self.conv2.forward(h))));
        let h = tanh(self.conv4.forward(h));
        let [b, c, _, _] = h.dims();
        self.head.forward(h.mean_dim(3).mean_dim(2).reshape([b, c]))
    }
}

/// Tokens [B, T] through an embedding, a dense layer on the sequence (ghost norm: T^2 < 40),
/// LayerNorm, mean pooling and a head.
#[derive(Module, Debug)]
struct Tokens {
    embed: Embedding,
    mix: Linear,
    ln: LayerNorm,
    head: Linear,
}

impl Tokens {
    fn new(device: &Device) -> Self {
        Self {
            embed: EmbeddingConfig::new(7, 4).init(device),
            mix: LinearConfig::new(4, 10).init(device),
            ln: LayerNormConfig::new(10).init(device),
            head: LinearConfig::new(10, CLASSES).init(device),
        }
    }

    fn forward(&self, tokens: Tensor<2, Int>) -> Tensor<2> {
        let h = self.ln.forward(tanh(self.mix.forward(self.embed.forward(tokens))));
        let [b, _, d] = h.dims();
        self.head.forward(h.mean_dim(1).reshape([b, d]))
    }
}

/// A DP layer of a user's own, defined outside dp-engine: a learnable per-feature scale
/// y = x * s over x [B, d] (a parameter no built-in layer has). Example b's gradient of s is
/// x_b * dL/dy_b.
#[derive(Module, Debug)]
struct Scale {
    s: Param<Tensor<1>>,
}

/// The scale's per-example gradients in one batch, [B, d].
struct ScaleGrads {
    per_example: Tensor<2>,
    id: ParamId,
}

impl PerExampleGrads for ScaleGrads {
    fn sq_norms(&mut self) -> Tensor<1> {
        sum_per_example(self.per_example.clone().square())
    }

    fn weighted_sum(&self, factors: Option<&Tensor<1>>) -> Vec<ParamGrad> {
        vec![ParamGrad { id: self.id, value: weighted_sum_examples(self.per_example.clone(), factors) }]
    }
}

impl Scale {
    fn new(rng: &mut ChaCha20Rng, d: usize, device: &Device) -> Self {
        let s: Vec<f32> = (0..d).map(|_| rng.random_range(0.5..1.5)).collect();
        Self { s: Param::from_tensor(Tensor::from_data(TensorData::new(s, [d]), device)) }
    }

    fn forward(&self, x: Tensor<2>) -> Tensor<2> {
        scaled(x, &self.s)
    }
}

/// x [B, d] scaled per feature by `s`, recorded on the tape as a layer of its own.
fn scaled(x: Tensor<2>, s: &Param<Tensor<1>>) -> Tensor<2> {
    let y = x.clone() * s.val().unsqueeze();
    let id = s.id;
    observe("Scale", &[id], y, || -> Finish {
        let x = x.inner();
        Box::new(move |g: Tensor<2>| Box::new(ScaleGrads { per_example: x * g, id }))
    })
}

/// A user's layer between two DP dense layers.
#[derive(Module, Debug)]
struct WithOwnLayer {
    fc1: Linear,
    scale: Scale,
    fc2: Linear,
}

impl WithOwnLayer {
    fn new(rng: &mut ChaCha20Rng, device: &Device) -> Self {
        Self {
            fc1: LinearConfig::new(6, 5).init(device),
            scale: Scale::new(rng, 5, device),
            fc2: LinearConfig::new(5, CLASSES).init(device),
        }
    }

    fn forward(&self, x: Tensor<2>) -> Tensor<2> {
        self.fc2.forward(tanh(self.scale.forward(self.fc1.forward(x))))
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

    // conv1: P = 5 x 5 outputs, N = 4, K = 2 x 3 x 3; conv2: P = 2 x 2, N = 12, K = 4 x 2 x 3;
    // the same methods by memory (other backends) and by arithmetic (flex, in cache or not).
    assert_eq!(NormMethod::cheapest(25, 4, 18), NormMethod::Materialize);
    assert_eq!(NormMethod::cheapest(4, 12, 24), NormMethod::Ghost);
    // Strided: their patches' Grams unfolded, P^2 K.
    assert_eq!(NormMethod::cheapest_on_host(b, 25, 4, 18, 25 * 25 * 18, false), NormMethod::Materialize);
    assert_eq!(NormMethod::cheapest_on_host(b, 4, 12, 24, 4 * 4 * 24, false), NormMethod::Ghost);
    let every = EveryLayer::new(device);
    let x = images(&mut rng, b, [2, 9, 9], device);
    let y = labels(&mut rng, b);
    check(&every, b, &y, |m, r| m.forward(x.clone().narrow(0, r.start, r.len())));

    // The residual block's convolutions: P = 6 x 6, N = 4, K = 4 x 3 x 3; the strided one: P = 2 x 2.
    assert_eq!(NormMethod::cheapest(36, 4, 36), NormMethod::Materialize);
    assert_eq!(NormMethod::cheapest(4, 4, 36), NormMethod::Ghost);
    // At stride 1 the patches' Gram from the pixels (H W)^2 C + 9 P^2 (`host::patch_gram`).
    assert_eq!(NormMethod::cheapest_on_host(b, 36, 4, 36, 36 * 36 * 4 + 9 * 36 * 36, true), NormMethod::Materialize);
    assert_eq!(NormMethod::cheapest_on_host(b, 4, 4, 36, 4 * 4 * 36, true), NormMethod::Ghost);
    let residual = Residual::new(device);
    let x = images(&mut rng, b, [1, 6, 6], device);
    let y = labels(&mut rng, b);
    check(&residual, b, &y, |m, r| m.forward(x.clone().narrow(0, r.start, r.len())));

    // The wide convolutions on 7 x 7: P = 49, N = 16, K = 16 x 3 x 3 (standardised) and P = 25,
    // N = 17 materialised; P = 9, N = 16, K = 17 x 3 x 3 on 5 x 5 and the standardised
    // K = 16 x 3 x 3 on 3 x 3 by the ghost norm, their patches' Grams from their pixels.
    let from_pixels = |c: usize, hw: usize, p: usize| hw * hw * c + 9 * p * p;
    assert_eq!(NormMethod::cheapest_on_host(b, 49, 16, 144, from_pixels(16, 49, 49), true), NormMethod::Materialize);
    assert_eq!(NormMethod::cheapest_on_host(b, 25, 17, 144, from_pixels(16, 49, 25), false), NormMethod::Materialize);
    assert_eq!(NormMethod::cheapest_on_host(b, 9, 16, 153, from_pixels(17, 25, 9), false), NormMethod::Ghost);
    assert_eq!(NormMethod::cheapest_on_host(b, 9, 16, 144, from_pixels(16, 9, 9), true), NormMethod::Ghost);
    let wide = Wide::new(device);
    let x = images(&mut rng, b, [1, 7, 7], device);
    let y = labels(&mut rng, b);
    check(&wide, b, &y, |m, r| m.forward(x.clone().narrow(0, r.start, r.len())));

    let tokens = Tokens::new(device);
    // Six tokens of a vocabulary of seven: repeats within an example exercise the masked Gram.
    let ids: Vec<i64> = (0..b * 6).map(|_| rng.random_range(0..7)).collect();
    let x = Tensor::<2, Int>::from_data(TensorData::new(ids, [b, 6]), device);
    let y = labels(&mut rng, b);
    check(&tokens, b, &y, |m, r| m.forward(x.clone().narrow(0, r.start, r.len())));

    let own = WithOwnLayer::new(&mut rng, device);
    let x: Vec<f32> = (0..b * 6).map(|_| rng.random_range(-1.5..1.5)).collect();
    let x = Tensor::<2>::from_data(TensorData::new(x, [b, 6]), device);
    let y = labels(&mut rng, b);
    check(&own, b, &y, |m, r| m.forward(x.clone().narrow(0, r.start, r.len())));
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

/// The wide convolutions on 17 x 17 on flex: conv1 (standardised, P = 17 x 17) and conv2
/// (P = 15 x 15) materialise their norms with 90 and 72 tiles per example, each example's
/// gradient by Winograd's transform (`host::winograd::per_example`, flex's alone: the other
/// backends' per-example products are the ones `check_all` tests); conv3 and conv4 (P = 13 x 13,
/// 56 tiles) by the unfolded patches.
#[test]
fn flex_per_example_winograd_matches_the_naive_loop() {
    let (mut rng, b) = (ChaCha20Rng::seed_from_u64(4), 5);
    let from_pixels = |c: usize, hw: usize, p: usize| hw * hw * c + 9 * p * p;
    assert_eq!(NormMethod::cheapest_on_host(b, 289, 16, 144, from_pixels(16, 289, 289), true), NormMethod::Materialize);
    assert_eq!(
        NormMethod::cheapest_on_host(b, 225, 17, 144, from_pixels(16, 289, 225), false),
        NormMethod::Materialize
    );
    let device = backend::cpu().device;
    let wide = Wide::new(&device);
    let x = images(&mut rng, b, [1, 17, 17], &device);
    let y = labels(&mut rng, b);
    check(&wide, b, &y, |m, r| m.forward(x.clone().narrow(0, r.start, r.len())));
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
    body: Linear,
    fc: burn::nn::Linear,
}

/// BatchNorm inside a model.
#[derive(Module, Debug)]
struct WithBatchNorm {
    conv: Conv2d,
    bn: burn::nn::BatchNorm,
}

/// A DP layer the forward pass skips.
#[derive(Module, Debug)]
struct WithUnusedLayer {
    body: Linear,
    unused: Linear,
}

/// The refusal of the parameters a recorded forward pass of `model` leaves without per-example
/// gradients (what the dry run of `make_private` and the trainer checks), as one line.
fn unrecorded<M: Module>(model: &M, forward: impl Fn(&M) -> Tensor<2>) -> String {
    let table = ParamTable::of(model).expect("parameters");
    let (batch, ()) = BatchGrads::compute(|| (forward(model).sum_dim(1).reshape([2]), ())).expect("recorded");
    let err = table.check_recorded(batch.layer_params().flatten()).expect_err("a parameter without").to_string();
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    err
}

#[test]
fn a_layer_without_per_example_gradients_is_refused_by_name() {
    let device = backend::cpu().device;
    let model = WithPlainLinear {
        body: LinearConfig::new(3, 3).init(&device),
        fc: burn::nn::LinearConfig::new(3, 2).init(&device),
    };
    let x = Tensor::<2>::ones([2, 3], &device);
    let err = unrecorded(&model, |m| m.fc.forward(m.body.forward(x.clone())));
    assert!(err.contains("`fc.weight`") && err.contains("a Linear") && err.contains("Linear"), "{err}");
    assert!(err.contains("`.into()`") && !err.contains("BatchNorm"), "the Linear's own hint: {err}");
    let model = WithBatchNorm {
        conv: Conv2dConfig::new([1, 2], [3, 3]).init(&device),
        bn: burn::nn::BatchNormConfig::new(2).init(&device),
    };
    let images = Tensor::<4>::ones([2, 1, 5, 5], &device);
    let err = unrecorded(&model, |m| m.bn.forward(m.conv.forward(images.clone())).flatten(1, 3));
    assert!(err.contains("`bn.") && err.contains("BatchNorm") && err.contains("GroupNorm"), "{err}");
    let model =
        WithUnusedLayer { body: LinearConfig::new(3, 3).init(&device), unused: LinearConfig::new(3, 3).init(&device) };
    let err = unrecorded(&model, |m| m.body.forward(x.clone()));
    assert!(err.contains("`unused.weight`") && err.contains("a Linear"), "{err}");
    // The same layers converted from burn-nn are accepted.
    let converted = Linear::from(burn::nn::LinearConfig::new(3, 2).init(&device));
    let (batch, ()) = BatchGrads::compute(|| (converted.forward(x.clone()).sum_dim(1).reshape([2]), ())).expect("ok");
    let table = ParamTable::of(&converted).expect("parameters");
    assert_eq!(table.num_params(), 8);
    table.check_recorded(batch.layer_params().flatten()).expect("every parameter recorded");
}

/// burn-nn's convolution, GroupNorm and LayerNorm converted keep their parameters and compute
/// the same function; what has no DP counterpart is refused in one line.
#[test]
fn burn_nn_layers_convert_with_the_same_parameters() {
    use burn::nn::conv::Conv2dConfig;
    use burn::nn::{GroupNormConfig, LayerNormConfig, PaddingConfig2d};
    let device = backend::cpu().device;
    let mut rng = ChaCha20Rng::seed_from_u64(9);
    let same = |a: Tensor<4>, b: Tensor<4>| {
        let (a, b) = (host(a), host(b));
        a.iter().zip(&b).all(|(x, y)| (x - y).abs() <= 1e-5 * (1.0 + y.abs()))
    };
    let x = images(&mut rng, 2, [4, 7, 7], &device);
    let conv = Conv2dConfig::new([4, 6], [3, 2])
        .with_stride([2, 1])
        .with_dilation([1, 2])
        .with_padding(PaddingConfig2d::Explicit(1, 2, 1, 2))
        .init(&device);
    let dp = Conv2d::try_from(conv.clone()).expect("a plain convolution");
    assert_eq!(dp.weight.id, conv.weight.id);
    assert!(same(dp.forward(x.clone()), conv.forward(x.clone())), "convolution");
    // `Same` at stride 1 with an odd kernel pads symmetrically: burn-nn's output, shape and values.
    let conv = Conv2dConfig::new([4, 3], [3, 5]).with_padding(PaddingConfig2d::Same).init(&device);
    let dp = Conv2d::try_from(conv.clone()).expect("`Same` padding of an odd kernel");
    assert_eq!(dp.forward(x.clone()).dims(), [2, 3, 7, 7]);
    assert!(same(dp.forward(x.clone()), conv.forward(x.clone())), "`Same` convolution");
    let gn = GroupNormConfig::new(2, 4).with_epsilon(1e-3).init(&device);
    let dp = GroupNorm::try_from(gn.clone()).expect("an affine GroupNorm");
    assert!(same(dp.forward(x.clone()), gn.forward(x.clone())), "GroupNorm");
    for bias in [true, false] {
        let ln = LayerNormConfig::new(7).with_epsilon(1e-3).with_bias(bias).init(&device);
        let dp = LayerNorm::try_from(ln.clone()).expect("a LayerNorm");
        assert_eq!((dp.epsilon, dp.beta.is_some()), (1e-3, bias));
        assert!(same(dp.forward(x.clone()), ln.forward(x.clone())), "LayerNorm, bias {bias}");
    }
    let refused = [
        Conv2d::try_from(Conv2dConfig::new([4, 4], [3, 3]).with_groups(2).init(&device)).err(),
        Conv2d::try_from(Conv2dConfig::new([4, 4], [2, 2]).with_padding(PaddingConfig2d::Same).init(&device)).err(),
        Conv2d::try_from(
            Conv2dConfig::new([4, 4], [3, 3]).with_padding(PaddingConfig2d::Explicit(1, 1, 0, 1)).init(&device),
        )
        .err(),
        GroupNorm::try_from(GroupNormConfig::new(2, 4).with_affine(false).init(&device)).err(),
    ];
    for (err, what) in refused.into_iter().zip(["groups", "`Same`", "asymmetric", "affine"]) {
        let err = err.expect("refused").to_string();
        assert!(err.contains(what) && err.lines().count() == 1, "{err}");
        if what == "groups" {
            assert!(err.contains("tape::observe"), "a grouped convolution's way out: {err}");
        }
    }
}

/// One module whose two parameters its forward pass records as two layers.
#[derive(Module, Debug)]
struct RecordsTwice {
    a: Param<Tensor<1>>,
    b: Param<Tensor<1>>,
}

/// Per-layer clipping splits C over the layers a forward pass records when they outnumber the
/// model's modules with parameters, so an example's whole clipped gradient stays within C.
#[test]
fn per_layer_clipping_holds_when_a_layer_records_twice() {
    let device = backend::cpu().device;
    let param = |v: f32| Param::from_tensor(Tensor::<1>::from_data(TensorData::new(vec![v; 3], [3]), &device));
    let model = RecordsTwice { a: param(2.0), b: param(3.0) };
    let table = ParamTable::of(&model).expect("parameters");
    assert_eq!(table.layers().len(), 1, "both parameters sit in one module");
    let x = Tensor::<2>::from_data(TensorData::new(vec![5.0f32, -4.0, 6.0], [1, 3]), &device);
    let forward = || (scaled(scaled(x.clone(), &model.a), &model.b).sum_dim(1).reshape([1]), ());
    let (mut batch, ()) = BatchGrads::compute(forward).expect("recorded");
    let spec = ClipSpec { clip_norm: 1.0, clipping: Clipping::PerLayer, layers: table.layers().len() };
    let total: f64 = batch.clipped_sum(Some(spec)).into_iter().map(|g| sq(&host(g.value))).sum();
    assert!(total.sqrt() <= 1.0 + 1e-5, "one example's clipped gradient has norm {} > C = 1", total.sqrt());
}

/// A user's layer that does not group views (no `group_views`) refuses augmentation
/// multiplicity in one line, where the built-in layers group; rows that are not a whole number
/// of views are refused too.
#[test]
fn views_through_a_layer_that_cannot_group_them_are_refused() {
    let device = backend::cpu().device;
    let mut rng = ChaCha20Rng::seed_from_u64(2);
    let model = WithOwnLayer::new(&mut rng, &device);
    let x =
        Tensor::<2>::from_data(TensorData::new((0..24).map(|i| i as f32 / 10.0).collect::<Vec<_>>(), [4, 6]), &device);
    let forward = |m: &WithOwnLayer| Ok((m.forward(x.clone()).sum_dim(1).reshape([4]), ()));
    let err = BatchGrads::try_compute(2, &[], || forward(&model)).err().expect("the user's layer cannot group");
    assert!(err.to_string().contains("group_views"), "{err}");
    let plain = |m: &WithOwnLayer| Ok((m.fc2.forward(m.fc1.forward(x.clone())).sum_dim(1).reshape([4]), ()));
    let (mut grouped, ()) = BatchGrads::try_compute(2, &[], || plain(&model)).expect("built-in layers group views");
    assert!(grouped.sq_norms().iter().all(|n| n.dims() == [2]), "two examples of two views each");
    let err = BatchGrads::try_compute(3, &[], || plain(&model)).err().expect("4 rows are not views of 3");
    assert!(err.to_string().contains("views"), "{err}");
}

#[test]
fn weight_sharing_is_refused() {
    let device = backend::cpu().device;
    let layer = LinearConfig::new(4, 4).init(&device);
    let x = Tensor::<2>::ones([2, 4], &device);
    let err = BatchGrads::compute(|| (layer.forward(layer.forward(x.clone())).sum_dim(1).reshape([2]), ()))
        .err()
        .expect("one layer used twice");
    assert!(err.to_string().contains("used twice") && err.to_string().contains("Linear"), "{err}");
    // With the model's table (as the dry run and the step have it) the error names the path.
    let named = ParamTable::of(&layer).expect("parameters").name_shared(err).to_string();
    assert!(named.contains("parameter `weight` is used twice"), "{named}");
    // The tape is released: the next recording works.
    let (mut ok, ()) = BatchGrads::compute(|| (layer.forward(x.clone()).sum_dim(1).reshape([2]), ())).expect("fine");
    assert_eq!(ok.sq_norms().len(), 1);
    // Outside a recording a DP layer is a plain Burn layer.
    assert_eq!(layer.forward(x).dims(), [2, 4]);
}
