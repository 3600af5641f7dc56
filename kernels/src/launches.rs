//! Counting the device kernels a piece of work launches (the benchmark's kernels per lot), through
//! CubeCL's launch observer; a build without a CubeCL backend launches none.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The launches counted while it lives (every launch of the process, on any CubeCL device).
pub struct LaunchCount {
    count: Arc<Counter>,
    /// CubeCL's observer slot, restored when the count drops.
    #[cfg(feature = "wgpu")]
    _observation: burn_cubecl::cubecl::logging::LaunchObservation,
}

/// The number of launches seen.
#[derive(Default)]
struct Counter(AtomicUsize);

#[cfg(feature = "wgpu")]
impl burn_cubecl::cubecl::logging::LaunchObserver for Counter {
    fn launched(&self, _kernel: &'static str) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
}

impl LaunchCount {
    /// Starts counting at zero.
    pub fn start() -> Self {
        let count = Arc::new(Counter::default());
        #[cfg(feature = "wgpu")]
        let _observation = burn_cubecl::cubecl::logging::LaunchObservation::new(count.clone());
        LaunchCount {
            count,
            #[cfg(feature = "wgpu")]
            _observation,
        }
    }

    /// The launches counted so far.
    pub fn launched(&self) -> usize {
        self.count.0.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::StreamPosition;

    /// A device kernel launched while the count lives is counted (other tests of the process may
    /// launch too, so only the lower bound is checked).
    #[test]
    fn a_device_kernel_launched_while_counting_is_counted() {
        let Some(device) = crate::wgpu_probe::wgpu_for_tests() else { return };
        let position = StreamPosition { key: [7; 8], stream: 1, block: 0 };
        crate::random_words(&device, &position, 64).expect("warm-up words");
        let count = LaunchCount::start();
        let words = crate::random_words(&device, &position, 64).expect("words");
        assert_eq!(words.len(), 64);
        assert!(count.launched() >= 1, "the noise kernel's launch was not counted");
    }
}
