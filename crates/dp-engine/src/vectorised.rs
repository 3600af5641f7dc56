//! Host loops compiled for the CPU's widest vector instructions, chosen at run time. The crates
//! are built for the x86-64 baseline (SSE2), so that one binary runs on any x86-64 CPU, and the
//! loops the compiler vectorises then use 4 lanes where AVX-512 has 16. `pulp` (already the gemm
//! crate's dispatcher) runs a closure inside a function compiled for AVX-512 or AVX2 where the
//! CPU has them, so that the closure's loops vectorise to that width.

/// Runs `f` compiled for the widest vector instructions this CPU has. The result is the one
/// the baseline build gives: the same operations in the same order (no fast-math, no fused
/// multiply-add the code does not ask for), only more of them at once. It gains only where the
/// compiler inlines `f` into the dispatched function: a short loop, as tanh's (its samples then
/// show `zmm` registers under `perf annotate`); GroupNorm's longer row passes were not inlined,
/// and stay as they were.
#[inline(always)]
pub fn vectorised<R>(f: impl FnOnce() -> R) -> R {
    pulp::Arch::new().dispatch(f)
}
