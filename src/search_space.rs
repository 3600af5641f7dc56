//! The space `dptrain tune` searches, as its TOML file holds it: `[base]` holds `dptrain train`
//! settings (as `--config` does) and `[space]`, for each setting searched, a list of values or a
//! range `{ low = 1.0, high = 16.0, scale = "log" }`. Every combination of listed values is a
//! configuration (a cell); a range's value is drawn for each candidate from the search's
//! CSPRNG, without the data. A range may not change a candidate's training shape (lot size,
//! steps), on which its noise is calibrated: such settings are lists.

use crate::train_config::TrainConfig;
use dp_accounting::search::TrainingShape;
use dp_engine::error::{EngineError, Result};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;
use serde::{Deserialize, Serialize};

/// The most configurations a space may hold.
pub const MAX_CONFIGURATIONS: usize = 10_000;

/// A search space as its TOML file holds it.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SpaceFile {
    /// Settings every candidate shares.
    #[serde(default)]
    pub base: toml::Table,
    /// For each setting searched, its values (a list) or its range (a table).
    pub space: toml::Table,
}

/// How a range's values spread.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Scale {
    /// Uniformly between the bounds.
    #[default]
    Linear,
    /// Uniformly in the logarithm (both bounds positive).
    Log,
}

/// A setting's range: integers when both bounds are, else real numbers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Range {
    /// The smallest value.
    pub low: toml::Value,
    /// The largest value.
    pub high: toml::Value,
    /// How values spread between them.
    #[serde(default)]
    pub scale: Scale,
}

/// A parsed space: its cells (each at its ranges' low ends) and its ranges.
#[derive(Debug, Clone, Serialize)]
pub struct Space {
    /// Every combination of the listed values.
    pub cells: Vec<TrainConfig>,
    /// The settings drawn per candidate, in key order.
    pub ranges: Vec<(String, Range)>,
}

impl Range {
    /// The bounds as numbers, refused unless finite, ordered and positive on a log scale.
    fn bounds(&self, key: &str) -> Result<(f64, f64)> {
        let number = |v: &toml::Value| v.as_float().or_else(|| v.as_integer().map(|i| i as f64));
        let bad = |why: &str| EngineError::invalid("search space", format!("`{key}`: {why}"));
        let (Some(low), Some(high)) = (number(&self.low), number(&self.high)) else {
            return Err(bad("a range's low and high are numbers"));
        };
        if !(low.is_finite() && high.is_finite() && low <= high) {
            return Err(bad("a range needs finite low <= high"));
        }
        if self.scale == Scale::Log && low <= 0.0 {
            return Err(bad("a log range needs low > 0"));
        }
        Ok((low, high))
    }

    /// The value at `u` in [0, 1): an integer when both bounds are (rounded, within them).
    fn at(&self, key: &str, u: f64) -> Result<toml::Value> {
        let (low, high) = self.bounds(key)?;
        let x = match self.scale {
            Scale::Linear => low + u * (high - low),
            Scale::Log => (low.ln() + u * (high.ln() - low.ln())).exp(),
        };
        Ok(match (self.low.is_integer(), self.high.is_integer()) {
            (true, true) => toml::Value::Integer(x.round().clamp(low, high) as i64),
            _ => toml::Value::Float(x.clamp(low, high)),
        })
    }
}

/// The most memory a space's configurations may take, by [`weight`].
const MAX_SPACE_BYTES: usize = 64 << 20;

/// About the bytes `value` takes once parsed (its text and a word per value and entry): what
/// each cell's copy of it costs.
fn weight(value: &toml::Value) -> usize {
    const WORD: usize = 16;
    match value {
        toml::Value::String(text) => WORD + text.len(),
        toml::Value::Array(items) => WORD + items.iter().map(weight).sum::<usize>(),
        toml::Value::Table(table) => WORD + table.iter().map(|(k, v)| WORD + k.len() + weight(v)).sum::<usize>(),
        _ => WORD,
    }
}

/// Refuses a space whose configurations, each a copy of `[base]` with one value of each
/// listed setting, would take more than [`MAX_SPACE_BYTES`], before any is made.
fn check_size(file: &SpaceFile) -> Result<()> {
    let mut cells = 1usize;
    let mut per_cell = weight(&toml::Value::Table(file.base.clone()));
    for values in file.space.values() {
        let items = values.as_array().map_or(1, Vec::len).max(1);
        cells = cells.saturating_mul(items);
        per_cell = per_cell
            .saturating_add(values.as_array().map_or(weight(values), |v| v.iter().map(weight).max().unwrap_or(0)));
    }
    let bytes = cells.saturating_mul(per_cell);
    if bytes > MAX_SPACE_BYTES {
        return Err(EngineError::invalid(
            "search space",
            format!(
                "its configurations ({cells}, of about {per_cell} bytes each) would take {} MiB, more than the {} MiB a space may: list fewer values, or keep large settings short",
                bytes >> 20,
                MAX_SPACE_BYTES >> 20
            ),
        ));
    }
    Ok(())
}

/// The settings the search gives each candidate itself: refused in the file.
const SET_BY_THE_SEARCH: [(&str, &str); 4] = [
    ("noise_multiplier", "calibrated so that the whole search meets --target-epsilon"),
    ("target_epsilon", "the search's total is --target-epsilon"),
    ("seed", "the search's own --seed seeds its candidates"),
    ("out_dir", "candidates train in the search's private folder"),
];

/// Every cell of `file`, and its ranges.
pub fn configurations(file: &SpaceFile) -> Result<Space> {
    for (key, why) in SET_BY_THE_SEARCH {
        if file.base.contains_key(key) || file.space.contains_key(key) {
            return Err(EngineError::invalid("search space", format!("`{key}` is set by the search: {why}")));
        }
    }
    check_size(file)?;
    let mut tables = vec![file.base.clone()];
    let mut ranges = Vec::new();
    for (key, values) in &file.space {
        if let Some(table) = values.as_table() {
            let range = Range::deserialize(toml::Value::Table(table.clone()))
                .map_err(|e| EngineError::invalid("search space", format!("`{key}`: {}", e.message())))?;
            range.bounds(key)?;
            tables.iter_mut().for_each(|t| _ = t.insert(key.clone(), range.low.clone()));
            ranges.push((key.clone(), range));
            continue;
        }
        let values = values.as_array().filter(|v| !v.is_empty()).ok_or_else(|| {
            EngineError::invalid("search space", format!("`{key}` must be a non-empty list of values or a range"))
        })?;
        if tables.len().saturating_mul(values.len()) > MAX_CONFIGURATIONS {
            return Err(EngineError::invalid("search space", format!("more than {MAX_CONFIGURATIONS} configurations")));
        }
        tables = tables
            .iter()
            .flat_map(|t| values.iter().map(move |v| (t.clone(), v.clone())))
            .map(|(mut t, v)| {
                t.insert(key.clone(), v);
                t
            })
            .collect();
    }
    let cells = tables.into_iter().map(config).collect::<Result<_>>()?;
    Ok(Space { cells, ranges })
}

/// The configuration `table` holds, refused when it is not one or its privacy is unsound.
fn config(table: toml::Table) -> Result<TrainConfig> {
    let config =
        TrainConfig::deserialize(table).map_err(|e| EngineError::invalid("search space", e.message().to_string()))?;
    config.privacy()?;
    Ok(config)
}

/// The training shape of `config` on `n` examples.
pub fn shape(config: &TrainConfig, n: usize) -> Result<TrainingShape> {
    config.privacy()?.settings.training_shape(n)
}

impl Space {
    /// `cell` with its ranges' values at `at(key)`.
    fn with(&self, cell: &TrainConfig, mut at: impl FnMut(&str, &Range) -> Result<toml::Value>) -> Result<TrainConfig> {
        let mut table = toml::Table::try_from(cell)
            .map_err(|e| EngineError::invalid("search space", format!("not expressible in TOML: {e}")))?;
        for (key, range) in &self.ranges {
            table.insert(key.clone(), at(key, range)?);
        }
        config(table)
    }

    /// `cell` as the candidate of `draw` (a number from the search's CSPRNG) takes it: each
    /// range's value drawn from a ChaCha20 keyed by it.
    pub fn candidate(&self, cell: &TrainConfig, draw: u64) -> Result<TrainConfig> {
        let mut rng = ChaCha20Rng::seed_from_u64(draw);
        self.with(cell, |key, range| range.at(key, rng.random()))
    }

    /// The cells' training shapes on `n` examples, refused when a range changes one (between
    /// its ends) or the held-out examples: a candidate's noise is calibrated on its shape.
    pub fn shapes(&self, n: usize) -> Result<Vec<TrainingShape>> {
        self.cells
            .iter()
            .map(|cell| {
                let high = self.with(cell, |_, range| Ok(range.high.clone()))?;
                let at_low = shape(cell, n)?;
                if shape(&high, n)? != at_low || high.validation != cell.validation {
                    let keys: Vec<&str> = self.ranges.iter().map(|(k, _)| k.as_str()).collect();
                    return Err(EngineError::invalid(
                        "search space",
                        format!(
                            "a range ({}) changes the candidates' lot size, steps or held-out examples, on which their noise is calibrated: give such a setting as a list",
                            keys.join(", ")
                        ),
                    ));
                }
                Ok(at_low)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn space(text: &str) -> Result<Space> {
        configurations(&toml::from_str(text).unwrap())
    }

    #[test]
    fn lists_multiply_and_ranges_are_drawn_within_their_bounds() {
        let s = space(
            "[base]\nmodel = \"logreg\"\n[space]\nlot_size = [64, 128]\nlearning_rate = { low = 0.5, high = 8.0, scale = \"log\" }\nhidden = { low = 10, high = 20 }",
        )
        .unwrap();
        assert_eq!(s.cells.len(), 2);
        assert_eq!(s.shapes(1000).unwrap().len(), 2);
        let drawn: Vec<TrainConfig> = (0..200).map(|d| s.candidate(&s.cells[1], d).unwrap()).collect();
        assert!(drawn.iter().all(|c| c.lot_size == 128 && (0.5..=8.0).contains(&c.learning_rate)));
        assert!(drawn.iter().all(|c| c.hidden.is_some_and(|h| (10..=20).contains(&h))));
        let below_2 = drawn.iter().filter(|c| c.learning_rate < 2.0).count();
        assert!((70..=130).contains(&below_2), "log-uniform: half below the geometric mean 2, {below_2}");
        assert_eq!(s.candidate(&s.cells[0], 7).unwrap(), s.candidate(&s.cells[0], 7).unwrap(), "keyed by the draw");
        assert_ne!(drawn[0].learning_rate, drawn[1].learning_rate);
    }

    #[test]
    fn a_range_that_moves_the_noise_or_makes_no_sense_is_refused() {
        let refused = |text: &str, why: &str| {
            let err = space(text).and_then(|s| s.shapes(1000)).unwrap_err().to_string();
            assert!(err.contains(why), "{text}: {err}");
        };
        refused("[space]\nlot_size = { low = 64, high = 256 }", "give such a setting as a list");
        refused("[space]\nepochs = { low = 1.0, high = 3.0 }", "give such a setting as a list");
        refused("[space]\nlearning_rate = { low = 2.0, high = 1.0 }", "low <= high");
        refused("[space]\nlearning_rate = { low = 0.0, high = 1.0, scale = \"log\" }", "low > 0");
        refused("[space]\nlearning_rate = { low = 1.0, high = 2.0, step = 1 }", "step");
        refused("[space]\nlearning_rate = { low = \"a\", high = 2.0 }", "numbers");
        refused("[space]\nlearning_rate = []", "non-empty list");
        refused("[base]\nnoise_multiplier = 0.5\n[space]\nlearning_rate = [1.0]", "set by the search");
        refused("[space]\nseed = [1, 2]", "set by the search");
    }

    #[test]
    fn a_space_too_large_for_memory_is_refused_before_its_cells_are_made() {
        let lists = |n: usize| (0..n).map(|i| format!("{}.0", i + 1)).collect::<Vec<_>>().join(", ");
        let grid = format!("learning_rate = [{}]\nmomentum = [{}]", lists(100), lists(100));
        let numbers = (0..480_000).map(|i| (i % 10).to_string()).collect::<Vec<_>>().join(",");
        let names = (0..250_000).map(|i| format!("\"c{i}\"")).collect::<Vec<_>>().join(",");
        for base in [
            format!("hidden_sizes = [{numbers}]"),
            format!("label = \"{}\"", "x".repeat(1 << 20)),
            format!("classes = [{names}]"),
        ] {
            let text = format!("[base]\n{base}\n[space]\n{grid}");
            let e = space(&text).unwrap_err().to_string();
            assert!(e.contains("MiB, more than the 64 MiB"), "{e}");
        }
        // The same [base] in one cell is no burden.
        let one = format!("[base]\nlabel = \"{}\"\n[space]\nlearning_rate = [1.0]", "x".repeat(1 << 20));
        assert_eq!(space(&one).unwrap().cells.len(), 1);
    }
}
