//! A DP training run as a library object: a user's model, optimiser, lots, evaluation and
//! privacy configuration, trained into a run folder that holds everything a trustworthy run
//! needs (the lock, the key file, sealed checkpoints, metrics, curves, the report), fresh or
//! resumed with every privacy-relevant check. `dptrain train` is one program built on it.

use crate::audit;
use crate::event::Event;
use crate::folder::RunFolder;
use crate::folder::checkpoint::{self, Checkpoint, checkpoint_path};
use crate::folder::keys::RunKeys;
use crate::folder::lock::RunLock;
use crate::folder::{self, METRICS_FILE};
use crate::model_file;
use crate::options::RunOptions;
use crate::owner_key::OwnerKey;
use crate::provenance::Provenance;
use crate::report::RunReport;
use crate::session::Session;
use crate::speaker::Speaker;
use crate::step_loop::{Position, StepLoop};
use burn::module::Module;
use burn::optim::ModuleOptimizer;
use burn::tensor::Device;
use dp_engine::backend::{SelectedDevice, Trial};
use dp_engine::engine::DpOptimizer;
use dp_engine::engine::PrivacyEngine;
use dp_engine::error::{EngineError, Result};
use dp_engine::lots::Batching;
use dp_engine::lots::LotSource;
use dp_engine::optim::LrSchedule;
use dp_engine::privacy::PrivacyConfig;
use serde::Serialize;
use std::time::{SystemTime, UNIX_EPOCH};

/// A DP training run in a folder (see the crate's documentation for an example).
pub struct Run<'a, M> {
    session: Session<'a, M>,
    batch_size: usize,
    settings: String,
    /// The program's observer; None: the run speaks ([`Speaker`]).
    observe: Option<Observer<'a>>,
}

/// A program's observer of a run's events.
type Observer<'a> = Box<dyn FnMut(&Event) + 'a>;

/// Where a session starts: the folder's lock, the digest of the config.toml its checkpoints
/// name, the run's start time, and the model and optimiser at the step it starts from.
pub(crate) struct Begun<M> {
    pub(crate) lock: RunLock,
    pub(crate) config_digest: String,
    pub(crate) started: u64,
    pub(crate) at: Position<M>,
    pub(crate) dp: DpOptimizer<M>,
}

/// Seconds since the Unix epoch.
fn unix_now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// How far the clock of a machine resuming a run may disagree with the one that started it.
const CLOCK_SLACK: u64 = 86_400;

impl<'a, M: Module> Run<'a, M> {
    /// The run of `privacy` in `folder` at a constant `learning_rate`, whose model is scored by
    /// `evaluate` (its accuracy on a held-out set) at every epoch and at the end.
    pub fn new(
        folder: RunFolder,
        privacy: PrivacyConfig,
        learning_rate: f64,
        evaluate: impl Fn(&M) -> Result<f64> + 'a,
    ) -> Self {
        let session = Session {
            folder,
            privacy,
            learning_rate: (learning_rate, LrSchedule::Constant),
            evaluate: Box::new(evaluate),
            options: RunOptions::default(),
            names: ("model".into(), "test".into()),
            initial_weights: None,
            device_tried: Vec::new(),
        };
        Self { session, batch_size: 256, settings: String::new(), observe: None }
    }

    /// The learning rate's schedule over the planned steps.
    pub fn with_schedule(mut self, schedule: LrSchedule) -> Self {
        self.session.learning_rate.1 = schedule;
        self
    }

    /// Examples per physical batch: bounds memory, does not change the result.
    pub fn with_batch_size(mut self, batch_size: usize) -> Self {
        self.batch_size = batch_size;
        self
    }

    /// The session's options (where it stops, checkpoints, averaging, audit, interruption).
    pub fn with_options(mut self, options: RunOptions) -> Self {
        self.session.options = options;
        self
    }

    /// The program's own settings, written to a fresh run's config.toml (without any seed: the
    /// key file keeps it), which its checkpoints are bound to; [`RunFolder::settings`] reads
    /// them back on resume.
    pub fn with_settings(mut self, settings: &impl Serialize) -> Result<Self> {
        self.settings = toml::to_string(settings)
            .map_err(|e| EngineError::invalid("settings", format!("not expressible in TOML: {e}")))?;
        Ok(self)
    }

    /// The model's name and that of the set it is evaluated on, for the report.
    pub fn describe(mut self, model: impl Into<String>, evaluated_on: impl Into<String>) -> Self {
        self.session.names = (model.into(), evaluated_on.into());
        self
    }

    /// Records in the report where the model's initial weights came from
    /// ([`crate::provenance::provenance`]): a model trained before on the same private data
    /// spends it again, which this run's epsilon does not count.
    pub fn with_initial_weights(mut self, provenance: Provenance) -> Self {
        self.session.initial_weights = Some(provenance);
        self
    }

    /// Records in the report how `auto` chose the device (`SelectedDevice::tried`): each device
    /// tried, and why it was taken or passed over.
    pub fn with_device_choice(mut self, tried: Vec<Trial>) -> Self {
        self.session.device_tried = tried;
        self
    }

    /// Tells `observe` of the run's start, each step, the metrics logged and each evaluation,
    /// instead of saying them on stderr (what a run does unless told otherwise: the set-up,
    /// its progress and each evaluation with the privacy spent, as `dptrain train` shows them).
    pub fn observe(mut self, observe: impl FnMut(&Event) + 'a) -> Self {
        self.observe = Some(Box::new(observe));
        self
    }

    /// Says nothing while it runs (the report and the run folder still tell everything).
    pub fn quiet(self) -> Self {
        self.observe(|_| {})
    }

    /// Trains `model` with `optimizer` (fresh ones of the run's kind on resume, into which the
    /// checkpoint is loaded) on lots of `source` until the plan, the options or an interruption
    /// end the session, and reports it (report.json). A completed run's key file is removed
    /// unless the options keep it.
    pub fn train(
        self,
        model: M,
        optimizer: ModuleOptimizer,
        source: &dyn LotSource<M>,
        device: &Device,
    ) -> Result<RunReport> {
        Ok(self.train_model(model, optimizer, source, device)?.1)
    }

    /// [`Self::train`], giving back the model the run releases too (the parameter average when
    /// the options keep one, else the last iterate).
    pub fn train_model(
        mut self,
        model: M,
        optimizer: ModuleOptimizer,
        source: &dyn LotSource<M>,
        device: &Device,
    ) -> Result<(M, RunReport)> {
        self.session.options.check(self.session.folder.is_resumed())?;
        self.session.privacy.settings.seed = self.seed()?;
        // The key the released model is sealed with, checked before any step: a completed run
        // never loses its certificate to a key found unusable at the end.
        let owner = OwnerKey::for_folder(&self.session.folder.dir)?;
        let engine = PrivacyEngine::new(self.session.privacy.clone())
            .with_batch_size(self.batch_size)
            .with_keys(self.session.folder.streams().clone());
        let begun = match self.session.folder.resumed.take() {
            Some((_, digest)) => self.resumed(engine, digest, (model, optimizer), source, device)?,
            None => self.fresh(engine, (model, optimizer), source, device)?,
        };
        let selected = SelectedDevice::of(device);
        let mut observe = self.observe.take().unwrap_or_else(|| {
            let mut speaker = Speaker::new(self.session.names.1.clone());
            Box::new(move |event: &Event| speaker.say(event))
        });
        observe(&Event::started(&begun.dp, &selected, source.len(), begun.at.step));
        let Begun { lock, config_digest, started, at, mut dp } = begun;
        let steps = StepLoop { session: &self.session, lock: &lock, config_digest, started, source, device: &selected };
        if at.step == 0 {
            // Checkpointed before its first step: a run killed at any point resumes with its own
            // keys (the noise it drew again), never started afresh with new noise.
            steps.save(0.0, &at.model, &dp)?;
        }
        let ended = steps.run(&mut dp, at, &mut *observe)?;
        let report = steps.finish(&dp, &ended)?;
        let averaged = dp.averaged().is_some();
        let released = dp.averaged().cloned().unwrap_or(ended.model);
        if report.completed {
            lock.held()?;
            model_file::write(&self.session.folder.dir, &released, &report, averaged, &owner)?;
            if !self.session.options.keep_key {
                RunKeys::remove(&self.session.folder.dir)?;
            }
        }
        Ok((released, report))
    }

    /// The run's seed: the folder's keys', which a seed in the privacy configuration must equal.
    fn seed(&self) -> Result<Option<u64>> {
        match self.session.privacy.settings.seed {
            Some(seed) if Some(seed) != self.session.folder.seed() => Err(EngineError::invalid(
                "seed",
                "RunFolder::resume takes the run's own seed (from its key file): drop PrivacyConfig::with_seed or give the run's",
            )),
            _ => Ok(self.session.folder.seed()),
        }
    }

    /// A fresh run set up by the library's dry run, with its averaging and canaries (placed
    /// before anything is written); then the folder is locked and started.
    fn fresh(
        &mut self,
        engine: PrivacyEngine,
        (model, optimizer): (M, ModuleOptimizer),
        source: &dyn LotSource<M>,
        device: &Device,
    ) -> Result<Begun<M>> {
        let mut dp = engine.make_private(&model, optimizer, source, device)?;
        if let Some(decay) = self.session.options.average {
            dp.set_parameter_averaging(decay)?;
        }
        if let Some(request) = self.session.options.audit {
            let batching = Batching::for_device(self.batch_size, &SelectedDevice::of(device));
            let canaries =
                audit::place(request.canaries, (&self.session.privacy, dp.plan()), &model, source, (batching, device))?;
            dp.set_hook(Box::new(canaries))?;
        }
        let dir = &self.session.folder.dir;
        let lock = RunLock::acquire(dir)?;
        let digest = folder::start(
            dir,
            &self.settings,
            dp.noise_multiplier(),
            self.session.options.overwrite,
            &self.session.folder.keys,
        )?;
        let at = Position { model: model.train(), step: 0, seconds: 0.0, interrupted: false };
        Ok(Begun { lock, config_digest: digest, started: unix_now(), at, dp })
    }

    /// The run continued from its checkpoint (sealed under the key file's MAC key, bound to the
    /// config.toml of `digest`, its clock checked here and everything the privacy claim depends
    /// on by the library); metrics logged after it are dropped (they are taken again).
    fn resumed(
        &mut self,
        engine: PrivacyEngine,
        digest: String,
        (model, optimizer): (M, ModuleOptimizer),
        source: &dyn LotSource<M>,
        device: &Device,
    ) -> Result<Begun<M>> {
        let dir = self.session.folder.dir.clone();
        let path = checkpoint_path(&dir);
        let ckpt = self.checkpoint(&digest, model.num_params())?;
        check_clock(&ckpt.header, &path)?;
        self.session.initial_weights = started_from(self.session.initial_weights.take(), &ckpt.header, &path)?;
        let (model, dp) =
            engine.resume((model, optimizer), source, device, ckpt.state).map_err(|e| e.of_checkpoint(&path))?;
        let lock =
            self.session.folder.lock.take().ok_or_else(|| EngineError::invalid("run folder", "is not locked"))?;
        let step = dp.steps_taken();
        folder::keep_metrics_until(&dir.join(METRICS_FILE), step)?;
        let at = Position { model, step, seconds: ckpt.header.seconds, interrupted: false };
        Ok(Begun { lock, config_digest: ckpt.header.config_digest, started: ckpt.header.started, at, dp })
    }

    /// The run's checkpoint, no larger than a model of `params` parameters can make it, its MAC
    /// checked under the key file's key, refused unless it belongs to the config.toml of
    /// `digest` (the configuration decides every other check) and agrees with the key file on
    /// the seed.
    fn checkpoint(&self, digest: &str, params: usize) -> Result<Checkpoint> {
        let path = checkpoint_path(&self.session.folder.dir);
        let ckpt = Checkpoint::load(&path, self.session.folder.keys.mac(), checkpoint::size_bound(params))?;
        let refuse = |reason: &str| EngineError::checkpoint(&path, reason);
        if digest != ckpt.header.config_digest {
            return Err(refuse("the run folder's config.toml is not the one this checkpoint belongs to"));
        }
        if ckpt.header.seeded != self.session.folder.seed().is_some() {
            return Err(refuse("it says the run is seeded where the key file does not, or the reverse"));
        }
        Ok(ckpt)
    }
}

/// Where a resumed run's initial weights came from: what its checkpoint recorded when it
/// started (the file may have been deleted or replaced since); a program that names a file of
/// other bytes is refused, and one that names none is told nothing new.
fn started_from(
    given: Option<Provenance>,
    h: &checkpoint::Header,
    path: &std::path::Path,
) -> Result<Option<Provenance>> {
    match (given, &h.initial_weights) {
        (Some(given), recorded) if recorded.as_ref().is_none_or(|r| r.sha256 != given.sha256) => {
            Err(EngineError::checkpoint(
                path,
                format!(
                    "the run started from {}, not from {} (sha256 {}): a resumed run's weights come from its checkpoint; drop Run::with_initial_weights on resume",
                    recorded
                        .as_ref()
                        .map_or("no initial weights".into(), |r| format!("weights of sha256 {}", r.sha256)),
                    given.file.display(),
                    given.sha256
                ),
            ))
        }
        _ => Ok(h.initial_weights.clone()),
    }
}

/// The run folder's own check of a checkpoint before the library resumes it: the training
/// seconds against the clock (everything the privacy claim depends on is checked by
/// `PrivacyEngine::resume`).
fn check_clock(h: &checkpoint::Header, path: &std::path::Path) -> Result<()> {
    let now = unix_now();
    let elapsed = now.saturating_sub(h.started) + CLOCK_SLACK;
    if !(h.seconds.is_finite() && h.seconds >= 0.0 && h.seconds <= elapsed as f64) || h.started > now + CLOCK_SLACK {
        return Err(EngineError::checkpoint(
            path,
            format!(
                "{} training seconds for a run started at Unix time {}, {} s ago",
                h.seconds,
                h.started,
                now.saturating_sub(h.started)
            ),
        ));
    }
    Ok(())
}
