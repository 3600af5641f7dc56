//! Tabular data from CSV files (UCI, Kaggle and scikit-learn tables): numeric and one-hot
//! categorical features, a label column by name or index, missing values imputed or dropped and
//! reported, and a seeded train/test split. Every error names the file and the line.

mod parse;

use crate::error::{DataError, Result};
use rand::SeedableRng;
use rand::seq::SliceRandom;
use rand_chacha::ChaCha20Rng;
use serde::Serialize;
use std::collections::BTreeMap;

pub use parse::load_csv;

/// Whether the first line of the file names the columns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeaderMode {
    /// A header is assumed when none of the first line's fields is a number and some column has a
    /// name over numbers below it.
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
    fn a_first_row_with_a_typo_is_data_and_its_bad_cell_an_error() {
        // Headerless, its first row mistyped: once taken for a header and dropped without a word.
        for first in ["0.5x,1,0", "1,2x,1", "0.5,1,zero"] {
            let csv = format!("{first}\n0.25,3,1\n0.75,4,0\n");
            match load(&csv, &of(&["0", "1"])) {
                Err(e) => {
                    let e = e.to_string();
                    assert!(e.contains("line 1") && !e.contains('\n'), "{first}: {e}");
                }
                Ok(d) => panic!("{first}: read as {} rows", d.len()),
            }
        }
        // A header of names alone is still one; declared, a first row of names is too.
        assert_eq!(load("a,b,y\n0.5,1,0\n2,3,1\n", &of(&["0", "1"])).unwrap().len(), 2);
        let named = CsvOptions { header: HeaderMode::Present, ..of(&["0", "1"]) };
        assert_eq!(load("a,2020,y\n0.5,1,0\n2,3,1\n", &named).unwrap().feature_names, ["a", "2020"]);
        let e = load("a,2020,y\n0.5,1,0\n2,3,1\n", &of(&["0", "1"])).unwrap_err().to_string();
        assert!(e.contains("line 1") && e.contains("if line 1 names the columns"), "{e}");
    }

    #[test]
    fn a_table_of_a_million_columns_is_read_in_linear_time() {
        let width = 1_000_000;
        let header: Vec<String> = (0..width).map(|j| format!("c{j}")).collect();
        let row: Vec<&str> = (0..width).map(|j| if j + 1 == width { "1" } else { "2" }).collect();
        let csv = format!("{}\n{}\n{}\n", header.join(","), row.join(","), row.join(","));
        let started = std::time::Instant::now();
        let d = load(&csv, &of(&["0", "1"])).unwrap();
        assert_eq!((d.len(), d.dim), (2, width - 1));
        // The duplicate-name check was quadratic: 10^5 columns took 79 s, 10^6 over 120.
        assert!(started.elapsed().as_secs() < 60, "{:?}", started.elapsed());
        let mut twice = header.clone();
        twice[width - 1] = "c17".into();
        let csv = format!("{}\n{}\n", twice.join(","), row.join(","));
        let e = load(&csv, &of(&["0", "1"])).unwrap_err().to_string();
        assert!(e.contains("columns 17 and 999999 are both named 'c17'"), "{e}");
    }

    #[test]
    fn one_hot_columns_too_wide_for_memory_are_refused_before_they_are_made() {
        // A unique identifier per row, read as a categorical column: rows x rows one-hot cells.
        let rows: String = (0..3000).map(|i| format!("id{i},{}\n", i % 2)).collect();
        let e = crate::memory::with_budget(32 << 20, || load(&rows, &of(&["0", "1"]))).unwrap_err().to_string();
        assert!(e.contains("one-hot") && e.contains(crate::memory::BUDGET_VARIABLE), "{e}");
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
