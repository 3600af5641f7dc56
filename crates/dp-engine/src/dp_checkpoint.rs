//! A [`crate::dp_optimizer::DpOptimizer`]'s checkpoint (Opacus's
//! `PrivacyEngine.save_checkpoint`): the model and the optimiser as Burn records, the privacy
//! ledger, the positions of the lot sampler's and the noise's random streams, and the noise
//! allocation's state. The streams' keys are not in it: they are [`StreamKeys`], kept apart
//! (derived from the seed of a seeded run). Resuming ([`restore`]) checks everything the privacy
//! claim depends on against the run's configuration and keys before a step is taken: the step
//! counts, every ledger entry's noise multiplier, rate and sampling, the sampler replayed from
//! its key, the noise stream's position, and the allocation's state. The `dptrain` app's run
//! folder seals the same checkpoint with a MAC.
//!
//! Layout of [`DpCheckpoint::to_bytes`]: `DPSTATE1` | header length (u64 LE) | header JSON |
//! model | optimiser | allocation (f32 LE).

use crate::error::{EngineError, Result};
use crate::grad_sample::params::ParamTable;
use crate::noise::{GaussianNoise, NOISE_STREAM};
use crate::plan::{Plan, sampling};
use crate::privacy_config::PrivacyConfig;
use crate::step::StepState;
use crate::tensor_io::{to_host, vector};
use burn::module::{Module, ModuleVisitor, Param};
use burn::optim::ModuleOptimizer;
use burn::store::ModuleRecord;
use burn::tensor::{Bytes, Device, Tensor};
use dp_accounting::PrivacyLedger;
use dp_data::sampler::SAMPLER_STREAM;
use dp_data::{ChaChaPosition, ChaChaState, LotSampler, SamplerPosition, SecretKey};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// The first bytes of [`DpCheckpoint::to_bytes`].
const MAGIC: &[u8; 8] = b"DPSTATE1";

/// The largest header accepted (a header is a few kilobytes; this bounds what a damaged length
/// field can make the reader allocate).
pub const MAX_HEADER: u64 = 64 << 20;

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

/// Everything in a checkpoint but the records and tensors.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DpStateHeader {
    /// Steps the run plans in total.
    pub planned_steps: u64,
    /// Steps taken so far.
    pub step: u64,
    /// Every privatised step taken so far.
    pub ledger: PrivacyLedger,
    /// Where the lot sampler is (its state follows from its key and the steps).
    pub sampler: SamplerPosition,
    /// Where the noise stream is (None for the unperturbed baseline).
    pub noise: Option<ChaChaPosition>,
    /// Bytes of the model record.
    pub model_bytes: u64,
    /// Bytes of the optimiser record.
    pub optimizer_bytes: u64,
    /// Scalars of each tensor of the noise allocation's state (optimized: the average released
    /// gradient; optimized-paper: the current sigma), one per parameter.
    pub allocation: Option<Vec<usize>>,
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
    /// The noise allocation's state, per parameter.
    pub allocation: Option<Vec<Vec<f32>>>,
}

/// The front `n` bytes of `rest`, which moves past them; `what` names them in the error.
pub fn take<'a>(rest: &mut &'a [u8], n: u64, what: &str) -> std::result::Result<&'a [u8], String> {
    let n = usize::try_from(n).ok().filter(|&n| n <= rest.len()).ok_or_else(|| format!("truncated {what}"))?;
    let (head, tail) = rest.split_at(n);
    *rest = tail;
    Ok(head)
}

impl DpCheckpoint {
    /// The checkpoint of `model` and `optimizer` with the step's `state` after `step` of
    /// `planned_steps` steps.
    pub fn capture<M: Module>(
        model: &M,
        optimizer: &ModuleOptimizer,
        state: StepState,
        step: u64,
        planned_steps: u64,
    ) -> Result<Self> {
        let record = |e: burn::store::RecordError| EngineError::invalid("checkpoint", format!("{e:?}"));
        let model_bytes = model.clone().into_record().into_bytes().map_err(record)?.to_vec();
        let optimizer_bytes = optimizer.into_bytes().map_err(record)?.to_vec();
        let allocation: Option<Vec<Vec<f32>>> = state.allocation.map(|r| r.iter().map(to_host).collect());
        let header = DpStateHeader {
            planned_steps,
            step,
            ledger: state.ledger,
            sampler: state.sampler.position(),
            noise: state.noise.map(|n| n.position()),
            model_bytes: model_bytes.len() as u64,
            optimizer_bytes: optimizer_bytes.len() as u64,
            allocation: allocation.as_ref().map(|r| r.iter().map(Vec::len).collect()),
        };
        Ok(Self { header, model: model_bytes, optimizer: optimizer_bytes, allocation })
    }

    /// The records and tensors after the header, in the layout's order.
    pub fn write_sections(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.model);
        out.extend_from_slice(&self.optimizer);
        for part in self.allocation.iter().flatten() {
            out.extend(part.iter().flat_map(|x| x.to_le_bytes()));
        }
    }

    /// The checkpoint of `header` with its records and tensors read from `rest`, which must
    /// hold exactly them.
    pub fn read_sections(header: DpStateHeader, mut rest: &[u8]) -> std::result::Result<Self, String> {
        let model = take(&mut rest, header.model_bytes, "model")?.to_vec();
        let optimizer = take(&mut rest, header.optimizer_bytes, "optimizer")?.to_vec();
        let allocation = match &header.allocation {
            Some(sizes) => Some(
                sizes
                    .iter()
                    .map(|&n| {
                        let raw = take(&mut rest, (n as u64).saturating_mul(4), "allocation state")?;
                        Ok(raw.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect())
                    })
                    .collect::<std::result::Result<Vec<Vec<f32>>, String>>()?,
            ),
            None => None,
        };
        if !rest.is_empty() {
            return Err(format!("{} bytes after the last record", rest.len()));
        }
        Ok(Self { header, model, optimizer, allocation })
    }

    /// The checkpoint as bytes (see the module's layout).
    pub fn to_bytes(&self) -> Result<Vec<u8>> {
        let header = serde_json::to_vec(&self.header).map_err(|e| EngineError::invalid("checkpoint", e.to_string()))?;
        let mut out = Vec::with_capacity(header.len() + self.model.len() + self.optimizer.len() + 16);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&(header.len() as u64).to_le_bytes());
        out.extend_from_slice(&header);
        self.write_sections(&mut out);
        Ok(out)
    }

    /// A checkpoint read from `bytes` (as [`Self::to_bytes`] wrote them), refused when its
    /// magic, lengths or header do not hold. What it claims is checked when it is resumed.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self> {
        let refuse = |reason: String| EngineError::invalid("checkpoint", reason);
        let mut rest = bytes.strip_prefix(MAGIC).ok_or_else(|| refuse("not a dp-engine checkpoint".into()))?;
        let len =
            u64::from_le_bytes(take(&mut rest, 8, "header length").map_err(refuse)?.try_into().unwrap_or_default());
        if len > MAX_HEADER {
            return Err(refuse(format!("a header of {len} bytes")));
        }
        let header = serde_json::from_slice(take(&mut rest, len, "header").map_err(refuse)?)
            .map_err(|e| refuse(format!("corrupt header: {e}")))?;
        Self::read_sections(header, rest).map_err(refuse)
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
}

/// Restores `ckpt` into `model` and `optimizer` (fresh ones of the run's kind) after checking
/// everything the run's privacy claim depends on against the run (`config`, `plan`, `keys`):
/// the step counts; every ledger entry's noise multiplier, rate and sampling; the sampler,
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
    if h.planned_steps != plan.planned_steps || h.step > plan.planned_steps {
        return Err(refuse(format!(
            "step {} of {} planned; the run plans {}",
            h.step, h.planned_steps, plan.planned_steps
        )));
    }
    let recorded = if mechanism.is_private() { h.step } else { 0 };
    if h.ledger.total_steps() != recorded {
        return Err(refuse(format!("its ledger holds {} steps, the run took {}", h.ledger.total_steps(), recorded)));
    }
    let want_z = plan.z.map(|z| mechanism.ledger_multiplier(z));
    for e in h.ledger.entries() {
        let z_ok = want_z.is_none_or(|z| z.admits(e.noise_multiplier));
        if !z_ok || e.sample_rate != plan.sample_rate || e.sampling != config.settings.sampling {
            return Err(refuse(format!(
                "a ledger entry (z {}, q {}, {:?}) is not this run's (z {:?}, q {}, {:?})",
                e.noise_multiplier,
                e.sample_rate,
                e.sampling,
                want_z.map(|z| z.z),
                plan.sample_rate,
                config.settings.sampling
            )));
        }
    }
    let sampler = LotSampler::replayed(sampling(config, plan), plan.n, keys.sampler_stream(), h.step)
        .map_err(|e| refuse(e.to_string()))?;
    if sampler.position() != h.sampler {
        return Err(refuse(format!(
            "its sampler ({:?}) is not where {} steps leave the run's ({:?})",
            h.sampler,
            h.step,
            sampler.position()
        )));
    }
    let table = ParamTable::of(&model)?;
    let sizes: Vec<usize> = table.params().iter().map(|p| p.len()).collect();
    let noise = match (mechanism.is_private(), h.noise) {
        (true, Some(position)) => {
            let noise = GaussianNoise::resumed(keys.noise_stream(), position, h.step, &sizes).map_err(refuse)?;
            Some(noise.state().clone())
        }
        (false, None) => None,
        _ => return Err(refuse("its noise stream does not fit the mechanism".into())),
    };
    let allocation = restored_allocation(ckpt.allocation, &h.ledger, config, plan, &table, h.step, device)?;
    let record = ModuleRecord::from_bytes(Bytes::from_bytes_vec(ckpt.model))
        .map_err(|e| refuse(format!("model record: {e:?}")))?;
    // The record brings back the parameters' ids, which the optimiser's record is keyed by.
    let model =
        model.try_load_record(record).map_err(|e| refuse(format!("the model record does not fit the model: {e:?}")))?;
    let optimizer = optimizer
        .from_bytes(Bytes::from_bytes_vec(ckpt.optimizer))
        .map_err(|e| refuse(format!("optimizer record: {e:?}")))?;
    let state = StepState { sampler, noise, ledger: h.ledger, allocation };
    Ok(Restored { model: model.train(), optimizer, state, step: h.step })
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
        let last = ledger.entries().last().map(|e| e.noise_multiplier);
        if let Some(z) = a.current_multiplier().filter(|&z| Some(z) != last) {
            return Err(EngineError::Resume(format!(
                "its current sigma gives noise multiplier {z}, its last ledger entry records {last:?}"
            )));
        }
    }
    Ok(Some(state))
}
