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

/// A table's records as parsed: every field trimmed, all in one buffer and found by where it
/// ends, so that parsing costs the text and a word per field, never a `String` per field (600
/// MiB of one-character fields were 24 GiB of them).
struct Records {
    text: String,
    ends: Vec<usize>,
    width: usize,
    /// Records before this one are not data (the header).
    first: usize,
}

impl Records {
    /// The data records.
    fn len(&self) -> usize {
        (self.ends.len() / self.width.max(1)).saturating_sub(self.first)
    }

    /// Field `j` of data record `i`.
    fn field(&self, i: usize, j: usize) -> &str {
        let k = (self.first + i) * self.width + j;
        let start = if k == 0 { 0 } else { self.ends[k - 1] };
        &self.text[start..self.ends[k]]
    }

    /// The fields of data record `i`.
    fn row(&self, i: usize) -> impl Iterator<Item = &str> {
        (0..self.width).map(move |j| self.field(i, j))
    }
}

/// Bytes a word of bookkeeping takes.
const WORD: u128 = std::mem::size_of::<usize>() as u128;

/// The memory `bytes` of CSV text takes while it is parsed, its `fields` fields and the
/// `features` it will encode: the text read, its trimmed copy, an end offset per field and a
/// number per feature.
fn parsing_cost(bytes: u64, fields: u128, features: u128) -> Option<u128> {
    let text = u128::from(bytes).checked_mul(2)?;
    text.checked_add(fields.checked_mul(WORD)?)?.checked_add(features.checked_mul(8)?)
}

/// The records of `bytes` (of `path`) as `csv` reads them: each one's fields to `field`, every
/// record of the first one's width, records of empty fields skipped.
fn each_record(path: &Path, bytes: &[u8], mut record_fields: impl FnMut(&csv::StringRecord)) -> Result<usize> {
    let mut reader = csv::ReaderBuilder::new().has_headers(false).flexible(false).from_reader(bytes);
    let mut record = csv::StringRecord::new();
    let mut width = 0;
    loop {
        match reader.read_record(&mut record) {
            Ok(false) => return Ok(width),
            Ok(true) if record.iter().all(|f| f.trim().is_empty()) => {}
            Ok(true) => {
                width = record.len();
                record_fields(&record);
            }
            Err(e) => {
                let line = e.position().map(|p| p.line()).unwrap_or(0);
                let reason = match e.kind() {
                    csv::ErrorKind::UnequalLengths { expected_len, len, .. } => {
                        format!("line {line} has {len} fields, the file's first line has {expected_len}")
                    }
                    _ => format!("line {line}: {e}"),
                };
                return Err(DataError::corrupt(path, reason));
            }
        }
    }
}

/// Reads every record, requiring one width for all of them, within the memory budget: the
/// fields are counted first, and what they will take checked, before any is kept.
fn read_records(path: &Path) -> Result<Records> {
    let (file, len) = open_regular(path)?;
    let what = format!("reading the table {}", path.display());
    crate::memory::check(&what, parsing_cost(len, 0, 0))?;
    let mut bytes = Vec::with_capacity(len as usize);
    file.take(len.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|reason| DataError::Io { path: path.to_path_buf(), reason })?;
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(DataError::corrupt(path, "the file is empty"));
    }
    let mut fields = 0u128;
    each_record(path, &bytes, |record| fields += record.len() as u128)?;
    // Every field is at least one feature (a categorical one more: checked when encoded).
    crate::memory::check(&what, parsing_cost(len, fields, fields))?;
    let mut records = Records { text: String::new(), ends: Vec::with_capacity(fields as usize), width: 0, first: 0 };
    records.text.reserve(bytes.len());
    records.width = each_record(path, &bytes, |record| {
        for field in record {
            records.text.push_str(field.trim());
            records.ends.push(records.text.len());
        }
    })?;
    Ok(records)
}

/// True when the first record names the columns: none of its fields is a number (a data row
/// with a typo, `0.5x,1,2`, is data, and its bad cell an error) and some column has a name
/// over numbers below it (or the file has no other record).
fn looks_like_header(records: &Records) -> bool {
    if records.len() == 0 {
        return false;
    }
    let first: Vec<&str> = records.row(0).collect();
    if first.iter().any(|f| number(f).is_some()) {
        return false;
    }
    let rows = 1..records.len();
    if rows.is_empty() {
        return first.iter().all(|f| !is_missing(f));
    }
    (0..first.len()).any(|j| {
        !is_missing(first[j])
            && rows.clone().any(|i| !is_missing(records.field(i, j)))
            && rows.clone().all(|i| is_missing(records.field(i, j)) || number(records.field(i, j)).is_some())
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
fn kept_rows(rows: &Records, names: &[String], label: usize, missing: MissingValues) -> (Vec<usize>, MissingReport) {
    let mut report = MissingReport::default();
    let mut kept = Vec::with_capacity(rows.len());
    for i in 0..rows.len() {
        let missing_cols: Vec<usize> =
            (0..names.len()).filter(|&j| j != label && is_missing(rows.field(i, j))).collect();
        for &j in &missing_cols {
            *report.by_column.entry(names[j].clone()).or_default() += 1;
        }
        if is_missing(rows.field(i, label)) || (missing == MissingValues::Drop && !missing_cols.is_empty()) {
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

/// The first column name given twice in `names`, with where it first is and where again.
fn repeated(names: &[String]) -> Option<(usize, usize, &str)> {
    let mut seen = std::collections::HashMap::with_capacity(names.len());
    names.iter().enumerate().find_map(|(j, name)| seen.insert(name.as_str(), j).map(|first| (first, j, name.as_str())))
}

/// Loads a CSV table.
pub fn load_csv(path: &Path, options: &CsvOptions) -> Result<TabularData> {
    let mut rows = read_records(path)?;
    let header = match options.header {
        HeaderMode::Present => true,
        HeaderMode::Absent => false,
        HeaderMode::Auto => looks_like_header(&rows),
    };
    let width = rows.width;
    let names: Vec<String> = match header {
        true => rows.row(0).map(str::to_string).collect(),
        false => (0..width).map(|j| format!("column{j}")).collect(),
    };
    rows.first = usize::from(header);
    if rows.len() == 0 {
        return Err(DataError::corrupt(path, "the file has a header but no data rows"));
    }
    if width < 2 {
        return Err(DataError::corrupt(path, "a table needs at least one feature column and a label column"));
    }
    if let Some((first, j, name)) = repeated(&names) {
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
    // A guessed first line that is data and holds a name: say how to read it as the header.
    let guessed = options.header == HeaderMode::Auto && !header;
    let feature_cols: Vec<usize> = (0..width).filter(|&j| j != label).collect();
    let columns: Vec<Column> = feature_cols
        .iter()
        .map(|&j| {
            let values: Vec<&str> = kept.iter().map(|&i| rows.field(i, j)).collect();
            describe_column(&values).map_err(|k| {
                let line = first_line + kept[k];
                let hint = match guessed && line == 1 {
                    true => "; if line 1 names the columns, say so (a header is guessed only where none of its fields is a number)",
                    false => "",
                };
                DataError::corrupt(
                    path,
                    format!(
                        "line {line}, column '{}': '{}' is not a finite number in a numeric column (fix it, or mark it missing: empty, ?, NA){hint}",
                        names[j], values[k]
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
    // The records are still held while the features are encoded.
    let held = rows.text.len() as u128 + rows.ends.len() as u128 * WORD;
    let cells = (kept.len() as u128).checked_mul(dim as u128);
    crate::memory::check(
        &format!("the {} rows of {dim} features (one-hot categories counted) of {}", kept.len(), path.display()),
        cells.and_then(|c| c.checked_mul(8)).and_then(|b| b.checked_add(held)),
    )?;
    let mut features = Vec::with_capacity(kept.len() * dim);
    for &i in &kept {
        for &(c, j) in &described {
            encode(c, rows.field(i, j), &mut features);
        }
    }
    let classes = declared_classes(path, options.classes.as_deref())?;
    let labels = kept
        .iter()
        .map(|&i| {
            let value = rows.field(i, label);
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
