//! Linking dp-engine changes nothing process-wide, and setting up a run keeps freed memory
//! (`host::keep_freed_memory`, made by the engine): glibc's allocator keeps its defaults in a
//! program that uses the library (a 64 MiB block comes from its own mmap, glibc's default for any
//! block over 32 MiB) until `make_private` sets up a run, beside another running thread as
//! a program's data loader and Burn's pool are; the same block then comes from the heap. It runs
//! alone (`harness = false`): it reads its own process's allocator statistics.

use burn::data::dataloader::batcher::Batcher;
use burn::data::dataset::InMemDataset;
use burn::module::Module;
use burn::tensor::{Device, Tensor, TensorData};
use dp_engine::prelude::*;

/// Blocks glibc serves by mmap while a 64 MiB vector is alive, beyond those already mmapped.
fn mmapped_for_a_block() -> usize {
    // SAFETY: mallinfo2 only reads the allocator's statistics.
    let before = unsafe { libc::mallinfo2() }.hblks;
    let block = vec![1u8; 64 << 20];
    // SAFETY: as above.
    let during = unsafe { libc::mallinfo2() }.hblks;
    std::hint::black_box(&block);
    during - before
}

/// A one-weight model.
#[derive(Module, Debug)]
struct Tiny {
    fc: Linear,
}

/// Rows of two features into a [B, 2] tensor.
struct Rows;

impl Batcher<[f32; 2], Tensor<2>> for Rows {
    fn batch(&self, items: Vec<[f32; 2]>, device: &Device) -> Tensor<2> {
        let n = items.len();
        Tensor::from_data(TensorData::new(items.concat(), [n, 2]), device)
    }
}

fn main() {
    if !cfg!(all(target_os = "linux", target_env = "gnu")) {
        return;
    }
    // The library in use, so that whatever it would run at load is linked in.
    std::hint::black_box(dp_engine::privacy::PrivacySettings::default());
    assert_eq!(mmapped_for_a_block(), 1, "glibc's defaults were changed at load: the block came from the heap");

    let (stop, stopped) = std::sync::mpsc::channel::<()>();
    let other = std::thread::spawn(move || stopped.recv());
    let device = dp_engine::backend::cpu().device;
    let model = Tiny { fc: LinearConfig::new(2, 1).init(&device) };
    let rows = InMemDataset::new((0..16).map(|i| [i as f32, 1.0]).collect());
    let lots = DatasetLots::new(rows, Rows, |m: &Tiny, x: Tensor<2>| ExampleLosses {
        losses: m.fc.forward(x).powi_scalar(2).flatten(0, 1),
        correct: None,
    });
    let privacy = PrivacyConfig::new(Gaussian).with_noise_multiplier(1.0).with_lot_size(4);
    PrivacyEngine::new(privacy).make_private(&model, burn::optim::SgdConfig::new().init(), &lots, &device).unwrap();
    assert_eq!(mmapped_for_a_block(), 0, "a run was set up, and glibc still mmapped the block");
    stop.send(()).unwrap();
    other.join().unwrap().unwrap();
    println!("a 64 MiB block: mmapped by default, from the heap once a run is set up beside another thread");
}
