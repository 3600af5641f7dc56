//! Privacy accounting from Rust: the epsilon of the MNIST DP-SGD tutorial run with each sound
//! accountant, and the noise needed for epsilon = 3. Run: `cargo run --release -p dp-accounting
//! --example account`

use dp_accounting::{Accountant, PrivacyLedger, PrvAccountant, RdpAccountant, calibrate_noise_multiplier};

fn main() -> Result<(), dp_accounting::AccountingError> {
    // 60 epochs of expected batch 256 out of 60,000 examples, noise multiplier 1.1.
    let (z, q, steps, delta) = (1.1, 256.0 / 60000.0, 14_062, 1e-5);
    let mut ledger = PrivacyLedger::new();
    ledger.record(z, q, steps)?;
    let rdp = RdpAccountant::default();
    let prv = PrvAccountant::default();
    for accountant in [&rdp as &dyn Accountant, &prv] {
        println!("{}", accountant.epsilon(&ledger, delta)?);
    }
    let calibration = calibrate_noise_multiplier(&prv, 3.0, delta, q, steps)?;
    println!("noise multiplier for epsilon 3: {:.4} -> {}", calibration.noise_multiplier, calibration.report);
    Ok(())
}
