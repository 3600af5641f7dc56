//! Laplacian smoothing: A_s^{-1} v by the device's truncated circulant convolution against the
//! CPU reference's FFT solve (f64), for s = 1 and 3 on a vector long enough to wrap around many
//! times the taps' reach. The kernel's truncation drops at most 1e-9 max|v|; f32 rounding the rest.

use super::{Check, Tap, inputs, observed, worst_against_peak};
use crate::tensor_io::vector;
use burn::tensor::Device;
use dp_kernels::{LaplacianSmoothing, smooth};

/// The tap name of the suite's device output.
pub(super) const SMOOTHED: &str = "smoothing: smoothed";

/// The smoothing suite.
pub(super) fn checks(device: &Device, tap: &dyn Tap) -> Result<Vec<Check>, String> {
    let d = 100_003;
    let v = inputs(d, 3);
    [1.0, 3.0]
        .into_iter()
        .map(|s| {
            let smoothing = LaplacianSmoothing::new(s)?;
            let want: Vec<f64> = smoothing.apply_fft(&v).into_iter().map(f64::from).collect();
            let got = observed(&smooth(vector(v.clone(), device), &smoothing)?, SMOOTHED, tap);
            Ok(Check::new(
                format!("smoothing: A_s^-1 v, s = {s}, d = {d}, against the FFT, max |diff| / max |exact|"),
                worst_against_peak(&got, &want),
                1e-5,
            ))
        })
        .collect()
}
