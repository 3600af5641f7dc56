//! `dptrain train`: a zoo model on an image dataset, trained by the DP step (or, for the
//! baseline, by plain Burn training) with a burn-optim optimiser, as a [`dp_run::Run`] in the
//! run folder (lock, key file, sealed checkpoints, resume with every check, metrics, curves,
//! report). What is the app's own: the dataset and its held-out split, the ScatterNet features
//! and augmented views, the zoo model checked against the memory budget, and the settings.

use crate::cache_dir::cache_dir;
use crate::fetch::data_folder;
use crate::scattered::scattered;
use crate::search_folder::refuse_search;
use crate::train_config::TrainConfig;
use crate::zoo::{ModelSpec, ZooModel, build, footprint};
use dp_data::{ChaChaState, CropFlip, ImageDataset, SecretKey, Split};
use dp_engine::Result;
use dp_engine::lots::AugmentedLots;
use dp_engine::lots::Batching;
use dp_engine::lots::image_accuracy;
use dp_engine::nn::scatter_net::ScatterNet;
use dp_engine::optim::optimizer;
use dp_engine::weights::load_weights;
use dp_run::prelude::*;
use dp_run::provenance::provenance;
use std::path::Path;
use std::sync::atomic::AtomicBool;

/// The ChaCha20 stream reserved for parameter initialisation.
const INIT_STREAM: u64 = 2;

/// What the trainer tells its observer: the run's events, and the features it computes first.
#[derive(Debug, Clone, Copy)]
pub enum Told<'a> {
    /// An event of the run.
    Run(&'a Event),
    /// ScatterNet features are being computed (not found in the cache).
    Scattering {
        /// Examples to transform.
        examples: usize,
        /// Where they will be cached (None: nowhere, no cache folder is known).
        cache: Option<&'a Path>,
    },
}

/// The sets a run trains and is evaluated on: the training set, the set it is evaluated on
/// (the test set, or the held-out end of the training set with `validation`), and the test set
/// beside a held-out one when asked for.
#[derive(Debug, Clone)]
pub struct Datasets {
    /// The training examples.
    pub train: ImageDataset,
    /// What the run is evaluated on.
    pub test: ImageDataset,
    /// The test set beside a held-out one.
    pub beside: Option<ImageDataset>,
}

/// [`Datasets`], borrowed: what a run reads.
#[derive(Debug, Clone, Copy)]
pub struct DataView<'a> {
    /// The training examples.
    pub train: &'a ImageDataset,
    /// What the run is evaluated on.
    pub test: &'a ImageDataset,
    /// The test set beside a held-out one.
    pub beside: Option<&'a ImageDataset>,
}

impl Datasets {
    /// The sets, borrowed.
    pub fn view(&self) -> DataView<'_> {
        DataView { train: &self.train, test: &self.test, beside: self.beside.as_ref() }
    }
}

/// The images of a run's sets as `config` names them (its dataset, own data and `validation`),
/// with `test_too` the test set beside a held-out one; refused when a set is empty or their
/// shapes or classes differ (the model could not evaluate them after training).
pub fn load_images(config: &TrainConfig, test_too: bool) -> Result<Datasets> {
    // The folder is found once: a fetched one is verified by hashing its files.
    let folder = data_folder(config.dataset, config.data_dir.as_deref())?;
    let train = config.dataset.load(&folder, Split::Train, &config.own_data())?;
    let (train, test) = match config.validation {
        None => (train, config.dataset.load(&folder, Split::Test, &config.own_data())?),
        Some(held) if held > 0 && held < train.len() => {
            let at = train.len() - held;
            train.split_off(at)
        }
        Some(held) => {
            return Err(EngineError::invalid(
                "validation",
                format!(
                    "{held} held-out examples: give between 1 and {} for {} training examples",
                    train.len().max(1) - 1,
                    train.len()
                ),
            ));
        }
    };
    let beside = match test_too && config.validation.is_some() {
        true => Some(config.dataset.load(&folder, Split::Test, &config.own_data())?),
        false => None,
    };
    for (set, name) in [(Some(&train), "training"), (Some(&test), "test"), (beside.as_ref(), "test")] {
        if set.is_some_and(ImageDataset::is_empty) {
            return Err(EngineError::data(format!("the {name} set of {:?} holds no example", config.dataset)));
        }
    }
    for other in [Some(&test), beside.as_ref()].into_iter().flatten() {
        if train.shape() != other.shape() || train.classes() != other.classes() {
            return Err(EngineError::data(format!(
                "the test set's examples are {:?} in {} classes, the training set's {:?} in {}",
                other.shape(),
                other.classes(),
                train.shape(),
                train.classes()
            )));
        }
    }
    Ok(Datasets { train, test, beside })
}

/// The ScatterNet features of `images` (`scattered`, cached), whose computation `observe` is
/// told of; the training set's only with `train_too` (a run with augmented views transforms
/// its training images view by view as they are drawn).
pub fn features(
    images: &Datasets,
    train_too: bool,
    interrupt: Option<&AtomicBool>,
    observe: &mut dyn FnMut(Told<'_>),
) -> Result<Datasets> {
    let cache = cache_dir();
    let mut features = |set: &ImageDataset| {
        scattered(set, cache.as_deref(), interrupt, &mut |examples| {
            observe(Told::Scattering { examples, cache: cache.as_deref() })
        })
    };
    let train = if train_too { features(&images.train)? } else { images.train.clone() };
    let beside = images.beside.as_ref().map(&mut features).transpose()?;
    Ok(Datasets { train, test: features(&images.test)?, beside })
}

/// The sets a run of `config` reads (images, or a ScatterNet model's features).
fn load_data(
    config: &TrainConfig,
    test_too: bool,
    interrupt: Option<&AtomicBool>,
    observe: &mut dyn FnMut(Told<'_>),
) -> Result<Datasets> {
    let images = load_images(config, test_too)?;
    match config.model.reads_scattering() {
        true => features(&images, config.augmult.is_none(), interrupt, observe),
        false => Ok(images),
    }
}

/// How this invocation runs: fresh or resumed, and the run's options (where it stops, audit,
/// overwrite, interruption, the key file; the checkpoint cadence and averaging come from the
/// configuration).
#[derive(Debug, Clone, Copy, Default)]
pub struct Session {
    /// Continue the run in the config's run folder from its checkpoint.
    pub resume: bool,
    /// The run's options.
    pub options: RunOptions,
}

/// The training lots with `--augmult` views of each image (random crops after reflect padding,
/// mirrored as configured), transformed to ScatterNet features
/// for a ScatterNet model; None without `--augmult`. The views are drawn with the run's sampler
/// key (from the key file on `--resume`), so a resumed run, seeded or not, draws the views the
/// whole run would have.
fn augmented_lots<'a>(
    config: &TrainConfig,
    train: &'a ImageDataset,
    sampler_key: &SecretKey,
) -> Result<Option<AugmentedLots<'a>>> {
    let Some(views) = config.augmult else { return Ok(None) };
    let mirror = config.augment_mirror.unwrap_or(config.dataset.mirrors_keep_labels());
    let padding = config.augment_padding.unwrap_or(dp_data::augment::DEFAULT_PADDING);
    let augmentation = CropFlip::new(padding, mirror, train.shape())?;
    let lots = AugmentedLots::new(train, augmentation, views, sampler_key.clone())?;
    Ok(Some(if config.model.reads_scattering() { lots.with_features(ScatterNet::new(train.shape())?)? } else { lots }))
}

/// The zoo model `config` names for `test` (what the model reads: a ScatterNet model's
/// features even where the training set is images), refused from arithmetic when a step on the
/// device's physical batches would not fit the memory budget. A physical batch holds at least
/// one example's views, beyond --batch-size when they outnumber it.
fn checked_model(
    config: &TrainConfig,
    train: &ImageDataset,
    test: &ImageDataset,
    device: &SelectedDevice,
) -> Result<ZooModel> {
    let spec = ModelSpec {
        name: config.model,
        activation: config.activation,
        hidden: config.hidden,
        normalization: config.normalization,
    };
    let batching = Batching::for_device(config.batch_size, device);
    let batch = batching.padded(config.batch_size.min(train.len())).max(config.augmult.unwrap_or(1));
    let [c, h, w] = test.shape();
    let bytes = footprint(spec, test.shape(), test.classes())?.step_bytes(batch);
    dp_data::memory::check(
        &format!("a step of {} on batches of {batch} images of {c}x{h}x{w}", spec.name.as_str()),
        bytes,
    )?;
    let mut init_rng = ChaChaState::new(config.seed, INIT_STREAM).restore();
    build(spec, test.shape(), test.classes(), &mut init_rng, &device.device)
}

/// Trains as `config` says (or resumes the run in `config.out_dir`), reporting progress to
/// `observe`. The run folder's lock is held from the first write (or, resuming, the first read)
/// to the end.
pub fn train(
    config: TrainConfig,
    session: Session,
    device: &SelectedDevice,
    observe: &mut dyn FnMut(Told<'_>),
) -> Result<RunReport> {
    let (folder, config) = opened(config, session)?;
    let data = load_data(&config, false, session.options.interrupt, observe)?;
    Ok(trained(folder, config, session, data.view(), device, observe)?.1)
}

/// The run `config` says on `data` (loaded once by the caller for several runs, as a search's
/// candidates share theirs), and the released model's accuracy on the test set beside its
/// held-out examples (a search's candidates are scored on held-out training examples; the
/// chosen one's test accuracy is post-processing).
pub fn train_then_test(
    config: TrainConfig,
    session: Session,
    data: DataView<'_>,
    device: &SelectedDevice,
    observe: &mut dyn FnMut(Told<'_>),
) -> Result<(RunReport, f64)> {
    let (folder, config) = opened(config, session)?;
    let (model, report) = trained(folder, config, session, data, device, observe)?;
    let accuracy = match data.beside {
        Some(test) => image_accuracy(&model, test, &device.device)?,
        None => report.test_accuracy,
    };
    Ok((report, accuracy))
}

/// The run's folder (fresh, or resumed) and the configuration the run goes on with (a resumed
/// run's own, whatever else was passed), checked.
fn opened(config: TrainConfig, session: Session) -> Result<(RunFolder, TrainConfig)> {
    let folder = if session.resume {
        RunFolder::resume(&config.out_dir)?
    } else {
        refuse_search(&config.out_dir)?;
        RunFolder::fresh(&config.out_dir, config.seed)?
    };
    let config = match folder.settings::<TrainConfig>()? {
        Some(own) => TrainConfig { seed: config.seed, out_dir: config.out_dir, ..own },
        None => config,
    };
    config.validate(&config.privacy()?)?;
    Ok((folder, config))
}

/// The released model of the run `config` says in `folder`, on `data`, and its report.
fn trained(
    folder: RunFolder,
    config: TrainConfig,
    session: Session,
    data: DataView<'_>,
    device: &SelectedDevice,
    observe: &mut dyn FnMut(Told<'_>),
) -> Result<(ZooModel, RunReport)> {
    let privacy = config.privacy()?;
    let DataView { train: train_data, test: test_data, .. } = data;
    let dev = &device.device;
    let model = checked_model(&config, train_data, test_data, device)?;
    // A resumed run's weights, and where they first came from, are its checkpoint's: its
    // initial weights file is not read again (it may be gone, or another file now).
    let (model, initial) = match config.init_from.as_deref().filter(|_| !folder.is_resumed()) {
        Some(file) => (load_weights(model, file, &[])?, Some(provenance(file)?)),
        None => (model, None),
    };
    let plain = CrossEntropyLots { data: train_data };
    let augmented = augmented_lots(&config, train_data, folder.streams().sampler_key())?;
    let source: &dyn LotSource<ZooModel> = match &augmented {
        Some(lots) => lots,
        None => &plain,
    };
    let optimizer = optimizer(config.optimizer(), config.momentum, config.weight_decay);
    let run = Run::new(folder, privacy, config.learning_rate, |model: &ZooModel| image_accuracy(model, test_data, dev));
    let run = match initial {
        Some(p) => run.with_initial_weights(p),
        None => run,
    };
    run.with_device_choice(device.tried.clone())
        .with_schedule(config.lr_schedule)
        .with_batch_size(config.batch_size)
        .with_options(RunOptions { checkpoint_every: config.checkpoint_every, average: config.ema, ..session.options })
        .with_settings(&TrainConfig { seed: None, ..config.clone() })?
        .describe(config.model.as_str(), config.evaluated_on())
        .observe(|event| observe(Told::Run(event)))
        .train_model(model, optimizer, source, dev)
}
