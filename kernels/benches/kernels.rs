//! Throughput of each DP kernel in GB/s of the bytes its passes must move, beside a plain
//! elementwise `x * 2` on the same device (what Burn's own kernels reach: the practical memory
//! bandwidth), so the table shows how close each kernel is to the limit.
//!
//! Device: `DPTRAIN_BENCH_DEVICE=cpu|wgpu` (default: wgpu when the adapter is physical hardware,
//! else cpu). Run: `cargo bench -p dp-kernels --bench kernels`.

use burn::tensor::{Device, Tensor, TensorData};
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use dp_kernels::sigma_solver::SolverSchedule;
use dp_kernels::wgpu_probe::open_wgpu;
use dp_kernels::{LaplacianSmoothing, NoiseScale, StreamPosition, noisy_scale, smooth, sphere_sigma};

/// Elements of the noise and smoothing benchmarks (16 MiB of f32).
const N: usize = 1 << 22;
/// Coordinates of the solver benchmark.
const D: usize = 1 << 18;
/// Bytes per coordinate per solver iteration: the three passes read sigma and Delta, the second
/// and third write Delta, the third reads w and writes sigma (f32 each).
const SOLVER_BYTES_PER_ITERATION: u64 = 40;

#[allow(deprecated)]
fn device() -> (Device, String) {
    let cpu = || (Device::ndarray(), "cpu".to_string());
    match std::env::var("DPTRAIN_BENCH_DEVICE").as_deref() {
        Ok("cpu") => cpu(),
        Ok("wgpu") => match open_wgpu() {
            Ok((d, id)) => (d, format!("wgpu {}", id.map(|i| i.0).unwrap_or_default())),
            Err(e) => panic!("{e}"),
        },
        _ => match open_wgpu() {
            Ok((d, Some((name, true)))) => (d, format!("wgpu {name}")),
            _ => cpu(),
        },
    }
}

fn ramp(n: usize, device: &Device) -> Tensor<1> {
    let values: Vec<f32> = (0..n).map(|i| (i % 1000) as f32 * 1e-3).collect();
    Tensor::from_data(TensorData::new(values, [n]), device)
}

fn kernels(c: &mut Criterion) {
    let (device, name) = device();
    let sync = || device.sync().expect("device sync");
    let position = StreamPosition { key: [7; 8], stream: 1, block: 0 };
    let x = ramp(N, &device);
    let sigma = NoiseScale::PerCoordinate(Box::new(ramp(N, &device).add_scalar(0.5)));
    let mut group = c.benchmark_group(format!("kernels on {name}"));
    group.sample_size(10);
    group.throughput(Throughput::Bytes(8 * N as u64));
    group.bench_function(BenchmarkId::new("burn x*2 (bandwidth reference)", N), |b| {
        b.iter(|| {
            let _ = x.clone().mul_scalar(2.0);
            sync();
        })
    });
    group.bench_function(BenchmarkId::new("noise, scalar sigma", N), |b| {
        b.iter(|| {
            let _ = noisy_scale(x.clone(), &NoiseScale::Uniform(1.0), &position, 0.5).expect("noise");
            sync();
        })
    });
    let smoothing = LaplacianSmoothing::new(1.0).expect("s = 1");
    group.bench_function(BenchmarkId::new("laplacian smoothing s=1", N), |b| {
        b.iter(|| {
            let _ = smooth(x.clone(), &smoothing).expect("smoothing");
            sync();
        })
    });
    group.throughput(Throughput::Bytes(12 * N as u64));
    group.bench_function(BenchmarkId::new("noise, per-coordinate sigma", N), |b| {
        b.iter(|| {
            let _ = noisy_scale(x.clone(), &sigma, &position, 0.5).expect("noise");
            sync();
        })
    });
    let schedule = SolverSchedule::default();
    group.throughput(Throughput::Bytes(SOLVER_BYTES_PER_ITERATION * schedule.iterations as u64 * D as u64));
    let w = ramp(D, &device);
    group.bench_function(BenchmarkId::new("sigma solver, 50 iterations", D), |b| {
        b.iter(|| {
            let _ = sphere_sigma(w.clone(), 1.0, 0.5, &schedule).expect("solver");
            sync();
        })
    });
    group.finish();
}

criterion_group!(benches, kernels);
criterion_main!(benches);
