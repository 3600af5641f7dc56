//! What a run's steps read: its folder, privacy configuration, learning rate, evaluation,
//! options and the names its report gives (the part of a [`crate::Run`] its step loop sees).

use crate::folder::RunFolder;
use crate::options::RunOptions;
use crate::provenance::Provenance;
use dp_engine::backend::Trial;
use dp_engine::error::Result;
use dp_engine::optim::LrSchedule;
use dp_engine::privacy::PrivacyConfig;

/// How a run evaluates a model: its accuracy on a held-out set.
pub type Evaluate<'a, M> = Box<dyn Fn(&M) -> Result<f64> + 'a>;

/// What a run's steps read.
pub(crate) struct Session<'a, M> {
    pub(crate) folder: RunFolder,
    pub(crate) privacy: PrivacyConfig,
    /// The base rate and its schedule.
    pub(crate) learning_rate: (f64, LrSchedule),
    pub(crate) evaluate: Evaluate<'a, M>,
    pub(crate) options: RunOptions,
    /// The model's name and that of the set it is evaluated on.
    pub(crate) names: (String, String),
    /// The file the model's initial weights came from, for the report.
    pub(crate) initial_weights: Option<Provenance>,
    /// How `auto` chose the device, for the report.
    pub(crate) device_tried: Vec<Trial>,
}
