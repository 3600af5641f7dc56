//! A [`crate::dp_optimizer::DpOptimizer`]'s checkpoint (Opacus's
//! `PrivacyEngine.save_checkpoint`): the model and the optimiser as Burn records, the privacy
//! ledger, the positions of the lot sampler's and the noise's random streams, and the noise
//! allocation's state. The streams' keys are not in it: they are [`StreamKeys`], kept apart
//! (derived from the seed of a seeded run). Resuming ([`restore`]) checks everything the privacy
//! claim depends on against the run's configuration and keys before a step is taken: the step
//! counts, every ledger event (exactly the event a step of this mechanism at the plan's rate and
//! sampling records, with an admitted noise multiplier), the sampler replayed from
//! its key, the noise stream's position, and the allocation's state. The `dptrain` app's run
//! folder seals the same checkpoint with a MAC.
//!
//! A checkpoint is one Burn record file (burnpack, `DpCheckpoint::save` / `load`, or
//! `to_bytes` / `from_bytes`): the model's and the optimiser's records as byte tensors, the
//! allocation's state as f32 tensors, and the steps, ledger and stream positions as its `state`
//! metadata.

use crate::backend::DeviceError;
use crate::error::{EngineError, Result};
use crate::grad_sample::params::ParamTable;
use crate::noise::{GaussianNoise, NOISE_STREAM};
use crate::parameter_average::ParameterAverage;
use crate::plan::{Plan, sampling};
use crate::privacy_config::PrivacyConfig;
use crate::step::StepState;
use crate::tensor_io::{to_host, vector};
use burn::module::{Module, ModuleVisitor, Param};
use burn::optim::{ModuleOptimizer, OptimizerRecord};
use burn::store::ModuleRecord;
use burn::tensor::{Bytes, Device, Tensor};
use burn_pack::{DType, Reader, Tensor as PackTensor, Writer};
use dp_accounting::{DpEvent, PrivacyLedger};
use dp_data::safe_files::{PUBLIC, read_regular, write_atomic};
use dp_data::sampler::SAMPLER_STREAM;
use dp_data::{ChaChaPosition, ChaChaState, LotSampler, SamplerPosition, SecretKey};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::path::Path;

/// The `format` metadata of a checkpoint's burnpack.
const FORMAT: &str = "dp-engine-checkpoint-3";

/// The keys of a run's lot sampler and noise streams: secret (anyone holding the noise key can
/// subtract the noise), unless derived from a seed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamKeys {
    sampler: SecretKey,
    noise: SecretKey,
}

impl StreamKeys {
    /// Keys from `seed` (a reproducible run) or from the OS.
    pub fn for_run(seed: Option<u64>) -> Self {
        Self { sampler: SecretKey::for_run(seed), noise: SecretKey::for_run(seed) }
    }

    /// The keys `sampler` and `noise`, as a key file holds them.
    pub fn new(sampler: SecretKey, noise: SecretKey) -> Self {
        Self { sampler, noise }
    }

    /// The lot sampler's key.
    pub fn sampler_key(&self) -> &SecretKey {
        &self.sampler
    }

    /// The noise's key.
    pub fn noise_key(&self) -> &SecretKey {
        &self.noise
    }

    /// The lot sampler's stream at its start.
    pub fn sampler_stream(&self) -> ChaChaState {
        ChaChaState::keyed(self.sampler.clone(), SAMPLER_STREAM)
    }

    /// The noise stream at its start.
    pub fn noise_stream(&self) -> ChaChaState {
        ChaChaState::keyed(self.noise.clone(), NOISE_STREAM)
    }
}

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
        keys: &StreamKeys,
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

/// A run's state restored from a checkpoint: the model and optimiser, the step's state and the
/// steps taken.
pub struct Restored<M> {
    /// The model, in training state, with the checkpoint's parameter ids.
    pub model: M,
    /// The optimiser with its record loaded.
    pub optimizer: ModuleOptimizer,
    /// Sampler, noise stream, ledger and allocation state.
    pub state: StepState,
    /// Steps taken.
    pub step: u64,
    /// The parameter average, when the run keeps one.
    pub average: Option<ParameterAverage<M>>,
}

/// Refuses a ledger with an entry that is not exactly the event a step of the run's mechanism
/// records at the run's rate and sampling, with an admitted noise multiplier.
fn check_ledger(ledger: &PrivacyLedger, config: &PrivacyConfig, plan: &Plan) -> Result<()> {
    let mechanism = config.mechanism.as_ref();
    let want_z = plan.z.map(|z| mechanism.ledger_multiplier(z));
    for (_, event) in ledger.entries() {
        let z = multiplier_of(event)?;
        let z_ok = match (want_z, z) {
            (Some(want), Some(z)) => want.admits(z),
            (None, None) => true,
            _ => false,
        };
        let this_run = z_ok && mechanism.step_event(z, plan.sample_rate, config.settings.sampling)? == *event;
        if !this_run {
            return Err(EngineError::Resume(format!(
                "a ledger entry ({event:?}) is not a step of this run (z {:?}, q {}, {:?})",
                want_z.map(|z| z.z),
                plan.sample_rate,
                config.settings.sampling
            )));
        }
    }
    Ok(())
}

/// Restores `ckpt` into `model` and `optimizer` (fresh ones of the run's kind) after checking
/// everything the run's privacy claim depends on against the run (`config`, `plan`, `keys`):
/// the step counts; every ledger event (the mechanism's step at an admitted multiplier); the sampler,
/// replayed from its key for the steps taken; the noise stream's position; the allocation's
/// state (a sigma that varies against the last ledger entry); and that the records fit the
/// model. A checkpoint failing any check is refused in one line.
pub fn restore<M: Module>(
    ckpt: DpCheckpoint,
    (model, optimizer): (M, ModuleOptimizer),
    config: &PrivacyConfig,
    plan: &Plan,
    keys: &StreamKeys,
    device: &Device,
) -> Result<Restored<M>> {
    let refuse = EngineError::Resume;
    let mechanism = config.mechanism.as_ref();
    let h = ckpt.header;
    if h.keys != keys.fingerprint() {
        return Err(refuse(
            "the keys given are not the ones this checkpoint was written with (their fingerprints differ): give the run's own keys (StreamKeys::load of its key file) or, for a seeded run, its seed".into(),
        ));
    }
    if h.planned_steps != plan.planned_steps || h.step > plan.planned_steps {
        // What changed, where the ledger tells: the rate (lot size or training set) or else the
        // length (epochs).
        let rate = h.ledger.grouped().ok().and_then(|g| g.first().map(|g| g.sample_rate));
        let what = match rate {
            Some(q) if q != plan.sample_rate => format!(
                "its lots were drawn at rate {q}, this run's at {} (lots of {} from {} examples): the lot size or the training set changed",
                plan.sample_rate, config.settings.lot_size, plan.n
            ),
            _ => format!("the run plans {} steps: its epochs ({}) changed", plan.planned_steps, config.settings.epochs),
        };
        return Err(refuse(format!("step {} of {} planned; {what}", h.step, h.planned_steps)));
    }
    if h.ledger.total_steps() != h.step {
        return Err(refuse(format!("its ledger holds {} steps, the run took {}", h.ledger.total_steps(), h.step)));
    }
    check_ledger(&h.ledger, config, plan)?;
    let sampler = LotSampler::replayed(sampling(config, plan), plan.n, keys.sampler_stream(), h.step)
        .map_err(EngineError::ResumeSampler)?;
    if sampler.position() != h.sampler {
        return Err(refuse(format!(
            "its sampler ({:?}) is not where {} steps leave the run's ({:?})",
            h.sampler,
            h.step,
            sampler.position()
        )));
    }
    let record = ModuleRecord::from_bytes(Bytes::from_bytes_vec(ckpt.model))
        .map_err(|e| refuse(format!("model record: {e:?}")))?;
    // The record brings back the parameters' ids, which the optimiser's record is keyed by.
    let model =
        model.try_load_record(record).map_err(|e| refuse(format!("the model record does not fit the model: {e:?}")))?;
    let table = config.table(&model)?;
    let sizes: Vec<usize> = table.params().iter().map(|p| p.len()).collect();
    let noise = match (mechanism.is_private(), h.noise) {
        (true, Some(position)) => {
            let noise = GaussianNoise::resumed(keys.noise_stream(), position, h.step, &sizes).map_err(|e| {
                refuse(format!(
                    "{e}: {} steps of this run's {} trained parameters ({} tensors) do not leave the noise there, so the trained (or frozen) parameters differ from the checkpointed run's",
                    h.step,
                    sizes.iter().sum::<usize>(),
                    sizes.len()
                ))
            })?;
            Some(noise.state().clone())
        }
        (false, None) => None,
        _ => return Err(refuse("its noise stream does not fit the mechanism".into())),
    };
    let allocation = restored_allocation(ckpt.allocation, &h.ledger, config, plan, &table, h.step, device)?;
    let average = restored_average(ckpt.average, &model, h.step)?;
    let record = OptimizerRecord::from_bytes(Bytes::from_bytes_vec(ckpt.optimizer))
        .map_err(|e| refuse(format!("optimizer record: {e:?}")))?;
    // Burn loads the optimiser's state on its default device, and moves it at the next step.
    if !record.is_empty() {
        dp_kernels::wgpu_probe::default_device_opens().map_err(|e| EngineError::Device(DeviceError(e)))?;
    }
    // burn-optim panics on a record whose tensors carry no parameter id.
    let optimizer = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| optimizer.load_record(record)))
        .map_err(|_| refuse("its optimizer record does not fit the optimizer".into()))?;
    let state = StepState { sampler, noise, ledger: h.ledger, allocation };
    Ok(Restored { model: model.train(), optimizer, state, step: h.step, average })
}

/// The parameter average of a checkpoint at `step`, loaded into a copy of `template`: refused
/// unless it was updated at every step and its record fits the model.
fn restored_average<M: Module>(
    kept: Option<AverageRecord>,
    template: &M,
    step: u64,
) -> Result<Option<ParameterAverage<M>>> {
    let Some(AverageRecord { meta, model }) = kept else { return Ok(None) };
    if meta.updates != step {
        return Err(EngineError::Resume(format!(
            "its parameter average has {} updates after {step} steps",
            meta.updates
        )));
    }
    let average = match step {
        0 => template.clone(),
        _ => {
            let record = ModuleRecord::from_bytes(Bytes::from_bytes_vec(model))
                .map_err(|e| EngineError::Resume(format!("average record: {e:?}")))?;
            template
                .clone()
                .try_load_record(record)
                .map_err(|e| EngineError::Resume(format!("the average does not fit the model: {e:?}")))?
                .no_grad()
        }
    };
    ParameterAverage::resumed(meta.decay, meta.updates, average).map(Some)
}

/// The noise allocation's state of a checkpoint at `step`, refused unless the mechanism keeps
/// one exactly when a step has been taken, it fits the parameters of `table`, and (for a sigma
/// that varies) the last ledger entry records the multiplier it gives.
fn restored_allocation(
    kept: Option<Vec<Vec<f32>>>,
    ledger: &PrivacyLedger,
    config: &PrivacyConfig,
    plan: &Plan,
    table: &ParamTable,
    step: u64,
    device: &Device,
) -> Result<Option<Vec<Tensor<1>>>> {
    let mut allocation = plan.z.map(|z| config.mechanism.allocation(z, &config.settings, table));
    let expected = allocation.as_ref().is_some_and(|a| a.is_stateful()) && step > 0;
    let parts = match kept {
        None if !expected => return Ok(None),
        Some(parts) if expected && parts.iter().map(Vec::len).eq(table.params().iter().map(|p| p.len())) => parts,
        _ => {
            return Err(EngineError::Resume("its noise allocation state does not fit the mechanism and model".into()));
        }
    };
    let state: Vec<_> = parts.into_iter().map(|p| vector(p, device)).collect();
    if let Some(a) = allocation.as_mut() {
        a.restore(state.clone())?;
        let last = ledger.entries().last().map(|(_, e)| multiplier_of(e)).transpose()?.flatten();
        if let Some(z) = a.current_multiplier().filter(|&z| Some(z) != last) {
            return Err(EngineError::Resume(format!(
                "its current sigma gives noise multiplier {z}, its last ledger entry records {last:?}"
            )));
        }
    }
    Ok(Some(state))
}

/// The noise multiplier of a ledger event holding one Gaussian release (None: it holds none),
/// refused when it holds several or one no Gaussian accountant can read.
fn multiplier_of(event: &DpEvent) -> Result<Option<f64>> {
    match event.gaussian_steps().as_deref() {
        Ok([]) => Ok(None),
        Ok([one]) => Ok(Some(one.noise_multiplier)),
        _ => Err(EngineError::Resume(format!("a ledger entry ({event:?}) is not one step's release"))),
    }
}
