//! The oracle shared by the per-example tests: every example gets its own forward and backward
//! pass with Burn's autodiff on the parameters (`Module::train`), and its gradient is read per
//! parameter, in the order of the model's `ParamTable`.

use burn::module::Module;
use burn::optim::GradientsParams;
use burn::tensor::Tensor;
use dp_engine::grad_sample::params::{ParamInfo, ParamTable};

/// A tensor's values on the host, as f64.
pub fn host<const D: usize>(t: Tensor<D>) -> Vec<f64> {
    dp_engine::tensor_io::to_host(&t).into_iter().map(f64::from).collect()
}

/// A parameter's gradient from Burn's `GradientsParams` (zeros when it got none), flattened.
pub fn param_grad(grads: &GradientsParams, info: &ParamInfo) -> Vec<f64> {
    let got = match info.shape.len() {
        1 => grads.get::<1>(info.id).map(host),
        2 => grads.get::<2>(info.id).map(host),
        4 => grads.get::<4>(info.id).map(host),
        r => panic!("rank {r}"),
    };
    got.unwrap_or_else(|| vec![0.0; info.len()])
}

/// Example e's gradient of every parameter of `model`, for e in 0..b, where `loss(model, e)` is
/// example e's loss computed on its own.
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

/// Sum of squares.
pub fn sq(v: &[f64]) -> f64 {
    v.iter().map(|x| x * x).sum()
}

/// `got` equals `want` to 1e-4 relative (absolute below 1e-3).
pub fn assert_close(got: f64, want: f64, what: &str) {
    let scale = want.abs().max(1e-3);
    assert!((got - want).abs() <= 1e-4 * scale, "{what}: got {got}, naive loop {want}");
}

/// A parameter's current value, found by id.
pub fn param_value<M: Module>(model: &M, info: &ParamInfo) -> Vec<f64> {
    struct Find<'a> {
        info: &'a ParamInfo,
        found: Vec<f64>,
    }
    impl burn::module::ModuleVisitor for Find<'_> {
        fn visit_float<const D: usize>(&mut self, param: &burn::module::Param<Tensor<D>>) {
            if param.id == self.info.id {
                self.found = host(param.val());
            }
        }
    }
    let mut find = Find { info, found: Vec::new() };
    model.visit(&mut find);
    find.found
}
