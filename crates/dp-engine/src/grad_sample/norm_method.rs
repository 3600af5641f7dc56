//! How an affine layer's per-example squared norms are computed (`affine`'s module comment has
//! the formulas): rank one, Gram matrices ("ghost") or materialised, chosen by memory on the
//! tensor path and by arithmetic on the CPU, and the margin that keeps a weight-standardised
//! layer's ghost norm from being under-estimated. Below both `affine` and `host_products`, which
//! read it.

use crate::host::machine;

/// The fraction of the uncorrected ghost norm added to a standardised layer's squared norm: far
/// above the f32 rounding of the subtraction (about 1e-6 relative), far below what changes a
/// clip factor that matters.
pub const CANCELLATION_MARGIN: f32 = 1e-5;

/// What storing one float of a materialised per-example gradient and reading it back for the
/// clipped sum costs on the CPU, in multiply-adds of a GEMM, when the layer's B N K floats fit in
/// the last-level cache: the price of a GEMM whose inner dimension is the P positions (an output
/// tile written per few multiply-adds) against one with K or N inside.
pub const STORE_COST_CACHED: usize = 8;

/// The same when they do not fit: every float goes to memory and back (8 bytes at a few GB/s
/// per core, against a microkernel's tens of GFLOP/s). Measured on the AMD EPYC VM (32 MiB L3;
/// docs/BENCHMARKS.md, issue 39): the cifar10-cnn's 8x8 layers (P^2 (K + N) / N K = 35 and 39,
/// 38 and 75 MB) took 101 ms per lot of 128 for their norms and sums as ghost norms against 111
/// materialised; WRN-16-4's 1x1 shortcut to 256 channels (28, 8 MB, in cache) the other way.
pub const STORE_COST_MEMORY: usize = 64;

/// The most bytes a materialised layer's per-example gradients may take on the CPU (B N K
/// floats); beyond, its norms are ghost norms, whose buffers are per thread.
pub const MAX_MATERIALIZED_BYTES: usize = 256 << 20;

/// Which way the squared norms of the weight gradients are computed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NormMethod {
    /// One position per example: the gradient has rank one.
    RankOne,
    /// Gram matrices of the P positions (cheaper when P^2 < N K).
    Ghost,
    /// Materialise each example's [N, K] gradient.
    Materialize,
}

impl NormMethod {
    /// The cheapest method for `positions` P, `outputs` N and `inputs` K.
    pub fn cheapest(positions: usize, outputs: usize, inputs: usize) -> Self {
        Self::cheapest_for(positions, outputs, inputs, false)
    }

    /// The cheapest method on the CPU (flex) for `examples` B, `positions` P, `outputs` N and
    /// `inputs` K, whose inputs' [P, P] Gram takes `input_gram` operations per example (P^2 K,
    /// or fewer for a convolution's patches taken from its pixels), of a layer `standardized` or
    /// not (the module comment): materialised when c N K <= input_gram + P^2 N,
    /// c = [`STORE_COST_CACHED`] where the B N K floats fit in this CPU's last-level cache and
    /// [`STORE_COST_MEMORY`] where they do not (or the cache is not known), and never beyond
    /// [`MAX_MATERIALIZED_BYTES`].
    pub fn cheapest_on_host(
        examples: usize,
        positions: usize,
        outputs: usize,
        inputs: usize,
        input_gram: usize,
        standardized: bool,
    ) -> Self {
        if positions == 1 {
            // Rank one, or a standardised layer's one position materialised, as everywhere.
            return Self::cheapest_for(positions, outputs, inputs, standardized);
        }
        let bytes = examples.saturating_mul(outputs * inputs).saturating_mul(std::mem::size_of::<f32>());
        let cached = machine::last_level_cache().is_some_and(|cache| bytes as u64 <= cache);
        let c = if cached { STORE_COST_CACHED } else { STORE_COST_MEMORY };
        let ghost_cost = (positions * positions).saturating_mul(outputs).saturating_add(input_gram);
        if c.saturating_mul(outputs * inputs) <= ghost_cost && bytes <= MAX_MATERIALIZED_BYTES {
            NormMethod::Materialize
        } else {
            NormMethod::Ghost
        }
    }

    /// The cheapest method that a layer, `standardized` or not, can use: a standardised layer's
    /// Jacobian is not rank one, so its single position is materialised.
    pub(crate) fn cheapest_for(positions: usize, outputs: usize, inputs: usize, standardized: bool) -> Self {
        if positions == 1 && standardized {
            NormMethod::Materialize
        } else if positions == 1 {
            NormMethod::RankOne
        } else if positions * positions < outputs * inputs {
            NormMethod::Ghost
        } else {
            NormMethod::Materialize
        }
    }
}
