//! The noise kernel: its ChaCha20 words bit-identical to the CPU stream, its normals equal to the
//! CPU transform (to what a device's ln, sqrt, sin and cos allow), 2^21 of its draws against the
//! normal law (mean, variance, a Kolmogorov-Smirnov quantile test, the tail beyond 4 sigma), and
//! the fused update (g + sigma z) * scale of a matrix with a sigma per coordinate. The key is fixed, so the
//! statistics are the same numbers on every correct device (they pass on the CPU reference).

use super::{Check, Tap, inputs, observed, worst_relative};
use crate::tensor_io::vector;
use burn::tensor::{Device, Tensor};
use dp_kernels::{NoiseScale, StreamPosition, chacha, gaussian, noisy_scale, random_words};

/// The tap names of the suite's device outputs.
pub(super) const WORDS: &str = "noise: words";
pub(super) const NORMALS: &str = "noise: normals";
pub(super) const DRAWS: &str = "noise: draws";
pub(super) const FUSED: &str = "noise: fused";

/// A fixed key; the first block sits just below 2^32 so that a draw crosses the counter's carry.
fn position(block: u64) -> StreamPosition {
    StreamPosition { key: [0x0123_4567, 0x89ab_cdef, 7, 0xdead_beef, 42, 0, u32::MAX, 0x5555_aaaa], stream: 1, block }
}

/// `n` standard normals drawn on `device` by the fused kernel (zero gradient, sigma 1, scale 1).
fn normals(device: &Device, at: &StreamPosition, n: usize, check: &str, tap: &dyn Tap) -> Result<Vec<f64>, String> {
    let z = noisy_scale(Tensor::<1>::zeros([n], device), &NoiseScale::Uniform(1.0), at, 1.0)?;
    Ok(observed(&z, check, tap))
}

/// The standard normal distribution function.
fn phi(x: f64) -> f64 {
    0.5 * libm::erfc(-x / std::f64::consts::SQRT_2)
}

/// The noise suite.
pub(super) fn checks(device: &Device, tap: &dyn Tap) -> Result<Vec<Check>, String> {
    let carry = position((1 << 32) - 3);
    let n = 16 * 256 + 5;
    let mut words: Vec<f64> = random_words(device, &carry, n)?.into_iter().map(f64::from).collect();
    tap.output(WORDS, &mut words);
    let stream = chacha::words(&carry, n);
    let differ = words.iter().zip(&stream).filter(|(got, want)| **got != f64::from(**want)).count()
        + words.len().abs_diff(stream.len());
    let mut checks = vec![Check::new(
        format!("noise: ChaCha20 words unlike the CPU stream, of {n} across the 32-bit counter carry"),
        differ as f64,
        0.0,
    )];

    // The words are exact; the transform is not: Vulkan lets a device's ln, sqrt, sin and cos
    // err (2.5e-6 seen on an NVIDIA H100, 3.6e-7 on lavapipe); a wrong transform errs by O(1).
    let n = 8 * 1000 + 3;
    let want: Vec<f64> = gaussian::normals(&carry, n).into_iter().map(f64::from).collect();
    let got = normals(device, &carry, n, NORMALS, tap)?;
    checks.push(Check::new(
        format!("noise: {n} normals against the CPU transform, max |diff| / max(1, |z|)"),
        worst_relative(&got, &want, 1.0),
        1e-5,
    ));

    let n = 1usize << 21;
    let mut draws = normals(device, &position(0), n, DRAWS, tap)?;
    let count = n as f64;
    let mean = draws.iter().sum::<f64>() / count;
    let variance = draws.iter().map(|z| (z - mean).powi(2)).sum::<f64>() / (count - 1.0);
    // P(|Z| > 4) = 6.334e-5.
    let p4 = 6.334_248_366_623_996e-5;
    let beyond = draws.iter().filter(|z| z.abs() > 4.0).count() as f64;
    draws.sort_by(f64::total_cmp);
    let ks = draws
        .iter()
        .enumerate()
        .map(|(i, &z)| {
            let f = phi(z);
            (f - i as f64 / count).abs().max(((i + 1) as f64 / count - f).abs())
        })
        .map(|d| if d.is_nan() { f64::INFINITY } else { d })
        .fold(0.0, f64::max);
    checks.extend([
        Check::new(format!("noise: mean of {n} draws, in standard errors"), mean.abs() * count.sqrt(), 5.0),
        Check::new(
            format!("noise: variance of {n} draws, |s^2 - 1| in standard errors"),
            (variance - 1.0).abs() / (2.0 / count).sqrt(),
            5.0,
        ),
        // The Kolmogorov distribution's critical value at level 0.001.
        Check::new(
            format!("noise: Kolmogorov-Smirnov statistic of {n} draws, times sqrt(n)"),
            ks * count.sqrt(),
            1.949,
        ),
        Check::new(
            format!("noise: draws beyond 4 sigma, of {n}, |count - expected| in standard deviations"),
            (beyond - count * p4).abs() / (count * p4 * (1.0 - p4)).sqrt(),
            5.0,
        ),
    ]);

    let n = 1001;
    let grad = inputs(n, 1);
    let sigma: Vec<f32> = inputs(n, 2).into_iter().map(|s| 1.0 + s * 0.9).collect();
    let scale = 0.25f32;
    let z = gaussian::normals(&carry, n);
    let want: Vec<f64> = (0..n).map(|i| f64::from((grad[i] + sigma[i] * z[i]) * scale)).collect();
    let sigmas = NoiseScale::PerCoordinate(Box::new(vector(sigma, device)));
    // A gradient of rows that are not a multiple of any alignment: a kernel output whose rows
    // the runtime padded (CUDA) would put values in the wrong coordinates.
    let [rows, cols] = [13, 77];
    let got = noisy_scale(vector(grad, device).reshape([rows, cols]), &sigmas, &carry, scale)?;
    checks.push(Check::new(
        format!("noise: fused (g + sigma z) * scale, a {rows} x {cols} gradient with a sigma per coordinate, max relative error"),
        worst_relative(&observed(&got, FUSED, tap), &want, 1.0),
        1e-5,
    ));
    Ok(checks)
}
