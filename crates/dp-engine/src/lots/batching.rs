//! How a lot is cut into physical batches: at most `size` examples each (bounds memory), and on
//! a CubeCL device padded to a few shapes, because every new batch shape costs kernel compilation and
//! autotuning there and a Poisson lot has a new size every step.

use dp_kernels::backend::SelectedDevice;

/// How a lot is cut into physical batches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Batching {
    /// Examples per physical batch at most (bounds memory).
    pub size: usize,
    /// Each batch is padded with inert rows (zero loss) to a multiple of this.
    pub granule: usize,
}

impl Batching {
    /// Batches of `size` on `device`: on a CubeCL device (wgpu, cuda) padded to eighths of
    /// `size` (measured on an H100 through wgpu: the first step 44 s, then 11 ms a step);
    /// unpadded on the CPU, where a shape costs nothing and padding only adds work.
    pub fn for_device(size: usize, device: &SelectedDevice) -> Self {
        let granule = if device.is_cube() { (size / 8).max(1) } else { 1 };
        Batching { size, granule }
    }

    /// The rows a batch of `len` examples is run with: `len` rounded up to the granule, never
    /// beyond the batch size (nor below `len`).
    pub fn padded(self, len: usize) -> usize {
        (len.div_ceil(self.granule.max(1)) * self.granule.max(1)).min(self.size).max(len)
    }

    /// The batching of a source with `views` rows per example (augmentation multiplicity): a
    /// physical batch bounds rows, so it holds `size / views` examples (at least one).
    pub fn for_views(self, views: usize) -> Self {
        let views = views.max(1);
        Batching { size: (self.size / views).max(1), granule: (self.granule / views).max(1) }
    }
}
