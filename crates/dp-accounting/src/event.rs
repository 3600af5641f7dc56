//! What a release did, apart from how it is accounted (Google dp_accounting's `DpEvent`): the
//! Gaussian mechanism with its multiplier, on a Poisson-sampled or a shuffled lot with its rate,
//! repeated or composed; a release with no privacy; a use of private data no analysis covers;
//! a release analysed only by its paper's own bound; one a published theorem proves. An
//! accountant says which events its proof covers ([`crate::Accountant::supports`]), and the
//! guarantee label of its epsilon follows from that.

use crate::error::{AccountingError, Result};
use crate::repeat_and_select::Repetitions;
use crate::validate;
use serde::{Deserialize, Serialize};

/// How the examples of a step's lot were chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LotSampling {
    /// Each example independently with probability q: what the accountants' proofs assume.
    Poisson,
    /// Fixed-size lots from shuffled passes: no accountant here covers it, so an epsilon
    /// computed as if it were Poisson carries no guarantee.
    Shuffled,
}

/// One release, or a structure of releases.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "kebab-case", deny_unknown_fields)]
pub enum DpEvent {
    /// Nothing released.
    NoOp,
    /// The Gaussian mechanism: noise of standard deviation `noise_multiplier` times the L2
    /// sensitivity.
    Gaussian {
        /// Noise standard deviation over the sensitivity.
        noise_multiplier: f64,
    },
    /// `of`, applied to a lot that holds each example independently with probability
    /// `sample_rate`.
    PoissonSampled {
        /// The inclusion probability q.
        sample_rate: f64,
        /// What was released about the lot.
        of: Box<DpEvent>,
    },
    /// `of`, applied to a fixed-size lot of a shuffled pass (`sample_rate` = lot size / N).
    Shuffled {
        /// Lot size over population.
        sample_rate: f64,
        /// What was released about the lot.
        of: Box<DpEvent>,
    },
    /// `of` (a Gaussian release) on a lot Poisson-sampled at `sample_rate` from one of `groups`
    /// groups the data was split into once, step t sampling group t mod `groups`, its noise
    /// correlated across steps by a `bands`-banded Toeplitz strategy of column norm 1 (BandMF with
    /// cyclic Poisson sampling, arXiv 2306.08153). An example is in one group, so `count`
    /// consecutive such steps expose it at ceil(count / groups) of them, with disjoint columns
    /// when `bands` <= `groups`: then exactly as private as that many Poisson-sampled Gaussians
    /// at `sample_rate`; more bands than groups is covered by no accountant here.
    CyclicBanded {
        /// Bands b of the strategy.
        bands: u64,
        /// Groups the data was split into (the cycle's length).
        groups: u64,
        /// The inclusion probability q within the step's group.
        sample_rate: f64,
        /// What was released about the lot.
        of: Box<DpEvent>,
    },
    /// `of`, `count` times.
    SelfComposed {
        /// How many times.
        count: u64,
        /// What was repeated.
        of: Box<DpEvent>,
    },
    /// Each of `events`, in turn.
    Composed {
        /// The releases.
        events: Vec<DpEvent>,
    },
    /// A release with no privacy (the unperturbed baseline's gradient): epsilon is infinite.
    NonPrivate {
        /// What was released.
        what: String,
    },
    /// A use of private data that no analysis here covers and no epsilon can express (Xiang et
    /// al.'s full-data gradient shaping the noise): the other releases' epsilon is shown, but
    /// holds no guarantee.
    Unaccounted {
        /// What was used.
        what: String,
    },
    /// A release analysed only by its paper's own bound, with unspecified constants or a
    /// heuristic step.
    PaperBound {
        /// The paper and the result used.
        paper: String,
        /// The paper's epsilon.
        epsilon: f64,
        /// The delta at which it holds.
        delta: f64,
    },
    /// One of `events`, chosen without looking at the data (a search's candidate, whose
    /// hyper-parameters are drawn at random): the worst of them at every RDP order.
    AnyOf {
        /// The releases it may be.
        events: Vec<DpEvent>,
    },
    /// A search: a random number of candidates (`repetitions`), each the release `of` (a whole
    /// training, with its score), of which only the best candidate is released.
    RepeatAndSelect {
        /// How the number of candidates is drawn.
        repetitions: Repetitions,
        /// One candidate.
        of: Box<DpEvent>,
    },
    /// A release whose (epsilon, delta) a published theorem proves for exactly this algorithm.
    Proven {
        /// The theorem.
        theorem: String,
        /// Its epsilon.
        epsilon: f64,
        /// Its delta.
        delta: f64,
    },
}

/// `steps` applications of the Gaussian mechanism with one noise multiplier, on lots drawn one
/// way at one rate: the unit the Gaussian accountants compute with.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GaussianSteps {
    /// Noise standard deviation divided by the L2 sensitivity (clipping norm).
    pub noise_multiplier: f64,
    /// Sampling rate q in (0, 1]; 1 means full batch.
    pub sample_rate: f64,
    /// How many steps used these parameters.
    pub steps: u64,
    /// How the lots were drawn.
    pub sampling: LotSampling,
}

impl GaussianSteps {
    fn same_mechanism(&self, other: &Self) -> bool {
        self.noise_multiplier == other.noise_multiplier
            && self.sample_rate == other.sample_rate
            && self.sampling == other.sampling
    }
}

impl DpEvent {
    /// A BandMF step: the Gaussian mechanism at noise multiplier `z` with a `bands`-banded
    /// strategy, on a lot Poisson-sampled at rate `q` from its group of `groups`, validated.
    pub fn cyclic_banded(z: f64, q: f64, bands: u64, groups: u64) -> Result<Self> {
        let of = Box::new(DpEvent::Gaussian { noise_multiplier: validate::noise_multiplier(z)? });
        let event = DpEvent::CyclicBanded { bands, groups, sample_rate: q, of };
        event.validate()?;
        Ok(event)
    }

    /// The Gaussian mechanism at noise multiplier `z` on a lot drawn by `sampling` at rate `q`,
    /// validated.
    pub fn sampled_gaussian(z: f64, q: f64, sampling: LotSampling) -> Result<Self> {
        let of = Box::new(DpEvent::Gaussian { noise_multiplier: validate::noise_multiplier(z)? });
        let sample_rate = validate::sample_rate(q)?;
        Ok(match sampling {
            LotSampling::Poisson => DpEvent::PoissonSampled { sample_rate, of },
            LotSampling::Shuffled => DpEvent::Shuffled { sample_rate, of },
        })
    }

    /// `self`, `count` times (at least once).
    pub fn repeated(self, count: u64) -> Result<Self> {
        Ok(DpEvent::SelfComposed { count: validate::steps(count)?, of: Box::new(self) })
    }

    /// Checks every parameter of the event (a loaded ledger is checked this way, so a damaged
    /// checkpoint cannot smuggle in an invalid release).
    pub fn validate(&self) -> Result<()> {
        match self {
            DpEvent::NoOp | DpEvent::NonPrivate { .. } | DpEvent::Unaccounted { .. } => Ok(()),
            DpEvent::Gaussian { noise_multiplier } => validate::noise_multiplier(*noise_multiplier).map(drop),
            DpEvent::PoissonSampled { sample_rate, of } | DpEvent::Shuffled { sample_rate, of } => {
                validate::sample_rate(*sample_rate)?;
                of.validate()
            }
            DpEvent::SelfComposed { count, of } => {
                validate::steps(*count)?;
                of.validate()
            }
            DpEvent::CyclicBanded { bands, groups, sample_rate, of } => {
                validate::at_least_one("bands", *bands)?;
                validate::at_least_one("groups", *groups)?;
                validate::sample_rate(*sample_rate)?;
                of.validate()
            }
            DpEvent::Composed { events } => events.iter().try_for_each(DpEvent::validate),
            DpEvent::RepeatAndSelect { repetitions, of } => {
                repetitions.validate()?;
                of.validate()
            }
            DpEvent::AnyOf { events } if events.is_empty() => {
                Err(AccountingError::Unsupported("a choice among no releases".into()))
            }
            DpEvent::AnyOf { events } => events.iter().try_for_each(DpEvent::validate),
            DpEvent::PaperBound { epsilon, delta, .. } | DpEvent::Proven { epsilon, delta, .. } => {
                validate::epsilon(*epsilon)?;
                validate::delta(*delta).map(drop)
            }
        }
    }

    /// The releases the event is made of, with repetitions and compositions taken apart, each
    /// with how many times it happened.
    pub fn parts(&self) -> Vec<(u64, &DpEvent)> {
        let mut out = Vec::new();
        self.collect_parts(1, &mut out);
        out
    }

    fn collect_parts<'a>(&'a self, times: u64, out: &mut Vec<(u64, &'a DpEvent)>) {
        match self {
            DpEvent::SelfComposed { count, of } => match of.as_ref() {
                // Consecutive steps of a cycle of `groups`: an example is in ceil(count / groups)
                // (an invalid 0 groups counts every step).
                DpEvent::CyclicBanded { groups, .. } => {
                    out.push((times.saturating_mul(count.div_ceil((*groups).max(1))), of.as_ref()))
                }
                _ => of.collect_parts(times.saturating_mul(*count), out),
            },
            DpEvent::Composed { events } => events.iter().for_each(|e| e.collect_parts(times, out)),
            DpEvent::NoOp => {}
            other => out.push((times, other)),
        }
    }

    /// The event's Gaussian releases as steps (an unsampled Gaussian has rate 1), one per
    /// distinct mechanism with the steps added up (composition commutes). An error names a part
    /// that is neither Gaussian nor free of privacy loss.
    pub fn gaussian_steps(&self) -> Result<Vec<GaussianSteps>> {
        let mut groups: Vec<GaussianSteps> = Vec::new();
        for (times, part) in self.parts() {
            let Some(step) = part.as_gaussian(times)? else { continue };
            match groups.iter_mut().find(|g| g.same_mechanism(&step)) {
                Some(g) => g.steps = g.steps.saturating_add(step.steps),
                None => groups.push(step),
            }
        }
        Ok(groups)
    }

    /// A part as Gaussian steps: None for what the Gaussian accountants leave to the label
    /// (no privacy, or an unaccounted use).
    pub(crate) fn as_gaussian(&self, steps: u64) -> Result<Option<GaussianSteps>> {
        let (sample_rate, sampling, of) = match self {
            DpEvent::PoissonSampled { sample_rate, of } => (*sample_rate, LotSampling::Poisson, of.as_ref()),
            DpEvent::Shuffled { sample_rate, of } => (*sample_rate, LotSampling::Shuffled, of.as_ref()),
            DpEvent::CyclicBanded { sample_rate, of, .. } => (*sample_rate, LotSampling::Poisson, of.as_ref()),
            DpEvent::NonPrivate { .. } | DpEvent::Unaccounted { .. } => return Ok(None),
            other => (1.0, LotSampling::Poisson, other),
        };
        match of {
            DpEvent::Gaussian { noise_multiplier } => {
                Ok(Some(GaussianSteps { noise_multiplier: *noise_multiplier, sample_rate, steps, sampling }))
            }
            other => {
                Err(AccountingError::Unsupported(format!("a Gaussian accountant cannot compute with {}", other.kind())))
            }
        }
    }

    /// True when some part released data with no privacy at all.
    pub fn is_non_private(&self) -> bool {
        self.parts().iter().any(|(_, p)| match p {
            DpEvent::NonPrivate { .. } => true,
            DpEvent::RepeatAndSelect { of, .. } => of.is_non_private(),
            DpEvent::AnyOf { events } => events.iter().any(DpEvent::is_non_private),
            _ => false,
        })
    }

    /// The event's kind, as its serialized tag.
    pub fn kind(&self) -> &'static str {
        match self {
            DpEvent::NoOp => "no-op",
            DpEvent::Gaussian { .. } => "gaussian",
            DpEvent::PoissonSampled { .. } => "poisson-sampled",
            DpEvent::Shuffled { .. } => "shuffled",
            DpEvent::CyclicBanded { .. } => "cyclic-banded",
            DpEvent::SelfComposed { .. } => "self-composed",
            DpEvent::Composed { .. } => "composed",
            DpEvent::NonPrivate { .. } => "non-private",
            DpEvent::Unaccounted { .. } => "unaccounted",
            DpEvent::PaperBound { .. } => "paper-bound",
            DpEvent::Proven { .. } => "proven",
            DpEvent::RepeatAndSelect { .. } => "repeat-and-select",
            DpEvent::AnyOf { .. } => "any-of",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A checkpoint's ledger is compared exactly on resume: its events must come back from JSON
    /// bit for bit (serde_json's default float parser is off by one ulp on some values, such as
    /// this noise multiplier a search calibrated, and the resume was refused).
    #[test]
    fn events_round_trip_through_json_bit_for_bit() {
        for z in [1.6139348843633459, 1.302870810005015, 0.1 + 0.2, 1e-300, 123456.789e10] {
            let event = DpEvent::sampled_gaussian(z, 0.05, LotSampling::Poisson).unwrap();
            let back: DpEvent = serde_json::from_str(&serde_json::to_string(&event).unwrap()).unwrap();
            assert_eq!(back, event, "z {z}");
        }
    }

    #[test]
    fn parts_multiply_repetitions_and_flatten_compositions() {
        let step = DpEvent::Composed {
            events: vec![
                DpEvent::sampled_gaussian(1.0, 0.01, LotSampling::Poisson).unwrap(),
                DpEvent::Unaccounted { what: "w".into() },
            ],
        };
        let run =
            DpEvent::Composed { events: vec![step.clone().repeated(3).unwrap(), DpEvent::NoOp] }.repeated(2).unwrap();
        let parts = run.parts();
        assert_eq!(parts.len(), 2);
        assert_eq!(parts[0].0, 6);
        let g = run.gaussian_steps().unwrap();
        assert_eq!(g.len(), 1);
        assert_eq!((g[0].steps, g[0].sample_rate, g[0].sampling), (6, 0.01, LotSampling::Poisson));
    }

    #[test]
    fn serde_tags_and_validation() {
        let e = DpEvent::sampled_gaussian(1.1, 0.004, LotSampling::Shuffled).unwrap().repeated(7).unwrap();
        let json = serde_json::to_string(&e).unwrap();
        assert!(json.contains(r#""event":"self-composed""#) && json.contains(r#""event":"shuffled""#), "{json}");
        let back: DpEvent = serde_json::from_str(&json).unwrap();
        assert_eq!(back, e);
        let bad: DpEvent = serde_json::from_str(
            r#"{"event":"poisson-sampled","sample_rate":1.5,"of":{"event":"gaussian","noise_multiplier":1.0}}"#,
        )
        .unwrap();
        assert!(bad.validate().unwrap_err().to_string().contains("sample rate"));
        assert!(DpEvent::sampled_gaussian(0.0, 0.1, LotSampling::Poisson).is_err());
        assert!(DpEvent::NoOp.repeated(0).is_err());
    }

    #[test]
    fn a_cycle_of_bandmf_steps_exposes_an_example_once_per_cycle() {
        let step = DpEvent::cyclic_banded(1.0, 0.05, 4, 4).unwrap();
        let mut ledger = crate::PrivacyLedger::new();
        ledger.record_event(step.clone(), 10).unwrap();
        let g = ledger.grouped().unwrap();
        assert_eq!((g.len(), g[0].steps, g[0].sample_rate, g[0].sampling), (1, 3, 0.05, LotSampling::Poisson));
        assert!(crate::accountant::poisson_gaussian_only(&ledger.event()));
        // Split by another release, each run of steps is a cycle of its own: never fewer.
        ledger.record_event(DpEvent::sampled_gaussian(2.0, 0.01, LotSampling::Poisson).unwrap(), 1).unwrap();
        ledger.record_event(step, 1).unwrap();
        let steps: Vec<u64> = ledger.grouped().unwrap().iter().map(|g| g.steps).collect();
        assert_eq!(steps, [4, 1]);
        let wide = DpEvent::cyclic_banded(1.0, 0.05, 5, 4).unwrap().repeated(8).unwrap();
        assert!(!crate::accountant::poisson_gaussian_only(&wide), "more bands than groups: columns overlap");
        assert!(DpEvent::cyclic_banded(1.0, 0.05, 0, 4).is_err() && DpEvent::cyclic_banded(1.0, 1.5, 1, 4).is_err());
        let json = serde_json::to_string(&wide).unwrap();
        assert_eq!(serde_json::from_str::<DpEvent>(&json).unwrap(), wide, "{json}");
    }

    #[test]
    fn an_epsilon_release_is_no_gaussian() {
        let e = DpEvent::Proven { theorem: "t".into(), epsilon: 1.0, delta: 1e-5 };
        assert!(e.gaussian_steps().unwrap_err().to_string().contains("proven"));
        assert!(DpEvent::NonPrivate { what: "g".into() }.is_non_private());
    }
}
