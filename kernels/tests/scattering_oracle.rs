//! The scattering transform against Kymatio 0.3's own output (scripts/reference/
//! kymatio_scattering.py, values in tests/data/kymatio_scattering.json): two 28 x 28 images
//! (Fashion-MNIST's size: 81 x 7 x 7) and a 32 x 32 one (CIFAR-10's: 81 x 8 x 8), to 1e-4.

use dp_kernels::scattering::Scattering2d;
use serde_json::Value;

fn floats(v: &Value) -> Vec<f64> {
    v.as_array().expect("an array").iter().map(|x| x.as_f64().expect("a number")).collect()
}

#[test]
fn scattering_matches_kymatio() {
    let reference: Value =
        serde_json::from_str(include_str!("data/kymatio_scattering.json")).expect("the reference values");
    for case in reference["cases"].as_array().expect("cases") {
        let shape = floats(&case["shape"]);
        let (m, n) = (shape[0] as usize, shape[1] as usize);
        let scattering = Scattering2d::new(m, n, 2, 8).expect("a valid size");
        let out = floats(&case["output_shape"]);
        assert_eq!(scattering.channels(), out[0] as usize);
        assert_eq!(scattering.output_size(), (out[1] as usize, out[2] as usize));
        let got = scattering.transform(&floats(&case["image"]));
        let want = floats(&case["scattering"]);
        assert_eq!(got.len(), want.len());
        let worst = got.iter().zip(&want).map(|(g, w)| (g - w).abs() / w.abs().max(1e-2)).fold(0.0, f64::max);
        assert!(worst < 1e-4, "{}: worst relative error {worst:e}", case["kind"]);
        let batch = scattering.transform_all(&[floats(&case["image"]), floats(&case["image"])].concat());
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
