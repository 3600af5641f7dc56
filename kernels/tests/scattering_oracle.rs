//! The scattering transform against Kymatio 0.3's own output (scripts/reference/
//! kymatio_scattering.py, values in tests/data/kymatio_scattering.json): two 28 x 28 images
//! (Fashion-MNIST's size: 81 x 7 x 7) and a 32 x 32 one (CIFAR-10's: 81 x 8 x 8), to 1e-4; the
//! host transform (f64, rustfft) and the device one (f32 Burn operations) on ndarray and on
//! wgpu (lavapipe in CI).

use burn::tensor::{Device, Tensor, TensorData};
use dp_kernels::backend;
use dp_kernels::scattering::Scattering2d;
use dp_kernels::scattering::on_device::DeviceScattering;
use dp_kernels::tensor_io::to_host;
use serde_json::Value;

fn floats(v: &Value) -> Vec<f64> {
    v.as_array().expect("an array").iter().map(|x| x.as_f64().expect("a number")).collect()
}

/// One committed case.
struct Case {
    kind: String,
    m: usize,
    n: usize,
    image: Vec<f64>,
    /// Kymatio's coefficients.
    want: Vec<f64>,
}

/// The committed cases.
fn cases() -> Vec<Case> {
    let reference: Value =
        serde_json::from_str(include_str!("data/kymatio_scattering.json")).expect("the reference values");
    let cases = reference["cases"].as_array().expect("cases");
    cases
        .iter()
        .map(|case| {
            let shape = floats(&case["shape"]);
            Case {
                kind: case["kind"].to_string(),
                m: shape[0] as usize,
                n: shape[1] as usize,
                image: floats(&case["image"]),
                want: floats(&case["scattering"]),
            }
        })
        .collect()
}

/// The largest error of `got` against Kymatio's `want`, relative (absolute below 1e-2).
fn worst(got: &[f64], want: &[f64]) -> f64 {
    assert_eq!(got.len(), want.len());
    got.iter().zip(want).map(|(g, w)| (g - w).abs() / w.abs().max(1e-2)).fold(0.0, f64::max)
}

/// The device transform of each case of at most `largest` rows, two copies of its image in one
/// batch, on `device`.
fn check_device(device: &Device, largest: usize) {
    for Case { kind, m, n, image, want } in cases().into_iter().filter(|c| c.m <= largest) {
        let host = Scattering2d::new(m, n, 2, 8).expect("a valid size");
        let on_device = DeviceScattering::new(&host, device);
        let pixels: Vec<f32> = [image.clone(), image].concat().into_iter().map(|x| x as f32).collect();
        let x = Tensor::<3>::from_data(TensorData::new(pixels, [2, m, n]), device);
        let out = on_device.apply(x);
        let (mo, no) = host.output_size();
        assert_eq!(out.dims(), [2, host.channels(), mo, no]);
        let got: Vec<f64> = to_host(&out).into_iter().map(f64::from).collect();
        let half = got.len() / 2;
        for copy in [&got[..half], &got[half..]] {
            let worst = worst(copy, &want);
            assert!(worst < 1e-4, "{kind} on the device: worst relative error {worst:e}");
        }
    }
}

#[test]
fn the_device_transform_matches_kymatio_on_ndarray() {
    check_device(&backend::ndarray().device, usize::MAX);
}

/// Lavapipe compiles a shader per shape and is slow: the 28 x 28 cases.
#[test]
fn the_device_transform_matches_kymatio_on_wgpu() {
    if let Some(device) = dp_kernels::wgpu_probe::wgpu_for_tests() {
        check_device(&device, 28);
    }
}

#[test]
fn scattering_matches_kymatio() {
    for Case { kind, m, n, image, want } in cases() {
        let scattering = Scattering2d::new(m, n, 2, 8).expect("a valid size");
        let got = scattering.transform(&image);
        let worst = worst(&got, &want);
        assert!(worst < 1e-4, "{kind}: worst relative error {worst:e}");
        let batch = scattering.transform_all(&[image.clone(), image].concat());
        assert_eq!(batch, [got.clone(), got].concat(), "in order, the same per image");
    }
}

#[test]
fn sizes_too_small_for_the_scales_are_refused() {
    assert!(Scattering2d::new(2, 28, 2, 8).is_none());
    assert!(Scattering2d::new(28, 28, 0, 8).is_none());
    assert!(Scattering2d::new(28, 28, 2, 0).is_none());
    assert!(Scattering2d::new(28, 28, 64, 8).is_none());
}
