//! The look every plot of dp-train shares, so that a run's curves (dp-run), the DP-ERM figures
//! (dp-erm) and the audits' plots (dp-audit) read alike without one of them depending on
//! another: the palette and the font their text is drawn in, embedded.

#![warn(missing_docs)]

use plotters::style::{FontStyle, RGBColor};

/// One color per series (matplotlib's default cycle).
pub const COLORS: [RGBColor; 7] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(127, 127, 127),
];

/// The font every plot's text is laid out and drawn in (DejaVu Sans, assets/fonts/LICENSE):
/// plotters measures and rasterizes text with ab_glyph, so no system font is needed.
static FONT: &[u8] = include_bytes!("../assets/fonts/DejaVuSans.ttf");

/// Registers the embedded font as plotters' sans-serif, once; every plot calls it first.
pub fn register_font() -> Result<(), String> {
    static REGISTERED: std::sync::OnceLock<Result<(), String>> = std::sync::OnceLock::new();
    REGISTERED
        .get_or_init(|| {
            plotters::style::register_font("sans-serif", FontStyle::Normal, FONT)
                .map_err(|_| "the embedded font cannot be read".to_string())
        })
        .clone()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_embedded_font_registers_and_the_colors_differ() {
        assert_eq!(register_font(), Ok(()));
        assert_eq!(register_font(), Ok(()), "a second call finds it registered");
        for (i, a) in COLORS.iter().enumerate() {
            assert!(COLORS[i + 1..].iter().all(|b| (a.0, a.1, a.2) != (b.0, b.1, b.2)));
        }
    }
}
