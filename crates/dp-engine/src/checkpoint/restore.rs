//! Resuming a run from its checkpoint ([`restore`]): everything the privacy claim depends on is
//! checked against the run's configuration, plan and keys before a step is taken (the step
//! counts, every ledger event, the sampler replayed from its key, the noise stream's position,
//! the allocation's state, the parameter average), and a checkpoint failing any check is refused
//! in one line.

use super::format::{AverageRecord, DpCheckpoint};
use super::keys::StreamKeys;
use crate::backend::DeviceError;
use crate::error::{EngineError, Result};
use crate::grad_sample::params::ParamTable;
use crate::noise::GaussianNoise;
use crate::optim::parameter_average::ParameterAverage;
use crate::privacy::config::PrivacyConfig;
use crate::privacy::plan::{Plan, sampling};
use crate::step::StepState;
use crate::tensor_io::vector;
use burn::module::Module;
use burn::optim::{ModuleOptimizer, OptimizerRecord};
use burn::store::ModuleRecord;
use burn::tensor::{Bytes, Device, Tensor};
use dp_accounting::{DpEvent, PrivacyLedger};
use dp_data::LotSampler;

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
            return Err(EngineError::resume(format!(
                "a ledger entry ({event:?}) is not a step of this run (z {:?}, q {}, {:?})",
                want_z.map(|z| z.z),
                plan.sample_rate,
                config.settings.sampling
            )));
        }
    }
    Ok(())
}

/// The digest of the examples a resumed run trains on: the one its checkpoint `recorded`, refused
/// unless the lot source gives the same (`given`); a run started from a source that gives none
/// cannot check.
pub(crate) fn same_data(recorded: Option<String>, given: Option<String>) -> Result<Option<String>> {
    match (&recorded, given) {
        (Some(was), Some(is)) if *was != is => Err(EngineError::resume(
            "the lot source's examples are not the ones the run started on (their digests differ: other examples, or the same in another order): resume on the training set the run started on",
        )),
        (Some(_), None) => Err(EngineError::resume(
            "the run started on a lot source whose examples it recorded a digest of, and this one gives none: resume on the source it started on",
        )),
        _ => Ok(recorded),
    }
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
    let refuse = |reason: String| EngineError::resume(reason);
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
        .map_err(EngineError::resume_sampler)?;
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
        return Err(EngineError::resume(format!(
            "its parameter average has {} updates after {step} steps",
            meta.updates
        )));
    }
    let average = match step {
        0 => template.clone(),
        _ => {
            let record = ModuleRecord::from_bytes(Bytes::from_bytes_vec(model))
                .map_err(|e| EngineError::resume(format!("average record: {e:?}")))?;
            template
                .clone()
                .try_load_record(record)
                .map_err(|e| EngineError::resume(format!("the average does not fit the model: {e:?}")))?
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
            return Err(EngineError::resume("its noise allocation state does not fit the mechanism and model"));
        }
    };
    let state: Vec<_> = parts.into_iter().map(|p| vector(p, device)).collect();
    if let Some(a) = allocation.as_mut() {
        a.restore(state.clone())?;
        let last = ledger.entries().last().map(|(_, e)| multiplier_of(e)).transpose()?.flatten();
        if let Some(z) = a.current_multiplier().filter(|&z| Some(z) != last) {
            return Err(EngineError::resume(format!(
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
        _ => Err(EngineError::resume(format!("a ledger entry ({event:?}) is not one step's release"))),
    }
}
