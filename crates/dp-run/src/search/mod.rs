//! A hyper-parameter search whose privacy is accounted (Papernot & Steinke, ICLR 2022): the
//! number of candidates K is drawn from the run's CSPRNG (ChaCha20, keyed by the OS, or by the
//! seed of a reproducible search), each candidate's configuration is drawn uniformly from the
//! space, each trains with the noise that keeps the whole search within its total budget
//! (`dp_accounting::search::calibrate_search`), its score is released through a Gaussian noisy
//! count when it is computed on private held-out data, and only the best candidate comes back,
//! with the search's epsilon. K and the other candidates are the mechanism's internal state:
//! publishing them voids the bound, and they are not in what comes back. The plan (K and every
//! candidate's draws) is drawn before any candidate trains and kept with the progress in a
//! sealed [`Journal`]: an interrupted search resumes from it, never redrawing K, rerunning a
//! finished candidate or releasing a score with fresh noise.

pub mod journal;
mod plan;

use crate::report::RunReport;
use dp_accounting::repeat_and_select::Repetitions;
use dp_accounting::search::{TrainingShape, calibrate_search};
use dp_accounting::{DpEvent, LotSampling, PrivacyReport};
use dp_data::ChaChaState;
use dp_engine::error::{EngineError, Result};
use dp_engine::privacy::PrivacyConfig;
pub use journal::Journal;
use journal::{Best, State};
use plan::draw_plan;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

/// The ChaCha20 stream of a search's draws (K, the configurations, the scores' noise).
pub const SEARCH_STREAM: u64 = 5;

/// How a candidate's score is computed.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub enum Score {
    /// On public data (a held-out set no one's privacy covers): released as is, free.
    Public,
    /// On `held_out` private examples: the count of correct predictions plus Gaussian noise of
    /// standard deviation `noise_multiplier` (the count's sensitivity is 1), over `held_out`.
    Private {
        /// The noise's standard deviation, in correct predictions.
        noise_multiplier: f64,
        /// The public number of held-out examples.
        held_out: usize,
    },
}

/// What determines a search's privacy.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct SearchSettings {
    /// How K is drawn.
    pub repetitions: Repetitions,
    /// The whole search's epsilon.
    pub target_epsilon: f64,
    /// Its delta.
    pub delta: f64,
    /// How the candidates are scored.
    pub score: Score,
    /// The seed of a reproducible search (its draws are then only as secret as the seed).
    pub seed: Option<u64>,
}

/// One candidate to train, as the search's plan drew it, with the privacy the search
/// calibrated for it: its run must use [`Candidate::privacy`] (the search checks the ledger its
/// run recorded against what it accounted).
#[derive(Clone)]
pub struct Candidate<'c, C> {
    /// Its configuration.
    pub config: &'c C,
    /// The privacy of its training: the configuration's, at the noise multiplier calibrated for
    /// the whole search.
    pub privacy: PrivacyConfig,
    /// That noise multiplier.
    pub noise_multiplier: f64,
    /// Its name, drawn from the OS (not its rank): a folder of its own may take it, and a
    /// resumed search gives the same name again, to continue what it left there.
    pub name: &'c str,
    /// A number drawn for it by the search's CSPRNG: the seed of anything it draws without
    /// looking at the data (values of continuous settings; a seeded search's run seed).
    pub draw: u64,
}

/// What one candidate's training gives: its result, the report of the run that trained it
/// (whose ledger the search checks) and its correct predictions on the held-out examples
/// (private or public).
#[derive(Debug, Clone)]
pub struct Trained<T> {
    /// The candidate's result (a model's file, a report), kept in the journal until released.
    pub value: T,
    /// The report of its run, as the run made it.
    pub run: RunReport,
    /// Correct predictions on the held-out examples.
    pub correct: usize,
    /// The held-out examples evaluated.
    pub evaluated: usize,
}

/// The released outcome of a search: the best candidate's configuration, result and (noisy)
/// score, and the whole search's privacy; nothing when Poisson drew no candidate.
#[derive(Debug, Clone)]
pub struct Searched<C, T> {
    /// The chosen candidate: its configuration, result and released score.
    pub chosen: Option<(C, T, f64)>,
    /// The search's privacy (RDP accountant; certified when its candidates are).
    pub privacy: PrivacyReport,
}

/// Runs the search over `configs` (each one's privacy given by `privacy_of`, its noise left to
/// the search) on a private training set of `examples` examples under `settings`, or continues
/// the one `journal` holds: `train` trains one candidate with the privacy it is handed. A
/// configuration that is not a Poisson-sampled Gaussian mechanism (what the search accounts) is
/// refused before anything trains; a candidate whose run recorded other releases than those
/// accounted for it (another rate, fewer noise, more steps: its data or settings changed) stops
/// the search before its score is used. The journal is left in place (the caller removes it
/// once it has released the choice).
pub fn search<C: Clone + Serialize, T: Serialize + DeserializeOwned>(
    configs: &[C],
    privacy_of: impl Fn(&C) -> Result<PrivacyConfig>,
    examples: usize,
    settings: &SearchSettings,
    journal: &Journal,
    mut train: impl FnMut(Candidate<'_, C>) -> Result<Trained<T>>,
) -> Result<Searched<C, T>> {
    if configs.is_empty() {
        return Err(EngineError::invalid("search space", "holds no candidate"));
    }
    let privacy: Vec<PrivacyConfig> = configs.iter().map(privacy_of).collect::<Result<_>>()?;
    let shapes: Vec<TrainingShape> =
        privacy.iter().enumerate().map(|(i, p)| accounted_shape(i, p, examples)).collect::<Result<_>>()?;
    let score_noise = match settings.score {
        Score::Public => None,
        Score::Private { noise_multiplier, .. } => Some(noise_multiplier),
    };
    let calibrated =
        calibrate_search(&shapes, score_noise, settings.repetitions, settings.target_epsilon, settings.delta)?;
    let mut state = begun(journal, fingerprint(configs, &shapes, settings)?, settings, configs.len())?;
    for position in state.done..state.plan.len() {
        let planned = state.plan[position].clone();
        let z = calibrated.noise_multipliers[planned.config];
        let candidate = Candidate {
            config: &configs[planned.config],
            privacy: privacy[planned.config].clone().with_noise_multiplier(z),
            noise_multiplier: z,
            name: &planned.name,
            draw: planned.draw,
        };
        let trained = train(candidate)?;
        shapes[planned.config].admits(z, trained.run.ledger()).map_err(|why| {
            EngineError::privacy(format!(
                "a candidate's run recorded {why}: the search's epsilon does not cover it, so its score is not used and the search stops"
            ))
        })?;
        let score = released_score(&trained, settings.score, planned.score_noise)?;
        if state.best.as_ref().is_none_or(|best| score > best.score) {
            state.best = Some(Best { position, score, value: trained.value });
        }
        state.done = position + 1;
        journal.save(&state)?;
    }
    let chosen = state.best.map(|b| (configs[state.plan[b.position].config].clone(), b.value, b.score));
    Ok(Searched { chosen, privacy: calibrated.report })
}

/// The training the search accounts for configuration `index` of `privacy` on `examples`
/// examples (q = L / N, its planned steps), refused unless each of its steps is a
/// Poisson-sampled Gaussian release (not the baseline, shuffled lots or a paper's own bound).
fn accounted_shape(index: usize, privacy: &PrivacyConfig, examples: usize) -> Result<TrainingShape> {
    let settings = &privacy.settings;
    let shape = settings
        .training_shape(examples)
        .map_err(|e| EngineError::invalid("search space", format!("configuration {index}: {e}")))?;
    let sample_rate = shape.sample_rate;
    let mechanism = privacy.mechanism.as_ref();
    let step = match mechanism.is_private() {
        true => mechanism.step_event(Some(1.0), sample_rate, settings.sampling)?,
        false => DpEvent::NonPrivate { what: "the gradient".into() },
    };
    if step != DpEvent::sampled_gaussian(1.0, sample_rate, LotSampling::Poisson)? {
        return Err(EngineError::invalid(
            "search space",
            format!(
                "configuration {index} ({} on {} lots) releases a {} step where a search accounts Poisson-sampled Gaussian steps: its candidates would not have the search's guarantee",
                mechanism.name(),
                match settings.sampling {
                    LotSampling::Poisson => "Poisson-sampled",
                    LotSampling::Shuffled => "shuffled",
                },
                step.kind()
            ),
        ));
    }
    Ok(shape)
}

/// The search's state: the journal's, refused when drawn for another search, or a new plan
/// drawn (K, then each candidate's draws, from the search's CSPRNG) and saved before any
/// candidate trains.
fn begun<T: Serialize + DeserializeOwned>(
    journal: &Journal,
    fingerprint: String,
    settings: &SearchSettings,
    configs: usize,
) -> Result<State<T>> {
    let loaded = journal.load::<T>()?;
    if loaded.is_none() && journal.has_candidates()? {
        return Err(EngineError::invalid(
            "resume",
            format!(
                "{} holds a search's candidates but not its state (search.json is gone): they spent the data's privacy, and a new plan here would spend it again uncounted; refused (a new search elsewhere adds its epsilon to theirs)",
                journal.dir().display()
            ),
        ));
    }
    if let Some(state) = loaded {
        if state.fingerprint != fingerprint || state.plan.iter().any(|p| p.config >= configs) {
            return Err(EngineError::invalid(
                "resume",
                format!(
                    "the search in {} was started with another space or other settings: continue it with those it was started with",
                    journal.dir().display()
                ),
            ));
        }
        return Ok(state);
    }
    let mut rng = ChaChaState::new(settings.seed, SEARCH_STREAM).restore();
    let state = State::new(fingerprint, draw_plan(settings.repetitions, configs, &mut rng)?);
    journal.save(&state)?;
    Ok(state)
}

/// Digest of what a search's plan and noise depend on.
fn fingerprint<C: Serialize>(configs: &[C], shapes: &[TrainingShape], settings: &SearchSettings) -> Result<String> {
    let json = serde_json::to_vec(&(configs, shapes, settings))
        .map_err(|e| EngineError::invalid("search space", format!("not expressible as JSON: {e}")))?;
    Ok(crate::seal::sha256_hex(&json))
}

/// The score released for `trained`: its accuracy on public data, or its count of correct
/// predictions over the public number of private held-out examples, with the plan's standard
/// normal `noise` at the score's scale.
fn released_score<T>(trained: &Trained<T>, score: Score, noise: f64) -> Result<f64> {
    match score {
        Score::Public => Ok(trained.correct as f64 / trained.evaluated.max(1) as f64),
        Score::Private { noise_multiplier, held_out } => {
            if trained.evaluated != held_out || held_out == 0 {
                return Err(EngineError::invalid(
                    "score",
                    format!("{} held-out examples evaluated where the search declared {held_out}", trained.evaluated),
                ));
            }
            Ok((trained.correct as f64 + noise_multiplier * noise) / held_out as f64)
        }
    }
}

#[cfg(test)]
mod tests;
