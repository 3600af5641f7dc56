//! MNIST-format datasets (MNIST, Fashion-MNIST): four IDX files, raw or .gz, in one folder.

use crate::error::{DataError, Result};
use crate::idx::read_idx;
use crate::image_dataset::{ImageDataset, Normalization};
use crate::split::Split;
use std::path::{Path, PathBuf};

/// Finds `stem.gz` or `stem` in `dir`.
fn find(dir: &Path, stem: &str) -> Result<PathBuf> {
    let candidates = [dir.join(format!("{stem}.gz")), dir.join(stem)];
    candidates.iter().find(|p| p.is_file()).cloned().ok_or_else(|| DataError::Io {
        path: candidates[0].clone(),
        reason: std::io::Error::new(std::io::ErrorKind::NotFound, format!("neither it nor {stem} exists")),
    })
}

/// Loads one split of an MNIST-format dataset with 10 classes from `dir`.
pub fn load_mnist_format(dir: &Path, split: Split, normalization: Normalization) -> Result<ImageDataset> {
    let prefix = match split {
        Split::Train => "train",
        Split::Test => "t10k",
    };
    let images_path = find(dir, &format!("{prefix}-images-idx3-ubyte"))?;
    let labels_path = find(dir, &format!("{prefix}-labels-idx1-ubyte"))?;
    let images = read_idx(&images_path, 3)?;
    let labels = read_idx(&labels_path, 1)?;
    if images.dims[0] != labels.dims[0] {
        return Err(DataError::corrupt(
            &labels_path,
            format!("{} labels for {} images in {}", labels.dims[0], images.dims[0], images_path.display()),
        ));
    }
    if let Some(bad) = labels.data.iter().find(|&&l| l >= 10) {
        return Err(DataError::corrupt(&labels_path, format!("label {bad} is not a digit class 0-9")));
    }
    let shape = [1, images.dims[1], images.dims[2]];
    ImageDataset::new(images.data, labels.data, shape, 10, normalization)
        .map_err(|e| DataError::corrupt(&images_path, e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::idx::encode_idx;

    fn write(dir: &Path, name: &str, bytes: &[u8]) {
        std::fs::write(dir.join(name), bytes).unwrap();
    }

    fn norm() -> Normalization {
        Normalization { mean: vec![0.0], std: vec![1.0] }
    }

    #[test]
    fn loads_raw_files_and_reports_mismatches() {
        let dir = std::env::temp_dir().join(format!("dp-data-mnist-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        write(&dir, "t10k-images-idx3-ubyte", &encode_idx(&[2, 2, 2], &[0, 1, 2, 3, 4, 5, 6, 7]));
        write(&dir, "t10k-labels-idx1-ubyte", &encode_idx(&[2], &[3, 9]));
        let d = load_mnist_format(&dir, Split::Test, norm()).unwrap();
        assert_eq!((d.len(), d.shape()), (2, [1, 2, 2]));
        // Missing split: names the file.
        let e = load_mnist_format(&dir, Split::Train, norm()).unwrap_err().to_string();
        assert!(e.contains("train-images-idx3-ubyte"), "{e}");
        // Label count mismatch.
        write(&dir, "t10k-labels-idx1-ubyte", &encode_idx(&[3], &[3, 9, 1]));
        let e = load_mnist_format(&dir, Split::Test, norm()).unwrap_err().to_string();
        assert!(e.contains("3 labels for 2 images"), "{e}");
        // Bad label value.
        write(&dir, "t10k-labels-idx1-ubyte", &encode_idx(&[2], &[3, 10]));
        assert!(load_mnist_format(&dir, Split::Test, norm()).unwrap_err().to_string().contains("label 10"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
