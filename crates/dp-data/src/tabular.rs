//! Tabular data from CSV files (UCI, Kaggle and scikit-learn tables): numeric and one-hot
//! categorical features, a label column by name or index, missing values imputed or dropped and
//! reported, and a seeded train/test split. Every error names the file and the line.

use crate::error::{DataError, Result};
use crate::safe_files::open_regular;
use rand::SeedableRng;
use rand::seq::SliceRandom;
use rand_chacha::ChaCha20Rng;
use serde::Serialize;
use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;

/// Whether the first line of the file names the columns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeaderMode {
    /// A header is assumed when some column has a non-numeric first field and numbers below it.
    Auto,
    /// The first line is a header.
    Present,
    /// Every line is data.
    Absent,
}

/// Which column holds the label.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LabelColumn {
    /// The last column.
    Last,
    /// A 0-based column index.
    Index(usize),
    /// A column named in the header.
    Name(String),
}

/// What to do with a row that has missing feature values ("", "?", "NA", "NaN", "null").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MissingValues {
    /// Replace by the column mean (numeric) or its most frequent value (categorical).
    Impute,
    /// Drop the row.
    Drop,
}

/// How to read a CSV file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CsvOptions {
    /// Header detection.
    pub header: HeaderMode,
    /// The label column.
    pub label: LabelColumn,
    /// Missing feature values.
    pub missing: MissingValues,
    /// The classes, in label order: declared by the user (public input), never read from the
    /// rows (a class seen in one row would tell of that row). A row whose label is not one of
    /// them is refused. None: refused, asking for them.
    pub classes: Option<Vec<String>>,
}

impl Default for CsvOptions {
    fn default() -> Self {
        Self { header: HeaderMode::Auto, label: LabelColumn::Last, missing: MissingValues::Impute, classes: None }
    }
}

/// What was missing in the file and what was done about it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct MissingReport {
    /// Missing feature cells that were imputed.
    pub imputed_cells: usize,
    /// Rows dropped (a missing label, or any missing value under [`MissingValues::Drop`]).
    pub dropped_rows: usize,
    /// Missing cells per original column name, for the columns that had any.
    pub by_column: BTreeMap<String, usize>,
}

/// A labelled table: row-major f64 features and class indices.
#[derive(Debug, Clone, PartialEq)]
pub struct TabularData {
    /// Row-major features, `len() * dim` values.
    pub features: Vec<f64>,
    /// Features per row (after one-hot encoding).
    pub dim: usize,
    /// Class index of each row, into `classes`.
    pub labels: Vec<usize>,
    /// Class names in index order (numeric labels sorted by value, others by name).
    pub classes: Vec<String>,
    /// Feature names (`column=value` for one-hot columns).
    pub feature_names: Vec<String>,
    /// The columns read as categorical (one-hot encoded over the categories the file holds).
    pub categorical: Vec<String>,
    /// Missing-value handling.
    pub missing: MissingReport,
}

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
            "declare the table's classes in label order (--classes NAME,NAME,...): they are public input, never read from the private rows",
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

impl TabularData {
    /// Number of rows.
    pub fn len(&self) -> usize {
        self.labels.len()
    }

    /// True when there are no rows.
    pub fn is_empty(&self) -> bool {
        self.labels.is_empty()
    }

    /// The features of row `i`.
    pub fn row(&self, i: usize) -> &[f64] {
        &self.features[i * self.dim..(i + 1) * self.dim]
    }

    /// The rows at `indices`, in that order.
    pub fn select(&self, indices: &[usize]) -> TabularData {
        TabularData {
            features: indices.iter().flat_map(|&i| self.row(i).iter().copied()).collect(),
            labels: indices.iter().map(|&i| self.labels[i]).collect(),
            missing: MissingReport::default(),
            ..self.clone_metadata()
        }
    }

    fn clone_metadata(&self) -> TabularData {
        TabularData {
            features: Vec::new(),
            dim: self.dim,
            labels: Vec::new(),
            classes: self.classes.clone(),
            feature_names: self.feature_names.clone(),
            categorical: self.categorical.clone(),
            missing: self.missing.clone(),
        }
    }

    /// The table as CSV with a header (feature names, then `label`) and class names as
    /// labels, so that [`load_csv`] reads it back.
    pub fn to_csv(&self) -> std::result::Result<Vec<u8>, csv::Error> {
        let mut w = csv::Writer::from_writer(Vec::new());
        w.write_record(self.feature_names.iter().map(String::as_str).chain(["label"]))?;
        for i in 0..self.len() {
            let mut record: Vec<String> = self.row(i).iter().map(|v| format!("{v:e}")).collect();
            record.push(self.classes[self.labels[i]].clone());
            w.write_record(&record)?;
        }
        w.into_inner().map_err(|e| csv::Error::from(e.into_error()))
    }

    /// A random (train, test) split with `test_fraction` of the rows held out, shuffled by `seed`.
    pub fn split(&self, test_fraction: f64, seed: u64) -> Result<(TabularData, TabularData)> {
        if !(test_fraction > 0.0 && test_fraction < 1.0) {
            return Err(DataError::InvalidParameter {
                name: "test fraction",
                reason: format!("{test_fraction} must lie strictly between 0 and 1"),
            });
        }
        let test = ((self.len() as f64) * test_fraction).round() as usize;
        if test == 0 || test >= self.len() - 1 {
            return Err(DataError::InvalidParameter {
                name: "test fraction",
                reason: format!("{test_fraction} of {} rows leaves an empty or single-row side", self.len()),
            });
        }
        let mut order: Vec<usize> = (0..self.len()).collect();
        order.shuffle(&mut ChaCha20Rng::seed_from_u64(seed));
        Ok((self.select(&order[test..]), self.select(&order[..test])))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn file(content: &str) -> tempfile::NamedTempFile {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        f.write_all(content.as_bytes()).unwrap();
        f
    }

    fn load(content: &str, options: &CsvOptions) -> Result<TabularData> {
        load_csv(file(content).path(), options)
    }

    /// Options declaring `classes`.
    fn of(classes: &[&str]) -> CsvOptions {
        CsvOptions { classes: Some(classes.iter().map(|c| c.to_string()).collect()), ..CsvOptions::default() }
    }

    #[test]
    fn header_categorical_and_missing() {
        let csv =
            "age,work,score,income\n39,State-gov,1.5,<=50K\n50,?,2.5,>50K\n38,Private,,<=50K\n41,Private,3.0,>50K\n";
        let opts = CsvOptions { label: LabelColumn::Name("income".into()), ..of(&["<=50K", ">50K"]) };
        let d = load(csv, &opts).unwrap();
        assert_eq!(d.feature_names, ["age", "work=Private", "work=State-gov", "score"]);
        assert_eq!(d.classes, ["<=50K", ">50K"]);
        assert_eq!(d.labels, [0, 1, 0, 1]);
        // work is imputed with its mode, score with its mean 7/3.
        assert_eq!(d.row(1), [50.0, 1.0, 0.0, 2.5]);
        assert_eq!(d.row(2), [38.0, 1.0, 0.0, 7.0 / 3.0]);
        assert_eq!(d.missing.imputed_cells, 2);
        assert_eq!(d.missing.by_column["work"], 1);
        let dropped = load(csv, &CsvOptions { missing: MissingValues::Drop, ..opts }).unwrap();
        assert_eq!(dropped.len(), 2);
        assert_eq!(dropped.missing.dropped_rows, 2);
    }

    #[test]
    fn labels_take_the_declared_classes_order_and_nothing_else() {
        let d = load("0.1,0.2,10\n0.3,0.4,2\n0.5,0.6,10\n", &of(&["2", "10"])).unwrap();
        assert_eq!(d.dim, 2);
        assert_eq!(d.classes, ["2", "10"]);
        assert_eq!(d.labels, [1, 0, 1]);
        // A class no row has is still a class: the schema, not the rows, says what they are.
        let unseen = load("0.1,0.2,10\n0.3,0.4,2\n", &of(&["2", "10", "zebra"])).unwrap();
        assert_eq!((unseen.classes.len(), unseen.labels), (3, vec![1, 0]));
        let by_index = load("1,a\n2,b\n", &CsvOptions { label: LabelColumn::Index(1), ..of(&["b", "a"]) }).unwrap();
        assert_eq!(by_index.labels, [1, 0]);
        // A row labelled otherwise (one more class, or `1.0` beside `1`) is refused, naming it.
        let zebra = load("1,a\n2,b\n3,zebra\n", &of(&["a", "b"])).unwrap_err().to_string();
        assert!(zebra.contains("line 3: label 'zebra' is not a declared class (a, b)"), "{zebra}");
        let float = load("1,1\n2,0\n3,1.0\n", &of(&["0", "1"])).unwrap_err().to_string();
        assert!(float.contains("label '1.0' is not a declared class"), "{float}");
        // Undeclared, one class, a class twice: refused.
        let undeclared = load("1,a\n2,b\n", &CsvOptions::default()).unwrap_err().to_string();
        assert!(undeclared.contains("declare the table's classes"), "{undeclared}");
        assert!(load("1,a\n2,a\n", &of(&["a"])).unwrap_err().to_string().contains("at least two"));
        assert!(load("1,a\n2,b\n", &of(&["a", "b", "a"])).unwrap_err().to_string().contains("given twice"));
    }

    #[test]
    fn one_line_errors() {
        let binary = of(&["0", "1"]);
        let bad_row = load("a,b,y\n1,2,0\n1,2\n", &binary).unwrap_err().to_string();
        assert!(bad_row.contains("line 3 has 2 fields"), "{bad_row}");
        assert!(load("", &binary).unwrap_err().to_string().contains("empty"));
        assert!(load("a,b,y\n", &binary).unwrap_err().to_string().contains("no data rows"));
        let opts = CsvOptions { label: LabelColumn::Name("label".into()), ..binary.clone() };
        let no_label = load("a,b,y\n1,2,0\n", &opts).unwrap_err().to_string();
        assert!(no_label.contains("'label' does not exist"), "{no_label}");
        let idx = CsvOptions { label: LabelColumn::Index(7), ..binary.clone() };
        assert!(load("1,2,0\n", &idx).unwrap_err().to_string().contains("column 7 does not exist"));
        // Two columns named like the label: the first used to be taken silently.
        let twice = load("a,label,label\n1,0,1\n2,1,0\n", &opts).unwrap_err().to_string();
        assert!(twice.contains("columns 1 and 2 are both named 'label'"), "{twice}");
        // One bad cell among numbers is an error naming its line and column, not 40 one-hot columns.
        for cell in ["abc", "inf", "1e309"] {
            let csv = format!("a,b,y\n1,2,0\n3,{cell},1\n5,6,0\n7,8,1\n");
            let e = load(&csv, &binary).unwrap_err().to_string();
            assert!(e.contains("line 3, column 'b'") && e.contains(cell), "{e}");
        }
        // A categorical column is still one: most of its values are not numbers.
        let colours = load("c,y\nred,0\n7,1\nblue,0\n", &binary).unwrap();
        assert_eq!(colours.dim, 3);
        for e in [bad_row, no_label] {
            assert!(!e.contains('\n'));
        }
    }

    #[test]
    fn written_tables_read_back() {
        let d = load("a,b,y\n0.5,1e-3,cat\n2,3,dog\n", &of(&["cat", "dog"])).unwrap();
        let out = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(out.path(), d.to_csv().unwrap()).unwrap();
        let back =
            load_csv(out.path(), &CsvOptions { label: LabelColumn::Name("label".into()), ..of(&["cat", "dog"]) })
                .unwrap();
        assert_eq!((back.features, back.labels, back.classes), (d.features, d.labels, d.classes));
    }

    #[test]
    fn split_is_seeded_and_disjoint() {
        let rows: String = (0..20).map(|i| format!("{i},{}\n", i % 2)).collect();
        let d = load(&rows, &of(&["0", "1"])).unwrap();
        let (train, test) = d.split(0.25, 7).unwrap();
        assert_eq!((train.len(), test.len()), (15, 5));
        let (train2, _) = d.split(0.25, 7).unwrap();
        assert_eq!(train, train2);
        let mut all: Vec<f64> = train.features.iter().chain(&test.features).copied().collect();
        all.sort_by(f64::total_cmp);
        assert_eq!(all, (0..20).map(f64::from).collect::<Vec<_>>());
        assert!(d.split(1.5, 0).is_err());
    }
}
