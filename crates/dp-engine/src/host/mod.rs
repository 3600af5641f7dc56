//! The CPU fast paths the engine owns on Burn's flex backend: host access to flex tensors
//! (`flex`), reused scratch buffers (`buffers`), a scale and shift's sums per channel
//! (`channel_sums`), the GEMMs of the per-example products (`gemm`),
//! the 3x3 convolutions by Winograd's minimal filtering (`winograd`), a convolution's patch Gram
//! from its pixels (`patch_gram`),
//! the allocator setting a run makes ([`keep_freed_memory`]), the machine a
//! CPU figure was measured on ([`Machine`]), where a step's time goes ([`PhaseClock`]) and which
//! kernel ran each pass of each layer ([`KernelLog`]).

pub(crate) mod buffers;
pub(crate) mod channel_sums;
pub(crate) mod flex;
pub(crate) mod gemm;
pub(crate) mod kernel_log;
pub(crate) mod machine;
pub(crate) mod memory;
pub(crate) mod patch_gram;
pub(crate) mod phases;
pub(crate) mod winograd;
pub use kernel_log::{Kernel, KernelLog, KernelUse, Pass};
pub use machine::{Cache, Machine, last_level_cache};
pub use memory::keep_freed_memory;
pub use phases::{Phase, PhaseClock, PhaseTimes, timed};
