//! The steps of a run's session: metrics every tenth of an epoch, an evaluation every epoch
//! (its curves redrawn), a sealed checkpoint as configured, at the end and on interruption,
//! and the session's report.

use crate::curves;
use crate::event::Event;
use crate::folder::checkpoint::{Checkpoint, Header, checkpoint_path};
use crate::folder::lock::RunLock;
use crate::folder::{self, METRICS_FILE, PLOT_FILE};
use crate::provenance::Provenance;
use crate::report::RunReport;
use crate::seal::sha256_hex;
use crate::session::Session;
use burn::module::Module;
use dp_engine::backend::SelectedDevice;
use dp_engine::checkpoint::values_digest;
use dp_engine::engine::DpOptimizer;
use dp_engine::error::{EngineError, Result};
use dp_engine::lots::LotSource;
use dp_engine::step::canaries::WhiteBoxCanaries;
use std::sync::atomic::Ordering;
use std::time::Instant;

/// Where the step loop is: the model and the steps and seconds so far, and whether it was
/// interrupted.
pub(crate) struct Position<M> {
    pub(crate) model: M,
    pub(crate) step: u64,
    pub(crate) seconds: f64,
    pub(crate) interrupted: bool,
}

/// What the step loop needs besides the optimiser and the model.
pub(crate) struct StepLoop<'r, 'a, M> {
    pub(crate) session: &'r Session<'a, M>,
    pub(crate) lock: &'r RunLock,
    pub(crate) config_digest: String,
    pub(crate) started: u64,
    pub(crate) source: &'r dyn LotSource<M>,
    pub(crate) device: &'r SelectedDevice,
}

impl<M: Module> StepLoop<'_, '_, M> {
    /// Steps from `at` until the plan, `stop_after` or an interrupt ends the session: metrics
    /// every tenth of an epoch, an evaluation every epoch, a checkpoint as configured and at the
    /// end.
    pub(crate) fn run(
        &self,
        dp: &mut DpOptimizer<M>,
        at: Position<M>,
        observe: &mut dyn FnMut(&Event),
    ) -> Result<Position<M>> {
        let options = &self.session.options;
        let Position { mut model, mut step, mut seconds, mut interrupted } = at;
        let planned_steps = dp.planned_steps();
        let lot_size = self.session.privacy.settings.lot_size;
        let steps_per_epoch = ((self.source.len() as f64 / lot_size as f64).round() as u64).max(1);
        let log_every = (steps_per_epoch / 10).max(1);
        let mut segment = Instant::now();
        let stop_at = options.stop_after.map_or(planned_steps, |s| step.saturating_add(s).min(planned_steps));
        let (base, schedule) = self.session.learning_rate;
        while step < stop_at {
            let (next, metrics) = dp.step(model, self.source, schedule.rate(base, step, planned_steps))?;
            model = next;
            step += 1;
            observe(&Event::Progress { step });
            if (step % log_every == 0 || step == planned_steps)
                && let Some((loss, accuracy)) = metrics.read()
            {
                if !loss.is_finite() {
                    return Err(EngineError::Diverged(format!(
                        "loss is {loss} at step {step}; lower Run::new's learning rate (the last checkpoint is kept)"
                    )));
                }
                self.log(&Event::Step { step, loss, accuracy }, observe)?;
            }
            if step % steps_per_epoch == 0 || step == planned_steps {
                let test_accuracy = (self.session.evaluate)(dp.averaged().unwrap_or(&model))?;
                self.log(&Event::Evaluated { step, test_accuracy, privacy: dp.privacy()? }, observe)?;
            }
            interrupted = options.interrupt.is_some_and(|flag| flag.load(Ordering::SeqCst));
            let every = options.checkpoint_every;
            let due = options.checkpoint_interval.is_some_and(|interval| segment.elapsed() >= interval);
            if (every > 0 && step % every == 0) || due || step == stop_at || interrupted {
                seconds += segment.elapsed().as_secs_f64();
                segment = Instant::now();
                self.save(seconds, &model, dp)?;
            }
            if interrupted {
                break;
            }
        }
        Ok(Position { model, step, seconds, interrupted })
    }

    /// Writes the checkpoint of `model` and `dp` after `seconds` of training, atomically, sealed
    /// with the run's MAC key.
    pub(crate) fn save(&self, seconds: f64, model: &M, dp: &DpOptimizer<M>) -> Result<()> {
        let path = checkpoint_path(&self.session.folder.dir);
        let state = dp.checkpoint(model).map_err(|e| e.of_checkpoint(&path))?;
        let header = Header {
            config_digest: self.config_digest.clone(),
            seeded: self.session.folder.seed().is_some(),
            started: self.started,
            seconds,
            model_digest: sha256_hex(&state.model),
            values_digest: values_digest(model),
            initial_weights: self.session.initial_weights.clone(),
        };
        self.lock.held()?;
        Checkpoint { header, state }.save(&path, self.session.folder.keys.mac())
    }

    /// Appends `event` to the run's metrics and shows it. After an evaluation, the run
    /// folder's curves are redrawn.
    fn log(&self, event: &Event, observe: &mut dyn FnMut(&Event)) -> Result<()> {
        let dir = &self.session.folder.dir;
        self.lock.held()?;
        folder::log(&dir.join(METRICS_FILE), event)?;
        if let Event::Evaluated { .. } = event {
            curves::redraw(dir)?;
        }
        observe(event);
        Ok(())
    }

    /// The report of the session that `ended`, written to the run folder.
    pub(crate) fn finish(&self, dp: &DpOptimizer<M>, ended: &Position<M>) -> Result<RunReport> {
        let run = self.session;
        let spent = dp.privacy()?;
        let delta = spent.delta;
        let planned_steps = dp.planned_steps();
        let dir = &run.folder.dir;
        let report = RunReport {
            test_accuracy: (run.evaluate)(dp.averaged().unwrap_or(&ended.model))?,
            evaluated_on: run.names.1.clone(),
            privacy: spent,
            sigma_privacy: dp.sigma_privacy()?,
            steps: ended.step,
            seconds: ended.seconds,
            noise_multiplier: dp.noise_multiplier(),
            sample_rate: dp.sample_rate(),
            device: format!("{} ({})", self.device.backend, self.device.name),
            device_tried: run.device_tried.clone(),
            model: run.names.0.clone(),
            mechanism: run.privacy.mechanism.name().into(),
            trained_parameters: dp.table().params().iter().map(|p| p.path.clone()).collect(),
            frozen_parameters: dp.table().frozen().iter().map(|p| p.path.clone()).collect(),
            seeded: run.folder.seed().is_some(),
            notes: dp.notes().iter().cloned().chain(run.initial_weights.as_ref().map(Provenance::note)).collect(),
            run_dir: dir.clone(),
            curves: dir.join(PLOT_FILE),
            completed: ended.step == planned_steps,
            interrupted: ended.interrupted && ended.step < planned_steps,
            audit: run
                .options
                .audit
                .zip(dp.hook().and_then(|h| h.as_any().downcast_ref::<WhiteBoxCanaries>()))
                .map(|(request, c)| c.audit(delta, request.confidence)),
            initial_weights: run.initial_weights.clone(),
            ledger: dp.ledger().clone(),
        };
        self.lock.held()?;
        folder::write_report(dir, &report)?;
        Ok(report)
    }
}
