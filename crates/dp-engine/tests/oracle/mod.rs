//! The oracle shared by the per-example tests: the naive per-example loop
//! (`dp_engine::selftest::naive`: every example its own forward and backward pass with Burn's
//! autodiff on the parameters), and comparisons against it.

use burn::module::Module;
use burn::tensor::Tensor;
use dp_engine::grad_sample::params::ParamInfo;
#[allow(unused_imports)] // each test crate uses its part
pub use dp_engine::selftest::naive::{host, naive_gradients, param_grad};

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
