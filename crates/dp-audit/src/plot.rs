//! The audit report as a picture: for each mechanism and budget, the empirical lower bound on
//! epsilon against the epsilon the mechanism claims, with the diagonal "lower bound = claim":
//! a point above it refutes the claim (a certified one must never be there).

use crate::audit::AuditReport;
use dp_erm::{ErmError, Method, Result};
use dp_plot::{COLORS, register_font};
use plotters::prelude::*;
use std::path::Path;

/// Draws the lower bounds of the private reports in `reports` against their claims to the SVG
/// file `path`.
pub fn draw(reports: &[AuditReport], title: &str, path: &Path) -> Result<()> {
    let fail = |e: String| ErmError::Output { path: path.display().to_string(), reason: e };
    let private: Vec<&AuditReport> = reports.iter().filter(|r| r.claimed_epsilon.is_finite()).collect();
    let claims: Vec<f64> = private.iter().map(|r| r.claimed_epsilon).collect();
    let (x0, x1) = (claims.iter().copied().fold(f64::INFINITY, f64::min), claims.iter().copied().fold(0.0, f64::max));
    if private.is_empty() || x0 <= 0.0 {
        return Err(fail("no audit of a private mechanism to plot".into()));
    }
    let top = private.iter().map(|r| r.max_lower_bound.max(r.claimed_epsilon)).fold(0.0, f64::max) * 1.1;
    register_font().map_err(fail)?;
    let root = SVGBackend::new(path, (800, 520)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| fail(e.to_string()))?;
    let (left, right) = (x0 / 1.5, x1 * 1.5);
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d((left..right).log_scale(), 0.0..top)
        .map_err(|e| fail(e.to_string()))?;
    chart
        .configure_mesh()
        .x_desc("claimed epsilon")
        .y_desc("epsilon")
        .x_label_formatter(&|x: &f64| format!("{x}"))
        .y_label_formatter(&|y: &f64| format!("{y:.1}"))
        .draw()
        .map_err(|e| fail(e.to_string()))?;
    let diagonal = (0..=100).map(|i| left * (right / left).powf(f64::from(i) / 100.0)).map(|x| (x, x.min(top)));
    chart
        .draw_series(LineSeries::new(diagonal, BLACK.stroke_width(1)))
        .map_err(|e| fail(e.to_string()))?
        .label("claimed epsilon (above it: claim refuted)")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], BLACK));
    let methods: Vec<Method> = Method::ALL.into_iter().filter(|m| private.iter().any(|r| r.method == *m)).collect();
    for (k, &m) in methods.iter().enumerate() {
        let color = COLORS[k % COLORS.len()];
        let points: Vec<(f64, f64)> =
            private.iter().filter(|r| r.method == m).map(|r| (r.claimed_epsilon, r.max_lower_bound)).collect();
        let label = private.iter().find(|r| r.method == m).map_or(String::new(), |r| r.guarantee.to_string());
        chart
            .draw_series(LineSeries::new(points.iter().copied(), color.stroke_width(2)))
            .map_err(|e| fail(e.to_string()))?
            .label(format!("{m} ({label}): lower bound"))
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2)));
        chart
            .draw_series(points.iter().map(|&p| Circle::new(p, 4, color.filled())))
            .map_err(|e| fail(e.to_string()))?;
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperLeft)
        .draw()
        .map_err(|e| fail(e.to_string()))?;
    root.present().map_err(|e| fail(e.to_string()))
}
