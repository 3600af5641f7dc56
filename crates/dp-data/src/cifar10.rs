//! The CIFAR-10 binary format: records of one label byte and 3072 pixel bytes (32x32, channel
//! planes R, G, B), in data_batch_1..5.bin (train) and test_batch.bin (test).

use crate::error::{DataError, Result};
use crate::idx::read_maybe_gzip;
use crate::image_dataset::{ImageDataset, Normalization};
use crate::split::Split;
use std::path::{Path, PathBuf};

const RECORD: usize = 1 + 3 * 32 * 32;
/// Records in each CIFAR-10 batch file (the most a file may hold: a larger one is refused before
/// it is read further).
const BATCH_RECORDS: usize = 10_000;

/// The folder holding the .bin files: `dir` itself or its `cifar-10-batches-bin` subfolder.
fn batches_dir(dir: &Path) -> PathBuf {
    let nested = dir.join("cifar-10-batches-bin");
    if nested.is_dir() { nested } else { dir.to_path_buf() }
}

/// Loads one split of CIFAR-10 from `dir`.
pub fn load_cifar10(dir: &Path, split: Split, normalization: Normalization) -> Result<ImageDataset> {
    let dir = batches_dir(dir);
    let files: Vec<PathBuf> = match split {
        Split::Train => (1..=5).map(|i| dir.join(format!("data_batch_{i}.bin"))).collect(),
        Split::Test => vec![dir.join("test_batch.bin")],
    };
    let (mut pixels, mut labels) = (Vec::new(), Vec::new());
    for path in &files {
        let bytes = read_maybe_gzip(path, BATCH_RECORDS * RECORD)?;
        if bytes.is_empty() || bytes.len() % RECORD != 0 {
            return Err(DataError::corrupt(
                path,
                format!("{} bytes is not a whole number of {RECORD}-byte CIFAR-10 records", bytes.len()),
            ));
        }
        for record in bytes.chunks_exact(RECORD) {
            if record[0] >= 10 {
                return Err(DataError::corrupt(path, format!("label {} is not a CIFAR-10 class 0-9", record[0])));
            }
            labels.push(record[0]);
            pixels.extend_from_slice(&record[1..]);
        }
    }
    ImageDataset::new(pixels, labels, [3, 32, 32], 10, normalization)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loads_records_and_rejects_truncation() {
        let dir = std::env::temp_dir().join(format!("dp-data-cifar-{}", std::process::id()));
        let nested = dir.join("cifar-10-batches-bin");
        std::fs::create_dir_all(&nested).unwrap();
        let mut bytes = vec![7u8];
        bytes.extend((0..3072).map(|i| (i % 251) as u8));
        std::fs::write(nested.join("test_batch.bin"), &bytes).unwrap();
        let norm = Normalization { mean: vec![0.0; 3], std: vec![1.0; 3] };
        let d = load_cifar10(&dir, Split::Test, norm.clone()).unwrap();
        assert_eq!((d.len(), d.labels()[0]), (1, 7));
        let (x, _) = d.batch(&[0]);
        assert_eq!(x[1024], (1024 % 251) as f32 / 255.0); // first green pixel
        std::fs::write(nested.join("test_batch.bin"), &bytes[..100]).unwrap();
        let e = load_cifar10(&dir, Split::Test, norm).unwrap_err().to_string();
        assert!(e.contains("test_batch.bin") && e.contains("records"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
