//! The settings `dptrain train` takes as flags, each a key of [`TrainConfig`] of the same name
//! (a mechanism's own option a key of its options): defined here once, given to the
//! configuration as a map of the flags given ([`SettingFlags::given`]) that
//! [`TrainConfig::overlaid`] lays over the file's and the defaults.

use super::enum_arg::{choice, parse};
use clap::Args;
use dp_accounting::LotSampling;
use dp_data::DatasetName;
use dp_engine::DeviceChoice;
use dp_engine::nn::activation::Activation;
use dp_engine::optim::LrSchedule;
use dp_engine::optim::OptimizerName;
use dp_engine::privacy::AccountantName;
use dp_engine::privacy::Clipping;
use dp_engine::privacy::mechanism::MechanismName;
use dp_engine::privacy::mechanism::smoothing::SmoothingScope;
use dptrain::train_config::{Settings, TrainConfig};
use dptrain::zoo::ModelName;
use dptrain::zoo::Normalization;
use serde::Serialize;
use std::path::PathBuf;

/// The run's settings as flags; one not given is absent, so the file's value or the default
/// stands.
#[derive(Args, Debug, Serialize)]
pub struct SettingFlags {
    /// Dataset: fashion-mnist, mnist or cifar10; or your own, in --data-dir: image-folder
    /// (DIR/train/CLASS/*.png or .jpg, one folder per class, and DIR/test/CLASS/... or
    /// --validation N; resized to --image-shape) or csv (DIR/train.csv, and DIR/test.csv or
    /// --validation N; numeric features as they are, the label column --label, the classes
    /// declared with --classes; a missing
    /// value or a text column is refused: nothing is computed from the private rows)
    /// [default: fashion-mnist].
    #[arg(long, value_parser = parse::<DatasetName>)]
    dataset: Option<DatasetName>,

    /// Folder with the dataset's files [default for fashion-mnist: /usr/share/datasets/fashion-mnist].
    #[arg(long, value_name = "DIR")]
    data_dir: Option<PathBuf>,

    /// image-folder: CxHxW the images are resized to, C 1 (grey) or 3 (RGB) [default: 3x32x32].
    #[arg(long, value_name = "CxHxW", value_parser = parse_shape)]
    image_shape: Option<[usize; 3]>,

    /// csv: the label column, a header name or a 0-based index [default: the last column].
    #[arg(long, value_name = "COLUMN")]
    label: Option<String>,

    /// csv: the classes, in label order, as the labels are written (required: they are public
    /// input, never read from the private rows; a row labelled otherwise is refused).
    #[arg(long, value_name = "NAME,NAME,...", value_delimiter = ',')]
    classes: Option<Vec<String>>,

    /// Model: mnist-cnn, xiang-mnist, cifar10-cnn, logreg, mlp, wrn-16-4 (residual, GroupNorm,
    /// weight-standardised convolutions; use --activation relu), or scatnet-linear / scatnet-cnn
    /// (Tramèr & Boneh's heads on ScatterNet features, computed once and cached in
    /// DPTRAIN_CACHE_DIR, else ~/.cache/dptrain) [default: mnist-cnn].
    #[arg(long, value_parser = parse::<ModelName>)]
    model: Option<ModelName>,

    /// Activation: tanh (tempered sigmoid, best under DP) or relu [default: tanh].
    #[arg(long, value_parser = parse::<Activation>)]
    activation: Option<Activation>,

    /// Hidden width of the mlp model [default: the input width].
    #[arg(long)]
    hidden: Option<usize>,

    /// Evaluate an exponential moving average of the parameters with this decay (e.g. 0.999)
    /// instead of the last iterate, with De et al.'s warm-up min(decay, (1 + t) / (10 + t)).
    /// Post-processing of the released models: the same epsilon. Kept in checkpoints.
    #[arg(long, value_name = "DECAY")]
    ema: Option<f64>,

    /// Augmentation multiplicity (De et al. 2022): train on K augmented views of every example
    /// of each lot (a random crop after reflect padding, mirrored at random: see
    /// --augment-padding and --augment-mirror), its gradient averaged over its views before it
    /// is clipped.
    /// Each example still moves the sum by at most C: the same epsilon, K times the compute
    /// (--batch-size then counts views). Off by default.
    #[arg(long, value_name = "K")]
    augmult: Option<usize>,

    /// Pixels of reflect padding before each view's random crop (0: no shift) [default: 4].
    #[arg(long, value_name = "PIXELS")]
    augment_padding: Option<usize>,

    /// Mirror views at random: true or false [default: true on fashion-mnist and cifar10, false
    /// on mnist, whose digits a mirror changes].
    #[arg(long, value_name = "BOOL")]
    augment_mirror: Option<bool>,

    /// Hold the last N training examples out: train on the others and evaluate on these instead
    /// of the test set, to choose hyper-parameters without looking at the test set. The held-out
    /// examples are never trained on; what the evaluation reveals about them is not accounted
    /// (as in the papers' searches).
    #[arg(long, value_name = "N")]
    validation: Option<usize>,

    /// Start from the weights in FILE (safetensors: another run's model.safetensors, or a
    /// PyTorch state dict saved with `safetensors.torch.save_file`) instead of a random
    /// initialisation, for DP fine-tuning. The file is treated as public: weights trained on the
    /// private data would make the printed epsilon meaningless. Its tensors must be exactly the
    /// model's, by name and shape (a mismatch names the tensor).
    #[arg(long, value_name = "FILE")]
    init_from: Option<PathBuf>,

    /// Keep the parameters whose name matches the regular expression PATTERN fixed (repeat for
    /// more), as a pretrained model's feature layers are while its head is fine-tuned: they get
    /// no gradient, no noise and no update, and the report lists the trained and frozen ones.
    /// Names are those of model.safetensors (`convs.0.weight`, `dense.1.bias`); a pattern
    /// matches anywhere in a name (anchor it with ^ and $), and must freeze all of a layer's
    /// parameters or none. E.g. `--freeze '^convs\.'` trains the dense layers only.
    #[arg(long, value_name = "PATTERN")]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    freeze: Vec<String>,

    /// Normalisation layers: none, or batch (refused: BatchNorm has no DP version; use GroupNorm).
    #[arg(long, value_parser = parse::<Normalization>)]
    normalization: Option<Normalization>,

    /// Device: auto (an NVIDIA GPU through CUDA in a build with `--features cuda`, else a real GPU
    /// through wgpu if present, else cpu), cpu (Burn's flex backend),
    /// ndarray (Burn's deprecated ndarray backend, the tests' reference, in a build with
    /// `--features ndarray`), wgpu, or cuda (an NVIDIA GPU, in a build with `--features cuda`).
    #[arg(long, value_parser = parse::<DeviceChoice>)]
    device: Option<DeviceChoice>,

    /// Mechanism: gaussian (DP-SGD/DP-Adam), ls-sgd / ls-adam (DP-LSSGD / DP-LSAdam: the noisy
    /// gradient Laplacian-smoothed, same epsilon), optimized (Xiang et al.'s mechanism made sound: per-layer
    /// clipping and a sigma per layer, certified), optimized-paper (Xiang et al.'s Algorithm 1 as
    /// written: the paper's epsilon, paper-bound, beside the certified reading of its sigma, none)
    /// or none (the unperturbed baseline, no privacy) [default: gaussian].
    #[arg(long, value_parser = parse::<MechanismName>)]
    mechanism: Option<MechanismName>,

    /// Passes over the training data [default: 1].
    #[arg(long)]
    epochs: Option<f64>,

    /// Expected examples per lot (one noisy step); the sampling rate is lot-size / N [default: 256].
    #[arg(long)]
    lot_size: Option<usize>,

    /// Examples per physical batch: bounds memory, does not change the result [default: 256].
    #[arg(long)]
    batch_size: Option<usize>,

    /// Lot sampling: poisson (what the accountant assumes) or shuffled (not covered: label none).
    #[arg(long, value_parser = parse::<LotSampling>)]
    sampling: Option<LotSampling>,

    /// Noise standard deviation divided by the clipping norm.
    #[arg(long, short = 'z', conflicts_with = "target_epsilon")]
    noise_multiplier: Option<f64>,

    /// Calibrate the noise multiplier so that the whole run spends exactly this epsilon.
    #[arg(long)]
    target_epsilon: Option<f64>,

    /// Delta of the (epsilon, delta) guarantee; keep it below 1/N [default: 1e-5].
    #[arg(long)]
    delta: Option<f64>,

    /// Per-example gradient clipping bound C [default: 1].
    #[arg(long)]
    clip_norm: Option<f64>,

    /// Clipping: flat (whole gradient) or per-layer (C / sqrt(layers) per layer) [default:
    /// per-layer for optimized, else flat].
    #[arg(long, value_parser = parse::<Clipping>)]
    clipping: Option<Clipping>,

    /// optimized-paper: recompute the model sensitivity w (the full-data gradient, one pass over
    /// the training set) every this many lots; the paper does it every lot [default: 1].
    #[arg(long, value_name = "LOTS")]
    sensitivity_every: Option<u64>,

    /// Laplacian smoothing parameter s of ls-sgd / ls-adam; 0 is plain DP-SGD [default: 1].
    #[arg(long)]
    ls_sigma: Option<f64>,

    /// What ls-sgd / ls-adam smooth: tensor (each parameter tensor, as the authors' code) or model
    /// (all parameters as one vector) [default: tensor].
    #[arg(long, value_parser = parse::<SmoothingScope>)]
    ls_scope: Option<SmoothingScope>,

    /// Optimizer (burn-optim): sgd, adam or adamw [default: adam for ls-adam, else sgd].
    #[arg(long, value_parser = parse::<OptimizerName>)]
    optimizer: Option<OptimizerName>,

    /// Learning rate [default: 0.5].
    #[arg(long)]
    learning_rate: Option<f64>,

    /// Learning-rate schedule: constant, or cosine (decays from --learning-rate to zero over the
    /// run's steps; post-processing, the same epsilon) [default: constant].
    #[arg(long, value_parser = parse::<LrSchedule>)]
    lr_schedule: Option<LrSchedule>,

    /// SGD momentum, PyTorch's convention (no dampening) [default: 0].
    #[arg(long)]
    momentum: Option<f64>,

    /// Weight decay: an L2 term for sgd and adam, decoupled for adamw [default: 0].
    #[arg(long)]
    weight_decay: Option<f64>,

    /// Accountant, as `dptrain account`'s [default: rdp].
    #[arg(long, value_parser = choice::<AccountantName>())]
    accountant: Option<AccountantName>,

    /// Seed for a reproducible run (sampling, noise, initialisation). Without it every random
    /// stream is keyed from the OS; with it the guarantee holds only while the seed is secret.
    #[arg(long)]
    seed: Option<u64>,

    /// Checkpoint every this many steps (0: only at the end) [default: 200].
    #[arg(long)]
    checkpoint_every: Option<u64>,

    /// Run folder [default: runs/latest].
    #[arg(long, value_name = "DIR")]
    pub out_dir: Option<PathBuf>,
}

impl SettingFlags {
    /// The settings given, by their configuration key.
    pub fn given(&self) -> anyhow::Result<Settings> {
        Ok(TrainConfig::settings_of(self)?)
    }
}

/// `CxHxW` as three sizes.
pub(super) fn parse_shape(s: &str) -> std::result::Result<[usize; 3], String> {
    let sizes: Vec<usize> =
        s.split('x').map(str::parse).collect::<std::result::Result<_, _>>().map_err(|e| format!("{s}: {e}"))?;
    <[usize; 3]>::try_from(sizes).map_err(|_| format!("{s}: give channels, height and width as CxHxW, e.g. 3x32x32"))
}
