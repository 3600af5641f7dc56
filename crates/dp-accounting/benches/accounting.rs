//! Accountant speed: RDP and PRV epsilon for 100,000 steps, and calibration, in the MNIST DP-SGD
//! setting (z = 1.1, q = 256/60000, delta = 1e-5). Run: cargo bench -p dp-accounting --bench accounting

use criterion::{Criterion, criterion_group, criterion_main};
use dp_accounting::{
    Accountant, Conversion, OrderGrid, PrivacyLedger, PrvAccountant, RdpAccountant, calibrate_noise_multiplier,
};
use std::hint::black_box;
use std::time::Duration;

const Q: f64 = 256.0 / 60000.0;
const DELTA: f64 = 1e-5;

fn epsilon_100k(c: &mut Criterion) {
    let ledger = PrivacyLedger::homogeneous(1.1, Q, 100_000).expect("valid ledger");
    let standard = RdpAccountant::new(OrderGrid::Standard, Conversion::Balle2020);
    let extended = RdpAccountant::default();
    c.bench_function("rdp_epsilon_100k_steps_standard_grid", |b| {
        b.iter(|| standard.epsilon(black_box(&ledger), DELTA).expect("epsilon"))
    });
    c.bench_function("rdp_epsilon_100k_steps_extended_grid", |b| {
        b.iter(|| extended.epsilon(black_box(&ledger), DELTA).expect("epsilon"))
    });
    let prv = PrvAccountant::default();
    let mut group = c.benchmark_group("slow");
    group.sample_size(10).measurement_time(Duration::from_secs(20));
    group.bench_function("prv_epsilon_100k_steps", |b| {
        b.iter(|| prv.epsilon(black_box(&ledger), DELTA).expect("epsilon"))
    });
    group.bench_function("calibrate_rdp_eps3_14062_steps", |b| {
        b.iter(|| calibrate_noise_multiplier(&extended, black_box(3.0), DELTA, Q, 14_062).expect("calibration"))
    });
    group.bench_function("calibrate_prv_eps3_14062_steps", |b| {
        b.iter(|| calibrate_noise_multiplier(&prv, black_box(3.0), DELTA, Q, 14_062).expect("calibration"))
    });
    group.finish();
}

criterion_group!(benches, epsilon_100k);
criterion_main!(benches);
