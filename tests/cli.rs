//! End-to-end tests of the `dptrain` binary: JSON contracts, labels, and one-line errors.

use crate::common;

use crate::common::dptrain;
use crate::common::{base_args, binary, dptrain_with, one_line_error, temp_with_dataset};

use serde_json::Value;
use std::process::Output;

fn json_of(out: &Output) -> Value {
    assert!(out.status.success(), "stderr: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("stdout is one JSON object")
}

const MNIST: [&str; 8] = ["--dataset-size", "60000", "--batch-size", "256", "--steps", "14062", "--delta", "1e-5"];

#[test]
fn account_json_has_the_contract_keys() {
    let mut args = vec!["account", "--noise-multiplier", "1.1", "--json", "--rdp-orders", "standard"];
    args.extend(MNIST);
    let v = json_of(&dptrain(&args));
    assert!((v["epsilon"].as_f64().unwrap() - 2.5966).abs() < 5e-5, "{v}");
    assert_eq!(v["delta"], 1e-5);
    assert_eq!(v["accountant"], "rdp");
    assert_eq!(v["guarantee"], "certified");
    assert_eq!(v["optimal_order"], 8.1);
    assert_eq!(v["steps"], 14062);
}

#[test]
fn account_prv_reports_its_bounds() {
    let mut args = vec!["account", "-z", "1.1", "--accountant", "prv", "--json"];
    args.extend(MNIST);
    let v = json_of(&dptrain(&args));
    let eps = v["epsilon"].as_f64().unwrap();
    assert!((2.3816..2.3816 * 1.01).contains(&eps), "{v}");
    assert_eq!(v["guarantee"], "certified");
    assert!(v["epsilon_lower"].as_f64().unwrap() < eps);
    assert!(v["eps_error"].as_f64().unwrap() > 0.0);
}

#[test]
fn human_output_labels_every_epsilon() {
    let mut args = vec!["account", "-z", "1.1"];
    args.extend(MNIST);
    let out = dptrain(&args);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.starts_with("epsilon 2.5966 (delta 1e-5, rdp, certified)"), "{text}");
}

#[test]
fn bandmf_prints_a_strategy_of_column_norm_one_beside_dp_sgd() {
    let v = json_of(&dptrain(&["bandmf", "--steps", "2000", "--bands", "16", "--json"]));
    let c: Vec<f64> = v["coefficients"].as_array().unwrap().iter().map(|c| c.as_f64().unwrap()).collect();
    assert_eq!((c.len(), v["steps"].as_u64(), v["bands"].as_u64()), (16, Some(2000), Some(16)), "{v}");
    assert!((c.iter().map(|x| x * x).sum::<f64>() - 1.0).abs() < 1e-12, "{v}");
    assert!((v["sensitivity"].as_f64().unwrap() - 1.0).abs() < 1e-12, "{v}");
    assert_eq!(v["dp_sgd_prefix_sum_error"].as_f64(), Some(1000.5), "{v}");
    let error = v["prefix_sum_error"].as_f64().unwrap();
    assert!(error > 0.0 && error < 1000.5 / 10.0, "16 bands cut DP-SGD's error tenfold or more: {v}");
    let one = json_of(&dptrain(&["bandmf", "--steps", "2000", "--bands", "1", "--json"]));
    assert_eq!(one["prefix_sum_error"].as_f64(), Some(1000.5), "one band is DP-SGD: {one}");
    let text = String::from_utf8(dptrain(&["bandmf", "--steps", "100", "--bands", "4"]).stdout).unwrap();
    assert!(text.starts_with("4 bands over 100 steps\nmean squared prefix-sum error per unit noise = "), "{text}");
}

#[test]
fn account_with_bands_is_bandmf_with_cyclic_poisson_sampling_and_one_band_dp_sgd() {
    let run =
        ["account", "-z", "1", "--dataset-size", "60000", "--batch-size", "256", "-t", "2000", "-d", "1e-5", "--json"];
    let plain = json_of(&dptrain(&run));
    let one = json_of(&dptrain(&[&run[..], &["--bands", "1"]].concat()));
    assert_eq!(plain["epsilon"], one["epsilon"], "{one}");
    let four = json_of(&dptrain(&[&run[..], &["--bands", "4"]].concat()));
    // jax-privacy 2.0.0 (crates/dp-accounting/tests/data/bandmf_accounting.json): PLD 2.3409, RDP 2.6816.
    let eps = four["epsilon"].as_f64().unwrap();
    assert!((2.3409..=2.6817).contains(&eps), "{four}");
    assert_eq!((four["guarantee"].as_str(), four["bands"].as_u64()), (Some("certified"), Some(4)), "{four}");
    assert_eq!(four["sample_rate"].as_f64(), Some(256.0 / 15000.0), "{four}");
    let text = String::from_utf8(
        dptrain(&run[..run.len() - 1].iter().chain(&["--bands", "7"]).copied().collect::<Vec<_>>()).stdout,
    )
    .unwrap();
    for bands in ["0", "1000", "-2", "x"] {
        let out = dptrain(&[&run[..], &["--bands", bands]].concat());
        one_line_error(&out, "");
        assert!(out.stdout.is_empty(), "--bands {bands}");
    }
    assert!(text.starts_with("BandMF, 7 bands: 7 groups of 8571 (3 left out), rate 0.029868 within a group, an example in 286 of 2000 steps\nepsilon "), "{text}");
}

#[test]
fn calibrate_json_has_the_contract_keys() {
    let args = [
        "calibrate",
        "--target-epsilon",
        "3",
        "--dataset-size",
        "60000",
        "--batch-size",
        "256",
        "--epochs",
        "60",
        "--delta",
        "1e-5",
        "--json",
    ];
    let v = json_of(&dptrain(&args));
    let z = v["noise_multiplier"].as_f64().unwrap();
    assert!((1.0..1.03).contains(&z), "{v}");
    assert!(v["epsilon"].as_f64().unwrap() <= 3.0);
    assert_eq!(v["accountant"], "rdp");
    assert_eq!(v["guarantee"], "certified");
    assert_eq!(v["steps"], 14063);
}

#[test]
fn analytic_accountant_for_full_batch() {
    let v = json_of(&dptrain(&[
        "account",
        "-z",
        "5",
        "-q",
        "1",
        "-t",
        "100",
        "-d",
        "1e-5",
        "--accountant",
        "analytic",
        "--json",
    ]));
    assert!((v["epsilon"].as_f64().unwrap() - 9.9973).abs() < 1e-3, "{v}");
    assert_eq!(v["effective_noise_multiplier"], 0.5);
}

#[test]
fn bad_input_gives_one_line_and_nonzero_exit() {
    let cases: &[&[&str]] = &[
        &["account", "-z", "1", "-q", "0", "-t", "10", "-d", "1e-5"],
        &["account", "-z", "1", "-q", "1.5", "-t", "10", "-d", "1e-5"],
        &["account", "-z", "1", "-q", "0.1", "-t", "10", "-d", "0"],
        &["account", "-z", "1", "-q", "0.1", "-t", "10", "-d", "1"],
        &["account", "-z", "0", "-q", "0.1", "-t", "10", "-d", "1e-5"],
        &["account", "-z", "-1", "-q", "0.1", "-t", "10", "-d", "1e-5"],
        &["account", "-z", "NaN", "-q", "0.1", "-t", "10", "-d", "1e-5"],
        &["account", "-z", "1", "-q", "NaN", "-t", "10", "-d", "1e-5"],
        &["account", "-z", "1", "-q", "0.1", "-t", "0", "-d", "1e-5"],
        &["account", "-z", "1", "-q", "0.1", "-t", "10"],
        &["account", "-z", "1", "-q", "0.1", "-t", "abc", "-d", "1e-5"],
        &["account", "-z", "1", "-q", "0.1", "--epochs", "-3", "-d", "1e-5"],
        &["account", "-z", "1", "--dataset-size", "10", "--batch-size", "20", "-t", "5", "-d", "1e-5"],
        &["account", "-z", "1", "-q", "0.5", "-t", "5", "-d", "1e-5", "--accountant", "analytic"],
        &["account", "--bogus-flag"],
        &["calibrate", "-e", "1e-9", "-q", "1", "-t", "1000000", "-d", "1e-5"],
        &["calibrate", "-e", "0", "-q", "0.1", "-t", "10", "-d", "1e-5"],
        &["calibrate", "-e", "inf", "-q", "0.1", "-t", "10", "-d", "1e-5"],
        &["account", "-z", "1", "-q", "0.1", "-t", "10", "-d", "1e-5", "--bands", "4"],
        &["bandmf", "--steps", "10", "--bands", "0"],
        &["bandmf", "--steps", "10", "--bands", "11"],
        &["bandmf", "--steps", "0", "--bands", "1"],
        &["bandmf", "--steps", "100000000000", "--bands", "4"],
        &["bandmf", "--steps", "1000", "--bands", "100000"],
        &["bandmf", "--steps", "-5", "--bands", "4"],
        &["bandmf", "--steps", "ten", "--bands", "4"],
        &["bandmf", "--bands", "4"],
    ];
    for args in cases {
        let out = dptrain(args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} succeeded");
        assert_eq!(stderr.trim_end().lines().count(), 1, "{args:?}: {stderr}");
        assert!(stderr.starts_with("error"), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        assert!(out.stdout.is_empty(), "{args:?} printed to stdout");
    }
}

#[test]
fn help_explains_the_flags() {
    let out = dptrain(&["account", "--help"]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    for flag in
        ["--noise-multiplier", "--sample-rate", "--epochs", "--dataset-size", "--delta", "--accountant", "--json"]
    {
        assert!(text.contains(flag), "help lacks {flag}");
    }
}

/// `dptrain selftest` reports every check with its measured deviation and tolerance, all passed
/// on the CPU; a device that cannot be opened is one line, not a report.
#[test]
fn selftest_reports_each_check_with_its_tolerance() {
    let report = json_of(&dptrain(&["selftest", "--device", "cpu", "--json"]));
    assert_eq!(report["failed"], 0, "{report}");
    let checks = report["checks"].as_array().expect("checks");
    assert!(checks.len() >= 15, "{report}");
    for row in checks {
        let check = &row["check"];
        assert_eq!(row["passed"], true, "{row}");
        let (measured, tolerance) =
            (check["measured"].as_f64().expect("measured"), check["tolerance"].as_f64().expect("tol"));
        assert!(measured <= tolerance, "{row}");
    }
    let names: Vec<&str> = checks.iter().filter_map(|c| c["check"]["name"].as_str()).collect();
    for suite in ["noise:", "smoothing:", "solver:", "im2col:", "dp-step:"] {
        assert!(names.iter().any(|n| n.starts_with(suite)), "no {suite} check in {names:?}");
    }
    // Without the feature, or without an NVIDIA driver (an NVIDIA machine runs the checks).
    let out = dptrain(&["selftest", "--device", "cuda"]);
    if !(common::built_with_cuda() && out.status.success()) {
        common::one_line_error(&out, "CUDA");
    }
}

/// `dptrain args` with its standard output on /dev/full (a full disk).
fn onto_full_disk(args: &[&str]) -> Output {
    let full = std::fs::OpenOptions::new().write(true).open("/dev/full").unwrap();
    std::process::Command::new(binary()).args(args).stdout(full).output().expect("dptrain runs")
}

#[test]
fn every_command_whose_output_cannot_be_written_fails_in_one_line() {
    let (tmp, data) = temp_with_dataset(200);
    let d = data.to_str().unwrap();
    let run = tmp.path().join("run");
    let r = run.to_str().unwrap();
    let table = tmp.path().join("t.csv");
    std::fs::write(&table, (0..60).map(|i| format!("{},{}\n", i % 7, i % 2)).collect::<String>()).unwrap();
    let t = table.to_str().unwrap();
    let (export, plot) = (tmp.path().join("e.safetensors"), tmp.path().join("p.svg"));
    let erm = tmp.path().join("erm");
    let train = [&base_args(d, r)[..], &["--noise-multiplier", "1"]].concat();
    let commands: Vec<Vec<&str>> = vec![
        vec!["--version"],
        vec!["--help"],
        vec!["train", "--help"],
        [&["account", "-z", "1.1"][..], &MNIST].concat(),
        [&["calibrate", "--target-epsilon", "3"][..], &MNIST].concat(),
        vec!["selftest", "--device", "cpu"],
        vec!["bandmf", "--steps", "100", "--bands", "4"],
        train,
        vec!["export", r, "--out", export.to_str().unwrap()],
        vec!["plot", "--out", plot.to_str().unwrap(), r],
        vec![
            "erm",
            "--dataset",
            t,
            "--label",
            "column1",
            "--classes",
            "0,1",
            "--methods",
            "non-private",
            "--epsilons",
            "1",
            "--out",
            erm.to_str().unwrap(),
        ],
    ];
    for args in commands {
        let out = onto_full_disk(&args);
        assert!(!out.status.success() && out.status.code() != Some(101), "{args:?}: {:?}", out.status);
        let stderr = String::from_utf8_lossy(&out.stderr);
        let last = stderr.trim().lines().last().unwrap_or_default();
        assert!(last.contains("standard output could not be written"), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    }
    // The completed run's files are kept.
    assert!(run.join("model.safetensors").exists() && run.join("report.json").exists());
}

#[test]
fn a_burn_device_this_build_has_not_is_one_line_at_resume() {
    let (tmp, data) = temp_with_dataset(200);
    let out = tmp.path().join("run");
    let o = out.to_str().unwrap();
    let stop = dptrain(
        &[&base_args(data.to_str().unwrap(), o)[..], &["--noise-multiplier", "1", "--stop-after", "2"]].concat(),
    );
    assert!(stop.status.success(), "{}", String::from_utf8_lossy(&stop.stderr));
    for value in ["junk", "", "metal", "tch"] {
        let resume = dptrain_with(
            &["train", "--resume", "--device", "cpu", "--out-dir", o],
            &[("BURN_DEVICE", Some(value.as_ref()))],
        );
        one_line_error(&resume, "BURN_DEVICE");
        assert!(String::from_utf8_lossy(&resume.stderr).contains("flex"), "names what it may be");
    }
    let resume = dptrain(&["train", "--resume", "--device", "cpu", "--out-dir", o]);
    assert!(resume.status.success(), "the run itself is intact: {}", String::from_utf8_lossy(&resume.stderr));
}
