//! Parameter averaging (De et al. 2022, "EMA"): an exponential moving average of the model's
//! parameters, updated after every DP step with the warm-up decay min(decay, (1 + t) / (10 + t))
//! at update t, and evaluated instead of the last iterate. It reads only the models the steps
//! released, so it is post-processing: the same epsilon.

use crate::error::{EngineError, Result};
use burn::module::{Module, ModuleMapper, ModuleVisitor, Param};
use burn::tensor::Tensor;

/// The running average of a model's parameters.
#[derive(Clone)]
pub struct ParameterAverage<M> {
    decay: f64,
    updates: u64,
    average: Option<M>,
}

/// The values of every float parameter, flattened, in visiting order.
struct Values(Vec<Tensor<1>>);

impl ModuleVisitor for Values {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
        self.0.push(param.val().detach().flatten(0, D - 1));
    }
}

/// Moves every float parameter towards the next of `values` by `1 - keep`.
struct Blend {
    values: std::vec::IntoIter<Tensor<1>>,
    keep: f64,
}

impl ModuleMapper for Blend {
    fn map_float<const D: usize>(&mut self, param: Param<Tensor<D>>) -> Param<Tensor<D>> {
        let Some(new) = self.values.next() else { return param };
        let keep = self.keep;
        param.map(|avg| {
            let shape = avg.shape();
            (avg.detach() * keep + new.reshape(shape) * (1.0 - keep)).detach()
        })
    }
}

/// `decay`, refused unless it lies in [0, 1): what a configuration is checked with before a run.
pub fn checked_decay(decay: f64) -> Result<f64> {
    if decay.is_finite() && (0.0..1.0).contains(&decay) {
        Ok(decay)
    } else {
        Err(EngineError::invalid("ema", format!("a decay of {decay}: give a number in [0, 1)")))
    }
}

impl<M: Module> ParameterAverage<M> {
    /// An average with `decay` in [0, 1) (0.999 or 0.9999 in De et al.); no update yet.
    pub fn new(decay: f64) -> Result<Self> {
        Ok(Self { decay: checked_decay(decay)?, updates: 0, average: None })
    }

    /// An average of `decay` after `updates` updates, at `average` (a checkpoint's).
    pub fn resumed(decay: f64, updates: u64, average: M) -> Result<Self> {
        Ok(Self { updates, average: (updates > 0).then_some(average), ..Self::new(decay)? })
    }

    /// The decay of update `t` (0-based): min(decay, (1 + t) / (10 + t)).
    fn decay_at(&self, t: u64) -> f64 {
        self.decay.min((1.0 + t as f64) / (10.0 + t as f64))
    }

    /// Takes in the model a step released.
    pub fn update(&mut self, model: &M) {
        let keep = self.decay_at(self.updates);
        self.average = Some(match self.average.take() {
            None => model.clone().no_grad(),
            Some(average) => {
                let mut values = Values(Vec::new());
                model.visit(&mut values);
                average.map(&mut Blend { values: values.0.into_iter(), keep })
            }
        });
        self.updates += 1;
    }

    /// The averaged model (None before the first update).
    pub fn average(&self) -> Option<&M> {
        self.average.as_ref()
    }

    /// The decay asked for.
    pub fn decay(&self) -> f64 {
        self.decay
    }

    /// Updates so far.
    pub fn updates(&self) -> u64 {
        self.updates
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend;
    use crate::nn::{Linear, LinearConfig};
    use crate::tensor_io::to_host;

    /// A 2 -> 1 linear layer whose weights and bias are `values`.
    fn linear(values: [f32; 3], device: &burn::tensor::Device) -> Linear {
        let mut layer = LinearConfig::new(2, 1).init(device);
        layer.weight = layer
            .weight
            .map(|w| Tensor::from_data(burn::tensor::TensorData::new(values[..2].to_vec(), [2, 1]), &w.device()));
        layer.bias = layer
            .bias
            .map(|b| b.map(|b| Tensor::from_data(burn::tensor::TensorData::new(vec![values[2]], [1]), &b.device())));
        layer
    }

    fn values(layer: &Linear) -> Vec<f32> {
        let mut all = Values(Vec::new());
        layer.visit(&mut all);
        all.0.iter().flat_map(to_host).collect()
    }

    #[test]
    fn the_average_follows_the_warm_up_decay() {
        let device = backend::cpu().device;
        let mut average = ParameterAverage::new(0.5).unwrap();
        assert!(average.average().is_none());
        average.update(&linear([1.0, 2.0, 3.0], &device));
        assert_eq!(values(average.average().unwrap()), vec![1.0, 2.0, 3.0]);
        // Update 1 keeps min(0.5, 2 / 11) of the average.
        average.update(&linear([12.0, 13.0, 14.0], &device));
        let keep = 2.0 / 11.0;
        let want: Vec<f32> =
            [(1.0, 12.0), (2.0, 13.0), (3.0, 14.0)].iter().map(|(a, b)| a * keep + b * (1.0 - keep)).collect();
        let got = values(average.average().unwrap());
        assert!(got.iter().zip(&want).all(|(g, w)| (g - w).abs() < 1e-5), "{got:?} vs {want:?}");
        // Late updates keep `decay` of it.
        assert_eq!(average.decay_at(1000), 0.5);
        assert_eq!(average.updates(), 2);
        for bad in [1.0, -0.1, f64::NAN] {
            assert!(ParameterAverage::<Linear>::new(bad).is_err());
        }
    }
}
