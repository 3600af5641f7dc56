//! dp-kernels' kernel and oracle tests as one binary (each file a module).

mod banded_strategy_reference;
mod cube_outputs;
mod im2col_kernel;
mod noise_kernel;
mod scattering_oracle;
mod smoothing_kernel;
mod solver_kernel;
