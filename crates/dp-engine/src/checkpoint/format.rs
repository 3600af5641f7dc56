//! A [`crate::engine::optimizer::DpOptimizer`]'s checkpoint (Opacus's
//! `PrivacyEngine.save_checkpoint`): the model and the optimiser as Burn records, the privacy
//! ledger, the positions of the lot sampler's and the noise's random streams, and the noise
//! allocation's state. The streams' keys are not in it: they are [`StreamKeys`], kept apart
//! (derived from the seed of a seeded run). Resuming ([`super::restore`]) checks everything the
//! privacy claim depends on against the run's configuration and keys before a step is taken: the step
//! counts, every ledger event (exactly the event a step of this mechanism at the plan's rate and
//! sampling records, with an admitted noise multiplier), the sampler replayed from
//! its key, the noise stream's position, and the allocation's state. The `dptrain` app's run
//! folder seals the same checkpoint with a MAC.
//!
//! A checkpoint is one Burn record file (burnpack, `DpCheckpoint::save` / `load`, or
//! `to_bytes` / `from_bytes`): the model's and the optimiser's records as byte tensors, the
//! allocation's state as f32 tensors, and the steps, ledger and stream positions as its `state`
//! metadata.

use super::keys::StreamKeys;
use crate::error::{EngineError, Result};
use crate::optim::parameter_average::ParameterAverage;
use crate::step::StepState;
use crate::tensor_io::to_host;
use burn::module::{Module, ModuleVisitor, Param};
use burn::optim::ModuleOptimizer;
use burn::tensor::{Bytes, Tensor};
use burn_pack::{DType, Reader, Tensor as PackTensor, Writer};
use dp_accounting::PrivacyLedger;
use dp_data::safe_files::{PUBLIC, read_regular, write_atomic};
use dp_data::{ChaChaPosition, SamplerPosition};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::path::Path;

/// The `format` metadata of a checkpoint's burnpack.
const FORMAT: &str = "dp-engine-checkpoint-4";

/// Steps, ledger and stream positions: the checkpoint's `state` metadata.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DpStateHeader {
    /// The fingerprint of the run's stream keys ([`StreamKeys::fingerprint`]): a resume with
    /// other keys (another seed, a lost key file replaced by new keys) is refused.
    pub keys: String,
    /// Steps the run plans in total.
    pub planned_steps: u64,
    /// Steps taken so far.
    pub step: u64,
    /// Every release of the steps taken so far.
    pub ledger: PrivacyLedger,
    /// Where the lot sampler is (its state follows from its key and the steps).
    pub sampler: SamplerPosition,
    /// Where the noise stream is (None for the unperturbed baseline).
    pub noise: Option<ChaChaPosition>,
    /// The digest of the examples the run trains on ([`crate::lots::LotSource::fingerprint`]),
    /// None where its lot source gives none.
    pub data: Option<String>,
}

/// A DP run's state between two steps.
#[derive(Debug, Clone)]
pub struct DpCheckpoint {
    /// Steps, ledger and stream positions.
    pub header: DpStateHeader,
    /// The model's Burn record (burnpack), parameter ids included.
    pub model: Vec<u8>,
    /// The optimiser's Burn record (burnpack).
    pub optimizer: Vec<u8>,
    /// The noise allocation's state, per parameter (optimized: the average released gradient;
    /// optimized-paper: the current sigma).
    pub allocation: Option<Vec<Vec<f32>>>,
    /// The parameter average, when the run keeps one.
    pub average: Option<AverageRecord>,
}

/// A run's parameter average as a checkpoint keeps it.
#[derive(Debug, Clone)]
pub struct AverageRecord {
    /// Its decay and updates (the `average` metadata).
    pub meta: AverageMeta,
    /// The averaged model's Burn record (burnpack).
    pub model: Vec<u8>,
}

/// The decay of a parameter average and its updates so far.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AverageMeta {
    /// The decay asked for.
    pub decay: f64,
    /// Updates so far (one per step).
    pub updates: u64,
}

/// One line for a burnpack that cannot be written or read.
fn pack_error(e: burn_pack::Error) -> EngineError {
    EngineError::invalid("checkpoint", e.to_string())
}

/// The bytes of `name`, a rank-1 tensor of `dtype` in `tensors`, taken out of it.
fn take_tensor(tensors: &mut BTreeMap<String, PackTensor>, name: &str, dtype: DType) -> Result<Option<Vec<u8>>> {
    let Some(tensor) = tensors.remove(name) else { return Ok(None) };
    let (_, found, shape, _, bytes) = tensor.into_parts().map_err(pack_error)?;
    let elements = shape.num_elements();
    if found != dtype || shape.num_dims() != 1 || elements.checked_mul(dtype.size()) != Some(bytes.len()) {
        return Err(EngineError::invalid("checkpoint", format!("its {name} is not a vector of {dtype:?}")));
    }
    Ok(Some(bytes.to_vec()))
}

impl DpCheckpoint {
    /// The checkpoint of `model` and `optimizer` with the step's `state` after `step` of
    /// `planned_steps` steps of the run whose streams `keys` drive.
    pub fn capture<M: Module>(
        model: &M,
        optimizer: &ModuleOptimizer,
        state: StepState,
        average: Option<&ParameterAverage<M>>,
        (step, planned_steps): (u64, u64),
        (keys, data): (&StreamKeys, Option<String>),
    ) -> Result<Self> {
        let record = |e: burn::store::RecordError| EngineError::invalid("checkpoint", format!("{e:?}"));
        let bytes_of = |m: &M| Ok::<_, EngineError>(m.clone().into_record().into_bytes().map_err(record)?.to_vec());
        let model_bytes = bytes_of(model)?;
        let average = match average {
            Some(a) => {
                let meta = AverageMeta { decay: a.decay(), updates: a.updates() };
                Some(AverageRecord { meta, model: a.average().map(bytes_of).transpose()?.unwrap_or_default() })
            }
            None => None,
        };
        let optimizer_bytes = optimizer.into_bytes().map_err(record)?.to_vec();
        let header = DpStateHeader {
            keys: keys.fingerprint(),
            planned_steps,
            step,
            ledger: state.ledger,
            sampler: state.sampler.position(),
            noise: state.noise.map(|n| n.position()),
            data,
        };
        let allocation = state.allocation.map(|r| r.iter().map(to_host).collect());
        Ok(Self { header, model: model_bytes, optimizer: optimizer_bytes, allocation, average })
    }

    /// The checkpoint as one burnpack: the records as byte tensors `model` and `optimizer`, the
    /// allocation state as f32 tensors `allocation.NNNNN`, the header as `state` metadata.
    fn writer(&self) -> Result<Writer> {
        let header =
            serde_json::to_string(&self.header).map_err(|e| EngineError::invalid("checkpoint", e.to_string()))?;
        let bytes = |name: &str, data: Vec<u8>, dtype: DType| {
            let elements = data.len() / dtype.size();
            PackTensor::new(name.into(), dtype, [elements], None, Bytes::from_bytes_vec(data))
        };
        let mut tensors =
            vec![bytes("model", self.model.clone(), DType::U8), bytes("optimizer", self.optimizer.clone(), DType::U8)];
        for (i, part) in self.allocation.iter().flatten().enumerate() {
            let raw = part.iter().flat_map(|x| x.to_le_bytes()).collect();
            tensors.push(bytes(&format!("allocation.{i:05}"), raw, DType::F32));
        }
        let average = match &self.average {
            Some(average) => {
                tensors.push(bytes("average", average.model.clone(), DType::U8));
                Some(
                    serde_json::to_string(&average.meta)
                        .map_err(|e| EngineError::invalid("checkpoint", e.to_string()))?,
                )
            }
            None => None,
        };
        let writer = Writer::new(tensors).with_metadata("format", FORMAT).with_metadata("state", &header);
        Ok(match average {
            Some(meta) => writer.with_metadata("average", &meta),
            None => writer,
        })
    }

    /// The checkpoint as bytes (a burnpack: see [`Self::save`]).
    pub fn to_bytes(&self) -> Result<Vec<u8>> {
        Ok(self.writer()?.into_bytes().map_err(pack_error)?.to_vec())
    }

    /// Writes the checkpoint to `path` as a burnpack file, atomically (never a partial file
    /// under the final name), never through a link or over anything but a regular file.
    pub fn save(&self, path: &Path) -> Result<()> {
        Ok(write_atomic(path, &self.to_bytes()?, PUBLIC)?)
    }

    /// A checkpoint read from `bytes` (as [`Self::to_bytes`] wrote them), refused in one line
    /// when it is not one. What it claims is checked when it is resumed.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self> {
        Self::read(Reader::from_bytes(Bytes::from_bytes_vec(bytes.to_vec())).map_err(pack_error)?)
    }

    /// A checkpoint read from the burnpack file at `path` (as [`Self::save`] wrote it): a
    /// regular file, not a link, no larger than the memory budget.
    pub fn load(path: &Path) -> Result<Self> {
        Self::from_bytes(&read_regular(path, dp_data::memory::budget())?)
    }

    fn read(reader: Reader) -> Result<Self> {
        let refuse = |reason: String| EngineError::invalid("checkpoint", reason);
        if reader.metadata().get("format").map(String::as_str) != Some(FORMAT) {
            return Err(refuse("not a dp-engine checkpoint of this version".into()));
        }
        let state = reader.metadata().get("state").ok_or_else(|| refuse("no state".into()))?;
        let header = serde_json::from_str(state).map_err(|e| refuse(format!("corrupt state: {e}")))?;
        let reader_average = reader.metadata().get("average").cloned();
        let mut tensors: BTreeMap<String, PackTensor> =
            reader.into_tensors().map_err(pack_error)?.into_iter().map(|t| (t.name.clone(), t)).collect();
        let mut record =
            |name: &str| take_tensor(&mut tensors, name, DType::U8)?.ok_or_else(|| refuse(format!("no {name}")));
        let (model, optimizer) = (record("model")?, record("optimizer")?);
        let mut allocation = Vec::new();
        while let Some(raw) = take_tensor(&mut tensors, &format!("allocation.{:05}", allocation.len()), DType::F32)? {
            allocation.push(raw.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect());
        }
        let average = match reader_average {
            Some(meta) => {
                let meta = serde_json::from_str(&meta).map_err(|e| refuse(format!("corrupt average: {e}")))?;
                let model =
                    take_tensor(&mut tensors, "average", DType::U8)?.ok_or_else(|| refuse("no average".into()))?;
                Some(AverageRecord { meta, model })
            }
            None => None,
        };
        if let Some(name) = tensors.keys().next() {
            return Err(refuse(format!("an unexpected tensor {name}")));
        }
        let allocation = (!allocation.is_empty()).then_some(allocation);
        Ok(Self { header, model, optimizer, allocation, average })
    }
}

/// Hex SHA-256 of the values of every parameter of `model`, in its visiting order.
pub fn values_digest<M: Module>(model: &M) -> String {
    struct Hash(Sha256);
    impl ModuleVisitor for Hash {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
            for x in to_host(&param.val()) {
                self.0.update(x.to_le_bytes());
            }
        }
    }
    let mut hash = Hash(Sha256::new());
    model.visit(&mut hash);
    hex::encode(hash.0.finalize())
}
