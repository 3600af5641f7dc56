//! Lots drawn from a Burn `Dataset`: the items of a lot's indices, batched by the user's Burn
//! `Batcher` on the step's device, scored by the user's per-example loss. What a burn-train user
//! already has (a dataset, a batcher, a forward pass) becomes a [`LotSource`] in one line.
//!
//! ```
//! use burn::data::dataloader::batcher::Batcher;
//! use burn::data::dataset::InMemDataset;
//! use burn::tensor::{Device, Tensor, TensorData};
//! use dp_engine::lots::DatasetLots;
//! use dp_engine::lots::{ExampleLosses, LotSource};
//!
//! /// Rows of two features into a [B, 2] tensor.
//! struct Rows;
//! impl Batcher<[f32; 2], Tensor<2>> for Rows {
//!     fn batch(&self, items: Vec<[f32; 2]>, device: &Device) -> Tensor<2> {
//!         let n = items.len();
//!         Tensor::from_data(TensorData::new(items.concat(), [n, 2]), device)
//!     }
//! }
//!
//! let data = InMemDataset::new(vec![[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]);
//! // A "model" that is one weight vector; each example's loss is its squared score.
//! let lots = DatasetLots::new(data, Rows, |w: &Tensor<1>, x: Tensor<2>| ExampleLosses {
//!     losses: (x * w.clone().unsqueeze::<2>()).sum_dim(1).squeeze_dim(1).powi_scalar(2),
//!     correct: None,
//! });
//! let device = dp_engine::backend::cpu().device;
//! let w = Tensor::<1>::from_data(TensorData::new(vec![1.0f32, -1.0], [2]), &device);
//! assert_eq!(lots.len(), 3);
//! let losses = lots.losses(&w, &[2, 0], &device)?.losses.into_data().to_vec::<f32>().unwrap();
//! assert_eq!(losses, vec![1.0, 1.0]);
//! # Ok::<(), dp_engine::EngineError>(())
//! ```

use super::burn_loss;
use super::source::{ExampleLosses, LotSource};
use crate::error::{EngineError, Result};
use burn::data::dataloader::batcher::Batcher;
use burn::data::dataset::Dataset;
use burn::nn::loss::CrossEntropyLoss;
use burn::tensor::{Device, Int, Tensor};
use rayon::prelude::*;
use serde::Serialize;
use sha2::{Digest, Sha256};
use std::marker::PhantomData;

/// The examples of a Burn `Dataset` of items `I`, batched into `O` by a Burn `Batcher`, with a
/// per-example loss `loss(model, batch)` (one loss per item, in the batch's order). The items are
/// `Serialize` (Burn's dataset items derive it): their digest is what a resumed run checks its
/// training set by ([`LotSource::fingerprint`]).
pub struct DatasetLots<D, B, L, I, O> {
    dataset: D,
    batcher: B,
    loss: L,
    items: PhantomData<fn(I) -> O>,
}

impl<D, B, L, I, O> DatasetLots<D, B, L, I, O> {
    /// Lots of `dataset`'s items, batched by `batcher`, scored by `loss`.
    pub fn new(dataset: D, batcher: B, loss: L) -> Self {
        Self { dataset, batcher, loss, items: PhantomData }
    }

    /// The dataset (to evaluate on, or to read its size).
    pub fn dataset(&self) -> &D {
        &self.dataset
    }
}

/// Lots of a Burn classification `dataset`, batched by the user's own `batcher` and scored by
/// their burn-nn `loss` as they configured it, per example ([`burn_loss::per_example`]):
/// `forward` gives a batch's logits and class indices (what a plain Burn loop hands to
/// `loss.forward`), and the lots count its correct predictions.
pub fn classification<M, D, B, I, O>(
    dataset: D,
    batcher: B,
    loss: CrossEntropyLoss,
    forward: impl Fn(&M, O) -> (Tensor<2>, Tensor<1, Int>),
) -> DatasetLots<D, B, impl Fn(&M, O) -> ExampleLosses, I, O> {
    let score = move |model: &M, batch: O| {
        let (logits, targets) = forward(model, batch);
        let [b, _] = logits.dims();
        let correct = logits.clone().inner().argmax(1).reshape([b]).equal(targets.clone()).float();
        ExampleLosses { losses: burn_loss::per_example(&loss, logits, targets), correct: Some(correct) }
    };
    DatasetLots::new(dataset, batcher, score)
}

/// Items hashed together before their digests are: the items of a chunk in one thread.
const CHUNK: usize = 4096;

/// SHA-256 of the items `range` of `dataset` in order (each as MessagePack, written into one
/// reused buffer and hashed whole), None when one cannot be read or written.
fn chunk_digest<I: Serialize>(dataset: &impl Dataset<I>, range: std::ops::Range<usize>) -> Option<[u8; 32]> {
    let mut h = Sha256::new();
    let mut bytes = Vec::new();
    for i in range {
        bytes.clear();
        rmp_serde::encode::write(&mut bytes, &dataset.get(i).ok()?).ok()?;
        h.update(&bytes);
    }
    Some(h.finalize().into())
}

impl<M, D, B, L, I, O> LotSource<M> for DatasetLots<D, B, L, I, O>
where
    D: Dataset<I>,
    B: Batcher<I, O>,
    L: Fn(&M, O) -> ExampleLosses,
    I: Serialize,
{
    fn len(&self) -> usize {
        self.dataset.len()
    }

    /// The items' digest, chunk by chunk in parallel (each item as MessagePack).
    fn fingerprint(&self) -> Option<String> {
        let (dataset, n) = (&self.dataset, self.dataset.len());
        let chunks: Option<Vec<[u8; 32]>> = (0..n.div_ceil(CHUNK))
            .into_par_iter()
            .map(|c| chunk_digest(dataset, c * CHUNK..n.min((c + 1) * CHUNK)))
            .collect();
        let mut h = Sha256::new();
        h.update((n as u64).to_le_bytes());
        chunks?.iter().for_each(|c| h.update(c));
        Some(hex::encode(h.finalize()))
    }

    /// An error when the dataset cannot give an item (a file behind it that fails).
    fn losses(&self, model: &M, indices: &[usize], device: &Device) -> Result<ExampleLosses> {
        let items = indices
            .iter()
            .map(|&i| {
                self.dataset.get(i).map_err(|e| {
                    EngineError::data(format!("the dataset cannot give item {i} of {}: {e}", self.dataset.len()))
                })
            })
            .collect::<Result<Vec<I>>>()?;
        Ok((self.loss)(model, self.batcher.batch(items, device)))
    }
}
