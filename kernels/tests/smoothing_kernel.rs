//! Laplacian smoothing against a dense solve of (I - sL) x = v and against the FFT, on the CPU
//! and on the device kernel, for d in {1, 2, 3, 7, 64, 1000, 10^6}.

use burn::tensor::{Device, Tensor, TensorData};
use dp_kernels::smoothing::apply_taps;
use dp_kernels::wgpu_probe::wgpu_for_tests;
use dp_kernels::{LaplacianSmoothing, smooth};

/// A reproducible, non-smooth test vector.
fn signal(d: usize) -> Vec<f32> {
    (0..d).map(|i| ((i * 7919 + 13) % 101) as f32 / 50.0 - 1.0 + if i % 17 == 0 { 3.0 } else { 0.0 }).collect()
}

/// x solving (I - sL) x = v by Gaussian elimination with partial pivoting, L the periodic
/// Laplacian built entry by entry (for d <= 2 the neighbour entries add up).
fn dense_solve(s: f64, v: &[f32]) -> Vec<f64> {
    let d = v.len();
    let mut a = vec![vec![0.0f64; d + 1]; d];
    for (i, row) in a.iter_mut().enumerate() {
        row[i] += 1.0 + 2.0 * s;
        row[(i + 1) % d] -= s;
        row[(i + d - 1) % d] -= s;
        row[d] = f64::from(v[i]);
    }
    for col in 0..d {
        let pivot = (col..d).max_by(|&x, &y| a[x][col].abs().total_cmp(&a[y][col].abs())).expect("rows");
        a.swap(col, pivot);
        let (top, rest) = a.split_at_mut(col + 1);
        let pivot_row = &top[col];
        for row in rest.iter_mut() {
            let f = row[col] / pivot_row[col];
            if f != 0.0 {
                for (r, p) in row[col..].iter_mut().zip(&pivot_row[col..]) {
                    *r -= f * p;
                }
            }
        }
    }
    let mut x = vec![0.0; d];
    for row in (0..d).rev() {
        let tail: f64 = (row + 1..d).map(|k| a[row][k] * x[k]).sum();
        x[row] = (a[row][d] - tail) / a[row][row];
    }
    x
}

/// max |got - want| / max |want|.
fn rel_err(got: &[f32], want: &[f64]) -> f64 {
    let scale = want.iter().fold(0.0f64, |m, w| m.max(w.abs()));
    got.iter().zip(want).fold(0.0f64, |m, (g, w)| m.max((f64::from(*g) - w).abs())) / scale
}

fn on_device(device: &Device, v: &[f32], smoothing: &LaplacianSmoothing) -> Vec<f32> {
    let t = Tensor::<1>::from_data(TensorData::new(v.to_vec(), [v.len()]), device);
    smooth(t, smoothing).expect("smooth").to_data().try_into_vec_as::<f32>().expect("f32")
}

#[test]
fn fft_and_truncated_taps_equal_the_dense_solve() {
    for s in [0.5, 1.0, 3.0] {
        let smoothing = LaplacianSmoothing::new(s).expect("valid s");
        for d in [1usize, 2, 3, 7, 64, 1000] {
            let v = signal(d);
            let exact = dense_solve(s, &v);
            let fft = rel_err(&smoothing.apply_fft(&v), &exact);
            let taps = rel_err(&apply_taps(&smoothing.taps(d), &v), &exact);
            assert!(fft < 1e-5 && taps < 1e-5, "s {s}, d {d}: fft {fft:e}, taps {taps:e}");
        }
    }
}

#[test]
fn device_kernel_equals_dense_solve_and_fft() {
    let Some(device) = wgpu_for_tests() else { return };
    for s in [1.0, 3.0] {
        let smoothing = LaplacianSmoothing::new(s).expect("valid s");
        for d in [1usize, 2, 3, 7, 64, 1000] {
            let v = signal(d);
            let err = rel_err(&on_device(&device, &v, &smoothing), &dense_solve(s, &v));
            assert!(err < 1e-5, "s {s}, d {d}: {err:e}");
        }
        let v = signal(1_000_000);
        let fft: Vec<f64> = smoothing.apply_fft(&v).into_iter().map(f64::from).collect();
        let err = rel_err(&on_device(&device, &v, &smoothing), &fft);
        assert!(err < 1e-5, "s {s}, d 10^6: {err:e}");
    }
}

#[test]
fn cpu_backend_smooths_by_fft_and_leaves_s_zero_alone() {
    #[allow(deprecated)]
    let cpu = Device::ndarray();
    let smoothing = LaplacianSmoothing::new(2.0).expect("valid s");
    let v = signal(1_000_000);
    let fft: Vec<f64> = smoothing.apply_fft(&v).into_iter().map(f64::from).collect();
    let taps: Vec<f64> = apply_taps(&smoothing.taps(v.len()), &v).into_iter().map(f64::from).collect();
    assert!(rel_err(&on_device(&cpu, &v, &smoothing), &taps) < 1e-5);
    assert!(rel_err(&on_device(&cpu, &v, &smoothing), &fft) < 1e-6);
    let identity = LaplacianSmoothing::new(0.0).expect("s = 0 is plain DP-SGD");
    assert_eq!(on_device(&cpu, &v[..10], &identity), v[..10].to_vec());
}

#[test]
fn smoothing_refuses_negative_or_nan_s() {
    assert!(LaplacianSmoothing::new(-0.1).is_err());
    assert!(LaplacianSmoothing::new(f64::NAN).is_err());
}

#[test]
fn smoothing_compresses_noise_as_predicted() {
    // E||A^-1 z||^2 / E||z||^2 = (1/d) sum_k 1/lambda_k^2, which tends to (1+2s)/(1+4s)^{3/2}.
    let s = 1.0;
    let smoothing = LaplacianSmoothing::new(s).expect("valid s");
    let d = 4096;
    let predicted: f64 = (0..d).map(|k| smoothing.eigenvalue(k, d).powi(-2)).sum::<f64>() / d as f64;
    assert!((predicted - (1.0 + 2.0 * s) / (1.0 + 4.0 * s).powf(1.5)).abs() < 1e-6);
    let z = dp_kernels::gaussian::normals(&dp_kernels::StreamPosition { key: [9; 8], stream: 1, block: 0 }, d * 64);
    let ratio: f64 = z
        .chunks(d)
        .map(|c| {
            let out = smoothing.apply_fft(c);
            out.iter().map(|x| f64::from(*x).powi(2)).sum::<f64>()
                / c.iter().map(|x| f64::from(*x).powi(2)).sum::<f64>()
        })
        .sum::<f64>()
        / 64.0;
    assert!((ratio - predicted).abs() < 0.02 * predicted, "measured {ratio}, predicted {predicted}");
}
