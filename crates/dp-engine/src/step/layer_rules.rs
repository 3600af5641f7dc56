//! Each DP layer's per-example rule, checked rather than trusted. A layer of a user's own joins
//! through `grad_sample::tape::observe` with a `PerExampleGrads` written by hand: one that gets a
//! term wrong (a scale's gradient left out of the squared norms) clips every example by a norm
//! that is not its own, so the clip no longer bounds an example's influence and no epsilon holds,
//! though the run would print `certified`. Before a run, on the CPU, the first examples go through
//! the tape together, and each example's loss in that batch through Burn's own autodiff of the
//! parameters; every recorded layer's squared norms, and its sum of the examples' gradients
//! weighted by distinct factors (what clipping computes), must agree with autodiff's. A layer that does not is refused, naming
//! it and the parameter. Opacus checks a grad sampler only in its own tests.

use crate::backend;
use crate::error::{EngineError, Result};
use crate::grad_sample::batch::BatchGrads;
use crate::grad_sample::params::{ParamInfo, ParamTable};
use crate::lots::source::{LotSource, batch_losses};
use crate::selftest::naive::{host, param_grad};
use burn::module::{Module, ModuleMapper, Param};
use burn::optim::GradientsParams;
use burn::tensor::{Tensor, TensorData};

/// How far (relative) a layer's squared norm or weighted sum may be from autodiff's: the built-in
/// layers' rules on the zoo's models, in f32 on the CPU, are within 3e-7 of it (they reduce in
/// other orders), WRN-16-4's 256-channel ghost norms within 1.0e-5; a rule that leaves out the
/// term of a learnt scale was 7.7e-4 away.
pub const TOLERANCE: f64 = 1e-4;
/// Examples checked, and the factors their gradients are weighted by (distinct, as clip
/// factors are, so that a sum that weighs the examples wrongly shows).
const FACTORS: [f32; 3] = [1.0, 0.625, 0.25];

/// A model's float parameters as autodiff leaves that keep their gradient, its training flags
/// (dropout, ...) left as they are: what Burn's `Module::train` does to the parameters alone.
struct Tracked;

impl ModuleMapper for Tracked {
    fn map_float<const D: usize>(&mut self, param: Param<Tensor<D>>) -> Param<Tensor<D>> {
        param.map(|t| t.autodiff().require_grad())
    }
}

/// Each of `table`'s parameters' gradient of example `i`'s loss in the batch of `indices` (its
/// views' rows), by Burn's autodiff: the gradient the tape's rules must give it.
fn autodiff_gradients<M: Module>(
    model: &M,
    source: &dyn LotSource<M>,
    (table, indices): (&ParamTable, &[usize]),
    i: usize,
    device: &burn::tensor::Device,
) -> Result<Vec<Vec<f64>>> {
    let tracked = model.clone().map(&mut Tracked);
    let views = source.views();
    let losses = batch_losses(source, &tracked, indices, indices.len(), device)?.weighted;
    let grads = GradientsParams::from_grads(losses.narrow(0, i * views, views).sum().backward(), &tracked);
    Ok(table.params().iter().map(|p| param_grad(&grads, p)).collect())
}

/// |a - b| relative to the larger of them, and to `floor` where both are smaller.
fn relative(a: f64, b: f64, floor: f64) -> f64 {
    (a - b).abs() / a.abs().max(b.abs()).max(floor)
}

/// The refusal of `layer`'s rule for what it computed wrong.
fn refusal(params: &[&ParamInfo], what: String) -> EngineError {
    let holder = params.first().map_or("?", |p| p.holder.as_str());
    let paths: Vec<&str> = params.iter().map(|p| p.path.as_str()).collect();
    EngineError::invalid(
        "model",
        format!(
            "the per-example rule of its {holder} layer ({}) {what} (tolerance {TOLERANCE:.0e}): clipping by it would not bound an example's influence, so no epsilon would hold; fix the layer's PerExampleGrads (sq_norms and weighted_sum must be the example's gradient's)",
            paths.join(", ")
        ),
    )
}

/// Checks every DP layer that `model` (in its validation state) records on the first examples of
/// `source` against Burn's autodiff, on the CPU: each example's squared gradient norm and the
/// weighted sum of the examples' gradients, per layer, within [`TOLERANCE`]; refused in one line
/// naming the layer and parameter that disagree. Gives the largest relative error it saw.
pub fn check_layer_rules<M: Module>(model: &M, source: &dyn LotSource<M>, table: &ParamTable) -> Result<f64> {
    let cpu = backend::cpu().device;
    let model = model.clone().to_device(&cpu);
    let n = source.len().min(FACTORS.len());
    let indices: Vec<usize> = (0..n).collect();
    let (mut grads, ()) = BatchGrads::try_compute(source.views(), &table.frozen_ids(), || {
        Ok((batch_losses(source, &model, &indices, n, &cpu)?.weighted, ()))
    })?;
    let factors = Tensor::<1>::from_data(TensorData::new(FACTORS[..n].to_vec(), [n]), &cpu);
    let reference: Vec<Vec<Vec<f64>>> =
        (0..n).map(|i| autodiff_gradients(&model, source, (table, &indices), i, &cpu)).collect::<Result<_>>()?;
    let mut worst = 0.0f64;
    for (params, sq_norms, sums) in grads.norms_and_sums(&factors) {
        let at: Vec<usize> = params.iter().filter_map(|id| table.index_of(*id)).collect();
        let infos: Vec<&ParamInfo> = at.iter().map(|&k| &table.params()[k]).collect();
        let want: Vec<f64> =
            (0..n).map(|i| at.iter().flat_map(|&k| &reference[i][k]).map(|g| g * g).sum::<f64>()).collect();
        let scale = want.iter().copied().fold(f64::MIN_POSITIVE, f64::max);
        for (i, (got, want)) in host(sq_norms).into_iter().zip(&want).enumerate() {
            let error = relative(got, *want, scale);
            worst = worst.max(error);
            if error > TOLERANCE {
                return Err(refusal(
                    &infos,
                    format!(
                        "gives example {i} a squared gradient norm of {got:.6e} where Burn's autodiff gives {want:.6e} (relative error {error:.1e})"
                    ),
                ));
            }
        }
        for sum in sums {
            let Some(k) = table.index_of(sum.id) else { continue };
            let got = host(sum.value);
            let want: Vec<f64> = (0..table.params()[k].len())
                .map(|j| (0..n).map(|i| f64::from(FACTORS[i]) * reference[i][k][j]).sum())
                .collect();
            let norm = |v: &[f64]| v.iter().map(|x| x * x).sum::<f64>().sqrt();
            let diff: Vec<f64> = got.iter().zip(&want).map(|(a, b)| a - b).collect();
            let error = norm(&diff) / norm(&got).max(norm(&want)).max(f64::MIN_POSITIVE);
            worst = worst.max(error);
            if error > TOLERANCE || got.len() != want.len() {
                return Err(refusal(
                    &infos,
                    format!(
                        "sums the examples' weighted gradients of `{}` {error:.1e} (relative) away from Burn's autodiff",
                        table.params()[k].path
                    ),
                ));
            }
        }
    }
    Ok(worst)
}
