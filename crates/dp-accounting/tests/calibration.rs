//! Calibration returns the smallest noise multiplier that meets the target, to 1e-4 relative, from
//! epsilon 0.01 to 100, with each accountant.

use dp_accounting::{Accountant, PrivacyLedger, PrvAccountant, RdpAccountant, calibrate_noise_multiplier};

fn check(acc: &dyn Accountant, target: f64, delta: f64, q: f64, steps: u64) {
    let c = calibrate_noise_multiplier(acc, target, delta, q, steps)
        .unwrap_or_else(|e| panic!("{} eps={target} q={q} T={steps}: {e}", acc.name()));
    let eps = |z: f64| acc.epsilon(&PrivacyLedger::homogeneous(z, q, steps).unwrap(), delta).unwrap().epsilon;
    let z = c.noise_multiplier;
    assert!(eps(z) <= target, "{}: eps({z}) = {} > {target}", acc.name(), eps(z));
    let below = z * (1.0 - 1e-4);
    assert!(eps(below) > target, "{}: z is not the smallest: eps({below}) = {}", acc.name(), eps(below));
    assert_eq!(c.report.epsilon, eps(z));
}

#[test]
fn rdp_calibration_from_0_01_to_100() {
    let acc = RdpAccountant::default();
    for &target in &[0.01, 0.1, 1.0, 3.0, 10.0, 100.0] {
        for &(q, steps) in &[(256.0 / 60000.0, 14062u64), (0.01, 100), (1.0, 10), (0.1, 60000)] {
            check(&acc, target, 1e-5, q, steps);
        }
    }
}

#[test]
fn prv_calibration_mnist_and_small_epsilon() {
    let acc = PrvAccountant::default();
    check(&acc, 3.0, 1e-5, 256.0 / 60000.0, 14062);
    check(&acc, 0.5, 1e-5, 0.01, 1000);
}
