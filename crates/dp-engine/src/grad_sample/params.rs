//! The parameters of a model, by `ParamId`, with their paths, shapes and the modules that hold
//! them. Which parameters have per-example gradients is what a recorded forward pass says (every
//! DP layer, built in or a user's own, records its parameters through `tape::observe`), not a
//! list of layer types: [`ParamTable::check_recorded`] refuses a parameter that no layer recorded
//! (BatchNorm, burn-nn's Linear, a bare `Param` field, a DP layer the forward pass skipped), by
//! its path and its module's type. [`ParamTable::freezing`] leaves out the parameters a run keeps
//! fixed (fine-tuning a pretrained model's last layers): they get no gradient, no noise and no
//! update, and may belong to any module, DP layer or not.

use crate::error::{EngineError, Result, one_line};
use burn::module::{Module, ModuleVisitor, Param, ParamId};
use burn::tensor::Tensor;
use regex::Regex;

/// One trainable parameter.
#[derive(Debug, Clone)]
pub struct ParamInfo {
    /// Its id (what Burn's optimisers and records key on).
    pub id: ParamId,
    /// Its path in the model, e.g. `blocks.0.conv1.weight` (an enum module's variant left out,
    /// as in a weight file).
    pub path: String,
    /// Its shape.
    pub shape: Vec<usize>,
    /// Index of the layer that holds it (into [`ParamTable::layers`]).
    pub layer: usize,
    /// The type of the module that holds it, e.g. `Linear`.
    pub holder: String,
    /// True where it is stored as the transpose of PyTorch's layout (a Linear weight is
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

/// Every trained parameter of a model, in the model's visiting order, and the frozen ones.
#[derive(Debug, Clone)]
pub struct ParamTable {
    params: Vec<ParamInfo>,
    layers: Vec<String>,
    frozen: Vec<ParamInfo>,
}

/// Walks a module, keeping the path and the type of the module that holds each parameter.
#[derive(Default)]
struct Lister {
    path: Vec<(String, String)>,
    params: Vec<ParamInfo>,
    layers: Vec<String>,
}

impl ModuleVisitor for Lister {
    fn enter_module(&mut self, name: &str, container_type: &str) {
        self.path.push((name.to_string(), container_type.to_string()));
    }

    fn exit_module(&mut self, _name: &str, _container_type: &str) {
        self.path.pop();
    }

    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
        let path = self
            .path
            .iter()
            .filter(|(_, t)| !t.starts_with("Enum:"))
            .map(|(n, _)| n.as_str())
            .collect::<Vec<_>>()
            .join(".");
        let holder = self.path.last().map_or("module", |(_, t)| t.as_str());
        let holder = holder.trim_start_matches("Struct:").trim_start_matches("Enum:").to_string();
        let layer_path = path.rsplit_once('.').map_or("", |(l, _)| l).to_string();
        let layer = match self.layers.iter().position(|l| *l == layer_path) {
            Some(i) => i,
            None => {
                self.layers.push(layer_path);
                self.layers.len() - 1
            }
        };
        let torch_transposed = holder == "Linear" && path.ends_with("weight");
        let shape = param.lazy_shape().to_vec();
        self.params.push(ParamInfo { id: param.id, path, shape, layer, holder, torch_transposed });
    }
}

/// What to use instead of a layer of type `holder` that records no per-example gradient.
fn replacement(holder: &str) -> String {
    let converts = |dp: &str, how: &str| format!("use dp_engine::nn::{dp} (burn-nn's {holder} converts with `{how}`)");
    match holder {
        "Linear" => converts("Linear", ".into()"),
        "Embedding" => converts("Embedding", ".into()"),
        "Conv2d" => converts("Conv2d", "try_into()"),
        "GroupNorm" => converts("GroupNorm", "try_into()"),
        "LayerNorm" => converts("LayerNorm", "try_into()"),
        h if h.starts_with("BatchNorm") => {
            "BatchNorm mixes the examples of a batch, so it has no per-example gradient: use dp_engine::nn::GroupNorm".into()
        }
        _ => "build the model from dp_engine::nn's Linear, Conv2d, GroupNorm, LayerNorm and Embedding, or give a layer of your own per-example gradients through dp_engine::grad_sample::tape::observe".into(),
    }
}

impl ParamTable {
    /// The parameters of `model`; refused when there is none.
    pub fn of<M: Module>(model: &M) -> Result<Self> {
        let mut lister = Lister::default();
        model.visit(&mut lister);
        if lister.params.is_empty() {
            return Err(EngineError::Unsupported("the model has no trainable parameter".into()));
        }
        Ok(Self { params: lister.params, layers: lister.layers, frozen: Vec::new() })
    }

    /// The table without the parameters whose path a regular expression of `patterns` matches
    /// (anywhere in the path: anchor with `^` and `$`), which the run keeps fixed. Refused in one
    /// line: a pattern that is not a regular expression or matches no parameter, a layer frozen
    /// in part (its parameters are clipped together), every parameter frozen.
    pub fn freezing(self, patterns: &[String]) -> Result<Self> {
        if patterns.is_empty() {
            return Ok(self);
        }
        let invalid = |reason: String| EngineError::invalid("freeze", reason);
        let regexes = patterns
            .iter()
            .map(|p| {
                Regex::new(p)
                    .map_err(|e| invalid(format!("`{p}` is not a regular expression: {}", one_line(&e.to_string()))))
            })
            .collect::<Result<Vec<_>>>()?;
        let all: Vec<&ParamInfo> = self.params.iter().collect();
        if let Some((p, _)) = patterns.iter().zip(&regexes).find(|(_, r)| !all.iter().any(|q| r.is_match(&q.path))) {
            let names: Vec<&str> = all.iter().map(|q| q.path.as_str()).collect();
            return Err(invalid(format!("`{p}` matches no parameter of the model ({})", names.join(", "))));
        }
        let frozen = |q: &ParamInfo| regexes.iter().any(|r| r.is_match(&q.path));
        for (a, b) in all.iter().flat_map(|a| all.iter().map(move |b| (a, b))) {
            if a.layer == b.layer && frozen(a) && !frozen(b) {
                return Err(invalid(format!(
                    "`{}` is frozen but `{}` of the same layer is not: a layer's parameters are clipped together, so freeze all of them or none",
                    a.path, b.path
                )));
            }
        }
        let (frozen, trained): (Vec<ParamInfo>, Vec<ParamInfo>) = self.params.into_iter().partition(|q| frozen(q));
        if trained.is_empty() {
            return Err(invalid("every parameter is frozen: nothing would be trained".into()));
        }
        let mut layers: Vec<String> = Vec::new();
        let params = trained
            .into_iter()
            .map(|mut q| {
                let name = &self.layers[q.layer];
                q.layer = layers.iter().position(|l| l == name).unwrap_or_else(|| {
                    layers.push(name.clone());
                    layers.len() - 1
                });
                q
            })
            .collect();
        Ok(Self { params, layers, frozen })
    }

    /// Refuses the first parameter that is not among `recorded` (the parameters the layers of a
    /// recorded forward pass named): it would have no per-example gradient.
    pub fn check_recorded<'a>(&self, recorded: impl IntoIterator<Item = &'a ParamId>) -> Result<()> {
        let recorded: Vec<&ParamId> = recorded.into_iter().collect();
        match self.params.iter().find(|p| !recorded.contains(&&p.id)) {
            None => Ok(()),
            Some(p) => Err(EngineError::Unsupported(format!(
                "parameter `{}` belongs to a {}, which recorded no per-example gradient in the forward pass: {}",
                p.path,
                p.holder,
                replacement(&p.holder)
            ))),
        }
    }

    /// `err` with a shared parameter named by its path instead of its id.
    pub fn name_shared(&self, err: EngineError) -> EngineError {
        match err {
            EngineError::SharedParameter { id, path: _, layer } => {
                EngineError::SharedParameter { id, path: self.get(id).map(|p| p.path.clone()), layer }
            }
            other => other,
        }
    }

    /// The trained parameters, in visiting order.
    pub fn params(&self) -> &[ParamInfo] {
        &self.params
    }

    /// The frozen parameters ([`Self::freezing`]), in visiting order.
    pub fn frozen(&self) -> &[ParamInfo] {
        &self.frozen
    }

    /// The ids of the frozen parameters, which a recorded forward pass leaves untapped.
    pub fn frozen_ids(&self) -> Vec<ParamId> {
        self.frozen.iter().map(|p| p.id).collect()
    }

    /// The trained DP layers' paths, in visiting order.
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

    /// Number of trained scalar parameters.
    pub fn num_params(&self) -> usize {
        self.params.iter().map(ParamInfo::len).sum()
    }
}
