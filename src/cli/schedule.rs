//! How users describe a run's length and sampling: steps or epochs, a sampling rate or a dataset
//! and batch size. Resolved into the (q, T) the accountants need.

use anyhow::{Result, bail};
use clap::Args;
use dp_accounting::validate;

/// Sampling rate and number of steps, as flags.
#[derive(Args, Debug)]
pub struct ScheduleArgs {
    /// Poisson sampling rate q = expected batch size / dataset size, in (0, 1].
    #[arg(long, short = 'q', value_name = "Q", conflicts_with_all = ["dataset_size", "batch_size"],
          required_unless_present_all = ["dataset_size", "batch_size"])]
    sample_rate: Option<f64>,

    /// Number of training examples N (with --batch-size, gives q = batch / N).
    #[arg(long, value_name = "N", requires = "batch_size")]
    dataset_size: Option<u64>,

    /// Expected batch (lot) size B (with --dataset-size, gives q = B / N).
    #[arg(long, value_name = "B", requires = "dataset_size")]
    batch_size: Option<u64>,

    /// Number of noisy steps T.
    #[arg(long, short = 't', value_name = "T", conflicts_with = "epochs", required_unless_present = "epochs")]
    steps: Option<u64>,

    /// Number of epochs E; the steps are E / q rounded (E N / L, as a run plans them), one epoch
    /// being 1/q steps on average.
    #[arg(long, value_name = "E")]
    epochs: Option<f64>,
}

/// A resolved sampling schedule.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Schedule {
    /// Sampling rate q.
    pub sample_rate: f64,
    /// Number of steps T.
    pub steps: u64,
}

impl ScheduleArgs {
    /// The dataset and batch sizes, where given (not a bare sampling rate).
    pub fn sizes(&self) -> Option<(u64, u64)> {
        self.dataset_size.zip(self.batch_size)
    }

    /// Resolves the flags into (q, T), rejecting inconsistent or out-of-range values.
    pub fn resolve(&self) -> Result<Schedule> {
        let sample_rate = match (self.sample_rate, self.dataset_size, self.batch_size) {
            (Some(q), _, _) => validate::sample_rate(q)?,
            (None, Some(n), Some(b)) => {
                if n == 0 || b == 0 || b > n {
                    bail!("batch size {b} and dataset size {n}: need 1 <= batch size <= dataset size");
                }
                b as f64 / n as f64
            }
            _ => bail!("give --sample-rate, or --dataset-size with --batch-size"),
        };
        let steps = match (self.steps, self.epochs) {
            (Some(t), _) => validate::steps(t)?,
            (None, Some(e)) => {
                if !(e.is_finite() && e > 0.0) {
                    bail!("invalid epochs: {e} (must be a finite number > 0)");
                }
                // As the library plans a run (`PrivacySettings::planned_steps`): E N / L steps,
                // rounded, so that `dptrain calibrate` and a run of the same settings agree.
                let t = match (self.sample_rate, self.dataset_size, self.batch_size) {
                    (None, Some(n), Some(b)) => e * n as f64 / b as f64,
                    _ => e / sample_rate,
                }
                .round();
                if t > 1e12 {
                    bail!("{e} epochs at sample rate {sample_rate} is more than 1e12 steps");
                }
                if t < 1.0 {
                    bail!("{e} epochs at sample rate {sample_rate} is no step");
                }
                t as u64
            }
            _ => bail!("give --steps or --epochs"),
        };
        Ok(Schedule { sample_rate, steps })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(q: Option<f64>, n: Option<u64>, b: Option<u64>, t: Option<u64>, e: Option<f64>) -> ScheduleArgs {
        ScheduleArgs { sample_rate: q, dataset_size: n, batch_size: b, steps: t, epochs: e }
    }

    #[test]
    fn epochs_and_dataset_size() {
        let s = args(None, Some(60000), Some(256), None, Some(60.0)).resolve().unwrap();
        assert_eq!(s.sample_rate, 256.0 / 60000.0);
        assert_eq!(s.steps, 14063); // round(60 * 234.375)
        // As the library plans the same run: 117 steps, not ceil's 118.
        let s = args(None, Some(60000), Some(512), None, Some(1.0)).resolve().unwrap();
        let settings = dp_engine::privacy::PrivacySettings { epochs: 1.0, lot_size: 512, ..Default::default() };
        assert_eq!((s.steps, settings.planned_steps(60000).unwrap()), (117, 117));
        let s = args(Some(0.5), None, None, Some(7), None).resolve().unwrap();
        assert_eq!(s, Schedule { sample_rate: 0.5, steps: 7 });
    }

    #[test]
    fn rejects_inconsistent_sizes() {
        assert!(args(None, Some(10), Some(20), Some(1), None).resolve().is_err());
        assert!(args(None, Some(0), Some(0), Some(1), None).resolve().is_err());
        assert!(args(Some(0.1), None, None, None, Some(f64::NAN)).resolve().is_err());
        assert!(args(Some(1.5), None, None, Some(1), None).resolve().is_err());
    }
}
