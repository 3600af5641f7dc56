//! The papers' Figures 2-4: test accuracy and optimality gap against epsilon (log scale), one line
//! per method with +- one standard deviation bars, drawn as SVG.

use crate::error::{ErmError, Result};
use crate::experiment::ExperimentReport;
use crate::methods::Method;
use dp_data::safe_files::{PUBLIC, write_atomic};
use dp_plot::{COLORS, register_font};
use plotters::coord::Shift;
use plotters::coord::ranged1d::{AsRangedCoord, ValueFormatter};
use plotters::prelude::*;
use std::path::Path;

/// Which column of the report to draw.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Metric {
    /// Test accuracy in percent (linear axis).
    Accuracy,
    /// Optimality gap (log axis).
    Gap,
}

/// (epsilon, mean, std) of `method`'s completed cells.
fn series(report: &ExperimentReport, method: Method, metric: Metric) -> Vec<(f64, f64, f64)> {
    report
        .rows
        .iter()
        .filter(|r| r.method == method && r.runs > 0)
        .filter_map(|r| {
            let (m, s) = match metric {
                Metric::Accuracy => (100.0 * r.accuracy_mean, 100.0 * r.accuracy_std),
                Metric::Gap => (r.gap_mean, r.gap_std),
            };
            r.epsilon.map(|e| (e, m, s))
        })
        .collect()
}

/// Draws `metric` against epsilon to the SVG file `path`.
pub fn draw(report: &ExperimentReport, metric: Metric, title: &str, path: &Path) -> Result<()> {
    let fail = |e: String| ErmError::Output { path: path.display().to_string(), reason: e };
    let methods: Vec<Method> = Method::ALL.into_iter().filter(|m| report.rows.iter().any(|r| r.method == *m)).collect();
    let points: Vec<(f64, f64, f64)> = methods.iter().flat_map(|&m| series(report, m, metric)).collect();
    let eps: Vec<f64> = points.iter().map(|p| p.0).collect();
    let (x0, x1) = (eps.iter().copied().fold(f64::INFINITY, f64::min), eps.iter().copied().fold(0.0, f64::max));
    if points.is_empty() || x0.is_nan() || x0 <= 0.0 {
        return Err(fail("no completed private runs to plot".into()));
    }
    register_font().map_err(fail)?;
    let mut svg = String::new();
    let root = SVGBackend::with_string(&mut svg, (800, 520)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| fail(e.to_string()))?;
    let plot = Plot {
        report,
        metric,
        methods: &methods,
        x: (x0 / 1.5, x1 * 1.5),
        caption: format!("{title}: {} on {} training rows", report.model, report.train_rows),
    };
    let drawn = match metric {
        Metric::Accuracy => plot.chart(
            &root,
            0.0..100.0,
            "test accuracy (%)",
            &|y: &f64| format!("{y:.0}"),
            &|v| v,
            100.0 * report.non_private_accuracy,
        ),
        Metric::Gap => {
            // The gap is >= 0 up to solver precision; the log axis shows values below 1e-9 at 1e-9.
            let top = points.iter().map(|p| p.1 + p.2).fold(1e-8, f64::max) * 2.0;
            let y_range = (1e-9..top).log_scale();
            plot.chart(
                &root,
                y_range,
                "optimality gap F(theta) - L*",
                &|y: &f64| format!("{y:.0e}"),
                &|v| v.max(1e-9),
                1e-9,
            )
        }
    };
    drawn.and_then(|()| root.present().map_err(|e| e.to_string())).map_err(fail)?;
    drop(root);
    write_atomic(path, svg.as_bytes(), PUBLIC).map_err(|e| fail(e.to_string()))
}

/// One plot of a report: the methods it shows, its epsilon axis and its caption.
struct Plot<'a> {
    report: &'a ExperimentReport,
    metric: Metric,
    methods: &'a [Method],
    x: (f64, f64),
    caption: String,
}

impl Plot<'_> {
    /// The chart on `root` with the y axis `y_range` (values shown through `transform`): a line
    /// with error bars per private method, labelled with its guarantee, and the non-private
    /// method's `reference` as a flat line.
    fn chart<Y>(
        &self,
        root: &DrawingArea<SVGBackend<'_>, Shift>,
        y_range: Y,
        y_desc: &str,
        y_format: &dyn Fn(&f64) -> String,
        transform: &dyn Fn(f64) -> f64,
        reference: f64,
    ) -> std::result::Result<(), String>
    where
        Y: AsRangedCoord<Value = f64>,
        Y::CoordDescType: ValueFormatter<f64>,
    {
        let err = |e: &dyn std::fmt::Display| e.to_string();
        let (x0, x1) = self.x;
        let mut chart = ChartBuilder::on(root)
            .caption(&self.caption, ("sans-serif", 20))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(70)
            .build_cartesian_2d((x0..x1).log_scale(), y_range)
            .map_err(|e| err(&e))?;
        chart
            .configure_mesh()
            .x_desc("epsilon")
            .y_desc(y_desc)
            .x_label_formatter(&|x: &f64| format!("{x}"))
            .y_label_formatter(y_format)
            .draw()
            .map_err(|e| err(&e))?;
        for (k, &m) in self.methods.iter().enumerate() {
            let color = COLORS[k % COLORS.len()];
            if !m.is_private() {
                let line =
                    LineSeries::new([(x0, transform(reference)), (x1, transform(reference))], color.stroke_width(1));
                chart
                    .draw_series(line)
                    .map_err(|e| err(&e))?
                    .label(format!("{m} (none)"))
                    .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], color));
                continue;
            }
            let s = series(self.report, m, self.metric);
            chart
                .draw_series(LineSeries::new(s.iter().map(|p| (p.0, transform(p.1))), color.stroke_width(2)))
                .map_err(|e| err(&e))?
                .label(self.label(m))
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2)));
            let bar = |p: &(f64, f64, f64)| (p.0, transform(p.1 - p.2), transform(p.1), transform(p.1 + p.2));
            chart
                .draw_series(
                    s.iter().map(bar).map(|(x, lo, mid, hi)| ErrorBar::new_vertical(x, lo, mid, hi, color.filled(), 6)),
                )
                .map_err(|e| err(&e))?;
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .position(SeriesLabelPosition::LowerRight)
            .draw()
            .map_err(|e| err(&e))
    }

    /// A method's legend: its name and the guarantee its runs earned.
    fn label(&self, m: Method) -> String {
        let guarantee = self.report.rows.iter().find_map(|r| r.guarantee.filter(|_| r.method == m && r.runs > 0));
        format!("{m} ({})", guarantee.map_or(String::new(), |g| g.to_string()))
    }
}
