//! Frozen parameters (`PrivacyConfig::with_frozen`), as DP fine-tuning uses them: a two-layer
//! model whose first layer is kept fixed.
//! - One step equals the naive per-example loop's clipped sum of the *trained* layer's gradients,
//!   each example clipped by that layer's norm alone (not by the whole model's, which the test
//!   shows would differ), and the frozen layer is bit for bit unchanged, in the private step and
//!   in the unperturbed baseline.
//! - A frozen layer may be any module (a burn-nn Linear, which has no per-example gradients, is
//!   refused only when trained), and a checkpointed run with frozen layers resumes to the
//!   uninterrupted run, bit for bit.
//! - Patterns that match nothing, are not regular expressions, split a layer or freeze
//!   everything are one-line errors naming the parameters.

use crate::oracle;

use burn::module::Module;
use burn::optim::SgdConfig;
use burn::tensor::{Device, Tensor, TensorData};
use dp_engine::backend;
use dp_engine::checkpoint::StreamKeys;
use dp_engine::engine::PrivacyEngine;
use dp_engine::grad_sample::params::ParamTable;
use dp_engine::lots::{ExampleLosses, LotSource};
use dp_engine::nn::{Linear, LinearConfig};
use dp_engine::privacy::PrivacyConfig;
use dp_engine::privacy::mechanism::gaussian::Gaussian;
use dp_engine::privacy::mechanism::unperturbed::Unperturbed;
use oracle::{host, naive_gradients, param_value, sq};

const IN: usize = 3;
const HIDDEN: usize = 4;
const N: usize = 6;

/// A feature layer and a head; `F` is the feature layer's type.
#[derive(Module, Debug)]
struct Net<F> {
    features: F,
    head: Linear,
}

/// What the loss needs from a model.
trait Predict: Module {
    fn predict(&self, x: Tensor<2>) -> Tensor<2>;
}

impl Predict for Net<Linear> {
    fn predict(&self, x: Tensor<2>) -> Tensor<2> {
        self.head.forward(self.features.forward(x).tanh())
    }
}

impl Predict for Net<burn::nn::Linear> {
    fn predict(&self, x: Tensor<2>) -> Tensor<2> {
        self.head.forward(self.features.forward(x).tanh())
    }
}

/// Squared error on fixed rows.
struct Rows;

fn x_of(i: usize) -> [f32; IN] {
    [i as f32 / N as f32, (i % 3) as f32 - 1.0, 0.5]
}

fn y_of(i: usize) -> f32 {
    (i as f32 * 0.7).sin()
}

impl<M: Predict> LotSource<M> for Rows {
    fn len(&self) -> usize {
        N
    }

    fn losses(&self, model: &M, indices: &[usize], device: &Device) -> dp_engine::Result<ExampleLosses> {
        let rows: Vec<f32> = indices.iter().flat_map(|&i| x_of(i)).collect();
        let x = Tensor::<2>::from_data(TensorData::new(rows, [indices.len(), IN]), device);
        let y: Vec<f32> = indices.iter().map(|&i| y_of(i)).collect();
        let y = Tensor::<2>::from_data(TensorData::new(y, [indices.len(), 1]), device);
        Ok(ExampleLosses { losses: (model.predict(x) - y).powi_scalar(2).flatten::<1>(0, 1), correct: None })
    }
}

fn net(device: &Device) -> Net<Linear> {
    Net { features: LinearConfig::new(IN, HIDDEN).init(device), head: LinearConfig::new(HIDDEN, 1).init(device) }
}

/// q = 1 (every example in every lot), noise std 1e-12 C: negligible; C small enough that every
/// example is clipped.
fn privacy(clip: f64) -> PrivacyConfig {
    PrivacyConfig::new(Gaussian)
        .with_noise_multiplier(1e-12)
        .with_clip_norm(clip)
        .with_lot_size(N)
        .with_epochs(2.0)
        .with_seed(3)
        .with_frozen(["^features\\."])
}

/// The values of every parameter of `model`, in the order of `table` (trained, then frozen).
fn values<M: Module>(model: &M, table: &ParamTable) -> Vec<Vec<f64>> {
    table.params().iter().chain(table.frozen()).map(|p| param_value(model, p)).collect()
}

#[test]
fn a_frozen_layer_is_neither_clipped_with_nor_moved_and_the_head_follows_the_naive_loop() {
    let device = backend::cpu().device;
    let model = net(&device);
    let clip = 0.01;
    let config = privacy(clip);
    let table = config.table(&model).expect("the head is trained");
    let paths =
        |ps: &[dp_engine::grad_sample::params::ParamInfo]| ps.iter().map(|p| p.path.clone()).collect::<Vec<_>>();
    assert_eq!(paths(table.params()), ["head.weight", "head.bias"]);
    assert_eq!(paths(table.frozen()), ["features.weight", "features.bias"]);
    assert_eq!(table.layers().len(), 1, "per-layer clipping would split C over the trained layer only");

    // The oracle: every parameter's per-example gradient by the naive loop, clipped by the head's
    // norm alone, summed, over qN = N.
    let all = ParamTable::of(&model).expect("parameters");
    let naive = naive_gradients(&model, &all, N, |m, e| Rows.losses(m, &[e], &device).expect("rows").losses);
    let head_at = |name: &str| all.params().iter().position(|p| p.path == name).expect("head");
    let (w, b) = (head_at("head.weight"), head_at("head.bias"));
    let clipped_mean = |norm_of: &dyn Fn(&Vec<Vec<f64>>) -> f64| -> Vec<f64> {
        let mut sum = vec![0.0; HIDDEN + 1];
        for g in &naive {
            let factor = (clip / norm_of(g)).min(1.0);
            let head = g[w].iter().chain(&g[b]);
            sum.iter_mut().zip(head).for_each(|(s, v)| *s += factor * v / N as f64);
        }
        sum
    };
    let by_head = clipped_mean(&|g| (sq(&g[w]) + sq(&g[b])).sqrt());
    let by_model = clipped_mean(&|g| g.iter().map(|p| sq(p)).sum::<f64>().sqrt());
    let apart = by_head.iter().zip(&by_model).map(|(a, b)| (a - b).abs()).fold(0.0, f64::max);
    assert!(apart > 1e-3 * clip, "the two clippings must differ for this test to tell them apart ({apart})");

    let before = values(&model, &table);
    let lr = 0.5;
    let mut dp = PrivacyEngine::new(config).make_private(&model, SgdConfig::new().init(), &Rows, &device).expect("run");
    let (model, _) = dp.step(model, &Rows, lr).expect("a step");
    let after = values(&model, &table);
    let moved: Vec<f64> =
        after[0].iter().chain(&after[1]).zip(before[0].iter().chain(&before[1])).map(|(a, b)| (b - a) / lr).collect();
    for (got, want) in moved.iter().zip(&by_head) {
        assert!(
            (got - want).abs() <= 1e-4 * clip,
            "head update {got}, naive loop {want} (whole-model clipping {by_model:?})"
        );
    }
    assert_eq!(&after[2..], &before[2..], "the frozen layer is unchanged, bit for bit");
    assert_eq!(dp.table().frozen().len(), 2);

    // The unperturbed baseline trains the head only, too.
    let plain =
        PrivacyConfig::new(Unperturbed).with_lot_size(N).with_epochs(1.0).with_seed(3).with_frozen(["features"]);
    let mut dp = PrivacyEngine::new(plain).make_private(&model, SgdConfig::new().init(), &Rows, &device).expect("run");
    let trained = model.train();
    let (stepped, _) = dp.step(trained, &Rows, lr).expect("a plain step");
    let stepped = values(&stepped.valid(), &table);
    assert_eq!(&stepped[2..], &after[2..], "the baseline leaves the frozen layer too");
    assert_ne!(&stepped[..2], &after[..2], "and moves the head");
}

#[test]
fn a_frozen_layer_need_not_be_a_dp_layer_and_a_frozen_run_resumes_bit_for_bit() {
    let device = backend::cpu().device;
    let plain_features = || Net {
        features: burn::nn::LinearConfig::new(IN, HIDDEN).init(&device),
        head: LinearConfig::new(HIDDEN, 1).init(&device),
    };
    let err = PrivacyEngine::new(privacy(1.0).with_frozen(Vec::<String>::new()))
        .make_private(&plain_features(), SgdConfig::new().init(), &Rows, &device)
        .err()
        .expect("a trained burn-nn Linear has no per-example gradient")
        .to_string();
    assert!(err.contains("features.weight") && err.contains("Linear"), "{err}");
    let model = plain_features();
    let before = (host(model.features.weight.val()), host(model.head.weight.val()));
    let mut dp =
        PrivacyEngine::new(privacy(1.0)).make_private(&model, SgdConfig::new().init(), &Rows, &device).expect("frozen");
    let (model, _) = dp.step(model, &Rows, 0.1).expect("a step");
    assert_eq!(host(model.features.weight.val()), before.0, "the frozen burn-nn layer is unchanged");
    assert_ne!(host(model.head.weight.val()), before.1, "the head moved");

    // Checkpointed after one step, resumed into a fresh model: the same end as going on.
    let model = net(&device);
    let mut dp =
        PrivacyEngine::new(privacy(0.01)).make_private(&model, SgdConfig::new().init(), &Rows, &device).expect("run");
    let (model, _) = dp.step(model, &Rows, 0.5).expect("step 1");
    let checkpoint = dp.checkpoint(&model).expect("checkpoint");
    // Resumed with nothing frozen: the noise it drew covered fewer parameters, and the message
    // says so (it used to blame the noise stream alone).
    let err = PrivacyEngine::new(privacy(0.01).with_frozen(Vec::<String>::new()))
        .with_keys(StreamKeys::for_run(Some(3)))
        .resume((net(&device), SgdConfig::new().init()), &Rows, &device, checkpoint.clone())
        .err()
        .expect("another frozen set")
        .to_string();
    assert!(err.contains("the trained (or frozen) parameters differ"), "{err}");
    let (whole, _) = dp.step(model, &Rows, 0.5).expect("step 2");
    let (fresh, mut resumed) = PrivacyEngine::new(privacy(0.01))
        .with_keys(StreamKeys::for_run(Some(3)))
        .resume((net(&device), SgdConfig::new().init()), &Rows, &device, checkpoint)
        .expect("resumed");
    let (again, _) = resumed.step(fresh, &Rows, 0.5).expect("step 2 again");
    let table = resumed.table().clone();
    assert_eq!(values(&again, &table), values(&whole, &table), "resumed = uninterrupted, bit for bit");
}

#[test]
fn freeze_patterns_that_match_nothing_split_a_layer_or_freeze_everything_are_refused_in_one_line() {
    let device = backend::cpu().device;
    let refused = |patterns: &[&str]| {
        let err = privacy(1.0).with_frozen(patterns.iter().copied()).table(&net(&device)).expect_err("refused");
        let text = err.to_string();
        assert_eq!(text.lines().count(), 1, "{text}");
        text
    };
    let err = refused(&["^backbone\\."]);
    assert!(
        err.contains("`^backbone\\.` matches no parameter")
            && err.contains("features.weight, features.bias, head.weight"),
        "{err}"
    );
    let err = refused(&["features.(weight"]);
    assert!(err.contains("not a regular expression"), "{err}");
    let err = refused(&["features.weight"]);
    assert!(err.contains("`features.weight` is frozen but `features.bias`"), "{err}");
    let err = refused(&["features", "head"]);
    assert!(err.contains("every parameter is frozen"), "{err}");
    let err = refused(&["."]);
    assert!(err.contains("every parameter is frozen"), "{err}");
}
