//! A user's CSV table as a dataset for DP-SGD (logistic regression, an MLP): the parsing of
//! `dptrain erm` (header detection, the label column by name or index), but nothing computed
//! across rows: a column mean to impute with, a category list to one-hot encode with, or a range
//! to scale with would be statistics of the private rows, released by no accountant. A missing
//! value (or label) is refused, never imputed or its row skipped silently; a categorical column is
//! refused (encode it with a public category list first); numeric features are taken as they are. The
//! classes are declared by the user (public input, in label order), never read from the rows: a
//! row labelled otherwise is refused. Rows are put in a fixed order that depends on
//! their count only (a permutation drawn with seed 0), so that rows held out from the end
//! (`--validation`) mix the classes.

use crate::error::{DataError, Result};
use crate::image_dataset::ImageDataset;
use crate::tabular::{CsvOptions, HeaderMode, LabelColumn, MissingValues, load_csv};
use rand::SeedableRng;
use rand::seq::SliceRandom;
use rand_chacha::ChaCha20Rng;
use std::path::Path;

/// The label column as a flag gives it: a header name, or a 0-based index; None: the last.
pub fn label_column(label: Option<&str>) -> LabelColumn {
    match label {
        None => LabelColumn::Last,
        Some(l) => l.parse::<usize>().map_or_else(|_| LabelColumn::Name(l.to_string()), LabelColumn::Index),
    }
}

/// The rows of the CSV file `path` as 1 x 1 x d examples of the declared `classes`, with the
/// table's feature columns; `columns`, when given (a test table's), are the training table's,
/// which it must have.
pub fn load_table(
    path: &Path,
    label: Option<&str>,
    classes: Option<&[String]>,
    columns: Option<&[String]>,
) -> Result<(ImageDataset, Vec<String>)> {
    let options = CsvOptions {
        header: HeaderMode::Auto,
        label: label_column(label),
        missing: MissingValues::Drop,
        classes: classes.map(<[String]>::to_vec),
    };
    let table = load_csv(path, &options)?;
    let corrupt = |reason: String| DataError::corrupt(path, reason);
    if table.missing.dropped_rows > 0 {
        let columns: Vec<String> = table.missing.by_column.iter().map(|(c, n)| format!("{c} ({n})")).collect();
        return Err(corrupt(format!(
            "{} rows have a missing label or value (missing values by column: {}): fill them with public values or remove those rows (dptrain train imputes nothing from the private rows)",
            table.missing.dropped_rows,
            if columns.is_empty() { "none, so labels".into() } else { columns.join(", ") }
        )));
    }
    if let Some(column) = table.categorical.first() {
        return Err(corrupt(format!(
            "column '{column}' is not numeric: its categories would be read from the private rows; encode it with a public list of categories (one 0/1 column each) before training"
        )));
    }
    if let Some(columns) = columns.filter(|c| *c != table.feature_names.as_slice()) {
        return Err(corrupt(format!(
            "has the feature columns {:?} where the training table has {columns:?}: they must be the same",
            table.feature_names
        )));
    }
    if table.classes.len() > 256 {
        return Err(corrupt(format!("{} classes declared: at most 256 are read", table.classes.len())));
    }
    let labels: Vec<u8> = table.labels.iter().map(|&k| k as u8).collect();
    crate::memory::check(&format!("the table {}", path.display()), Some((table.features.len() as u128) * 4))?;
    let mut order: Vec<usize> = (0..table.len()).collect();
    order.shuffle(&mut ChaCha20Rng::seed_from_u64(0));
    let features = order.iter().flat_map(|&i| table.row(i).iter().map(|&v| v as f32)).collect();
    let labels = order.iter().map(|&i| labels[i]).collect();
    let dataset = ImageDataset::from_features(features, labels, [1, 1, table.dim], table.classes.len())?;
    Ok((dataset, table.feature_names))
}
