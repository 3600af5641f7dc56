//! What a run tells its observer, and what its metrics.jsonl holds (the `step` and `evaluated`
//! events, one JSON object per line).

use dp_accounting::PrivacyReport;
use dp_engine::backend::SelectedDevice;
use dp_engine::engine::DpOptimizer;
use serde::Serialize;

/// What the run tells its observer.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    /// The run is set up.
    Started {
        /// Backend and adapter.
        device: String,
        /// Scalar parameters the run trains.
        parameters: usize,
        /// The parameters it keeps frozen, by path (empty: none).
        frozen: Vec<String>,
        /// Training examples.
        train_examples: usize,
        /// Sampling rate q.
        sample_rate: f64,
        /// Noise multiplier z (None for the baseline).
        noise_multiplier: Option<f64>,
        /// Steps planned.
        planned_steps: u64,
        /// Step the run starts from (non-zero when resumed).
        start_step: u64,
        /// Privacy the whole planned run will have spent.
        planned_privacy: Box<PrivacyReport>,
        /// optimized-paper: the epsilon of the smallest sigma it will use (label none).
        planned_sigma_privacy: Option<Box<PrivacyReport>>,
        /// Caveats the user must read.
        notes: Vec<String>,
    },
    /// A step was taken (every step; nothing is read from the device for it).
    Progress {
        /// Steps done.
        step: u64,
    },
    /// Training metrics of recent lots (on the private training data: not DP).
    Step {
        /// Steps done.
        step: u64,
        /// Mean training loss of the last lot.
        loss: f64,
        /// Training accuracy of the last lot.
        accuracy: Option<f64>,
    },
    /// Evaluation at an epoch boundary or at the end.
    Evaluated {
        /// Steps done.
        step: u64,
        /// Accuracy on the evaluation set.
        test_accuracy: f64,
        /// Privacy spent so far.
        privacy: PrivacyReport,
    },
}

impl Event {
    /// How a run's set-up reads: the device, the model and data, the privacy it plans to spend,
    /// the notes to read, and the step it resumes at (the lines `dptrain train` and a [`Run`]
    /// left to speak print; none for other events).
    ///
    /// [`Run`]: crate::Run
    pub fn setup_lines(&self) -> Vec<String> {
        let Event::Started {
            device,
            parameters,
            frozen,
            train_examples,
            sample_rate,
            noise_multiplier,
            planned_steps,
            start_step,
            planned_privacy,
            planned_sigma_privacy,
            notes,
        } = self
        else {
            return Vec::new();
        };
        let frozen = match frozen.len() {
            0 => String::new(),
            n => format!(" trained ({n} tensors frozen: {})", frozen.join(", ")),
        };
        let z = noise_multiplier.map_or("none".to_string(), |z| format!("{z:.4}"));
        let mut lines = vec![
            format!("device: {device}"),
            format!(
                "model: {parameters} parameters{frozen}; {train_examples} training examples, sampling rate {sample_rate:.6}"
            ),
            format!(
                "privacy: noise multiplier {z}; the {planned_steps} planned steps spend {}",
                planned_privacy.planned()
            ),
        ];
        lines.extend(
            planned_sigma_privacy.iter().map(|p| format!("privacy of the smallest sigma used: {}", p.planned())),
        );
        lines.extend(notes.iter().map(|note| format!("note: {note}")));
        if *start_step > 0 {
            lines.push(format!("resuming at step {start_step}"));
        }
        lines
    }

    /// How an evaluation reads, the model scored on `evaluated_on` ("test", say) beside the
    /// privacy spent so far; None for other events.
    pub fn evaluated_line(&self, evaluated_on: &str) -> Option<String> {
        let Event::Evaluated { step, test_accuracy, privacy } = self else {
            return None;
        };
        Some(format!("step {step}: {evaluated_on} accuracy {:.2}%, {privacy}", test_accuracy * 100.0))
    }

    /// The start of a session of `dp` on `device`, on `train_examples`, from step `start_step`.
    pub(crate) fn started<M: burn::module::Module>(
        dp: &DpOptimizer<M>,
        device: &SelectedDevice,
        train_examples: usize,
        start_step: u64,
    ) -> Self {
        Event::Started {
            device: format!("{} ({})", device.backend, device.name),
            parameters: dp.table().num_params(),
            frozen: dp.table().frozen().iter().map(|p| p.path.clone()).collect(),
            train_examples,
            sample_rate: dp.sample_rate(),
            noise_multiplier: dp.noise_multiplier(),
            planned_steps: dp.planned_steps(),
            start_step,
            planned_privacy: Box::new(dp.planned_privacy().clone()),
            planned_sigma_privacy: dp.planned_sigma_privacy().cloned().map(Box::new),
            notes: dp.notes().to_vec(),
        }
    }
}
