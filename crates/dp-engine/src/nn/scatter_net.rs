//! ScatterNet in front of a user's head (Tramèr and Boneh 2021): the fixed 2-D scattering
//! transform (`dp_kernels::scattering`, J = 2, L = 8, checked against Kymatio) applied to a batch
//! of images, with no parameter, so that a DP model's forward pass can read ScatterNet features
//! of augmented or raw images. `apply` runs on the batch's device where that is a GPU
//! (`DeviceScattering`: Burn operations, f32) and on the host for a CPU backend (rustfft, f64,
//! faster there); `features_of` is the host form, for a data set transformed once (the dptrain
//! app caches it).

use crate::error::{EngineError, Result};
use burn::tensor::{Device, Tensor, TensorData};
use dp_kernels::backend::SelectedDevice;
use dp_kernels::scattering::Scattering2d;
use dp_kernels::scattering::on_device::DeviceScattering;
use dp_kernels::tensor_io::to_host;
use std::fmt;
use std::sync::{Arc, Mutex};

/// Image channels transformed at once on the device (bounds memory: about 2 MB each for
/// 28 x 28 images).
const CHUNK: usize = 256;

/// Scales of the transform.
const J: usize = 2;
/// Angles of the transform.
const L: usize = 8;

/// The transform's filters and DFT matrices on the device it last ran on, kept so that each
/// batch of views does not upload them again.
type OnDevice = Arc<Mutex<Option<(Device, Arc<DeviceScattering>)>>>;

/// The scattering transform of `channels` x height x width images; cheap to clone, so a model
/// can hold it as a `#[module(skip)]` field.
#[derive(Clone)]
pub struct ScatterNet {
    transform: Arc<Scattering2d>,
    input: [usize; 3],
    on_device: OnDevice,
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
        Ok(Self { transform: Arc::new(transform), input, on_device: OnDevice::default() })
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

    /// The features of `images` [B, C, H, W], as [B, 81 C, H', W'] on their device: computed
    /// there on wgpu, in chunks of `CHUNK` image channels, and on the host for a CPU backend
    /// (no gradient flows through: the transform has no parameter).
    pub fn apply(&self, images: Tensor<4>) -> Result<Tensor<4>> {
        let [b, c, h, w] = images.dims();
        self.check_input([c, h, w])?;
        if b == 0 {
            return Err(EngineError::invalid("scatter net", "an empty batch has no features"));
        }
        let device = images.device();
        let [oc, oh, ow] = self.output_shape();
        if !SelectedDevice::of(&device).is_cube() {
            // On the CPU the host's FFTs beat the device form's DFT products (7.6 s against
            // 12.9 s for 16,384 images on the 2-core VM).
            let features = self.features_of(&to_host(&images.detach()));
            return Ok(Tensor::from_data(TensorData::new(features, [b, oc, oh, ow]), &device));
        }
        Ok(self.on_device(images, CHUNK).reshape([b, oc, oh, ow]))
    }

    /// The features of `images` computed on their device, `chunk` image channels at a time:
    /// [B C, 81, H', W'].
    fn on_device(&self, images: Tensor<4>, chunk: usize) -> Tensor<4> {
        let [b, c, h, w] = images.dims();
        let on_device = self.device_form(&images.device());
        let planes = images.detach().inner().reshape([b * c, h, w]);
        let chunks: Vec<Tensor<4>> = (0..b * c)
            .step_by(chunk.max(1))
            .map(|at| on_device.apply(planes.clone().narrow(0, at, chunk.max(1).min(b * c - at))))
            .collect();
        Tensor::cat(chunks, 0)
    }

    /// The transform on `device`: the one kept from the last call when it ran there, else built
    /// (and kept).
    fn device_form(&self, device: &Device) -> Arc<DeviceScattering> {
        // A poisoned lock only means another thread panicked while replacing the kept form.
        let mut kept = self.on_device.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        match kept.as_ref() {
            Some((on, form)) if on == device => form.clone(),
            _ => {
                let form = Arc::new(DeviceScattering::new(&self.transform, device));
                *kept = Some((device.clone(), form.clone()));
                form
            }
        }
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

    /// `got` [B, 162, 7, 7] for the two-channel `values` against the host transform of three of
    /// their image channels.
    fn check_planes(got: &[f32], values: &[f32], examples: [(usize, usize); 3]) {
        for (example, channel) in examples {
            let plane = example * 2 + channel;
            let image: Vec<f64> = values[plane * 784..(plane + 1) * 784].iter().map(|&x| f64::from(x)).collect();
            let want = Scattering2d::new(28, 28, J, L).unwrap().transform(&image);
            let start = example * 162 * 49 + channel * 81 * 49;
            let worst = got[start..start + 81 * 49]
                .iter()
                .zip(&want)
                .map(|(g, w)| (f64::from(*g) - w).abs())
                .fold(0.0, f64::max);
            assert!(worst < 1e-5, "example {example} channel {channel}: {worst:e} from the host transform");
        }
    }

    fn images(b: usize, device: &Device) -> (Vec<f32>, Tensor<4>) {
        let values: Vec<f32> = (0..b * 2 * 784).map(|i| ((i * 37 % 101) as f32) / 100.0).collect();
        (values.clone(), Tensor::<4>::from_data(TensorData::new(values, [b, 2, 28, 28]), device))
    }

    #[test]
    fn a_batch_of_two_channel_images_is_each_channel_transformed() {
        let device = backend::cpu().device;
        let net = ScatterNet::new([2, 28, 28]).unwrap();
        assert_eq!(net.output_shape(), [162, 7, 7]);
        let (values, batch) = images(3, &device);
        let features = net.apply(batch).unwrap();
        assert_eq!(features.dims(), [3, 162, 7, 7]);
        check_planes(&to_host(&features), &values, [(0, 0), (1, 1), (2, 1)]);
        let wrong = Tensor::<4>::zeros([1, 1, 28, 28], &device);
        assert!(net.apply(wrong).is_err());
        assert!(net.apply(Tensor::<4>::zeros([0, 2, 28, 28], &device)).is_err());
        assert!(ScatterNet::new([1, 2, 28]).is_err());
    }

    /// The device form in chunks of 4 image channels (6 in all: the second chunk is short), on
    /// ndarray and on wgpu (lavapipe in CI), by one transform: its form is kept while the device
    /// stays and built again when it changes.
    #[test]
    fn the_device_form_in_chunks_gives_the_host_features() {
        let net = ScatterNet::new([2, 28, 28]).unwrap();
        let devices = [Some(backend::ndarray().device), dp_kernels::wgpu_probe::wgpu_for_tests()];
        for device in devices.into_iter().flatten() {
            let (values, batch) = images(3, &device);
            let got = to_host(&net.on_device(batch, 4).reshape([3, 162, 7, 7]));
            check_planes(&got, &values, [(0, 0), (1, 1), (2, 1)]);
            assert!(Arc::ptr_eq(&net.device_form(&device), &net.device_form(&device)), "built again");
        }
    }
}
