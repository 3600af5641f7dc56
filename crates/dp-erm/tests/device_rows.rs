//! The batched device gradient sums (Burn f32, ndarray and wgpu) against the f64 host loop, one
//! example at a time, whose per-example gradients oracles.rs checks against finite differences.
//! wgpu runs on lavapipe in CI, where DPTRAIN_REQUIRE_WGPU=1 turns a missing adapter into a failure.

use crate::common::synthetic;
use burn::tensor::Device;
use dp_erm::ModelKind;
use dp_erm::device_rows::DeviceRows;
use dp_erm::linalg::norm;
use dp_erm::rng::NoiseRng;
use dp_erm::row_sums::{HostRows, RowSums};

fn devices() -> Vec<(&'static str, Device)> {
    let mut devices = vec![("cpu", dp_kernels::backend::cpu().device)];
    if let Some(wgpu) = dp_kernels::wgpu_probe::wgpu_for_tests() {
        devices.push(("wgpu", wgpu));
    }
    devices
}

/// max |a - b| / max |b|.
fn relative_error(a: &[f64], b: &[f64]) -> f64 {
    let scale = b.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    a.iter().zip(b).fold(0.0f64, |m, (x, y)| m.max((x - y).abs())) / scale
}

#[test]
fn device_sums_match_the_host_loop_for_every_model_subset_and_clip() {
    // (model family, classes): binary logistic, softmax, and the MLP with 2 and 3 classes.
    let cases = [(ModelKind::Logreg, 2), (ModelKind::Logreg, 3), (ModelKind::Mlp, 2), (ModelKind::Mlp, 3)];
    for (name, device) in devices() {
        // Parameter scales: moderate, and large enough to saturate the MLP's tanh units (as
        // heavily perturbed inputs do), where f32's 1 - tanh^2 would lose its accuracy.
        for ((kind, classes), scale) in cases.into_iter().flat_map(|c| [(c, 1.5), (c, 12.0)]) {
            let data = synthetic(40, 6, classes, 3);
            let model = kind.build(data.dim, classes);
            let theta = NoiseRng::new(Some(11), 2).gaussian(model.dim(), scale);
            let host = HostRows { model: model.as_ref(), data: &data };
            let norms: Vec<f64> = (0..data.len()).map(|i| norm(&host.gradient_sum(&theta, Some(&[i]), None))).collect();
            let mut sorted = norms.clone();
            sorted.sort_by(f64::total_cmp);
            // The median: some examples' gradients exceed the clip norm and some do not.
            let clip = sorted[norms.len() / 2];
            let device_rows = DeviceRows::new(kind, &data, &device);
            let subset: Vec<usize> = (0..data.len()).filter(|i| i % 3 != 1).collect();
            for (rows, clip) in
                [(None, None), (Some(&subset[..]), None), (Some(&subset[..]), Some(clip)), (None, Some(clip))]
            {
                let want = host.gradient_sum(&theta, rows, clip);
                let got = device_rows.gradient_sum(&theta, rows, clip);
                let err = relative_error(&got, &want);
                assert!(
                    err < 1e-5,
                    "{name} {kind:?} K={classes} scale {scale} rows {:?} clip {clip:?}: error {err:e}",
                    rows.map(<[_]>::len)
                );
            }
            assert_eq!(device_rows.gradient_sum(&theta, Some(&[]), Some(clip)), vec![0.0; model.dim()]);
            // Clipping must bind: the clipped full sum differs from the unclipped one.
            let clipped = device_rows.gradient_sum(&theta, None, Some(clip));
            assert!(relative_error(&clipped, &device_rows.gradient_sum(&theta, None, None)) > 1e-2);
        }
    }
}
