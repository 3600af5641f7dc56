//! Curves of training runs, drawn as SVG from their folders' metrics.jsonl:
//! - test accuracy against steps and against the epsilon spent;
//! - training loss against steps and against the epsilon spent.
//!
//! A run folder's `curves.svg` and `curves.png` are redrawn after every evaluation (and so after `--resume`);
//! `dptrain plot RUN...` overlays several runs, which gives a privacy/utility picture across
//! epsilons. The training loss is measured on the private training data: it is not DP, as the
//! progress bar's is not.

use crate::folder::{METRICS_FILE, PLOT_FILE};
use dp_data::safe_files::{PUBLIC, file_error, read_regular, write_atomic};
use dp_engine::error::{EngineError, Result};
use dp_plot::{COLORS, register_font};
use plotters::coord::Shift;
use plotters::prelude::*;
use serde::Deserialize;
use std::path::Path;

/// The largest metrics.jsonl read.
const MAX_METRICS: u64 = 256 << 20;

/// One run's points.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Curve {
    /// The name in the legend.
    pub name: String,
    /// (step, test accuracy in %, epsilon spent; None without privacy) at each evaluation.
    pub evaluated: Vec<(f64, f64, Option<f64>)>,
    /// (step, training loss) of the lots logged.
    pub losses: Vec<(f64, f64)>,
}

/// The lines of metrics.jsonl a curve reads.
#[derive(Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
enum Line {
    Evaluated { step: u64, test_accuracy: f64, privacy: Privacy },
    Step { step: u64, loss: f64 },
}

/// The epsilon of an evaluation (null without privacy).
#[derive(Deserialize)]
struct Privacy {
    epsilon: Option<f64>,
}

impl Curve {
    /// The curve of the run in `run_dir`, named `name`. Lines of other events, and a torn last
    /// line a kill may leave, are skipped.
    pub fn read(run_dir: &Path, name: &str) -> Result<Self> {
        let bytes = read_regular(&run_dir.join(METRICS_FILE), MAX_METRICS)?;
        let mut curve = Curve { name: name.to_string(), ..Curve::default() };
        for line in String::from_utf8_lossy(&bytes).lines() {
            match serde_json::from_str::<Line>(line) {
                Ok(Line::Evaluated { step, test_accuracy, privacy }) => {
                    curve.evaluated.push((
                        step as f64,
                        100.0 * test_accuracy,
                        privacy.epsilon.filter(|e| e.is_finite()),
                    ));
                }
                Ok(Line::Step { step, loss }) if loss.is_finite() => curve.losses.push((step as f64, loss)),
                _ => {}
            }
        }
        Ok(curve)
    }

    /// The loss logged last at or before each evaluation with an epsilon: (epsilon, loss).
    fn loss_by_epsilon(&self) -> Vec<(f64, f64)> {
        self.evaluated
            .iter()
            .filter_map(|&(step, _, eps)| {
                let loss = self.losses.iter().rev().find(|(s, _)| *s <= step)?.1;
                Some((eps?, loss))
            })
            .collect()
    }
}

/// The largest of `values` (`floor` when there are none), times 1.05.
fn top(values: impl Iterator<Item = f64>, floor: f64) -> f64 {
    values.fold(floor, f64::max) * 1.05
}

/// The size of the drawing, in pixels.
const SIZE: (u32, u32) = (1100, 760);
/// Draws `curves` into the SVG file `svg` and the PNG file next to it (same name, `.png`),
/// each written atomically.
pub fn draw(curves: &[Curve], title: &str, svg: &Path) -> Result<()> {
    // Both backends lay text out with the registered font.
    register_font().map_err(|e| file_error(svg, e))?;
    let mut text = String::new();
    {
        let root = SVGBackend::with_string(&mut text, SIZE).into_drawing_area();
        panels(&root, curves, title).map_err(|e| file_error(svg, e))?;
        root.present().map_err(|e| file_error(svg, e))?;
    }
    write_atomic(svg, text.as_bytes(), PUBLIC)?;
    let png = svg.with_extension("png");
    let (w, h) = SIZE;
    let mut pixels = vec![0u8; (w * h * 3) as usize];
    {
        let root = BitMapBackend::with_buffer(&mut pixels, SIZE).into_drawing_area();
        panels(&root, curves, title).map_err(|e| file_error(&png, e))?;
        root.present().map_err(|e| file_error(&png, e))?;
    }
    Ok(write_atomic(&png, &encode_png(&pixels, SIZE).map_err(|e| file_error(&png, e))?, PUBLIC)?)
}

/// `pixels` (RGB, row-major) as a PNG file.
fn encode_png(pixels: &[u8], (w, h): (u32, u32)) -> std::result::Result<Vec<u8>, String> {
    let mut out = Vec::new();
    let mut encoder = png::Encoder::new(&mut out, w, h);
    encoder.set_color(png::ColorType::Rgb);
    encoder.set_depth(png::BitDepth::Eight);
    let mut writer = encoder.write_header().map_err(|e| e.to_string())?;
    writer.write_image_data(pixels).map_err(|e| e.to_string())?;
    writer.finish().map_err(|e| e.to_string())?;
    Ok(out)
}

/// One panel: its x and y titles, the x axis' end, the y range, and one line per run.
type Panel<'a> = (&'a str, &'a str, f64, std::ops::Range<f64>, Vec<Vec<(f64, f64)>>);

/// The four panels on `root`.
fn panels<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    curves: &[Curve],
    title: &str,
) -> std::result::Result<(), String> {
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let root = root.titled(title, ("sans-serif", 22)).map_err(|e| e.to_string())?;
    let areas = root.split_evenly((2, 2));
    let steps =
        top(curves.iter().flat_map(|c| c.evaluated.iter().map(|p| p.0).chain(c.losses.iter().map(|p| p.0))), 1.0);
    let eps = top(curves.iter().flat_map(|c| c.evaluated.iter().filter_map(|p| p.2)), 0.1);
    let loss = top(curves.iter().flat_map(|c| c.losses.iter().map(|p| p.1)), 0.1);
    let low = curves.iter().flat_map(|c| c.evaluated.iter().map(|p| p.1)).fold(100.0, f64::min);
    let accuracy = ((low / 10.0).floor() * 10.0).clamp(0.0, 90.0)..100.0;
    let series = |pick: &dyn Fn(&Curve) -> Vec<(f64, f64)>| curves.iter().map(pick).collect::<Vec<_>>();
    let panels: [Panel; 4] = [
        (
            "steps",
            "test accuracy (%)",
            steps,
            accuracy.clone(),
            series(&|c| c.evaluated.iter().map(|p| (p.0, p.1)).collect()),
        ),
        (
            "epsilon spent",
            "test accuracy (%)",
            eps,
            accuracy,
            series(&|c| c.evaluated.iter().filter_map(|p| Some((p.2?, p.1))).collect()),
        ),
        ("steps", "training loss (not DP)", steps, 0.0..loss, series(&|c| c.losses.clone())),
        ("epsilon spent", "training loss (not DP)", eps, 0.0..loss, series(&Curve::loss_by_epsilon)),
    ];
    for (area, (x_desc, y_desc, x_max, y, lines)) in areas.iter().zip(panels) {
        let mut chart = ChartBuilder::on(area)
            .margin(14)
            .x_label_area_size(38)
            .y_label_area_size(56)
            .build_cartesian_2d(0.0..x_max, y)
            .map_err(|e| e.to_string())?;
        let x_format = |x: &f64| if x_desc == "steps" { format!("{x:.0}") } else { format!("{x:.1}") };
        chart
            .configure_mesh()
            .x_desc(x_desc)
            .y_desc(y_desc)
            .x_label_formatter(&x_format)
            .y_label_formatter(&|y: &f64| format!("{y:.1}"))
            .draw()
            .map_err(|e| e.to_string())?;
        for (k, (points, curve)) in lines.into_iter().zip(curves).enumerate() {
            let color = COLORS[k % COLORS.len()];
            chart
                .draw_series(LineSeries::new(points, color.stroke_width(2)))
                .map_err(|e| e.to_string())?
                .label(curve.name.clone())
                .legend(move |(x, y)| PathElement::new([(x, y), (x + 18, y)], color.stroke_width(2)));
        }
        if curves.len() > 1 || x_desc == "steps" && y_desc.starts_with("test") {
            chart
                .configure_series_labels()
                .background_style(WHITE.mix(0.8))
                .border_style(BLACK)
                .position(SeriesLabelPosition::LowerRight)
                .draw()
                .map_err(|e| e.to_string())?;
        }
    }
    Ok(())
}

/// Redraws the curves of the run in `run_dir` into its `curves.svg`.
pub fn redraw(run_dir: &Path) -> Result<()> {
    let name = run_dir.file_name().map_or_else(|| run_dir.display().to_string(), |n| n.to_string_lossy().into_owned());
    let curve = Curve::read(run_dir, &name)?;
    draw(&[curve], &format!("dptrain run {name}"), &run_dir.join(PLOT_FILE))
}

/// Refuses a plot of nothing.
pub fn check_some(curves: &[Curve]) -> Result<()> {
    if curves.iter().all(|c| c.evaluated.is_empty() && c.losses.is_empty()) {
        return Err(EngineError::data("the runs logged no evaluation and no step yet: nothing to plot"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn curves_read_their_events_and_draw_every_run() {
        let dir = tempfile::tempdir().unwrap();
        let lines = [
            r#"{"event":"started","device":"cpu"}"#,
            r#"{"event":"step","step":1,"loss":2.0,"accuracy":null}"#,
            r#"{"event":"step","step":2,"loss":1.5,"accuracy":0.5}"#,
            r#"{"event":"evaluated","step":2,"test_accuracy":0.8,"privacy":{"epsilon":0.5,"delta":1e-5}}"#,
            r#"{"event":"evaluated","step":4,"test_accuracy":0.85,"privacy":{"epsilon":null,"delta":1e-5}}"#,
            r#"{"event":"step","step":5,"lo"#,
        ];
        std::fs::write(dir.path().join(METRICS_FILE), lines.join("\n")).unwrap();
        let curve = Curve::read(dir.path(), "a run").unwrap();
        assert_eq!(curve.evaluated, vec![(2.0, 80.0, Some(0.5)), (4.0, 85.0, None)]);
        assert_eq!(curve.losses, vec![(1.0, 2.0), (2.0, 1.5)]);
        assert_eq!(curve.loss_by_epsilon(), vec![(0.5, 1.5)]);
        let other = Curve { name: "other run".into(), ..curve.clone() };
        let path = dir.path().join("both.svg");
        draw(&[curve, other], "title", &path).unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        assert!(
            svg.starts_with("<svg")
                && svg.contains("a run")
                && svg.contains("other run")
                && svg.contains("epsilon spent")
        );
        assert!(check_some(&[Curve::default()]).is_err());
    }
}
