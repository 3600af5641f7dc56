//! Checks on privacy parameters, shared by every accountant so that no entry point forgets one.

use crate::error::{AccountingError, Result};

fn invalid(name: &'static str, value: impl ToString, requirement: &'static str) -> AccountingError {
    AccountingError::InvalidParameter { name, value: value.to_string(), requirement }
}

/// A sampling rate must lie in (0, 1].
pub fn sample_rate(q: f64) -> Result<f64> {
    if q.is_finite() && q > 0.0 && q <= 1.0 { Ok(q) } else { Err(invalid("sample rate", q, "must be in (0, 1]")) }
}

/// A delta must lie in the open interval (0, 1).
pub fn delta(d: f64) -> Result<f64> {
    if d.is_finite() && d > 0.0 && d < 1.0 { Ok(d) } else { Err(invalid("delta", d, "must be in (0, 1)")) }
}

/// A noise multiplier (noise standard deviation over L2 sensitivity) must be finite and positive.
pub fn noise_multiplier(z: f64) -> Result<f64> {
    if z.is_finite() && z > 0.0 { Ok(z) } else { Err(invalid("noise multiplier", z, "must be a finite number > 0")) }
}

/// An epsilon (target or budget) must be finite and positive.
pub fn epsilon(e: f64) -> Result<f64> {
    if e.is_finite() && e > 0.0 { Ok(e) } else { Err(invalid("epsilon", e, "must be a finite number > 0")) }
}

/// A count of steps must be at least one.
pub fn steps(t: u64) -> Result<u64> {
    at_least_one("steps", t)
}

/// A count (steps, bands, groups) must be at least one.
pub fn at_least_one(name: &'static str, n: u64) -> Result<u64> {
    if n >= 1 { Ok(n) } else { Err(invalid(name, n, "must be at least 1")) }
}

/// A generic strictly positive, finite quantity (Lipschitz constants, sizes, the papers' constants).
pub fn positive(name: &'static str, x: f64) -> Result<f64> {
    if x.is_finite() && x > 0.0 { Ok(x) } else { Err(invalid(name, x, "must be a finite number > 0")) }
}

/// A fraction strictly inside (0, 1), such as the split parameter mu of Wang et al.'s Theorem 1.
pub fn open_unit(name: &'static str, x: f64) -> Result<f64> {
    if x.is_finite() && x > 0.0 && x < 1.0 { Ok(x) } else { Err(invalid(name, x, "must be in (0, 1)")) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_out_of_range_and_nan() {
        assert!(sample_rate(0.0).is_err());
        assert!(sample_rate(1.0000001).is_err());
        assert!(sample_rate(f64::NAN).is_err());
        assert_eq!(sample_rate(1.0), Ok(1.0));
        assert!(delta(0.0).is_err());
        assert!(delta(1.0).is_err());
        assert!(delta(f64::NAN).is_err());
        assert!(noise_multiplier(0.0).is_err());
        assert!(noise_multiplier(f64::INFINITY).is_err());
        assert!(epsilon(-1.0).is_err());
        assert!(steps(0).is_err());
        assert!(open_unit("mu", 1.0).is_err());
    }

    #[test]
    fn message_names_the_parameter() {
        let msg = delta(2.0).unwrap_err().to_string();
        assert_eq!(msg, "invalid delta: 2 (must be in (0, 1))");
    }
}
