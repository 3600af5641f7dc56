//! Lots of an image dataset with K augmented views of every example (augmentation
//! multiplicity, De et al. 2022), under per-example cross-entropy. The DP step averages an
//! example's K view gradients before clipping it (`LotSource::views`), so each example still
//! moves the sum by at most C and the privacy is that of the run without views; only the
//! compute grows K-fold. Views are cut on the host (`dp_data::CropFlip`) and, for a ScatterNet
//! model, transformed on the batch's device (`ScatterNet::apply`). A view's placement is a
//! function of the key, the step (which `DpOptimizer::step` tells the source, `LotSource::at_step`)
//! and the example, never of which batch the example fell in, so a run resumed at any step draws
//! the same views as one that never stopped, as long as it is given the same key (dptrain keeps
//! it in the run folder's key file: an unseeded run resumes with its views too).

use crate::error::{EngineError, Result};
use crate::lots::classifier::{ImageClassifier, scored};
use crate::lots::source::{ExampleLosses, LotSource};
use crate::nn::scatter_net::ScatterNet;
use burn::tensor::{Device, Tensor, TensorData};
use dp_data::{ChaChaState, CropFlip, ImageDataset, SecretKey};
use std::sync::atomic::{AtomicU64, Ordering};

/// The ChaCha20 stream the views are drawn from (the sampler, noise, initialisation and
/// canaries take 0 to 3).
pub const AUGMENT_STREAM: u64 = 4;

/// Random words set aside for each view's placement (two offsets and a coin use 3 to 6).
const WORDS_PER_VIEW: u128 = 16;

/// Views of an example at most: beyond this the step is hundreds of forward passes per example.
pub const MAX_VIEWS: usize = 256;

/// Refused unless `views` is 1 to [`MAX_VIEWS`].
pub fn check_views(views: usize) -> Result<()> {
    if !(1..=MAX_VIEWS).contains(&views) {
        return Err(EngineError::invalid("augmult", format!("{views} views per example: give 1 to {MAX_VIEWS}")));
    }
    Ok(())
}

/// Lots of `data` with `views` augmented views of each example.
pub struct AugmentedLots<'a> {
    data: &'a ImageDataset,
    augmentation: CropFlip,
    views: usize,
    key: SecretKey,
    step: AtomicU64,
    features: Option<ScatterNet>,
}

impl<'a> AugmentedLots<'a> {
    /// `views` views of each image of `data` drawn as `augmentation` says, from the stream
    /// [`AUGMENT_STREAM`] of `key` (a run's sampler key: `SecretKey::from_seed` for a
    /// reproducible run). Refused for no views, more than [`MAX_VIEWS`], or an augmentation of
    /// other images than `data`'s.
    pub fn new(data: &'a ImageDataset, augmentation: CropFlip, views: usize, key: SecretKey) -> Result<Self> {
        check_views(views)?;
        if augmentation.shape() != data.shape() {
            return Err(EngineError::invalid(
                "augmult",
                format!("views of {:?} images, for a data set of {:?}", augmentation.shape(), data.shape()),
            ));
        }
        Ok(Self { data, augmentation, views, key, step: AtomicU64::new(0), features: None })
    }

    /// The same lots with each view replaced by its ScatterNet features (what a ScatterNet
    /// model's head reads), refused when the transform takes other images than these.
    pub fn with_features(mut self, net: ScatterNet) -> Result<Self> {
        net.check_input(self.data.shape())?;
        self.features = Some(net);
        Ok(self)
    }

    /// The views of the examples `indices`, example after example, as host pixels, and their
    /// labels.
    fn views_of(&self, indices: &[usize]) -> (Vec<f32>, Vec<u8>) {
        let [c, h, w] = self.data.shape();
        let step = u128::from(self.step.load(Ordering::Relaxed));
        let stream = ChaChaState::keyed(self.key.clone(), AUGMENT_STREAM);
        let per_example = WORDS_PER_VIEW * self.views as u128;
        let mut out = Vec::with_capacity(indices.len() * self.views * c * h * w);
        let mut labels = Vec::with_capacity(indices.len() * self.views);
        for &i in indices {
            let (image, label) = self.data.batch(&[i]);
            labels.extend(std::iter::repeat_n(label[0], self.views));
            let example = step * self.data.len() as u128 + i as u128;
            let mut rng = stream.at_word(example.wrapping_mul(per_example)).restore();
            for _ in 0..self.views {
                let draw = self.augmentation.draw(&mut rng);
                self.augmentation.view_into(&image, draw, &mut out);
            }
        }
        (out, labels)
    }
}

impl<M: ImageClassifier> LotSource<M> for AugmentedLots<'_> {
    fn len(&self) -> usize {
        self.data.len()
    }

    fn views(&self) -> usize {
        self.views
    }

    /// The images' digest (the views follow from them, the sampler's key and the step).
    fn fingerprint(&self) -> Option<String> {
        Some(self.data.digest())
    }

    /// The views of the next lots are the step's.
    fn at_step(&self, step: u64) {
        self.step.store(step, Ordering::Relaxed);
    }

    fn losses(&self, model: &M, indices: &[usize], device: &Device) -> Result<ExampleLosses> {
        let (pixels, labels) = self.views_of(indices);
        let [c, h, w] = self.data.shape();
        let views = Tensor::from_data(TensorData::new(pixels, [indices.len() * self.views, c, h, w]), device);
        let x = match &self.features {
            Some(net) => net.apply(views)?,
            None => views,
        };
        Ok(scored(model, x, &labels, self.data.classes(), device))
    }
}
