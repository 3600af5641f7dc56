//! Everything that defines a `dptrain train` run: its privacy settings (from which
//! [`TrainConfig::privacy`] builds the library's [`PrivacyConfig`], the mechanism with its own
//! options through the registry) and the app's run settings (data, model, optimiser, device,
//! run folder, checkpoint cadence). Every field is a flag and a key of the TOML config; a
//! mechanism's own options are keys of the same file, read by that mechanism alone. The
//! resolved config is written to the run folder.

use crate::zoo::{ModelName, Normalization};
use dp_accounting::LotSampling;
use dp_data::{DatasetName, OwnData};
use dp_engine::backend::DeviceChoice;
use dp_engine::error::{EngineError, Result, one_line};
use dp_engine::nn::activation::Activation;
use dp_engine::optim::LrSchedule;
use dp_engine::optim::OptimizerName;
use dp_engine::privacy::AccountantName;
use dp_engine::privacy::Clipping;
use dp_engine::privacy::PrivacyConfig;
use dp_engine::privacy::mechanism::{self, MechanismName, MechanismOptions};
use dp_engine::privacy::{NoiseLevel, PrivacySettings, positive};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::path::PathBuf;

/// Settings by their configuration key, unset ones absent: the flags given, or a configuration's.
pub type Settings = serde_json::Map<String, Value>;

/// A setting that a resume's flags would change: its key, the run's value and the value given
/// (None: the flags drop it), each written as the run's config.toml writes it.
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    /// The setting's key.
    pub key: String,
    /// The run's value (`none`: unset).
    pub run_has: String,
    /// The value given; None when the flags unset it.
    pub given: Option<String>,
}

/// A training run's configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct TrainConfig {
    /// Dataset.
    pub dataset: DatasetName,
    /// Folder holding the dataset's files (default: the dataset's standard location).
    pub data_dir: Option<PathBuf>,
    /// image-folder: (channels, height, width) the images are resized to (default 3x32x32).
    pub image_shape: Option<[usize; 3]>,
    /// csv: the label column, a header name or a 0-based index (default: the last).
    pub label: Option<String>,
    /// csv: the classes in label order, declared (public input, never read from the rows).
    pub classes: Option<Vec<String>>,
    /// Architecture.
    pub model: ModelName,
    /// Non-linearity.
    pub activation: Activation,
    /// Hidden width of `mlp`.
    pub hidden: Option<usize>,
    /// Hold the last this many training examples out of training and evaluate on them instead
    /// of the test set (hyper-parameters chosen without the test set).
    pub validation: Option<usize>,
    /// Normalisation layers (BatchNorm is refused).
    pub normalization: Normalization,
    /// Initial weights from this safetensors file (pretrained on public data) instead of the
    /// random initialisation.
    pub init_from: Option<PathBuf>,
    /// Regular expressions of the parameter paths kept fixed (fine-tuning): no gradient, no
    /// noise, no update.
    pub freeze: Vec<String>,
    /// Device.
    pub device: DeviceChoice,
    /// Privacy mechanism.
    pub mechanism: MechanismName,
    /// Passes over the data (steps = round(epochs * N / lot_size)).
    pub epochs: f64,
    /// Expected examples per lot L (the sampling rate is q = L / N).
    pub lot_size: usize,
    /// Examples per physical batch (bounds memory; does not change the result).
    pub batch_size: usize,
    /// Lot sampling.
    pub sampling: LotSampling,
    /// Noise multiplier z (noise std = z * clip_norm); exclusive with target_epsilon.
    pub noise_multiplier: Option<f64>,
    /// Calibrate z so that the whole run spends this epsilon.
    pub target_epsilon: Option<f64>,
    /// Delta of the reported (epsilon, delta).
    pub delta: f64,
    /// Clipping bound C.
    pub clip_norm: f64,
    /// Flat or per-layer clipping (default: per-layer for optimized, else flat).
    pub clipping: Option<Clipping>,
    /// Update rule (default: adam for ls-adam, else sgd).
    pub optimizer: Option<OptimizerName>,
    /// Learning rate (of the first step).
    pub learning_rate: f64,
    /// How the learning rate moves over the run's steps.
    pub lr_schedule: LrSchedule,
    /// SGD momentum (PyTorch's convention: no dampening).
    pub momentum: f64,
    /// Weight decay (L2 for SGD and Adam, decoupled for AdamW).
    pub weight_decay: f64,
    /// Decay of an exponential moving average of the parameters, evaluated instead of the last
    /// iterate (De et al. 2022; post-processing, the same epsilon); None: no average.
    pub ema: Option<f64>,
    /// Augmented views of each example per step (augmentation multiplicity, De et al. 2022):
    /// their gradients averaged before clipping, the same epsilon; None: no augmentation.
    pub augmult: Option<usize>,
    /// Pixels of reflect padding before a view's random crop (default: De et al.'s 4).
    pub augment_padding: Option<usize>,
    /// Whether views are mirrored at random (default: where the data set's labels survive a
    /// mirror, fashion-mnist and cifar10).
    pub augment_mirror: Option<bool>,
    /// Accountant.
    pub accountant: AccountantName,
    /// Seed for a reproducible run (sampling, noise and initialisation); None keys from the OS.
    pub seed: Option<u64>,
    /// Write a checkpoint every this many steps (0: only at the end).
    pub checkpoint_every: u64,
    /// Run folder.
    pub out_dir: PathBuf,
    /// The mechanism's own options (ls-sgd's `ls_sigma`, optimized-paper's `sensitivity_every`),
    /// and any other key of the file: [`TrainConfig::privacy`] refuses a key that is no option
    /// (`MechanismOptions::KEYS`), the registry an option the mechanism named does not read.
    #[serde(flatten)]
    pub mechanism_options: toml::Table,
}

impl Default for TrainConfig {
    fn default() -> Self {
        Self {
            dataset: DatasetName::FashionMnist,
            data_dir: None,
            image_shape: None,
            label: None,
            classes: None,
            model: ModelName::MnistCnn,
            activation: Activation::Tanh,
            hidden: None,
            validation: None,
            normalization: Normalization::None,
            init_from: None,
            freeze: Vec::new(),
            device: DeviceChoice::Auto,
            mechanism: MechanismName::Gaussian,
            epochs: 1.0,
            lot_size: 256,
            batch_size: 256,
            sampling: LotSampling::Poisson,
            noise_multiplier: None,
            target_epsilon: None,
            delta: 1e-5,
            clip_norm: 1.0,
            clipping: None,
            optimizer: None,
            learning_rate: 0.5,
            lr_schedule: LrSchedule::Constant,
            momentum: 0.0,
            weight_decay: 0.0,
            ema: None,
            augmult: None,
            augment_padding: None,
            augment_mirror: None,
            accountant: AccountantName::Rdp,
            seed: None,
            checkpoint_every: dp_run::CHECKPOINT_EVERY,
            out_dir: PathBuf::from("runs/latest"),
            mechanism_options: toml::Table::new(),
        }
    }
}

impl TrainConfig {
    /// The settings `value` sets (anything serialised with this configuration's keys: the
    /// configuration itself, or the flags of a command), by key; those it leaves unset are absent.
    pub fn settings_of(value: &impl Serialize) -> Result<Settings> {
        match serde_json::to_value(value) {
            Ok(Value::Object(mut settings)) => {
                settings.retain(|_, v| !v.is_null());
                Ok(settings)
            }
            Ok(other) => Err(EngineError::invalid("settings", format!("{other} is not a map of settings"))),
            Err(e) => Err(EngineError::invalid("settings", e.to_string())),
        }
    }

    /// This configuration with `given` laid over it: each setting given replaces this one's (a
    /// mechanism's own option joins its options, which the mechanism named checks: it refuses
    /// another's), and a noise multiplier given drops a target epsilon and the other way round
    /// (a run has one noise level). Checked as a privacy configuration.
    pub fn overlaid(&self, given: &Settings) -> Result<TrainConfig> {
        let mut settings = Self::settings_of(self)?;
        for (one, other) in [("noise_multiplier", "target_epsilon"), ("target_epsilon", "noise_multiplier")] {
            if given.contains_key(one) {
                settings.remove(other);
            }
        }
        settings.extend(given.clone());
        let config: TrainConfig = serde_json::from_value(Value::Object(settings))
            .map_err(|e| EngineError::invalid("settings", e.to_string()))?;
        config.privacy()?;
        Ok(config)
    }

    /// What `asked` would change in this run's settings, key by key: the settings it gives
    /// another value (or that this run leaves unset), then those it unsets. The device, the seed
    /// and the run folder are not compared: a resumed run may move to another device, its seed
    /// is in its key file, and its folder is where it was found.
    pub fn changes(&self, asked: &TrainConfig) -> Result<Vec<Change>> {
        let compared = |config: &TrainConfig| {
            let config =
                TrainConfig { device: self.device, seed: None, out_dir: self.out_dir.clone(), ..config.clone() };
            Self::settings_of(&config)
        };
        let (run, now) = (compared(self)?, compared(asked)?);
        let changed = now.iter().filter(|(key, value)| run.get(*key) != Some(*value)).map(|(key, value)| Change {
            key: key.clone(),
            run_has: run.get(key).map_or("none".into(), as_toml),
            given: Some(as_toml(value)),
        });
        let unset = run.iter().filter(|(key, _)| !now.contains_key(*key)).map(|(key, value)| Change {
            key: key.clone(),
            run_has: as_toml(value),
            given: None,
        });
        Ok(changed.chain(unset).collect())
    }

    /// How a user's own data is read.
    pub fn own_data(&self) -> OwnData {
        let default = OwnData::default();
        OwnData {
            image_shape: self.image_shape.unwrap_or(default.image_shape),
            label: self.label.clone(),
            classes: self.classes.clone(),
        }
    }

    /// The set the run is evaluated on: `test`, or `validation` (the held-out end of the
    /// training set, `validation`).
    pub fn evaluated_on(&self) -> &'static str {
        if self.validation.is_some() { "validation" } else { "test" }
    }

    /// The run's privacy configuration: the mechanism named, built from its own options, and
    /// the privacy settings.
    pub fn privacy(&self) -> Result<PrivacyConfig> {
        let noise = match (self.noise_multiplier, self.target_epsilon) {
            (Some(_), Some(_)) => {
                return Err(EngineError::invalid(
                    "privacy",
                    "give either --noise-multiplier or --target-epsilon, not both",
                ));
            }
            (Some(z), None) => Some(NoiseLevel::Multiplier(z)),
            (None, Some(e)) => Some(NoiseLevel::TargetEpsilon(e)),
            (None, None) => None,
        };
        Ok(PrivacyConfig {
            mechanism: mechanism::named(self.mechanism, &self.mechanism_options()?)?,
            settings: PrivacySettings {
                noise,
                delta: self.delta,
                clip_norm: self.clip_norm,
                clipping: self.clipping,
                lot_size: self.lot_size,
                epochs: self.epochs,
                sampling: self.sampling,
                accountant: self.accountant.into(),
                seed: self.seed,
            },
            frozen: self.freeze.clone(),
        })
    }

    /// The mechanisms' own options among the file's other keys; a key that is neither a
    /// setting of a run nor an option of any mechanism is refused.
    fn mechanism_options(&self) -> Result<MechanismOptions> {
        if let Some(key) = self.mechanism_options.keys().find(|key| !MechanismOptions::KEYS.contains(&key.as_str())) {
            return Err(EngineError::invalid(
                "setting",
                format!("`{key}` is not a setting of a run, nor an option of any mechanism"),
            ));
        }
        MechanismOptions::deserialize(toml::Value::Table(self.mechanism_options.clone()))
            .map_err(|e| EngineError::invalid("mechanism option", one_line(&e.to_string())))
    }

    /// Checks the run settings, and `privacy` (this configuration's) with the update rule.
    pub fn validate(&self, privacy: &PrivacyConfig) -> Result<()> {
        positive("learning rate", self.learning_rate)?;
        if self.image_shape.is_some() && self.dataset != DatasetName::ImageFolder {
            return Err(EngineError::invalid(
                "image shape",
                "--image-shape resizes the images of --dataset image-folder",
            ));
        }
        if self.label.is_some() && self.dataset != DatasetName::Csv {
            return Err(EngineError::invalid("label", "--label names the label column of --dataset csv"));
        }
        match (self.dataset, &self.classes) {
            (DatasetName::Csv, None) => {
                return Err(EngineError::invalid(
                    "classes",
                    "--dataset csv needs its classes declared in label order (--classes NAME,NAME,...): they are public input, never read from the private rows",
                ));
            }
            (DatasetName::Csv, Some(_)) | (_, None) => {}
            (_, Some(_)) => {
                return Err(EngineError::invalid(
                    "classes",
                    "--classes declares the classes of --dataset csv (an image folder's are its class folders)",
                ));
            }
        }
        if let Some(decay) = self.ema {
            dp_engine::optim::checked_decay(decay)?;
        }
        if let Some(views) = self.augmult {
            dp_engine::lots::check_views(views)?;
        }
        if (self.augment_padding.is_some() || self.augment_mirror.is_some()) && self.augmult.is_none() {
            return Err(EngineError::invalid(
                "augmentation",
                "--augment-padding and --augment-mirror shape the views of --augmult K: give --augmult too",
            ));
        }
        if self.batch_size == 0 {
            return Err(EngineError::invalid("batch size", "must be at least 1"));
        }
        if !(0.0..1.0).contains(&self.momentum) {
            return Err(EngineError::invalid("momentum", format!("{} is not in [0, 1)", self.momentum)));
        }
        if !(self.weight_decay.is_finite() && self.weight_decay >= 0.0) {
            return Err(EngineError::invalid(
                "weight decay",
                format!("{} is not a non-negative number", self.weight_decay),
            ));
        }
        if privacy.mechanism.is_private() && privacy.settings.noise.is_none() {
            return Err(EngineError::invalid(
                "privacy",
                "this mechanism needs --noise-multiplier or --target-epsilon (or --mechanism none)",
            ));
        }
        privacy.validate()
    }

    /// The update rule used: the one given, else Adam for ls-adam (DP-LSAdam) and SGD for the
    /// others (the library refuses a rule the mechanism is not defined with).
    pub fn optimizer(&self) -> OptimizerName {
        let default = if self.mechanism == MechanismName::LsAdam { OptimizerName::Adam } else { OptimizerName::Sgd };
        self.optimizer.unwrap_or(default)
    }
}

/// `value` as a TOML file writes it (a JSON value where TOML has no form for it).
fn as_toml(value: &Value) -> String {
    toml::Value::try_from(value).map_or_else(|_| value.to_string(), |v| v.to_string())
}

#[cfg(test)]
mod tests;
