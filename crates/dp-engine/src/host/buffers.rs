//! Host buffers kept from one step to the next. A DP step on the CPU materialises the same
//! per-example gradients every step (`grad_sample::host_products`: for WRN-16-4 at a lot of 64,
//! 175 MB over its layers); a fresh `vec![0.0; n]` zeroes every byte before the GEMMs overwrite
//! it. A [`Reused`] buffer comes from the buffers earlier steps gave back, with whatever values
//! they left (only the part beyond an old buffer's length is zeroed), and goes back when dropped.
//! For buffers that are written in full before they are read. A buffer that leaves the engine
//! (a tensor's values) is [`zeros`], zeroed by the threads.

use rayon::prelude::*;
use std::sync::Mutex;

/// The most buffers kept.
const KEPT: usize = 64;

/// The most bytes kept (above, a returned buffer is freed).
const KEPT_BYTES: usize = 1 << 30;

/// Buffers given back, for the next [`Reused::take`].
static POOL: Mutex<Vec<Vec<f32>>> = Mutex::new(Vec::new());

/// A buffer of f32 from the pool, returned to it when dropped.
pub(crate) struct Reused(Vec<f32>);

impl Reused {
    /// A buffer of `len` values, stale (from an earlier step) where the pool had one large
    /// enough: the caller writes every value before reading it.
    pub fn take(len: usize) -> Self {
        let mut pool = POOL.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        // The smallest kept buffer that holds `len`, else the largest (grown).
        let fits = pool.iter().enumerate().filter(|(_, b)| b.capacity() >= len).min_by_key(|(_, b)| b.capacity());
        let pick = fits.or_else(|| pool.iter().enumerate().max_by_key(|(_, b)| b.capacity())).map(|(i, _)| i);
        let mut buffer = pick.map(|i| pool.swap_remove(i)).unwrap_or_default();
        drop(pool);
        buffer.truncate(len);
        buffer.resize(len, 0.0);
        Reused(buffer)
    }

    /// The values.
    pub fn values(&self) -> &[f32] {
        &self.0
    }

    /// The values, to write.
    pub fn values_mut(&mut self) -> &mut [f32] {
        &mut self.0
    }
}

impl Drop for Reused {
    fn drop(&mut self) {
        let buffer = std::mem::take(&mut self.0);
        let mut pool = POOL.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let kept: usize = pool.iter().map(|b| b.capacity() * size_of::<f32>()).sum();
        if pool.len() < KEPT && kept + buffer.capacity() * size_of::<f32>() <= KEPT_BYTES {
            pool.push(buffer);
        }
    }
}

/// `n` zeros written by all the threads: a fresh `vec![0; n]` of reused heap memory is zeroed by
/// one memset on the calling thread (glibc's calloc) while the other cores wait, 16 MB for each
/// of WRN-16-4's activations and their gradients at a lot of 64.
pub(crate) fn zeros<T: Default + Clone + Send + Sync>(n: usize) -> Vec<T> {
    let mut values = Vec::with_capacity(n);
    values.par_extend(rayon::iter::repeat_n(T::default(), n));
    values
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_buffer_comes_back_with_its_length_and_the_pool_stays_bounded() {
        for len in [0, 1, 1000, 10, 5000] {
            let mut b = Reused::take(len);
            assert_eq!(b.values().len(), len);
            b.values_mut().fill(3.0);
        }
        let many: Vec<Reused> = (0..2 * KEPT).map(|_| Reused::take(16)).collect();
        drop(many);
        assert!(POOL.lock().unwrap().len() <= KEPT);
        let huge = Reused::take(KEPT_BYTES / size_of::<f32>() + 1);
        drop(huge);
        let kept: usize = POOL.lock().unwrap().iter().map(|b| b.capacity() * size_of::<f32>()).sum();
        assert!(kept <= KEPT_BYTES, "{kept} bytes kept");
    }

    #[test]
    fn zeros_are_zeros_of_the_length_asked() {
        for n in [0, 1, 7, 100_003] {
            let values: Vec<f32> = zeros(n);
            assert_eq!(values.len(), n);
            assert!(values.iter().all(|&v| v.to_bits() == 0), "{n}: +0.0 everywhere");
            let indices: Vec<i64> = zeros(n);
            assert!(indices.len() == n && indices.iter().all(|&i| i == 0));
        }
    }
}
