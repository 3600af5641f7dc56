//! Fused device kernels for the DP step, written in CubeCL for the wgpu backend, each with a CPU
//! reference that the ndarray backend runs and the tests compare against:
//!
//! - secure noise: a counter-based ChaCha20 stream (key from the OS CSPRNG per run, one block per
//!   eight coordinates) with a Box-Muller transform whose tails reach 8.24 sigma, fused with adding
//!   the noise to the gradient and scaling it (one pass);
//! - Laplacian smoothing A_s^{-1} (DP-LSSGD) as an exact circulant convolution with closed-form
//!   taps and a proven truncation bound, against an FFT reference;
//! - the sigma solver of the optimized additive noise mechanism (Xiang et al., Eq. 11) under L2
//!   clipping, all its iterations in one cube, against the f64 reference;
//! - im2col, the patches a DP convolution's per-example gradients are made of, in one pass;
//! - the banded Toeplitz strategy of BandMF's correlated noise (`banded_strategy`), on the host.
//!
//! The CubeCL kernels are the `wgpu` feature's (on by default; the `cuda` feature adds CUDA on the
//! same kernels); without it every operation runs its CPU reference.
//!
//! It also holds what both DP engines (dp-engine's DP step on Burn modules and dp-erm's DP-ERM)
//! use, so that neither depends on the other: the device choice (`backend`), the clipping
//! formula (`clipping`), the noise stream (`noise`) and host/device tensor helpers
//! (`tensor_io`).

#![warn(missing_docs)]

pub mod backend;
pub mod banded_strategy;
pub mod burn_device;
pub mod chacha;
pub mod clipping;
#[cfg(feature = "wgpu")]
mod cube_im2col;
#[cfg(feature = "wgpu")]
mod cube_noise;
#[cfg(feature = "wgpu")]
mod cube_output;
#[cfg(feature = "wgpu")]
mod cube_smoothing;
#[cfg(feature = "wgpu")]
mod cube_solver;
pub mod device_ops;
pub mod gaussian;
pub mod im2col;
pub mod launches;
pub mod noise;
pub mod scattering;
pub mod sigma_solver;
pub mod smoothing;
pub mod tensor_io;
pub mod vectorised;
pub mod wgpu_probe;

pub use chacha::StreamPosition;
pub use device_ops::{NoiseScale, im2col, noisy_scale, random_words, smooth, sphere_sigma};
pub use im2col::Patches;
pub use smoothing::LaplacianSmoothing;
