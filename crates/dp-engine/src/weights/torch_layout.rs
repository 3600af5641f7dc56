//! The DP layers as PyTorch's own, for burn-store's PyTorch adapters: a `Linear` is a
//! `Linear` (its weight is [in, out] here, [out, in] in PyTorch: transposed either way), a
//! `GroupNorm` or `LayerNorm` a norm (gamma and beta here, weight and bias in PyTorch); a
//! `Conv2d` and a `Embedding` share PyTorch's layout and names already.

use burn::store::burn_pack::Tensor as PackTensor;
use burn::store::{ModuleAdapter, ModuleContext};

/// A burn-store adapter (`inner`: PyTorch's to Burn's, or the reverse) that sees the DP layers
/// as the burn-nn modules they mirror.
#[derive(Debug, Clone, Default)]
pub struct DpTorchLayout<A>(pub A);

/// The burn-nn module type whose PyTorch mapping `module_type` shares.
fn as_burn_nn(module_type: &str) -> &str {
    match module_type {
        "Struct:Linear" => "Struct:Linear",
        "Struct:GroupNorm" => "Struct:GroupNorm",
        "Struct:LayerNorm" => "Struct:LayerNorm",
        other => other,
    }
}

impl<A: ModuleAdapter + Clone + 'static> ModuleAdapter for DpTorchLayout<A> {
    fn adapt(&self, tensor: PackTensor, ctx: ModuleContext<'_>) -> PackTensor {
        let stack: Vec<String> = ctx.module_type().map(|t| as_burn_nn(t).to_string()).into_iter().collect();
        self.0.adapt(tensor, ModuleContext::new(&stack))
    }

    fn get_alternative_param_name(&self, param_name: &str, module_type: &str) -> Option<String> {
        self.0.get_alternative_param_name(param_name, as_burn_nn(module_type))
    }

    fn clone_box(&self) -> Box<dyn ModuleAdapter> {
        Box::new(self.clone())
    }
}
