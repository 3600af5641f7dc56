//! A sequential model of DP layers and parameter-free layers, with its parameters as a flat list
//! of [rows, cols] tensors (weight, bias per DP layer) that the DP step and optimisers work on.

use crate::activation::Activation;
use crate::conv2d::DpConv2d;
use crate::error::{EngineError, Result};
use crate::features::Features;
use crate::linear::DpLinear;
use crate::per_example::PerExampleGrad;
use crate::pool::MaxPool;
use crate::tape::{LayerIo, Tape};
use burn::tensor::Tensor;

/// One layer of a sequential model.
#[derive(Debug, Clone)]
pub enum Layer {
    /// A DP convolution.
    Conv(DpConv2d),
    /// A DP dense layer.
    Linear(DpLinear),
    /// An element-wise activation.
    Activation(Activation),
    /// Max pooling.
    MaxPool(MaxPool),
    /// Feature maps to flat features.
    Flatten,
}

/// A sequential classifier.
#[derive(Debug, Clone)]
pub struct Model {
    layers: Vec<Layer>,
}

impl Model {
    /// A model from its layers.
    pub fn new(layers: Vec<Layer>) -> Self {
        Self { layers }
    }

    /// The layers, in order.
    pub fn layers(&self) -> &[Layer] {
        &self.layers
    }

    /// Logits [B, classes]; with a tape, every DP layer records its input and probe.
    pub fn forward(&self, x: Features, mut tape: Option<&mut Tape>) -> Result<Tensor<2>> {
        let mut h = x;
        for layer in &self.layers {
            h = match (layer, h) {
                (Layer::Conv(c), Features::Image(t)) => Features::Image(c.forward(t, tape.as_deref_mut())),
                (Layer::Linear(l), Features::Flat(t)) => Features::Flat(l.forward(t, tape.as_deref_mut())),
                (Layer::Activation(a), h) => a.apply(h),
                (Layer::MaxPool(p), Features::Image(t)) => Features::Image(p.apply(t)),
                (Layer::Flatten, h) => Features::Flat(h.into_flat()),
                (layer, h) => {
                    return Err(EngineError::Unsupported(format!(
                        "layer {layer:?} cannot take {} features",
                        match h {
                            Features::Image(_) => "image",
                            Features::Flat(_) => "flat",
                        }
                    )));
                }
            };
        }
        match h {
            Features::Flat(logits) => Ok(logits),
            Features::Image(_) => Err(EngineError::Unsupported("the model must end with a dense layer".into())),
        }
    }

    /// Parameters in order: weight then bias of each DP layer.
    pub fn params(&self) -> Vec<Tensor<2>> {
        self.layers
            .iter()
            .flat_map(|l| match l {
                Layer::Conv(c) => vec![c.weight.clone(), c.bias.clone()],
                Layer::Linear(d) => vec![d.weight.clone(), d.bias.clone()],
                _ => vec![],
            })
            .collect()
    }

    /// Replaces the parameters (same order and shapes as [`Model::params`]).
    pub fn set_params(&mut self, params: Vec<Tensor<2>>) {
        let mut it = params.into_iter();
        for layer in &mut self.layers {
            let (w, b) = match layer {
                Layer::Conv(c) => (&mut c.weight, &mut c.bias),
                Layer::Linear(d) => (&mut d.weight, &mut d.bias),
                _ => continue,
            };
            if let (Some(nw), Some(nb)) = (it.next(), it.next()) {
                *w = nw;
                *b = nb;
            }
        }
    }

    /// For each parameter (the order of [`Model::params`]): true where it is stored as the
    /// transpose of PyTorch's layout (Linear weights, [in, out]).
    pub fn torch_transposed(&self) -> Vec<bool> {
        self.layers
            .iter()
            .flat_map(|layer| match layer {
                Layer::Conv(_) => vec![false, false],
                Layer::Linear(_) => vec![true, false],
                _ => vec![],
            })
            .collect()
    }

    /// Number of scalar parameters.
    pub fn num_params(&self) -> usize {
        self.params().iter().map(|p| p.dims().iter().product::<usize>()).sum()
    }

    /// Per-example gradient operands of every DP layer from the tape's records, in order.
    pub fn per_example(&self, records: Vec<LayerIo>) -> Vec<PerExampleGrad> {
        let mut records = records.into_iter();
        self.layers
            .iter()
            .filter_map(|layer| match layer {
                Layer::Conv(c) => records.next().map(|io| c.per_example(io)),
                Layer::Linear(d) => records.next().map(|io| d.per_example(io)),
                _ => None,
            })
            .collect()
    }
}
