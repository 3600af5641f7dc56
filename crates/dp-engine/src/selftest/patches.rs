//! im2col: the device's patches of a batch against the CPU reference (itself checked against the
//! definition in dp-kernels' tests), with stride, padding and dilation that differ per axis. A
//! copy: every value must be equal.

use super::{Check, Tap, inputs, observed};
use burn::tensor::{Device, Tensor, TensorData};
use dp_kernels::{Patches, im2col};

/// The tap name of the suite's device output.
pub(super) const PATCHES: &str = "im2col: patches";

/// The im2col suite.
pub(super) fn checks(device: &Device, tap: &dyn Tap) -> Result<Vec<Check>, String> {
    let shape = [3, 4, 11, 9];
    let p = Patches { kernel: [3, 2], stride: [2, 1], padding: [1, 2], dilation: [1, 2] };
    let x = inputs(shape.iter().product(), 4);
    let want: Vec<f64> = dp_kernels::im2col::im2col(&x, shape, &p).into_iter().map(f64::from).collect();
    let got = observed(&im2col(Tensor::<4>::from_data(TensorData::new(x, shape), device), &p)?, PATCHES, tap);
    let differ = got.iter().zip(&want).filter(|(g, w)| g != w).count() + got.len().abs_diff(want.len());
    Ok(vec![Check::new(
        format!(
            "im2col: values unlike the CPU's, of {} ([3, 4, 11, 9], kernel 3x2, stride 2x1, padding 1x2, dilation 1x2)",
            want.len()
        ),
        differ as f64,
        0.0,
    )])
}
