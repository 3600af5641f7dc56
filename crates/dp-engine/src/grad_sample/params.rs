//! The parameters of a model, by `ParamId`, with their paths, shapes and owning DP layers. A
//! parameter held by anything but a DP layer (BatchNorm, burn-nn's Linear, a bare `Param` field)
//! has no per-example gradient, so such a model is refused with an error naming the parameter.

use crate::error::{EngineError, Result};
use crate::nn::DP_LAYER_TYPES;
use burn::module::{Module, ModuleVisitor, Param, ParamId};
use burn::tensor::Tensor;

/// One trainable parameter.
#[derive(Debug, Clone)]
pub struct ParamInfo {
    /// Its id (what Burn's optimisers and records key on).
    pub id: ParamId,
    /// Its path in the model, e.g. `blocks.0.conv1.weight`.
    pub path: String,
    /// Its shape.
    pub shape: Vec<usize>,
    /// Index of the DP layer that owns it (into [`ParamTable::layers`]).
    pub layer: usize,
    /// True where it is stored as the transpose of PyTorch's layout (a DpLinear weight is
    /// [in, out], PyTorch's [out, in]): what follows PyTorch's flattening order needs this.
    pub torch_transposed: bool,
}

impl ParamInfo {
    /// Number of scalars.
    pub fn len(&self) -> usize {
        self.shape.iter().product()
    }

    /// True for a parameter with no scalar.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Every trainable parameter of a model, in the model's visiting order.
#[derive(Debug, Clone)]
pub struct ParamTable {
    params: Vec<ParamInfo>,
    layers: Vec<String>,
}

/// Walks a module, keeping the path and the type of the module that holds each parameter.
#[derive(Default)]
struct Lister {
    path: Vec<(String, String)>,
    params: Vec<ParamInfo>,
    layers: Vec<String>,
    refused: Option<String>,
}

impl ModuleVisitor for Lister {
    fn enter_module(&mut self, name: &str, container_type: &str) {
        self.path.push((name.to_string(), container_type.to_string()));
    }

    fn exit_module(&mut self, _name: &str, _container_type: &str) {
        self.path.pop();
    }

    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
        let path = self.path.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>().join(".");
        let holder = self.path.last().map_or("the model itself", |(_, t)| t.as_str());
        if !DP_LAYER_TYPES.contains(&holder) {
            self.refused.get_or_insert_with(|| {
                let holder = holder.trim_start_matches("Struct:").trim_start_matches("Enum:");
                format!(
                    "parameter `{path}` belongs to a {holder}, which is not a DP layer (it has no per-example \
                     gradient): build the model from dp_engine::nn's DpLinear, DpConv2d, DpGroupNorm, DpLayerNorm \
                     and DpEmbedding (BatchNorm mixes the examples of a batch: use DpGroupNorm)"
                )
            });
            return;
        }
        let layer_path = path.rsplit_once('.').map_or("", |(l, _)| l).to_string();
        let layer = match self.layers.iter().position(|l| *l == layer_path) {
            Some(i) => i,
            None => {
                self.layers.push(layer_path);
                self.layers.len() - 1
            }
        };
        let torch_transposed = holder == "Struct:DpLinear" && path.ends_with("weight");
        self.params.push(ParamInfo { id: param.id, path, shape: param.lazy_shape().to_vec(), layer, torch_transposed });
    }
}

impl ParamTable {
    /// The parameters of `model`; refused when one is not held by a DP layer, or there is none.
    pub fn of<M: Module>(model: &M) -> Result<Self> {
        let mut lister = Lister::default();
        model.visit(&mut lister);
        if let Some(reason) = lister.refused {
            return Err(EngineError::Unsupported(reason));
        }
        if lister.params.is_empty() {
            return Err(EngineError::Unsupported("the model has no trainable parameter".into()));
        }
        Ok(Self { params: lister.params, layers: lister.layers })
    }

    /// The parameters, in visiting order.
    pub fn params(&self) -> &[ParamInfo] {
        &self.params
    }

    /// The DP layers' paths, in visiting order.
    pub fn layers(&self) -> &[String] {
        &self.layers
    }

    /// The parameter with `id`.
    pub fn get(&self, id: ParamId) -> Option<&ParamInfo> {
        self.params.iter().find(|p| p.id == id)
    }

    /// The position of the parameter with `id` in [`ParamTable::params`].
    pub fn index_of(&self, id: ParamId) -> Option<usize> {
        self.params.iter().position(|p| p.id == id)
    }

    /// Number of scalar parameters.
    pub fn num_params(&self) -> usize {
        self.params.iter().map(ParamInfo::len).sum()
    }
}
