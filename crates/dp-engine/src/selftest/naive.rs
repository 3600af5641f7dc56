//! The naive per-example loop, the oracle of every per-example gradient the engine computes
//! (the self-test's DP step and the oracle tests): each example gets its own forward and
//! backward pass with Burn's autodiff on the parameters (`Module::train`), and its gradient is
//! read per parameter, in the order of the model's `ParamTable`.

use crate::grad_sample::params::{ParamInfo, ParamTable};
use burn::module::Module;
use burn::optim::GradientsParams;
use burn::tensor::Tensor;

/// A tensor's values on the host, as f64.
pub fn host<const D: usize>(t: Tensor<D>) -> Vec<f64> {
    crate::tensor_io::to_host(&t).into_iter().map(f64::from).collect()
}

/// A parameter's gradient from Burn's `GradientsParams` (zeros when it got none), flattened.
/// Parameters are of rank 1 to 4 (what a parameter gradient may have); another rank panics.
pub fn param_grad(grads: &GradientsParams, info: &ParamInfo) -> Vec<f64> {
    let got = match info.shape.len() {
        1 => grads.get::<1>(info.id).map(host),
        2 => grads.get::<2>(info.id).map(host),
        3 => grads.get::<3>(info.id).map(host),
        4 => grads.get::<4>(info.id).map(host),
        r => panic!("rank {r}"),
    };
    got.unwrap_or_else(|| vec![0.0; info.len()])
}

/// Example e's gradient of every parameter of `model`, for e in 0..b, where `loss(model, e)` is
/// example e's loss computed on its own, indexed `[example][parameter][coordinate]`.
pub fn naive_gradients<M: Module>(
    model: &M,
    table: &ParamTable,
    b: usize,
    loss: impl Fn(&M, usize) -> Tensor<1>,
) -> Vec<Vec<Vec<f64>>> {
    let trained = model.clone().train();
    (0..b)
        .map(|e| {
            let grads = GradientsParams::from_grads(loss(&trained, e).sum().backward(), &trained);
            table.params().iter().map(|p| param_grad(&grads, p)).collect()
        })
        .collect()
}
