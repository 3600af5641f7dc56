//! End-to-end tests of `dptrain train` and `dptrain bench` on a tiny MNIST-format dataset written
//! to a temporary folder: the report's contract, one-line errors, and resume after a stop, a kill
//! or Ctrl-C.

use crate::common::*;
use serde_json::Value;
use std::os::unix::fs::FileTypeExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[test]
fn train_reports_the_contract_keys_and_writes_the_run_folder() {
    let (tmp, data) = temp_with_dataset(500);
    let out = tmp.path().join("run");
    let mut args = base_args(data.to_str().unwrap(), out.to_str().unwrap());
    args.extend(["--epochs", "2", "--target-epsilon", "3", "--delta", "1e-3", "--seed", "1", "--json"]);
    let output = dptrain(&args);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let v: Value = serde_json::from_slice(&output.stdout).unwrap();
    for key in ["test_accuracy", "epsilon", "delta", "guarantee", "steps", "seconds"] {
        assert!(v.get(key).is_some(), "missing {key}: {v}");
    }
    assert_eq!(v["steps"], 20);
    assert_eq!(v["guarantee"], "certified");
    let eps = v["epsilon"].as_f64().unwrap();
    assert!(eps <= 3.0 && eps > 2.99, "calibrated run spends its budget: {eps}");
    for file in ["config.toml", "metrics.jsonl", "checkpoint.bin", "report.json"] {
        assert!(out.join(file).is_file(), "{file} missing");
    }
    // The config records the settings and the calibrated noise multiplier they resolve to.
    let config = std::fs::read_to_string(out.join("config.toml")).unwrap();
    let z = v["noise_multiplier"].as_f64().unwrap();
    assert!(config.contains("target_epsilon = 3") && config.contains(&format!("resolves to {z}")), "{config}");
    // Another fresh run into the folder is refused, saying the run there is complete (not that
    // it could be resumed); --overwrite replaces it.
    one_line_error(&dptrain(&args), "holds a completed run");
    one_line_error(&dptrain(&args), "--overwrite");
    args.push("--overwrite");
    assert!(dptrain(&args).status.success());
}

#[test]
fn train_refuses_bad_input_with_one_line() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    std::fs::create_dir(&data).unwrap();
    let out = tmp.path().join("run");
    let (d, o) = (data.to_str().unwrap(), out.to_str().unwrap());
    // Missing data.
    one_line_error(&dptrain(&[base_args(d, o), vec!["-z", "1"]].concat()), "train-images-idx3-ubyte");
    // Corrupt file: a truncated image file.
    tiny_dataset(&data, 100);
    let images = data.join("train-images-idx3-ubyte");
    let bytes = std::fs::read(&images).unwrap();
    std::fs::write(&images, &bytes[..bytes.len() / 2]).unwrap();
    one_line_error(&dptrain(&[base_args(d, o), vec!["-z", "1"]].concat()), "train-images-idx3-ubyte");
    tiny_dataset(&data, 100);
    // Bad flag and bad value.
    one_line_error(&dptrain(&[base_args(d, o), vec!["--no-such-flag"]].concat()), "--no-such-flag");
    one_line_error(&dptrain(&[base_args(d, o), vec!["--activation", "swish"]].concat()), "swish");
    // A negative value reaches its check (clap used to read "-1" as an unknown flag).
    one_line_error(&dptrain(&[base_args(d, o), vec!["-z", "1", "--clip-norm", "-1"]].concat()), "invalid clip norm");
    // Impossible epsilon, and no privacy parameter at all.
    one_line_error(&dptrain(&[base_args(d, o), vec!["--target-epsilon", "1e-9"]].concat()), "epsilon");
    one_line_error(&dptrain(&base_args(d, o)), "--target-epsilon");
    // A parameter average's decay outside [0, 1); a held-out part that leaves nothing to train on.
    one_line_error(&dptrain(&[base_args(d, o), vec!["-z", "1", "--ema", "1.5"]].concat()), "ema");
    one_line_error(&dptrain(&[base_args(d, o), vec!["-z", "1", "--validation", "100"]].concat()), "validation");
    // No views, or so many that a step would be thousands of forward passes per example.
    for views in ["0", "100000"] {
        one_line_error(&dptrain(&[base_args(d, o), vec!["-z", "1", "--augmult", views]].concat()), "augmult");
    }
    // Views' shape without views; padding the images cannot reflect.
    one_line_error(&dptrain(&[base_args(d, o), vec!["-z", "1", "--augment-padding", "2"]].concat()), "--augmult");
    let wide = [base_args(d, o), vec!["-z", "1", "--augmult", "2", "--augment-padding", "28"]].concat();
    one_line_error(&dptrain(&wide), "padding");
    // BatchNorm is refused with what to use instead.
    one_line_error(&dptrain(&[base_args(d, o), vec!["-z", "1", "--normalization", "batch"]].concat()), "GroupNorm");
    // A mechanism's own option in a config file is checked as its flag is.
    let toml = tmp.path().join("run.toml");
    for key in ["ls_sigma = 2.0", "sensitivity_every = 5"] {
        std::fs::write(&toml, format!("mechanism = \"gaussian\"\n{key}\n")).unwrap();
        let args = [base_args(d, o), vec!["-z", "1", "--config", toml.to_str().unwrap()]].concat();
        one_line_error(&dptrain(&args), key.split(' ').next().unwrap());
    }
    // A config file's view settings without views are refused as the flags are.
    std::fs::write(&toml, "augment_padding = 2\n").unwrap();
    one_line_error(
        &dptrain(&[base_args(d, o), vec!["-z", "1", "--config", toml.to_str().unwrap()]].concat()),
        "--augmult",
    );
    // An empty run folder would be the current directory.
    std::fs::write(&toml, "out_dir = \"\"\n").unwrap();
    let args = [
        "train",
        "--device",
        "cpu",
        "--data-dir",
        d,
        "--model",
        "logreg",
        "-z",
        "1",
        "--config",
        toml.to_str().unwrap(),
    ];
    one_line_error(&dptrain(&args), "out dir");
}

/// Waits (a minute at most) until a running run has written `file`.
fn wait_for(file: &Path) {
    let start = Instant::now();
    while !file.exists() && start.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn a_stopped_or_killed_run_resumes_with_the_same_ledger_and_model() {
    let (tmp, data) = temp_with_dataset(2000);
    let d = data.to_str().unwrap();
    // Checkpoints every step unless `extra` says otherwise.
    let run = |out: &Path, extra: &[&str]| {
        let mut args = base_args(d, out.to_str().unwrap());
        args.extend(["--epochs", "8", "-z", "1.2", "--seed", "5", "--optimizer", "adam"]);
        if !extra.contains(&"--checkpoint-every") {
            args.extend(["--checkpoint-every", "1"]);
        }
        args.extend(extra);
        let mut command = Command::new(binary());
        command.args(&args).stdout(Stdio::null()).stderr(Stdio::null());
        command
    };
    let whole = tmp.path().join("whole");
    assert!(run(&whole, &[]).status().unwrap().success());
    let reference = checkpoint(&whole);
    assert_eq!(reference["state"]["step"], 320);

    // Stopped, then resumed.
    let stopped = tmp.path().join("stopped");
    assert!(run(&stopped, &["--stop-after", "7"]).status().unwrap().success());
    assert_eq!(checkpoint(&stopped)["state"]["step"], 7);
    // A flag that would change the run is refused on resume, never silently ignored.
    let changed = [base_args(d, stopped.to_str().unwrap()), vec!["--resume", "--learning-rate", "9"]].concat();
    one_line_error(&dptrain(&changed), "--learning-rate");
    // What a kill leaves after a checkpoint: a step logged that the checkpoint does not hold.
    let metrics = stopped.join("metrics.jsonl");
    let mut log = std::fs::read_to_string(&metrics).unwrap();
    log.push_str("{\"event\":\"step\",\"step\":8,\"loss\":12345.5,\"accuracy\":null}\n");
    std::fs::write(&metrics, log).unwrap();
    assert!(run(&stopped, &["--resume"]).status().unwrap().success());
    let resumed = checkpoint(&stopped);
    let steps: Vec<u64> = std::fs::read_to_string(&metrics)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|v| v["event"] == "step")
        .map(|v| v["step"].as_u64().unwrap())
        .collect();
    assert!(steps.windows(2).all(|w| w[0] < w[1]), "each step logged once: {steps:?}");
    assert!(!std::fs::read_to_string(&metrics).unwrap().contains("12345.5"), "the stale line is dropped");
    assert_eq!(resumed["state"]["ledger"], reference["state"]["ledger"]);
    assert_eq!(resumed["values_digest"], reference["values_digest"], "a seeded resumed run ends with the same model");

    // Killed at an arbitrary moment (after at least one checkpoint), then resumed.
    let killed = tmp.path().join("killed");
    let mut child = run(&killed, &[]).spawn().unwrap();
    wait_for(&killed.join("checkpoint.bin"));
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(run(&killed, &["--resume"]).status().unwrap().success());
    let after_kill = checkpoint(&killed);
    assert_eq!(after_kill["state"]["ledger"], reference["state"]["ledger"]);
    assert_eq!(after_kill["values_digest"], reference["values_digest"]);

    // Ctrl-C with no periodic checkpoint: the step finishes, the checkpoint is written, the exit
    // status is non-zero and says how to resume; the resumed run ends where the whole one did.
    let interrupted = tmp.path().join("interrupted");
    let child = run(&interrupted, &["--checkpoint-every", "0"]).stderr(Stdio::piped()).spawn().unwrap();
    wait_for(&interrupted.join("metrics.jsonl"));
    // SAFETY: sending a signal to our own child process.
    assert_eq!(unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) }, 0);
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "stderr: {stderr}");
    assert!(stderr.contains("interrupted at step") && stderr.contains("--resume"), "stderr: {stderr}");
    let step = checkpoint(&interrupted)["state"]["step"].as_u64().unwrap();
    assert!(step > 0 && step < 320, "interrupted at step {step}");
    assert!(run(&interrupted, &["--resume", "--checkpoint-every", "0"]).status().unwrap().success());
    let after_interrupt = checkpoint(&interrupted);
    assert_eq!(after_interrupt["state"]["ledger"], reference["state"]["ledger"]);
    assert_eq!(after_interrupt["values_digest"], reference["values_digest"]);
}

#[test]
fn an_absurd_bench_lot_is_refused_before_allocation() {
    let out = dptrain(&["bench", "--model", "logreg", "--lot-size", "1000000000", "--device", "cpu"]);
    one_line_error(&out, "lot size");
}

/// `--device cuda` in a build without the `cuda` feature says, in one line, how to get one; in a
/// CUDA build on a machine without an NVIDIA driver (CI), that the GPU and driver are missing.
#[test]
fn cuda_without_the_feature_or_a_driver_is_one_line() {
    let out = dptrain(&["bench", "--model", "logreg", "--lot-size", "16", "--device", "cuda", "--iterations", "1"]);
    match built_with_cuda() {
        false => one_line_error(&out, "--features cuda"),
        // A machine with an NVIDIA GPU runs the bench.
        true if out.status.success() => {}
        true => one_line_error(&out, "no CUDA device could be opened (an NVIDIA GPU and its driver are needed"),
    }
}

/// Burn restores an optimiser's state on its default device (`BURN_DEVICE`, else CUDA, then
/// wgpu, as built): where that cannot open (CUDA on a machine without its driver), `--resume` says
/// in one line what to set instead of panicking; dptrain's own default (the CPU) resumes.
#[test]
fn a_resume_whose_default_device_cannot_open_is_one_line() {
    let (tmp, data) = temp_with_dataset(200);
    let out = tmp.path().join("run");
    let (d, o) = (data.to_str().unwrap(), out.to_str().unwrap());
    let args = |extra: &[&'static str]| {
        [base_args(d, o), vec!["-z", "1", "--epochs", "2", "--optimizer", "adam"], extra.to_vec()].concat()
    };
    assert!(dptrain(&args(&["--stop-after", "2"])).status.success());
    let resumed = Command::new(binary()).args(args(&["--resume"])).env("BURN_DEVICE", "cuda").output().unwrap();
    // An NVIDIA machine with a CUDA build opens it.
    if !(built_with_cuda() && resumed.status.success()) {
        one_line_error(&resumed, "BURN_DEVICE=flex");
        assert!(dptrain(&args(&["--resume"])).status.success(), "dptrain's own default resumes");
    }
}

/// A physical batch holds at least one example's views: 256 views of wrn-16-4 are counted
/// against the memory budget even with --batch-size 1, and refused before anything runs.
#[test]
fn an_example_s_views_count_against_the_memory_budget() {
    let (tmp, data) = temp_with_dataset(100);
    let out = tmp.path().join("run");
    let (d, o) = (data.to_str().unwrap(), out.to_str().unwrap());
    let args = ["train", "--device", "cpu", "--data-dir", d, "--out-dir", o, "--model", "wrn-16-4", "-z", "1"];
    let args = [&args[..], &["--augmult", "256", "--batch-size", "1"]].concat();
    let run = std::process::Command::new(binary())
        .args(&args)
        .env("DPTRAIN_MEMORY_BUDGET", "400000000")
        .output()
        .expect("dptrain runs");
    one_line_error(&run, "batches of 256 images");
}

/// An mlp too wide to allocate is refused from arithmetic; --hidden with a model that has no
/// hidden width is refused, not ignored.
#[test]
fn hidden_widths_that_cannot_apply_are_refused() {
    let (tmp, data) = temp_with_dataset(100);
    let out = tmp.path().join("run");
    let hidden = |model: &'static str, width: &'static str| {
        let mut args = base_args(data.to_str().unwrap(), out.to_str().unwrap());
        args[8] = model;
        args.extend(["--hidden", width, "--epochs", "1", "--noise-multiplier", "1"]);
        dptrain(&args)
    };
    one_line_error(&hidden("mlp", "100000000"), "model size");
    one_line_error(&hidden("logreg", "16"), "only the mlp model has a hidden width");
}

#[test]
fn bench_json_has_the_contract_keys() {
    let out = dptrain(&[
        "bench",
        "--model",
        "logreg",
        "--lot-size",
        "16",
        "--device",
        "cpu",
        "--iterations",
        "3",
        "--warmup",
        "1",
        "--json",
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(v["device"].as_str().unwrap().starts_with("cpu"));
    // The machine the figures hold for: its CPU, dispatched instruction set, caches and threads.
    let machine = &v["machine"];
    assert!(!machine["cpu"].as_str().unwrap().is_empty() && machine["threads"].as_u64().unwrap() >= 1, "{machine}");
    assert!(machine["isa"].as_str().is_some() && machine["caches"].is_array(), "{machine}");
    let w = &v["workloads"][0];
    assert_eq!(w["model"], "logreg");
    assert_eq!(w["lot_size"], 16);
    let ms = |m: &str| w["ms_per_lot"][m].as_f64().unwrap();
    for m in ["none", "gaussian", "optimized", "optimized-paper", "ls-sgd"] {
        assert!(ms(m) > 0.0, "{m}");
        assert!((w["ratio_to_none"][m].as_f64().unwrap() - ms(m) / ms("none")).abs() < 1e-9, "{m}");
        assert!((w["ratio_to_gaussian"][m].as_f64().unwrap() - ms(m) / ms("gaussian")).abs() < 1e-9, "{m}");
    }
}

/// The JSON names the kernel that ran each pass of each layer (issue 53): on the CPU the
/// first convolution multiplies its unfolded patches, the 3x3 stride-1 ones between 16 channels
/// or more go by Winograd's transform in all three passes, and the DP step's norms and sums
/// are named for every layer.
#[test]
fn bench_json_names_the_kernel_of_each_pass_of_each_layer() {
    let args = ["bench", "--model", "cifar10-cnn", "--dataset", "cifar10", "--activation", "relu"];
    let sizes = ["--lot-size", "2", "--device", "cpu", "--mechanisms", "none,gaussian", "--iterations", "1"];
    let out = dptrain(&[&args[..], &sizes[..], &["--warmup", "0", "--json"]].concat());
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let layers = v["workloads"][0]["kernels"].as_array().unwrap();
    let layer = |name: &str| layers.iter().find(|l| l["layer"] == name).unwrap_or_else(|| panic!("{name}: {layers:?}"));
    let first = layer("conv 3x3 [2, 3, 32, 32] -> 32, stride 1, padding 1");
    assert_eq!(first["forward"], serde_json::json!(["im2col-tensor"]), "{first}");
    let wide = layer("conv 3x3 [2, 64, 16, 16] -> 64, stride 1, padding 1");
    for pass in ["forward", "input-gradient", "weight-gradient"] {
        assert_eq!(wide[pass], serde_json::json!(["winograd-f2x2-3x3"]), "{pass}: {wide}");
    }
    let last = layer("linear [2, 128] -> 10");
    assert_eq!(last["norms"], serde_json::json!(["rank-one"]), "{last}");
    assert_eq!(layers.len(), 9, "six convolutions and three linear layers: {layers:?}");
    for l in layers {
        assert!(l["norms"].is_array() && l["clipped-sum"].is_array(), "every DP layer's norms and sum: {l}");
    }
}

#[test]
fn laplacian_smoothing_is_post_processing_and_s_zero_is_dp_sgd() {
    let (tmp, data) = temp_with_dataset(300);
    let d = data.to_str().unwrap();
    let run = |name: &str, extra: &[&str]| {
        let out = tmp.path().join(name);
        let mut args = base_args(d, out.to_str().unwrap());
        args.extend(["--epochs", "1", "-z", "1.1", "--seed", "4"]);
        args.extend(extra);
        let (report, ckpt) = train_json(args, &out);
        (report, ckpt["values_digest"].clone())
    };
    let (gaussian, gaussian_params) = run("gaussian", &[]);
    let (s_zero, s_zero_params) = run("s0", &["--mechanism", "ls-sgd", "--ls-sigma", "0"]);
    let (smoothed, smoothed_params) = run("s1", &["--mechanism", "ls-sgd", "--ls-sigma", "1"]);
    let (model_scope, _) = run("model", &["--mechanism", "ls-adam", "--ls-sigma", "2", "--ls-scope", "model"]);
    assert_eq!(s_zero_params, gaussian_params, "s = 0 must be exactly DP-SGD");
    assert_ne!(smoothed_params, gaussian_params, "s = 1 must smooth");
    for report in [&s_zero, &smoothed, &model_scope] {
        assert_eq!(report["epsilon"], gaussian["epsilon"], "smoothing is post-processing");
        assert_eq!(report["guarantee"], "certified");
    }
    let out = tmp.path().join("bad");
    let o = out.to_str().unwrap();
    one_line_error(
        &dptrain(&[base_args(d, o), vec!["-z", "1", "--mechanism", "ls-sgd", "--ls-sigma", "-1"]].concat()),
        "ls-sigma",
    );
    one_line_error(
        &dptrain(&[base_args(d, o), vec!["-z", "1", "--mechanism", "ls-adam", "--optimizer", "sgd"]].concat()),
        "ls-sgd",
    );
}

/// An unseeded two-epoch run of a two-layer mlp, checkpointing every step.
fn unseeded_mlp_args<'a>(data: &'a str, out: &'a str) -> Vec<&'a str> {
    let mut args = base_args(data, out);
    args[8] = "mlp";
    args.extend(["--hidden", "16", "--epochs", "2", "--checkpoint-every", "1"]);
    args
}

/// [`unseeded_mlp_args`] with `--seed 4`.
fn mlp_args<'a>(data: &'a str, out: &'a str) -> Vec<&'a str> {
    let mut args = unseeded_mlp_args(data, out);
    args.extend(["--seed", "4"]);
    args
}

#[test]
fn optimized_is_certified_and_resumes_exactly_and_optimized_paper_reports_both_readouts() {
    let (tmp, data) = temp_with_dataset(300);
    let d = data.to_str().unwrap();
    let run = |name: &str, extra: &[&str]| {
        let out = tmp.path().join(name);
        let mut args = mlp_args(d, out.to_str().unwrap());
        args.extend(extra);
        train_json(args, &out)
    };
    // Sound: the same noise multiplier as DP-SGD with per-layer clipping, so the same epsilon,
    // but a different sigma per layer.
    let (gaussian, gaussian_ckpt) = run("gaussian", &["-z", "1.1", "--clipping", "per-layer"]);
    let (optimized, optimized_ckpt) = run("optimized", &["-z", "1.1", "--mechanism", "optimized"]);
    assert_eq!(optimized["guarantee"], "certified");
    assert_eq!(optimized["epsilon"], gaussian["epsilon"]);
    assert_ne!(optimized_ckpt["values_digest"], gaussian_ckpt["values_digest"]);
    assert!(optimized_ckpt["state"]["allocation"].is_array(), "the allocation state is checkpointed");

    // As written: the paper's epsilon is the budget, its sigma's own epsilon is labelled none.
    let (paper, _) =
        run("paper", &["--target-epsilon", "2", "--mechanism", "optimized-paper", "--sensitivity-every", "3"]);
    assert_eq!(paper["guarantee"], "paper-bound");
    assert!((paper["epsilon"].as_f64().unwrap() - 2.0).abs() < 1e-9, "{paper}");
    assert_eq!(paper["sigma_privacy"]["guarantee"], "none");
    let sigma_eps = paper["sigma_privacy"]["epsilon"].as_f64().unwrap();
    assert!(sigma_eps.is_finite() && sigma_eps > 0.0, "{paper}");

    let o = tmp.path().join("bad");
    let o = o.to_str().unwrap();
    let bad =
        |extra: &[&str], needle: &str| one_line_error(&dptrain(&[base_args(d, o), extra.to_vec()].concat()), needle);
    bad(&["-z", "1", "--mechanism", "optimized", "--clipping", "flat"], "per-layer");
    bad(&["-z", "1", "--mechanism", "optimized-paper"], "--target-epsilon");
    bad(&["--target-epsilon", "1", "--mechanism", "optimized-paper", "--clipping", "per-layer"], "flat");
    bad(&["-z", "1", "--sensitivity-every", "2"], "optimized-paper");
    bad(&["--target-epsilon", "1", "--mechanism", "optimized-paper", "--sensitivity-every", "0"], "sensitivity");
}

/// Issue 23: a seeded run of every mechanism (and of shuffled lots and augmented views),
/// stopped mid-run and resumed, ends exactly where the uninterrupted run does: the same report,
/// ledger and model.
/// optimized-paper stops inside a window of its sensitivity (w recomputed every 3 lots), so its
/// current sigma must come back from the checkpoint; its ledger is then checked against it.
#[test]
fn every_mechanism_resumes_exactly_where_the_whole_run_ends() {
    let (tmp, data) = temp_with_dataset(300);
    let d = data.to_str().unwrap();
    let mechanisms: [(&str, &[&str]); 9] = [
        ("none", &["--mechanism", "none"]),
        ("gaussian", &["-z", "1.1"]),
        ("shuffled", &["-z", "1.1", "--sampling", "shuffled"]),
        ("ls-sgd", &["-z", "1.1", "--mechanism", "ls-sgd"]),
        ("ls-adam", &["-z", "1.1", "--mechanism", "ls-adam", "--learning-rate", "0.01"]),
        ("optimized", &["-z", "1.1", "--mechanism", "optimized"]),
        ("paper", &["--target-epsilon", "2", "--mechanism", "optimized-paper", "--sensitivity-every", "3"]),
        ("momentum", &["-z", "1.1", "--momentum", "0.9", "--weight-decay", "1e-3", "--lr-schedule", "cosine"]),
        // Augmented views are drawn by step and example: a resumed run draws the same ones.
        ("augmult", &["-z", "1.1", "--augmult", "3"]),
    ];
    for (name, extra) in mechanisms {
        let run = |suffix: &str, session: &[&str]| {
            let out = tmp.path().join(format!("{name}-{suffix}"));
            let mut args = mlp_args(d, out.to_str().unwrap());
            args.extend(extra);
            args.extend(session);
            (args.iter().map(|a| a.to_string()).collect::<Vec<_>>(), out)
        };
        let (whole_args, whole) = run("whole", &[]);
        let (report, reference) = train_json(whole_args.iter().map(String::as_str).collect(), &whole);
        let (stop_args, stopped) = run("stopped", &["--stop-after", "5"]);
        let stop = dptrain(&stop_args.iter().map(String::as_str).collect::<Vec<_>>());
        assert!(stop.status.success(), "{name}: {}", String::from_utf8_lossy(&stop.stderr));
        assert_eq!(checkpoint(&stopped)["state"]["step"], 5, "{name}");
        let (resume_args, _) = run("stopped", &["--resume"]);
        let (resumed, after) = train_json(resume_args.iter().map(String::as_str).collect(), &stopped);
        for key in ["test_accuracy", "epsilon", "steps", "guarantee", "sigma_privacy", "noise_multiplier"] {
            assert_eq!(resumed[key], report[key], "{name}: {key}");
        }
        assert_eq!(after["values_digest"], reference["values_digest"], "{name}: values_digest");
        for key in ["ledger", "sampler", "noise"] {
            assert_eq!(after["state"][key], reference["state"][key], "{name}: {key}");
        }
    }
    // optimized-paper's ledger multiplier, edited by a holder of the key: far from the plan (the
    // readout of its smallest sigma would claim less than the run spent), or near the plan but
    // not what its checkpointed sigma gives.
    let (args, out) = {
        let out = tmp.path().join("paper-edit");
        let mut args = mlp_args(d, out.to_str().unwrap());
        args.extend(["--target-epsilon", "2", "--mechanism", "optimized-paper", "--sensitivity-every", "3"]);
        (args.iter().map(|a| a.to_string()).collect::<Vec<_>>(), out)
    };
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    assert!(dptrain(&[args.clone(), vec!["--stop-after", "4"]].concat()).status.success());
    let original = std::fs::read(out.join("checkpoint.bin")).unwrap();
    let gaussian = |h: &mut Value| h["state"]["ledger"]["entries"][0]["event"]["events"][0].clone();
    let z = gaussian(&mut checkpoint(&out))["of"]["noise_multiplier"].as_f64().unwrap();
    let cases: [(f64, &str); 2] = [(100.0, "ledger entry"), (z * (1.0 + 2e-6), "current sigma")];
    for (edited, needle) in cases {
        std::fs::write(out.join("checkpoint.bin"), &original).unwrap();
        tamper(&out, &|h| {
            h["state"]["ledger"]["entries"][0]["event"]["events"][0]["of"]["noise_multiplier"] = edited.into()
        });
        one_line_error(&dptrain(&[args.clone(), vec!["--resume"]].concat()), needle);
    }
    // The unaccounted use of w dropped from the ledger: its sigma readout would claim a
    // certificate.
    std::fs::write(out.join("checkpoint.bin"), &original).unwrap();
    tamper(&out, &|h| h["state"]["ledger"]["entries"][0]["event"] = gaussian(h));
    one_line_error(&dptrain(&[args.clone(), vec!["--resume"]].concat()), "ledger entry");
    // The current sigma dropped (header and records): resumed, it would be recomputed mid-window.
    std::fs::write(out.join("checkpoint.bin"), &original).unwrap();
    assert!(checkpoint(&out)["state"]["allocation"].is_array());
    tamper(&out, &|h| h["state"]["allocation"] = Value::Null);
    one_line_error(&dptrain(&[args.clone(), vec!["--resume"]].concat()), "allocation");
}

/// An unseeded run with augmented views, stopped, copied and resumed twice: both copies end at
/// the same model, so the views (like the lots and the noise) come from the run folder's keys,
/// not from a generator the resuming process draws afresh.
#[test]
fn an_unseeded_run_resumes_with_its_own_views() {
    let (tmp, data) = temp_with_dataset(300);
    let d = data.to_str().unwrap();
    let first = tmp.path().join("first");
    let second = tmp.path().join("second");
    let args = |out: &Path, session: &[&str]| {
        let mut args: Vec<String> = unseeded_mlp_args(d, out.to_str().unwrap()).into_iter().map(String::from).collect();
        args.extend(["-z", "1.1", "--augmult", "3"].into_iter().chain(session.iter().copied()).map(String::from));
        args
    };
    let stop = dptrain(&args(&first, &["--stop-after", "5"]).iter().map(String::as_str).collect::<Vec<_>>());
    assert!(stop.status.success(), "{}", String::from_utf8_lossy(&stop.stderr));
    std::fs::create_dir(&second).unwrap();
    for entry in std::fs::read_dir(&first).unwrap() {
        let path = entry.unwrap().path();
        std::fs::copy(&path, second.join(path.file_name().unwrap())).unwrap();
    }
    let resume = |out: &Path| train_json(args(out, &["--resume"]).iter().map(String::as_str).collect(), out);
    let ((a, a_ckpt), (b, b_ckpt)) = (resume(&first), resume(&second));
    assert_eq!(a_ckpt["values_digest"], b_ckpt["values_digest"], "two resumes of one run drew other views");
    assert_eq!(a["test_accuracy"], b["test_accuracy"]);
}

/// The one-run audit of a training run (`--audit-canaries`): white-box canaries with every lot
/// the whole data set (q = 1), so that each included canary is in every step. The lower bound
/// stays below what each mechanism certifies, comes close to the audit's ceiling when the noise is
/// small, and the audit refuses what it cannot do in one line.
#[test]
fn audit_canaries_bound_each_mechanism_below_its_certificate() {
    let (tmp, data) = temp_with_dataset(500);
    let d = data.to_str().unwrap();
    let audit = |name: &str, model: &str, extra: &[&str]| {
        let out = tmp.path().join(name);
        let mut args = base_args(d, out.to_str().unwrap());
        (args[8], args[10]) = (model, "500");
        args.extend(["--epochs", "10", "--delta", "1e-5", "--seed", "2", "--audit-canaries", "1000"]);
        args.extend(extra);
        let (report, _) = train_json(args, &out);
        assert_eq!(report["audit"]["label"], "empirical", "{report}");
        assert_eq!(report["audit"]["bound"]["canaries"], 1000);
        (report["audit"]["bound"]["epsilon"].as_f64().unwrap(), report)
    };
    let (gaussian, report) = audit("gaussian", "logreg", &["--target-epsilon", "2"]);
    assert_eq!(report["guarantee"], "certified");
    assert!(gaussian <= 2.0, "DP-SGD audited above its certificate: {report}");
    let (loud, report) = audit("loud", "logreg", &["-z", "0.2"]);
    assert!(loud > 3.5, "a barely noised run must be caught: {report}");
    // Two layers, so that the optimized mechanism's per-layer sigmas differ.
    let (optimized, report) =
        audit("optimized", "mlp", &["--target-epsilon", "2", "--mechanism", "optimized", "--hidden", "16"]);
    assert!(optimized <= 2.0, "the sound optimized mechanism above its certificate: {report}");
    let (paper, report) = audit("paper", "logreg", &["--target-epsilon", "2", "--mechanism", "optimized-paper"]);
    let sigma_eps = report["sigma_privacy"]["epsilon"].as_f64().unwrap();
    assert!(paper <= sigma_eps.min(2.0), "optimized-paper above the privacy of its smallest sigma: {report}");

    let o = tmp.path().join("bad");
    let o = o.to_str().unwrap();
    let bad = |extra: &[&str]| dptrain(&[base_args(d, o), vec!["--audit-canaries", "10"], extra.to_vec()].concat());
    one_line_error(&bad(&["--mechanism", "none", "--epochs", "1"]), "no noise");
    one_line_error(&bad(&["-z", "1", "--epochs", "1", "--stop-after", "1"]), "one session");
    one_line_error(&bad(&["-z", "1", "--epochs", "1", "--audit-confidence", "1.5"]), "confidence");
    one_line_error(&dptrain(&[base_args(d, o), vec!["-z", "1", "--audit-canaries", "9000"]].concat()), "coordinates");
}

/// An edit of a checkpoint's JSON view.
type Edit = Box<dyn Fn(&mut Value)>;

/// Edits of a logistic-regression run's checkpoint after 3 steps of `words_per_step` noise
/// words each, and what the refusal of each names.
fn tamper_cases(words_per_step: u64) -> Vec<(&'static str, Edit, &'static str)> {
    vec![
        (
            "noise multiplier",
            Box::new(|h| h["state"]["ledger"]["entries"][0]["event"]["of"]["noise_multiplier"] = 100.0.into()),
            "ledger entry",
        ),
        (
            "sampling rate",
            Box::new(|h| h["state"]["ledger"]["entries"][0]["event"]["sample_rate"] = 0.0043.into()),
            "ledger entry",
        ),
        (
            "shuffled entry",
            Box::new(|h| h["state"]["ledger"]["entries"][0]["event"]["event"] = "shuffled".into()),
            "ledger entry",
        ),
        ("ledger steps", Box::new(|h| h["state"]["ledger"]["entries"][0]["count"] = 1.into()), "ledger holds 1"),
        (
            "non-private entry",
            Box::new(|h| {
                h["state"]["ledger"]["entries"][0]["event"] = serde_json::json!({"event": "non-private", "what": "x"})
            }),
            "ledger entry",
        ),
        ("empty ledger", Box::new(|h| h["state"]["ledger"]["entries"] = serde_json::json!([])), "ledger holds 0"),
        ("step", Box::new(|h| h["state"]["step"] = 2.into()), "the run took 2"),
        ("planned steps", Box::new(|h| h["state"]["planned_steps"] = 5.into()), "planned"),
        ("sampler rate", Box::new(|h| h["state"]["sampler"]["sampling"]["rate"] = 1.0.into()), "sampler"),
        ("sampler size", Box::new(|h| h["state"]["sampler"]["n"] = 1_000_000.into()), "sampler"),
        // Lots replayed: the sampler rewound to its start (the run spent more than it would say).
        ("sampler rewound", Box::new(|h| h["state"]["sampler"]["stream"]["word_pos"] = 0.into()), "sampler"),
        ("sampler stream", Box::new(|h| h["state"]["sampler"]["stream"]["stream"] = 1.into()), "sampler"),
        ("sampler cursor", Box::new(|h| h["state"]["sampler"]["cursor"] = 100_000.into()), "sampler"),
        ("noise position", Box::new(|h| h["state"]["noise"]["word_pos"] = 0.into()), "noise stream"),
        ("noise stream", Box::new(|h| h["state"]["noise"]["stream"] = 0.into()), "noise stream"),
        ("no noise", Box::new(|h| h["state"]["noise"] = Value::Null), "noise stream"),
        // The step, the ledger and the noise rewound together (noise vectors would be reused):
        // the sampler still says three lots were drawn.
        (
            "step rewound",
            Box::new(move |h| {
                h["state"]["step"] = 2.into();
                h["state"]["ledger"]["entries"][0]["count"] = 2.into();
                h["state"]["noise"]["word_pos"] = (2 * words_per_step).into();
            }),
            "sampler",
        ),
        ("seconds negative", Box::new(|h| h["seconds"] = (-1e9).into()), "training seconds"),
        ("seconds huge", Box::new(|h| h["seconds"] = 1e308.into()), "training seconds"),
        ("started in the future", Box::new(|h| h["started"] = (u64::MAX / 2).into()), "training seconds"),
        ("seed dropped", Box::new(|h| h["seeded"] = false.into()), "seeded"),
        ("allocation added", Box::new(|h| h["state"]["allocation"] = serde_json::json!([7840, 10])), "allocation"),
        ("config digest", Box::new(|h| h["config_digest"] = "0".repeat(64).into()), "config.toml"),
    ]
}

/// Issues 17 and 23: every privacy-relevant field of a checkpoint, edited by someone holding
/// the run's key (the MAC recomputed), is refused on --resume in one line by the checks against
/// the run, and the run is never resumed; the same edits sealed without the key are refused by
/// the MAC; a damaged file, an old-format file and a config.toml that is not the checkpoint's
/// are refused too; the untouched checkpoint resumes.
#[test]
fn a_tampered_checkpoint_is_refused_and_never_resumed() {
    let (tmp, data) = temp_with_dataset(300);
    let out = tmp.path().join("run");
    let (d, o) = (data.to_str().unwrap(), out.to_str().unwrap());
    let mut args = base_args(d, o);
    args.extend(["--epochs", "2", "-z", "1.2", "--seed", "3", "--stop-after", "3"]);
    assert!(dptrain(&args).status.success());
    let original = std::fs::read(out.join("checkpoint.bin")).unwrap();
    let header = checkpoint(&out);
    let resume = || dptrain(&[base_args(d, o), vec!["--resume"]].concat());
    // One step's noise: 7850 parameters, in blocks of 16 words per tensor.
    let words_per_step = header["state"]["noise"]["word_pos"].as_u64().unwrap() / 3;
    let cases = tamper_cases(words_per_step);
    let refused = |what: &str, needle: &str| {
        let tampered = std::fs::read(out.join("checkpoint.bin")).unwrap();
        let refused = resume();
        assert!(!refused.status.success(), "{what}: resumed");
        let stderr = String::from_utf8_lossy(&refused.stderr);
        assert_eq!(stderr.trim().lines().count(), 1, "{what}: {stderr}");
        assert!(stderr.contains(needle), "{what}: {stderr}");
        assert!(std::fs::read(out.join("checkpoint.bin")).unwrap() == tampered, "{what}: the run went on");
    };
    for (what, edit, needle) in &cases {
        std::fs::write(out.join("checkpoint.bin"), &original).unwrap();
        tamper(&out, edit.as_ref());
        refused(what, needle);
        // Without the run's key the same edit fails the MAC, before any other check.
        std::fs::write(out.join("checkpoint.bin"), &original).unwrap();
        forge(&out, &[7; 32], edit.as_ref());
        refused(what, "MAC");
    }
    // A flipped byte: damaged.
    let mut damaged = original.clone();
    let middle = damaged.len() / 2;
    damaged[middle] ^= 1;
    std::fs::write(out.join("checkpoint.bin"), &damaged).unwrap();
    one_line_error(&resume(), "MAC");
    // Checkpoints of older formats: one held the keys, the other a ledger without events.
    for magic in [b"DPTCKPT2", b"DPTCKPT4"] {
        let mut old = original.clone();
        old[..8].copy_from_slice(magic);
        std::fs::write(out.join("checkpoint.bin"), &old).unwrap();
        one_line_error(&resume(), "older dptrain");
    }
    // The run folder's config.toml replaced by another run's.
    std::fs::write(out.join("checkpoint.bin"), &original).unwrap();
    let config = std::fs::read_to_string(out.join("config.toml")).unwrap();
    for (from, to) in [("clip_norm = 1.0", "clip_norm = 9.0"), ("mechanism = \"gaussian\"", "mechanism = \"none\"")] {
        assert!(config.contains(from), "{config}");
        std::fs::write(out.join("config.toml"), config.replace(from, to)).unwrap();
        one_line_error(&resume(), "config.toml");
    }
    std::fs::write(out.join("config.toml"), config).unwrap();
    // Another seed than the run's.
    one_line_error(&dptrain(&[base_args(d, o), vec!["--resume", "--seed", "4"]].concat()), "seed");
    let resumed = resume();
    assert!(resumed.status.success(), "{}", String::from_utf8_lossy(&resumed.stderr));
    assert_eq!(checkpoint(&out)["state"]["step"], 12);
}

/// Without a login session (no XDG_RUNTIME_DIR) the GPU probe of `--device auto` used to print
/// "error: XDG_RUNTIME_DIR is invalid or not set" lines on a run that was fine.
#[test]
fn the_gpu_probe_prints_nothing_without_a_session() {
    let (tmp, data) = temp_with_dataset(100);
    let out = tmp.path().join("run");
    let (data, out) = (data.to_str().unwrap(), out.to_str().unwrap());
    let mut args = base_args(data, out);
    args[2] = "auto";
    args.extend(["--epochs", "1", "-z", "1", "--json"]);
    let output = Command::new(binary()).args(&args).env_remove("XDG_RUNTIME_DIR").output().expect("dptrain runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(!stderr.contains("XDG_RUNTIME_DIR"), "stderr: {stderr}");
}

/// The ScatterNet models train on features computed once and cached (the second run reads them,
/// says nothing of computing, and ends with the same seeded model), resume like any other, and
/// a cache folder that cannot be written only costs the recomputation.
#[test]
fn scatnet_models_train_on_cached_scattering_features() {
    let (tmp, data) = temp_with_dataset(200);
    let cache = tmp.path().join("cache");
    let run = |model: &str, out: &Path, cache: &Path, extra: &[&str]| {
        let mut args = base_args(data.to_str().unwrap(), out.to_str().unwrap());
        args[8] = model;
        args.extend(["--epochs", "1", "-z", "1", "--seed", "4", "--json"]);
        args.extend(extra);
        let out = Command::new(binary()).args(&args).env("DPTRAIN_CACHE_DIR", cache).output().unwrap();
        assert!(out.status.success(), "{model}: {}", String::from_utf8_lossy(&out.stderr));
        let report: Value = serde_json::from_slice(&out.stdout).unwrap();
        (report, String::from_utf8_lossy(&out.stderr).to_string())
    };
    let (first, said) = run("scatnet-linear", &tmp.path().join("a"), &cache, &[]);
    assert!(said.contains("computing the ScatterNet features of 200 examples"), "{said}");
    let cached = |ext: &str| {
        std::fs::read_dir(&cache)
            .unwrap()
            .filter(|e| e.as_ref().unwrap().path().extension().is_some_and(|x| x == ext))
            .count()
    };
    assert_eq!(cached("bin"), 2, "the training and test sets' features");
    assert_eq!(cached("key"), 1, "the cache's key, which seals them");
    assert!(first["curves"].as_str().unwrap().ends_with("curves.svg"));
    let curves = std::fs::read_to_string(tmp.path().join("a").join("curves.svg")).unwrap();
    assert!(curves.contains("test accuracy") && curves.contains("epsilon spent"), "the run folder's curves");
    assert!(std::fs::read(tmp.path().join("a").join("curves.png")).unwrap().starts_with(b"\x89PNG"));
    let (second, said) = run("scatnet-linear", &tmp.path().join("b"), &cache, &[]);
    let overlay = tmp.path().join("overlay.svg");
    let runs = [tmp.path().join("a"), tmp.path().join("b")].map(|p| p.to_str().unwrap().to_string());
    let plotted = dptrain(&["plot", &runs[0], &runs[1], "--out", overlay.to_str().unwrap()]);
    assert!(plotted.status.success(), "{}", String::from_utf8_lossy(&plotted.stderr));
    assert!(std::fs::read_to_string(&overlay).unwrap().contains("\nb\n"), "both runs in the legend");
    assert!(tmp.path().join("overlay.png").exists());
    one_line_error(&dptrain(&["plot", tmp.path().join("nothing").to_str().unwrap()]), "metrics.jsonl");
    // An output that is a device node is refused, not replaced (as root, /dev/full used to
    // become an SVG file); a PNG's name for the SVG is refused (the PNG overwrote the SVG).
    one_line_error(&dptrain(&["plot", &runs[0], "--out", "/dev/full"]), "ending in .svg");
    let device = tmp.path().join("device.svg");
    std::os::unix::fs::symlink("/dev/full", &device).unwrap();
    one_line_error(&dptrain(&["plot", &runs[0], "--out", device.to_str().unwrap()]), "symbolic link");
    assert!(std::fs::metadata("/dev/full").unwrap().file_type().is_char_device());
    let png = tmp.path().join("x.png");
    one_line_error(&dptrain(&["plot", &runs[0], "--out", png.to_str().unwrap()]), "ending in .svg");
    assert!(!png.exists());
    assert!(!said.contains("computing"), "{said}");
    assert_eq!(first["test_accuracy"], second["test_accuracy"]);
    assert_eq!(first["guarantee"], "certified");
    let stopped = tmp.path().join("c");
    run("scatnet-cnn", &stopped, &cache, &["--stop-after", "2"]);
    let (resumed, _) = run("scatnet-cnn", &stopped, &cache, &["--resume"]);
    let (whole, _) = run("scatnet-cnn", &tmp.path().join("d"), &cache, &[]);
    assert_eq!(resumed["test_accuracy"], whole["test_accuracy"]);
    assert_eq!(resumed["steps"], whole["steps"]);
    // Held out: trained on 150, evaluated on the last 50 training examples, with a parameter
    // average.
    let (held, _) = run("scatnet-linear", &tmp.path().join("f"), &cache, &["--validation", "50", "--ema", "0.9"]);
    assert_eq!(held["evaluated_on"], "validation");
    assert_ne!(held["sample_rate"], first["sample_rate"], "fewer training examples");
    let unwritable = tmp.path().join("a").join("config.toml").join("cache");
    let (uncached, said) = run("scatnet-linear", &tmp.path().join("e"), &unwritable, &[]);
    assert!(said.contains("computing"), "{said}");
    assert_eq!(uncached["test_accuracy"], first["test_accuracy"]);
}
