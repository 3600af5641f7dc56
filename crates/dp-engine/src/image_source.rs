//! Image datasets as example sources for the DP step.

use crate::features::Features;
use crate::step::ExampleSource;
use burn::tensor::{Device, Tensor, TensorData};
use dp_data::ImageDataset;

impl ExampleSource for ImageDataset {
    fn batch(&self, indices: &[usize], device: &Device) -> (Features, Vec<u8>) {
        let (pixels, labels) = ImageDataset::batch(self, indices);
        let [c, h, w] = self.shape();
        let x = Tensor::<4>::from_data(TensorData::new(pixels, [indices.len(), c, h, w]), device);
        (Features::Image(x), labels)
    }

    fn classes(&self) -> usize {
        ImageDataset::classes(self)
    }
}
