//! Printing a privacy report: one JSON object with `--json`, readable lines otherwise.

use anyhow::Result;
use dp_accounting::PrivacyReport;
use serde_json::{Map, Value};

/// Prints `report` merged with `extra` keys (the run's parameters) as JSON or as text.
pub fn print_report(headline: &str, report: &PrivacyReport, extra: &[(&str, Value)], json: bool) -> Result<()> {
    if json {
        let mut object = match serde_json::to_value(report)? {
            Value::Object(map) => map,
            _ => Map::new(),
        };
        for (key, value) in extra {
            object.insert((*key).to_string(), value.clone());
        }
        say!("{}", Value::Object(object))?;
        return Ok(());
    }
    say!("{headline}{report}")?;
    let params: Vec<String> = extra.iter().map(|(k, v)| format!("{} {v}", k.replace('_', " "))).collect();
    say!("  Poisson-subsampled Gaussian: {}", params.join(", "))?;
    if let (Some(order), Some(conversion)) = (report.optimal_order, &report.conversion) {
        say!("  RDP optimal order {order}, conversion {conversion}")?;
        if report.optimal_order_at_grid_edge == Some(true) {
            say!("  note: the optimal order lies at the end of the order grid; a wider grid could certify less")?;
        }
    }
    if let (Some(est), Some(lower), Some(err)) = (report.epsilon_estimate, report.epsilon_lower, report.eps_error) {
        say!(
            "  PRV estimate {est:.4}, bounds [{lower:.4}, {:.4}] (eps error {err:.2e}, delta error {:.2e})",
            report.epsilon,
            report.delta_error.unwrap_or(0.0)
        )?;
    }
    if let Some(z) = report.effective_noise_multiplier {
        say!("  equivalent single Gaussian release: noise multiplier {z:.6}")?;
    }
    Ok(())
}
