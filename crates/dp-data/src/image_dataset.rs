//! An in-memory image classification dataset: raw bytes kept compact, normalised per batch.

use crate::error::{DataError, Result};
use serde::{Deserialize, Serialize};

/// Per-channel normalisation x -> (x/255 - mean) / std. The constants are public (published for
/// each dataset), never computed from the private training data, whose statistics would leak.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Normalization {
    /// Mean of each channel on the [0, 1] scale.
    pub mean: Vec<f32>,
    /// Standard deviation of each channel on the [0, 1] scale.
    pub std: Vec<f32>,
}

/// Images of one shape with integer class labels.
#[derive(Debug, Clone)]
pub struct ImageDataset {
    pixels: Vec<u8>,
    labels: Vec<u8>,
    shape: [usize; 3],
    classes: usize,
    normalization: Normalization,
}

impl ImageDataset {
    /// A dataset from example-major CHW `pixels`; checks sizes, labels and normalisation.
    pub fn new(
        pixels: Vec<u8>,
        labels: Vec<u8>,
        shape: [usize; 3],
        classes: usize,
        normalization: Normalization,
    ) -> Result<Self> {
        let size: usize = shape.iter().product();
        let invalid = |reason: String| Err(DataError::InvalidParameter { name: "dataset", reason });
        if size == 0 || pixels.len() != labels.len() * size {
            return invalid(format!(
                "{} pixel bytes do not hold {} images of shape {shape:?}",
                pixels.len(),
                labels.len()
            ));
        }
        if let Some(bad) = labels.iter().find(|&&l| usize::from(l) >= classes) {
            return invalid(format!("label {bad} is not below the number of classes {classes}"));
        }
        if normalization.mean.len() != shape[0]
            || normalization.std.len() != shape[0]
            || normalization.std.iter().any(|s| !(s.is_finite() && *s > 0.0))
        {
            return invalid(format!("normalisation {normalization:?} does not fit {} channels", shape[0]));
        }
        Ok(Self { pixels, labels, shape, classes, normalization })
    }

    /// Number of examples.
    pub fn len(&self) -> usize {
        self.labels.len()
    }

    /// True when the dataset holds no example.
    pub fn is_empty(&self) -> bool {
        self.labels.is_empty()
    }

    /// (channels, height, width) of every image.
    pub fn shape(&self) -> [usize; 3] {
        self.shape
    }

    /// Number of classes.
    pub fn classes(&self) -> usize {
        self.classes
    }

    /// All labels, in example order.
    pub fn labels(&self) -> &[u8] {
        &self.labels
    }

    /// Normalised pixels (CHW per example, examples concatenated) and labels of `indices`.
    pub fn batch(&self, indices: &[usize]) -> (Vec<f32>, Vec<u8>) {
        let [c, h, w] = self.shape;
        let plane = h * w;
        let mut images = Vec::with_capacity(indices.len() * c * plane);
        for &i in indices {
            let example = &self.pixels[i * c * plane..(i + 1) * c * plane];
            for (ch, channel) in example.chunks_exact(plane).enumerate() {
                let (mean, std) = (self.normalization.mean[ch], self.normalization.std[ch]);
                images.extend(channel.iter().map(|&p| (f32::from(p) / 255.0 - mean) / std));
            }
        }
        (images, indices.iter().map(|&i| self.labels[i]).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn norm(c: usize) -> Normalization {
        Normalization { mean: vec![0.5; c], std: vec![0.5; c] }
    }

    #[test]
    fn batch_normalises_per_channel() {
        let pixels = vec![0, 255, 255, 0, 51, 102, 153, 204];
        let d = ImageDataset::new(pixels, vec![1, 0], [2, 1, 2], 2, norm(2)).unwrap();
        let (x, y) = d.batch(&[1]);
        assert_eq!(y, vec![0]);
        let want: Vec<f32> = [51u8, 102, 153, 204].iter().map(|&p| (f32::from(p) / 255.0 - 0.5) / 0.5).collect();
        assert_eq!(x, want);
    }

    #[test]
    fn rejects_inconsistent_data() {
        assert!(ImageDataset::new(vec![0; 5], vec![0, 1], [1, 1, 2], 2, norm(1)).is_err());
        assert!(ImageDataset::new(vec![0; 4], vec![0, 7], [1, 1, 2], 2, norm(1)).is_err());
        assert!(ImageDataset::new(vec![0; 4], vec![0, 1], [1, 1, 2], 2, norm(3)).is_err());
    }
}
