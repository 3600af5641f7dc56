//! An in-memory image classification dataset: raw bytes kept compact, normalised per batch; or
//! real-valued features of the same layout (a fixed transform's output, such as scattering
//! coefficients), taken as they are.

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

/// How an example's values are stored.
#[derive(Debug, Clone)]
enum Values {
    /// Raw bytes, normalised per channel when a batch is taken.
    Pixels { bytes: Vec<u8>, normalization: Normalization },
    /// Real values, taken as they are.
    Features(Vec<f32>),
}

/// Images (or feature maps) of one shape with integer class labels.
#[derive(Debug, Clone)]
pub struct ImageDataset {
    values: Values,
    labels: Vec<u8>,
    shape: [usize; 3],
    classes: usize,
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
        Self::check(pixels.len(), &labels, shape, classes)?;
        let invalid = |reason: String| Err(DataError::InvalidParameter { name: "dataset", reason });
        if normalization.mean.len() != shape[0]
            || normalization.std.len() != shape[0]
            || normalization.std.iter().any(|s| !(s.is_finite() && *s > 0.0))
        {
            return invalid(format!("normalisation {normalization:?} does not fit {} channels", shape[0]));
        }
        Ok(Self { values: Values::Pixels { bytes: pixels, normalization }, labels, shape, classes })
    }

    /// A dataset of example-major CHW real `features`, used as they are; refused unless every
    /// value is finite.
    pub fn from_features(features: Vec<f32>, labels: Vec<u8>, shape: [usize; 3], classes: usize) -> Result<Self> {
        Self::check(features.len(), &labels, shape, classes)?;
        if features.iter().any(|x| !x.is_finite()) {
            let reason = "a feature is not a finite number".to_string();
            return Err(DataError::InvalidParameter { name: "dataset", reason });
        }
        Ok(Self { values: Values::Features(features), labels, shape, classes })
    }

    /// Refuses `values` scalars that are not `labels.len()` examples of `shape`, or a label not
    /// below `classes`.
    fn check(values: usize, labels: &[u8], shape: [usize; 3], classes: usize) -> Result<()> {
        let size: usize = shape.iter().product();
        let invalid = |reason: String| Err(DataError::InvalidParameter { name: "dataset", reason });
        if size == 0 || Some(values) != labels.len().checked_mul(size) {
            return invalid(format!("{values} values do not hold {} examples of shape {shape:?}", labels.len()));
        }
        if let Some(bad) = labels.iter().find(|&&l| usize::from(l) >= classes) {
            return invalid(format!("label {bad} is not below the number of classes {classes}"));
        }
        Ok(())
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

    /// SHA-256 (hex) of everything a model trained on the set reads: shape, classes, labels,
    /// values and normalisation. Equal digests, equal training data.
    pub fn digest(&self) -> String {
        use sha2::{Digest, Sha256};
        let mut h = Sha256::new();
        for n in self.shape.iter().chain([&self.classes, &self.labels.len()]) {
            h.update((*n as u64).to_le_bytes());
        }
        h.update(&self.labels);
        match &self.values {
            Values::Pixels { bytes, normalization } => {
                h.update(b"pixels");
                for x in normalization.mean.iter().chain(&normalization.std) {
                    h.update(x.to_le_bytes());
                }
                h.update(bytes);
            }
            Values::Features(values) => {
                h.update(b"features");
                values.iter().for_each(|x| h.update(x.to_le_bytes()));
            }
        }
        h.finalize().iter().map(|b| format!("{b:02x}")).collect()
    }

    /// The first `at` examples and the others, as two datasets (`at` at most the length).
    pub fn split_off(self, at: usize) -> (Self, Self) {
        let at = at.min(self.len());
        let size: usize = self.shape.iter().product();
        let (values, rest) = match self.values {
            Values::Pixels { mut bytes, normalization } => {
                let rest = bytes.split_off(at * size);
                (
                    Values::Pixels { bytes, normalization: normalization.clone() },
                    Values::Pixels { bytes: rest, normalization },
                )
            }
            Values::Features(mut values) => {
                let rest = values.split_off(at * size);
                (Values::Features(values), Values::Features(rest))
            }
        };
        let mut labels = self.labels;
        let rest_labels = labels.split_off(at);
        let (shape, classes) = (self.shape, self.classes);
        (Self { values, labels, shape, classes }, Self { values: rest, labels: rest_labels, shape, classes })
    }

    /// Normalised pixels or features (CHW per example, examples concatenated) and labels of
    /// `indices`.
    pub fn batch(&self, indices: &[usize]) -> (Vec<f32>, Vec<u8>) {
        let [c, h, w] = self.shape;
        let (plane, size) = (h * w, c * h * w);
        let mut images = Vec::with_capacity(indices.len() * size);
        for &i in indices {
            match &self.values {
                Values::Pixels { bytes, normalization } => {
                    for (ch, channel) in bytes[i * size..(i + 1) * size].chunks_exact(plane).enumerate() {
                        let (mean, std) = (normalization.mean[ch], normalization.std[ch]);
                        images.extend(channel.iter().map(|&p| (f32::from(p) / 255.0 - mean) / std));
                    }
                }
                Values::Features(values) => images.extend_from_slice(&values[i * size..(i + 1) * size]),
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
    fn the_digest_changes_with_any_example_label_or_normalisation() {
        let d = |pixels: Vec<u8>, labels: Vec<u8>, n: Normalization| {
            ImageDataset::new(pixels, labels, [2, 1, 2], 2, n).unwrap()
        };
        let base = d(vec![0, 255, 255, 0, 51, 102, 153, 204], vec![1, 0], norm(2)).digest();
        assert_eq!(base, d(vec![0, 255, 255, 0, 51, 102, 153, 204], vec![1, 0], norm(2)).digest());
        assert_ne!(base, d(vec![0, 255, 255, 0, 51, 102, 153, 205], vec![1, 0], norm(2)).digest());
        assert_ne!(base, d(vec![0, 255, 255, 0, 51, 102, 153, 204], vec![1, 1], norm(2)).digest());
        let other = Normalization { mean: vec![0.5, 0.4], std: vec![0.5; 2] };
        assert_ne!(base, d(vec![0, 255, 255, 0, 51, 102, 153, 204], vec![1, 0], other).digest());
        let features = ImageDataset::from_features(vec![0.5, -3.0, 7.25, 1e-3], vec![1, 0], [1, 1, 2], 2).unwrap();
        let shorter = ImageDataset::from_features(vec![0.5, -3.0], vec![1], [1, 1, 2], 2).unwrap();
        assert_ne!(features.digest(), shorter.digest());
        assert_eq!(base.len(), 64);
    }

    #[test]
    fn features_are_taken_as_they_are() {
        let d = ImageDataset::from_features(vec![0.5, -3.0, 7.25, 1e-3], vec![1, 0], [1, 1, 2], 2).unwrap();
        assert_eq!(d.batch(&[1, 0]), (vec![7.25, 1e-3, 0.5, -3.0], vec![0, 1]));
        assert!(ImageDataset::from_features(vec![0.0, f32::NAN], vec![0], [1, 1, 2], 2).is_err());
        assert!(ImageDataset::from_features(vec![0.0; 3], vec![0], [1, 1, 2], 2).is_err());
    }

    #[test]
    fn split_off_keeps_examples_and_labels_together() {
        let d = ImageDataset::new(vec![0, 1, 2, 3, 4, 5], vec![0, 1, 0], [1, 1, 2], 2, norm(1)).unwrap();
        let (head, tail) = d.split_off(2);
        assert_eq!((head.len(), tail.len()), (2, 1));
        assert_eq!(tail.batch(&[0]), (vec![(4.0 / 255.0 - 0.5) / 0.5, (5.0 / 255.0 - 0.5) / 0.5], vec![0]));
        assert_eq!(head.batch(&[1]).1, vec![1]);
    }

    #[test]
    fn rejects_inconsistent_data() {
        assert!(ImageDataset::new(vec![0; 5], vec![0, 1], [1, 1, 2], 2, norm(1)).is_err());
        assert!(ImageDataset::new(vec![0; 4], vec![0, 7], [1, 1, 2], 2, norm(1)).is_err());
        assert!(ImageDataset::new(vec![0; 4], vec![0, 1], [1, 1, 2], 2, norm(3)).is_err());
    }
}
