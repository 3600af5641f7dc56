//! End-to-end tests of `dptrain erm` on small generated tables in the UCI/scikit-learn CSV
//! layouts: the report's labels and refusals, the files it writes, and one-line errors.

use crate::common::dptrain;

use serde_json::Value;
use std::path::Path;

/// A separable-ish table: `n` rows, 3 numeric features, one categorical, labels from a rule.
fn write_table(dir: &Path, n: usize, classes: usize) -> String {
    let mut csv = String::from("f1,f2,f3,colour,label\n");
    for i in 0..n {
        let (a, b, c) = ((i * 37 % 101) as f64 / 10.0, (i * 53 % 97) as f64 / 10.0, (i * 11 % 13) as f64);
        let colour = ["red", "green", "blue"][i % 3];
        let label = if classes == 2 { usize::from(a + 0.5 * b > 7.0) } else { ((a + b) as usize / 7).min(classes - 1) };
        csv.push_str(&format!("{a},{b},{c},{colour},class{label}\n"));
    }
    let path = dir.join(format!("table{classes}.csv"));
    std::fs::write(&path, csv).unwrap();
    path.display().to_string()
}

/// `dptrain audit` of the two-class `table`, then `rest`.
fn audit_args<'a>(table: &'a str, rest: &[&'a str]) -> Vec<&'a str> {
    [&["audit", "--dataset", table, "--classes", "class0,class1"][..], rest].concat()
}

fn run_json(args: &[&str]) -> Value {
    let out = dptrain(args);
    assert!(out.status.success(), "stderr: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("one JSON object")
}

#[test]
fn every_method_reports_its_label_and_the_files_are_written() {
    let dir = tempfile::tempdir().unwrap();
    let table = write_table(dir.path(), 120, 2);
    let out = dir.path().join("out");
    let v = run_json(&[
        "erm",
        "--dataset",
        &table,
        "--classes",
        "class0,class1",
        "--epsilons",
        "0.5,4",
        "--repeats",
        "2",
        "--c1",
        "1e6",
        "--lambda",
        "0.05",
        "--seed",
        "3",
        "--out",
        out.to_str().unwrap(),
        "--write-private-data",
        "--json",
    ]);
    let rows = v["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 6 * 2 + 1);
    for row in rows {
        let expected = match row["method"].as_str().unwrap() {
            "input" | "dbdp" | "dbdp-if" => "paper-bound",
            "gradient" | "output" | "objective" => "certified",
            _ => "none",
        };
        assert_eq!(row["guarantee"], expected, "{row}");
        assert_eq!(row["runs"], 2, "{row}");
        let acc = row["accuracy_mean"].as_f64().unwrap();
        assert!((0.0..=1.0).contains(&acc));
    }
    // The certified epsilons never exceed the budget.
    for row in rows.iter().filter(|r| r["guarantee"] == "certified") {
        assert!(row["claimed_epsilon"].as_f64().unwrap() <= row["epsilon"].as_f64().unwrap() + 1e-9, "{row}");
    }
    assert_eq!(v["features"], 3 + 3 + 1, "3 numeric + 3 one-hot + intercept");
    for file in ["table.csv", "report.json", "accuracy.svg", "gap.svg"] {
        assert!(out.join(file).metadata().unwrap().len() > 100, "{file}");
    }
    let csv = std::fs::read_to_string(out.join("table.csv")).unwrap();
    assert_eq!(csv.lines().count(), 14);
    // D_priv of input, dbdp and dbdp-if: 2 epsilons x 2 runs each, readable as a table again.
    let private: Vec<_> = std::fs::read_dir(out.join("private-data")).unwrap().collect();
    assert_eq!(private.len(), 3 * 2 * 2);
    let again = dptrain(&[
        "erm",
        "--dataset",
        out.join("private-data/input-eps4-run0.csv").to_str().unwrap(),
        "--classes",
        "class0,class1",
        "--methods",
        "non-private",
        "--repeats",
        "1",
        "--out",
        dir.path().join("again").to_str().unwrap(),
    ]);
    assert!(again.status.success(), "{}", String::from_utf8_lossy(&again.stderr));
    // Before the runs, what each method will take.
    let said = String::from_utf8_lossy(&again.stderr);
    assert!(said.contains("estimated time (one pass over the") && said.contains("non-private"), "{said}");
}

#[test]
fn seeded_runs_reproduce() {
    let dir = tempfile::tempdir().unwrap();
    let table = write_table(dir.path(), 80, 2);
    let args = |out: &str| {
        vec![
            "erm",
            "--dataset",
            &table,
            "--classes",
            "class0,class1",
            "--methods",
            "input,gradient,output",
            "--epsilons",
            "1",
            "--repeats",
            "1",
            "--seed",
            "9",
            "--json",
            "--out",
            out,
        ]
        .into_iter()
        .map(String::from)
        .collect::<Vec<_>>()
    };
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    let va = run_json(&args(a.to_str().unwrap()).iter().map(String::as_str).collect::<Vec<_>>());
    let vb = run_json(&args(b.to_str().unwrap()).iter().map(String::as_str).collect::<Vec<_>>());
    for (ra, rb) in va["rows"].as_array().unwrap().iter().zip(vb["rows"].as_array().unwrap()) {
        assert_eq!(ra["gap_mean"], rb["gap_mean"]);
    }
}

/// The seeded report of input, dbdp and gradient on `device` (None where wgpu has no adapter and
/// DPTRAIN_REQUIRE_WGPU is unset).
fn device_report(table: &str, model: &str, device: &str, out: &Path) -> Option<Value> {
    let classes = if model == "mlp" { "class0,class1,class2" } else { "class0,class1" };
    let args = ["erm", "--dataset", table, "--classes", classes, "--model", model, "--methods", "input,dbdp,gradient"];
    let args = [&args[..], &["--epsilons"]].concat();
    let rest = ["0.5,4", "--repeats", "2", "--c", "0.05", "--seed", "5", "--json", "--device", device, "--out"];
    let mut all: Vec<&str> = args.iter().chain(&rest).copied().collect();
    all.push(out.to_str().unwrap());
    let output = dptrain(&all);
    if !output.status.success() && device == "wgpu" && std::env::var_os("DPTRAIN_REQUIRE_WGPU").is_none() {
        eprintln!("skipped wgpu: {}", String::from_utf8_lossy(&output.stderr));
        return None;
    }
    assert!(output.status.success(), "{device}: {}", String::from_utf8_lossy(&output.stderr));
    Some(serde_json::from_slice(&output.stdout).expect("one JSON object"))
}

#[test]
fn device_runs_match_the_host_reference() {
    // Same seed, same noise and lots: the f32 device loops must land where the f64 host loops do.
    let dir = tempfile::tempdir().unwrap();
    for (model, classes) in [("logreg", 2), ("mlp", 3)] {
        let table = write_table(dir.path(), 90, classes);
        let host = device_report(&table, model, "host", &dir.path().join("host")).unwrap();
        assert_eq!(host["device"], "host (f64)");
        for device in ["cpu", "wgpu"] {
            let Some(v) = device_report(&table, model, device, &dir.path().join(device)) else { continue };
            assert!(v["device"].as_str().unwrap().starts_with(device), "{}", v["device"]);
            for (d, h) in v["rows"].as_array().unwrap().iter().zip(host["rows"].as_array().unwrap()) {
                let (gd, gh) = (d["gap_mean"].as_f64().unwrap(), h["gap_mean"].as_f64().unwrap());
                // The MLP trained on heavily perturbed rows (eps 0.5: sigma ~ 3 per feature) at rate
                // 0.5 is chaotic: rounding differences grow to percents over 100 steps, so it is
                // compared at eps 4 only; each step's sum is checked in crates/dp-erm/tests/device_rows.rs.
                if model == "logreg" || d["epsilon"] == 4.0 {
                    assert!((gd - gh).abs() <= 1e-5 * gh.abs(), "{model} {device} {h}: gap {gd} vs {gh}");
                }
            }
        }
    }
}

#[test]
fn refusals_name_the_violated_condition() {
    let dir = tempfile::tempdir().unwrap();
    let three = write_table(dir.path(), 90, 3);
    let one_cell = |extra: &[&str], out: &str| {
        let mut args = vec!["erm", "--dataset", &three, "--classes", "class0,class1,class2", "--epsilons", "1"];
        args.extend(["--repeats", "1", "--json", "--out", out]);
        args.extend(extra);
        run_json(&args)
    };
    let (o, m) = (dir.path().join("o"), dir.path().join("m"));
    let v = one_cell(&["--methods", "objective,dbdp-if,output"], o.to_str().unwrap());
    let rows = v["rows"].as_array().unwrap();
    assert!(rows[0]["refused"].as_str().unwrap().contains("rank one"), "{}", rows[0]);
    assert!(rows[1]["refused"].as_str().unwrap().contains("c1 T / n^2"), "{}", rows[1]);
    assert_eq!(rows[2]["guarantee"], "certified", "softmax regression is strongly convex: output perturbation applies");
    let mlp = one_cell(&["--model", "mlp", "--methods", "output"], m.to_str().unwrap());
    assert!(mlp["rows"][0]["refused"].as_str().unwrap().contains("not convex"));
}

#[test]
fn bad_input_gives_one_line_errors() {
    let dir = tempfile::tempdir().unwrap();
    let good = write_table(dir.path(), 40, 2);
    let bad_rows = dir.path().join("bad.csv");
    std::fs::write(&bad_rows, "a,b,label\n1,2,x\n3,y\n").unwrap();
    let empty = dir.path().join("empty.csv");
    std::fs::write(&empty, "").unwrap();
    let missing = dir.path().join("missing.csv");
    let twice = dir.path().join("twice.csv");
    std::fs::write(&twice, "a,label,label\n1,0,1\n2,1,0\n3,0,1\n4,1,0\n").unwrap();
    // A row whose label is no declared class (a table one row away from another's).
    let zebra = dir.path().join("zebra.csv");
    std::fs::write(&zebra, "a,b,label\n1,2,class0\n3,4,class1\n5,6,zebra\n").unwrap();
    let out = dir.path().join("out");
    let out = out.to_str().unwrap();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["--dataset", bad_rows.to_str().unwrap()], "line 3 has 2 fields"),
        (vec!["--dataset", empty.to_str().unwrap()], "empty"),
        (vec!["--dataset", &good, "--label", "income"], "label column 'income' does not exist"),
        (vec!["--dataset", &good, "--label", "9"], "label column 9 does not exist"),
        (vec!["--dataset", &good, "--epsilons", "1,0"], "invalid epsilon '0'"),
        (vec!["--dataset", &good, "--epsilons", "-1"], "invalid epsilon '-1'"),
        (vec!["--dataset", &good, "--delta", "1.5"], "delta"),
        (vec!["--dataset", &good, "--methods", "laplace"], "'laplace' is not one of"),
        (vec!["--dataset", missing.to_str().unwrap()], "cannot read"),
        (vec!["--dataset", twice.to_str().unwrap(), "--label", "label"], "both named 'label'"),
        (vec!["--dataset", zebra.to_str().unwrap()], "line 4: label 'zebra' is not a declared class (class0, class1)"),
    ];
    for (extra, expected) in cases {
        let mut args = vec!["erm", "--out", out, "--classes", "class0,class1"];
        args.extend(&extra);
        let o = dptrain(&args);
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{extra:?} succeeded");
        assert!(stderr.contains(expected), "{extra:?}: {stderr}");
        assert_eq!(stderr.trim_end().lines().count(), 1, "{extra:?}: {stderr}");
    }
    // An absurd audit is refused from arithmetic, before its canaries are allocated.
    let o = dptrain(&audit_args(&good, &["--mechanism", "output", "--canaries", "100000000"]));
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && stderr.contains("canaries"), "{stderr}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    // Undeclared classes: refused by the parser, before the table is read.
    let o = dptrain(&["erm", "--dataset", &good, "--out", out]);
    assert!(!o.status.success() && String::from_utf8_lossy(&o.stderr).contains("--classes"));
}

#[test]
fn audits_bound_dp_sgd_below_its_certificate_and_non_private_training_far_above() {
    let dir = tempfile::tempdir().unwrap();
    let table = write_table(dir.path(), 100, 2);
    let audit = |mechanism: &str, canary: &str| -> Value {
        let args = audit_args(&table, &["--mechanism", mechanism, "--canary", canary, "--epsilons", "2"]);
        let rest = ["--canaries", "2000", "--sample-rate", "1", "--repeats", "3", "--seed", "4", "--json"];
        run_json(&args.iter().chain(&rest).copied().collect::<Vec<_>>())
    };
    let dp = audit("gradient", "white-box");
    let r = &dp[0];
    assert_eq!(r["guarantee"], "certified");
    for run in r["runs"].as_array().unwrap() {
        let lb = run["epsilon"].as_f64().unwrap();
        assert!(lb > 0.3 && lb <= 2.0, "{run}");
    }
    let open = audit("non-private", "white-box");
    assert!(open[0]["max_lower_bound"].as_f64().unwrap() > 4.0, "{open}");
    // Black-box canaries run any method and report its label beside the bound; without noise
    // the out-of-distribution canaries give every guess right.
    let black = audit("input", "black-box");
    assert_eq!(black[0]["guarantee"], "paper-bound");
    assert_eq!(black[0]["runs"].as_array().unwrap().len(), 3);
    let open = audit("non-private", "black-box");
    for run in open[0]["runs"].as_array().unwrap() {
        assert_eq!(run["correct"], run["guesses"], "{run}");
        assert!(run["epsilon"].as_f64().unwrap() > 4.0, "{run}");
    }
    // White-box canaries exist only inside DP-SGD.
    let out = dptrain(&audit_args(&table, &["--mechanism", "input", "--canary", "white-box"]));
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("white-box"));
}

#[test]
fn many_run_audits_refute_dbdp_if_at_epsilon_7_and_respect_certificates() {
    let dir = tempfile::tempdir().unwrap();
    let table = write_table(dir.path(), 100, 2);
    let audit = |mechanism: &str, epsilons: &str, runs: &str, extra: &[&str]| -> Value {
        let args = audit_args(&table, &["--mechanism", mechanism, "--epsilons", epsilons, "--many-runs", runs]);
        let rest = ["--c1", "1e5", "--seed", "5", "--json"];
        run_json(&args.iter().chain(&rest).chain(extra).copied().collect::<Vec<_>>())
    };
    // dbdp-if at a claimed epsilon 7 adds no noise (line 9 never fires): 2 x 20,000 trainings
    // separate the worlds well enough to refute 7 at 95% confidence.
    let v = audit("dbdp-if", "7", "20000", &[]);
    let b = &v[0]["many_runs"];
    assert_eq!(b["counted"], 10000);
    assert!(v[0]["max_lower_bound"].as_f64().unwrap() > 7.0, "{v}");
    // Certified methods stay below their claims: output perturbation (black-box) at 1 and 7,
    // DP-SGD with one white-box gradient canary at 2.
    for r in audit("output", "1,7", "300", &[]).as_array().unwrap() {
        assert!(r["max_lower_bound"].as_f64().unwrap() <= r["claimed_epsilon"].as_f64().unwrap(), "{r}");
    }
    // 2 x 10,000 runs: the canary's mean shift is about half the noise's standard deviation, so
    // 2 x 1,000 runs gave lower bounds from 0 to 0.3 depending on the seed; at 10,000 they were
    // 0.25 to 0.87 on four seeds (measured when dp-erm moved onto the engine's streams).
    let dp = audit("gradient", "2", "10000", &["--sample-rate", "1"]);
    let lb = dp[0]["max_lower_bound"].as_f64().unwrap();
    assert!(lb > 0.2 && lb <= 2.0, "{dp}");
    // Non-private training: the least-variance canary is told apart in every counted run.
    let open = audit("non-private", "1", "300", &["--canary", "black-box"]);
    let b = &open[0]["many_runs"];
    assert_eq!((b["false_positives"].as_u64(), b["false_negatives"].as_u64()), (Some(0), Some(0)), "{open}");
    assert!(open[0]["max_lower_bound"].as_f64().unwrap() > 3.5, "{open}");
}
