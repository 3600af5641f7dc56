//! A user's own layer, its per-example rule checked by `make_private` before anything runs: the
//! issue's `ScaledLinear` (y = (xW + b) s, through `tape::observe`) whose squared norms leave out
//! the scale's term, or whose clipped sum weighs one parameter's examples wrongly, is refused,
//! naming the layer and the parameter; the right rule is accepted, and so are the built-in DP
//! layers (within a few 1e-7 of Burn's autodiff, far inside the tolerance).

use burn::module::{Module, Param, ParamId};
use burn::optim::SgdConfig;
use burn::tensor::{Device, Tensor, TensorData};
use dp_engine::backend;
use dp_engine::engine::PrivacyEngine;
use dp_engine::grad_sample::params::ParamTable;
use dp_engine::grad_sample::tape::{Finish, observe};
use dp_engine::grad_sample::{ParamGrad, PerExampleGrads, sum_per_example, weighted_sum_examples};
use dp_engine::lots::{ExampleLosses, LotSource};
use dp_engine::nn::{
    Conv2d, Conv2dConfig, GroupNorm, GroupNormConfig, LayerNorm, LayerNormConfig, Linear, LinearConfig,
};
use dp_engine::privacy::PrivacyConfig;
use dp_engine::privacy::mechanism::gaussian::Gaussian;
use dp_engine::step::layer_rules::{TOLERANCE, check_layer_rules};

/// What a rule gets wrong.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Mistake {
    /// None: the layer's own gradient.
    None,
    /// The squared norms leave out the scale's term (the issue's).
    DroppedScaleTerm,
    /// The clipped sum of the scale ignores the clip factors.
    UnweightedScaleSum,
}

/// y = (xW + b) s over x [B, in]: W [in, out], b and s [out].
#[derive(Module, Debug)]
struct ScaledLinear {
    weight: Param<Tensor<2>>,
    bias: Param<Tensor<1>>,
    scale: Param<Tensor<1>>,
}

/// Its per-example gradients: dW_b = x_b^T (g_b s), db_b = g_b s, ds_b = (x_b W + b) g_b.
struct ScaledGrads {
    x: Tensor<2>,
    gs: Tensor<2>,
    ds: Tensor<2>,
    ids: [ParamId; 3],
    mistake: Mistake,
}

impl PerExampleGrads for ScaledGrads {
    fn sq_norms(&mut self) -> Tensor<1> {
        let x = sum_per_example(self.x.clone().square());
        let gs = sum_per_example(self.gs.clone().square());
        let ds = sum_per_example(self.ds.clone().square());
        match self.mistake {
            Mistake::DroppedScaleTerm => x * gs.clone() + gs,
            _ => x * gs.clone() + gs + ds,
        }
    }

    fn weighted_sum(&self, factors: Option<&Tensor<1>>) -> Vec<ParamGrad> {
        let [b, _] = self.x.dims();
        let scaled = |t: Tensor<2>| match factors {
            Some(f) => t * f.clone().reshape([b, 1]),
            None => t,
        };
        let weight = scaled(self.x.clone()).transpose().matmul(self.gs.clone());
        let scale_factors = if self.mistake == Mistake::UnweightedScaleSum { None } else { factors };
        vec![
            ParamGrad { id: self.ids[0], value: weight.flatten(0, 1) },
            ParamGrad { id: self.ids[1], value: weighted_sum_examples(self.gs.clone(), factors) },
            ParamGrad { id: self.ids[2], value: weighted_sum_examples(self.ds.clone(), scale_factors) },
        ]
    }
}

impl ScaledLinear {
    fn new(d_in: usize, d_out: usize, device: &Device) -> Self {
        let values = |n: usize, at: f32| (0..n).map(|i| ((i as f32 * 0.37 + at).sin()) * 0.5).collect::<Vec<_>>();
        let vector = |v: Vec<f32>| {
            let n = v.len();
            Param::from_tensor(Tensor::<1>::from_data(TensorData::new(v, [n]), device))
        };
        let weight = Tensor::<2>::from_data(TensorData::new(values(d_in * d_out, 0.1), [d_in, d_out]), device);
        Self {
            weight: Param::from_tensor(weight),
            bias: vector(values(d_out, 0.7)),
            scale: vector(values(d_out, 1.3).iter().map(|v| 1.0 + v).collect()),
        }
    }

    fn forward(&self, x: Tensor<2>, mistake: Mistake) -> Tensor<2> {
        let z = x.clone().matmul(self.weight.val()) + self.bias.val().unsqueeze();
        let y = z.clone() * self.scale.val().unsqueeze();
        let ids = [self.weight.id, self.bias.id, self.scale.id];
        let scale = self.scale.val().inner();
        observe("ScaledLinear", &ids, y, move || -> Finish {
            let (x, z) = (x.inner(), z.inner());
            Box::new(move |g: Tensor<2>| {
                let gs = g.clone() * scale.unsqueeze();
                Box::new(ScaledGrads { x, gs, ds: z * g, ids, mistake })
            })
        })
    }
}

/// A model of the user's layer.
#[derive(Module, Debug)]
struct UsersModel {
    layer: ScaledLinear,
}

/// Rows of 12 features whose loss is their outputs' squared sum, the user's layer told which
/// mistake its rule makes.
struct Rows(Mistake);

impl LotSource<UsersModel> for Rows {
    fn len(&self) -> usize {
        16
    }

    fn losses(&self, model: &UsersModel, indices: &[usize], device: &Device) -> dp_engine::Result<ExampleLosses> {
        let rows: Vec<f32> =
            indices.iter().flat_map(|&i| (0..12).map(move |j| ((i * 12 + j) as f32 * 0.21).cos())).collect();
        let x = Tensor::<2>::from_data(TensorData::new(rows, [indices.len(), 12]), device);
        let y = model.layer.forward(x, self.0);
        Ok(ExampleLosses { losses: sum_per_example(y.square()), correct: None })
    }
}

#[test]
fn a_users_layer_whose_rule_is_wrong_is_refused_and_the_right_one_accepted() {
    let device = backend::cpu();
    let privacy = PrivacyConfig::new(Gaussian).with_noise_multiplier(1.0).with_lot_size(4).with_seed(1);
    let private = |mistake: Mistake| {
        let model = UsersModel { layer: ScaledLinear::new(12, 3, &device.device) };
        PrivacyEngine::new(privacy.clone()).make_private(
            &model,
            SgdConfig::new().init(),
            &Rows(mistake),
            &device.device,
        )
    };
    assert!(private(Mistake::None).is_ok(), "the right rule");
    for (mistake, what) in
        [(Mistake::DroppedScaleTerm, "squared gradient norm"), (Mistake::UnweightedScaleSum, "`layer.scale`")]
    {
        let e = private(mistake).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(e.contains("ScaledLinear") && e.contains("layer.weight") && e.contains(what), "{mistake:?}: {e}");
        assert!(!e.contains('\n'), "one line: {e}");
    }
}

/// The built-in layers, each in a model of its own, against autodiff.
#[derive(Module, Debug)]
struct BuiltIn {
    conv: Conv2d,
    group: GroupNorm,
    fc: Linear,
    layer: LayerNorm,
    head: Linear,
}

/// Images [B, 2, 6, 6] through every built-in layer, cross-entropy-free: the outputs' squared sum.
struct Images;

impl LotSource<BuiltIn> for Images {
    fn len(&self) -> usize {
        8
    }

    fn losses(&self, m: &BuiltIn, indices: &[usize], device: &Device) -> dp_engine::Result<ExampleLosses> {
        let b = indices.len();
        let pixels: Vec<f32> =
            indices.iter().flat_map(|&i| (0..72).map(move |j| ((i * 72 + j) as f32 * 0.13).sin())).collect();
        let x = Tensor::<4>::from_data(TensorData::new(pixels, [b, 2, 6, 6]), device);
        let h = burn::tensor::activation::tanh(m.group.forward(m.conv.forward(x)));
        let h: Tensor<2> = m.layer.forward(m.fc.forward(h.flatten::<2>(1, 3)));
        Ok(ExampleLosses { losses: sum_per_example(m.head.forward(h).square()), correct: None })
    }
}

#[test]
fn the_built_in_layers_agree_with_autodiff_far_inside_the_tolerance() {
    let device = backend::cpu().device;
    let model = BuiltIn {
        conv: Conv2dConfig::new([2, 4], [3, 3]).init(&device),
        group: GroupNormConfig::new(2, 4).init(&device),
        fc: LinearConfig::new(4 * 4 * 4, 5).init(&device),
        layer: LayerNormConfig::new(5).init(&device),
        head: LinearConfig::new(5, 3).init(&device),
    };
    let worst = check_layer_rules(&model.valid(), &Images, &ParamTable::of(&model).unwrap()).unwrap();
    assert!(worst < TOLERANCE / 100.0, "worst relative error {worst:e}");
}
