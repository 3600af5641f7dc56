//! Reading a CSV table: the fields, the header guess, the label column, the declared classes,
//! the missing values imputed or dropped, and the one-hot encoding; every error names the file
//! and the line.

use super::{CsvOptions, HeaderMode, LabelColumn, MissingReport, MissingValues, TabularData};
use crate::error::{DataError, Result};
use crate::safe_files::open_regular;
use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;

const MISSING: [&str; 7] = ["", "?", "na", "nan", "null", "none", "n/a"];

fn is_missing(field: &str) -> bool {
    MISSING.contains(&field.trim().to_ascii_lowercase().as_str())
}

fn number(field: &str) -> Option<f64> {
    field.trim().parse::<f64>().ok().filter(|v| v.is_finite())
}

/// What a table's text costs in memory while it is parsed, in copies of its bytes.
const PARSED_COPIES: u128 = 8;

/// Reads every record, requiring one width for all of them.
fn read_records(path: &Path) -> Result<Vec<Vec<String>>> {
    let (file, len) = open_regular(path)?;
    // Its bytes, and its fields as strings (a few times the text).
    crate::memory::check(&format!("reading the table {}", path.display()), Some(u128::from(len) * PARSED_COPIES))?;
    let mut bytes = Vec::with_capacity(len as usize);
    file.take(len.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|reason| DataError::Io { path: path.to_path_buf(), reason })?;
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(DataError::corrupt(path, "the file is empty"));
    }
    let mut reader = csv::ReaderBuilder::new().has_headers(false).flexible(false).from_reader(bytes.as_slice());
    let mut rows = Vec::new();
    for record in reader.records() {
        let record = record.map_err(|e| {
            let line = e.position().map(|p| p.line()).unwrap_or(0);
            let reason = match e.kind() {
                csv::ErrorKind::UnequalLengths { expected_len, len, .. } => {
                    format!("line {line} has {len} fields, the file's first line has {expected_len}")
                }
                _ => format!("line {line}: {e}"),
            };
            DataError::corrupt(path, reason)
        })?;
        if record.iter().all(|f| f.trim().is_empty()) {
            continue;
        }
        rows.push(record.iter().map(|f| f.trim().to_string()).collect());
    }
    Ok(rows)
}

/// True when some column has a non-numeric, non-missing first field and only numbers below it.
fn looks_like_header(rows: &[Vec<String>]) -> bool {
    let Some((first, rest)) = rows.split_first() else { return false };
    if rest.is_empty() {
        return first.iter().all(|f| !is_missing(f) && number(f).is_none());
    }
    (0..first.len()).any(|j| {
        !is_missing(&first[j])
            && number(&first[j]).is_none()
            && rest.iter().any(|r| !is_missing(&r[j]))
            && rest.iter().all(|r| is_missing(&r[j]) || number(&r[j]).is_some())
    })
}

/// One feature column: numeric, or categorical with its sorted categories.
enum Column {
    Numeric { fill: f64 },
    Categorical { categories: Vec<String>, fill: String },
}

/// A column is numeric when more than half of its present values are finite numbers; then a
/// present cell that is not (`abc`, `inf`, `1e309`) is an error, reported as the index of its
/// value (never a silent one-hot encoding of the whole column).
fn describe_column(values: &[&str]) -> std::result::Result<Column, usize> {
    let present: Vec<&str> = values.iter().copied().filter(|v| !is_missing(v)).collect();
    let numbers: Vec<f64> = present.iter().filter_map(|v| number(v)).collect();
    if 2 * numbers.len() > present.len() || present.is_empty() {
        if let Some(bad) = values.iter().position(|v| !is_missing(v) && number(v).is_none()) {
            return Err(bad);
        }
        let fill = if numbers.is_empty() { 0.0 } else { numbers.iter().sum::<f64>() / numbers.len() as f64 };
        return Ok(Column::Numeric { fill });
    }
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for v in &present {
        *counts.entry(v).or_default() += 1;
    }
    // The most frequent value; ties go to the first in sorted order.
    let fill =
        counts.iter().max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(a.0))).map(|(v, _)| v.to_string()).unwrap_or_default();
    Ok(Column::Categorical { categories: counts.keys().map(|v| v.to_string()).collect(), fill })
}

/// The declared classes, checked: at least two, none twice, none empty.
fn declared_classes(path: &Path, classes: Option<&[String]>) -> Result<Vec<String>> {
    let Some(classes) = classes else {
        return Err(DataError::corrupt(
            path,
            "declare the table's classes in label order (OwnData::classes): they are public input, never read from the private rows",
        ));
    };
    if classes.len() < 2 {
        return Err(DataError::corrupt(
            path,
            format!("{} declared class: a classifier needs at least two", classes.len()),
        ));
    }
    if let Some(c) = classes.iter().enumerate().find(|(j, c)| c.is_empty() || classes[..*j].contains(c)).map(|(_, c)| c)
    {
        return Err(DataError::corrupt(path, format!("the declared class '{c}' is empty or given twice")));
    }
    Ok(classes.to_vec())
}

/// The index of the label column among `names` (a header's, or generated).
fn label_column(path: &Path, label: &LabelColumn, names: &[String], header: bool) -> Result<usize> {
    let width = names.len();
    match label {
        LabelColumn::Last => Ok(width - 1),
        LabelColumn::Index(j) if *j < width => Ok(*j),
        LabelColumn::Index(j) => {
            Err(DataError::corrupt(path, format!("label column {j} does not exist (columns 0 to {})", width - 1)))
        }
        LabelColumn::Name(name) => names.iter().position(|n| n == name).ok_or_else(|| {
            let hint = if header {
                format!("columns: {}", names.join(", "))
            } else {
                "the file has no header; give the label column's index".into()
            };
            DataError::corrupt(path, format!("label column '{name}' does not exist ({hint})"))
        }),
    }
}

/// The rows kept (a row with a missing label is dropped, and with `Drop` one with any missing
/// value) and what happened to the missing values.
fn kept_rows(
    rows: &[Vec<String>],
    names: &[String],
    label: usize,
    missing: MissingValues,
) -> (Vec<usize>, MissingReport) {
    let mut report = MissingReport::default();
    let mut kept = Vec::with_capacity(rows.len());
    for (i, row) in rows.iter().enumerate() {
        let missing_cols: Vec<usize> = (0..names.len()).filter(|&j| j != label && is_missing(&row[j])).collect();
        for &j in &missing_cols {
            *report.by_column.entry(names[j].clone()).or_default() += 1;
        }
        if is_missing(&row[label]) || (missing == MissingValues::Drop && !missing_cols.is_empty()) {
            report.dropped_rows += 1;
            continue;
        }
        report.imputed_cells += missing_cols.len();
        kept.push(i);
    }
    if missing == MissingValues::Drop {
        report.imputed_cells = 0;
    }
    (kept, report)
}

/// Appends the encoding of one cell of column `c` to `features`: the number (the column's fill
/// when missing), or one-hot over the column's categories.
fn encode(c: &Column, field: &str, features: &mut Vec<f64>) {
    match c {
        Column::Numeric { fill } => {
            features.push(if is_missing(field) { *fill } else { number(field).unwrap_or(*fill) })
        }
        Column::Categorical { categories, fill } => {
            let value = if is_missing(field) { fill.as_str() } else { field };
            features.extend(categories.iter().map(|v| if v == value { 1.0 } else { 0.0 }));
        }
    }
}

/// Loads a CSV table.
pub fn load_csv(path: &Path, options: &CsvOptions) -> Result<TabularData> {
    let mut rows = read_records(path)?;
    let header = match options.header {
        HeaderMode::Present => true,
        HeaderMode::Absent => false,
        HeaderMode::Auto => looks_like_header(&rows),
    };
    let width = rows.first().map_or(0, Vec::len);
    let names: Vec<String> = if header { rows.remove(0) } else { (0..width).map(|j| format!("column{j}")).collect() };
    if rows.is_empty() {
        return Err(DataError::corrupt(path, "the file has a header but no data rows"));
    }
    if width < 2 {
        return Err(DataError::corrupt(path, "a table needs at least one feature column and a label column"));
    }
    if let Some((j, name)) = names.iter().enumerate().find(|(j, n)| names[..*j].contains(n)) {
        let first = names.iter().position(|n| n == name).unwrap_or(0);
        return Err(DataError::corrupt(
            path,
            format!("columns {first} and {j} are both named '{name}': rename one (a column is found by its name)"),
        ));
    }
    let label = label_column(path, &options.label, &names, header)?;
    let first_line = usize::from(header) + 1;
    let (kept, report) = kept_rows(&rows, &names, label, options.missing);
    if kept.is_empty() {
        return Err(DataError::corrupt(path, "every row has a missing label or value"));
    }
    let feature_cols: Vec<usize> = (0..width).filter(|&j| j != label).collect();
    let columns: Vec<Column> = feature_cols
        .iter()
        .map(|&j| {
            let values: Vec<&str> = kept.iter().map(|&i| rows[i][j].as_str()).collect();
            describe_column(&values).map_err(|k| {
                DataError::corrupt(
                    path,
                    format!(
                        "line {}, column '{}': '{}' is not a finite number in a numeric column (fix it, or mark it missing: empty, ?, NA)",
                        first_line + kept[k],
                        names[j],
                        values[k]
                    ),
                )
            })
        })
        .collect::<Result<_>>()?;
    let described: Vec<(&Column, usize)> = columns.iter().zip(feature_cols).collect();
    let feature_names: Vec<String> = described
        .iter()
        .flat_map(|&(c, j)| match c {
            Column::Numeric { .. } => vec![names[j].clone()],
            Column::Categorical { categories, .. } => categories.iter().map(|v| format!("{}={v}", names[j])).collect(),
        })
        .collect();
    let dim = feature_names.len();
    let mut features = Vec::with_capacity(kept.len() * dim);
    for &i in &kept {
        for &(c, j) in &described {
            encode(c, rows[i][j].as_str(), &mut features);
        }
    }
    let classes = declared_classes(path, options.classes.as_deref())?;
    let labels = kept
        .iter()
        .map(|&i| {
            let value = rows[i][label].as_str();
            classes.iter().position(|c| c == value).ok_or_else(|| {
                DataError::corrupt(
                    path,
                    format!(
                        "line {}: label '{value}' is not a declared class ({}): a row's label must be one of them, exactly as written",
                        first_line + i,
                        classes.join(", ")
                    ),
                )
            })
        })
        .collect::<Result<Vec<usize>>>()?;
    let categorical = described
        .iter()
        .filter(|(c, _)| matches!(c, Column::Categorical { .. }))
        .map(|&(_, j)| names[j].clone())
        .collect();
    Ok(TabularData { features, dim, labels, classes, feature_names, categorical, missing: report })
}
