//! ScatterNet in front of a user's head (Tramèr and Boneh 2021): the fixed 2-D scattering
//! transform (`dp_kernels::scattering`, J = 2, L = 8, checked against Kymatio) applied to a batch
//! of images, with no parameter, so that a DP model's forward pass can read ScatterNet features
//! of augmented or raw images. It runs on the host: the batch is read back, each image
//! transformed in parallel, and the features uploaded to the batch's device. Without
//! augmentation, transform the data set once instead (the dptrain app caches it).

use crate::error::{EngineError, Result};
use burn::tensor::{Tensor, TensorData};
use dp_kernels::scattering::Scattering2d;
use dp_kernels::tensor_io::to_host;
use std::fmt;
use std::sync::Arc;

/// Scales of the transform.
const J: usize = 2;
/// Angles of the transform.
const L: usize = 8;

/// The scattering transform of `channels` x height x width images; cheap to clone, so a model
/// can hold it as a `#[module(skip)]` field.
#[derive(Clone)]
pub struct ScatterNet {
    transform: Arc<Scattering2d>,
    input: [usize; 3],
}

impl fmt::Debug for ScatterNet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ScatterNet(J={J}, L={L}, input {:?}, output {:?})", self.input, self.output_shape())
    }
}

impl ScatterNet {
    /// The transform of `[channels, height, width]` images, refused when they are too small for
    /// two scales.
    pub fn new(input: [usize; 3]) -> Result<Self> {
        let transform = Scattering2d::new(input[1], input[2], J, L).filter(|_| input[0] > 0).ok_or_else(|| {
            EngineError::invalid("scatter net", format!("images of {input:?} are too small for {J} scales"))
        })?;
        Ok(Self { transform: Arc::new(transform), input })
    }

    /// [81 channels per image channel, height / 4 - ..., width / 4 - ...] of the features.
    pub fn output_shape(&self) -> [usize; 3] {
        let (h, w) = self.transform.output_size();
        [self.input[0] * self.transform.channels(), h, w]
    }

    /// Refused unless images of `shape` [C, H, W] are what the transform takes.
    pub fn check_input(&self, shape: [usize; 3]) -> Result<()> {
        if shape != self.input {
            return Err(EngineError::invalid(
                "scatter net",
                format!("images of {shape:?}, for a transform of {:?}", self.input),
            ));
        }
        Ok(())
    }

    /// The features of `images` [B, C, H, W], as [B, 81 C, H', W'] on their device (no gradient
    /// flows through: the transform has no parameter).
    pub fn apply(&self, images: Tensor<4>) -> Result<Tensor<4>> {
        let [b, c, h, w] = images.dims();
        self.check_input([c, h, w])?;
        let device = images.device();
        let features = self.features_of(&to_host(&images.detach()));
        let [oc, oh, ow] = self.output_shape();
        Ok(Tensor::from_data(TensorData::new(features, [b, oc, oh, ow]), &device))
    }

    /// The features of host images (examples of `[C, H, W]`, concatenated), in parallel and in
    /// order: what [`Self::apply`] computes, for a data set transformed once.
    pub fn features_of(&self, images: &[f32]) -> Vec<f32> {
        let host: Vec<f64> = images.iter().map(|&x| f64::from(x)).collect();
        self.transform.transform_all(&host).into_iter().map(|x| x as f32).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend;

    #[test]
    fn a_batch_of_two_channel_images_is_each_channel_transformed() {
        let device = backend::cpu().device;
        let net = ScatterNet::new([2, 28, 28]).unwrap();
        assert_eq!(net.output_shape(), [162, 7, 7]);
        let values: Vec<f32> = (0..3 * 2 * 784).map(|i| ((i * 37 % 101) as f32) / 100.0).collect();
        let images = Tensor::<4>::from_data(TensorData::new(values.clone(), [3, 2, 28, 28]), &device);
        let features = net.apply(images).unwrap();
        assert_eq!(features.dims(), [3, 162, 7, 7]);
        let got = to_host(&features);
        // Example 1, channel 1 is the 4th image; its 81 maps are that example's second half.
        let image: Vec<f64> = values[3 * 784..4 * 784].iter().map(|&x| f64::from(x)).collect();
        let want = Scattering2d::new(28, 28, J, L).unwrap().transform(&image);
        let start = 162 * 49 + 81 * 49;
        assert!(got[start..start + 81 * 49].iter().zip(&want).all(|(g, w)| (f64::from(*g) - w).abs() < 1e-5));
        let wrong = Tensor::<4>::zeros([1, 1, 28, 28], &device);
        assert!(net.apply(wrong).is_err());
        assert!(ScatterNet::new([1, 2, 28]).is_err());
    }
}
