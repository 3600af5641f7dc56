//! Models in and out of `dptrain train`: a completed run leaves `model.safetensors` (its released
//! model in PyTorch's names and layouts, its report in the metadata, no key, and a kept key is
//! warned of); `--init-from` starts another run from it (the accuracy it reached is where the
//! next starts); a file that does not fit the model, a FIFO and a pickle are one-line errors.

mod common;

use common::*;
use serde_json::Value;
use std::path::Path;

/// A safetensors file's metadata and tensor names.
fn header(path: &Path) -> (Value, Vec<String>) {
    let bytes = std::fs::read(path).unwrap();
    let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let mut header: serde_json::Map<String, Value> = serde_json::from_slice(&bytes[8..8 + n]).unwrap();
    let meta = header.remove("__metadata__").unwrap_or_default();
    (meta, header.keys().cloned().collect())
}

#[test]
fn a_run_exports_its_model_with_its_report_and_another_starts_from_it() {
    let (tmp, data) = temp_with_dataset(400);
    let (d, first) = (data.to_str().unwrap(), tmp.path().join("first"));
    let args =
        [&base_args(d, first.to_str().unwrap())[..], &["--epochs", "2", "--noise-multiplier", "1", "--seed", "1"]]
            .concat();
    let (report, _) = train_json(args, &first);
    let (meta, names) = header(&first.join("model.safetensors"));
    assert_eq!(names, ["dense.0.bias", "dense.0.weight"], "the zoo's names, no enum variant");
    assert_eq!(meta["format"], "dptrain model 1");
    assert_eq!(meta["epsilon"].as_str().unwrap().parse::<f64>().unwrap(), report["epsilon"].as_f64().unwrap());
    assert_eq!((meta["guarantee"].as_str(), meta["accountant"].as_str()), (Some("certified"), Some("rdp")));
    assert_eq!(meta["parameters"], "last iterate");
    assert!(!String::from_utf8_lossy(&std::fs::read(first.join("model.safetensors")).unwrap()).contains("key"));

    // Fine-tuned from it at a vanishing learning rate: the accuracy the first run reached.
    let second = tmp.path().join("second");
    let init = first.join("model.safetensors");
    let args = [
        &base_args(d, second.to_str().unwrap())[..],
        &["--epochs", "1", "--noise-multiplier", "1", "--learning-rate", "1e-9", "--init-from", init.to_str().unwrap()],
    ]
    .concat();
    let (again, _) = train_json(args, &second);
    assert_eq!(again["test_accuracy"], report["test_accuracy"], "started from the first run's weights");
    assert!(report["test_accuracy"].as_f64().unwrap() > 0.5, "a learnt model, not chance");

    // The key kept: the warning that it never travels with the model.
    let kept = tmp.path().join("kept");
    let args = [&base_args(d, kept.to_str().unwrap())[..], &["--noise-multiplier", "1", "--keep-key"]].concat();
    let run = dptrain(&args);
    assert!(String::from_utf8_lossy(&run.stderr).contains("never publish it with the model"));

    // Hostile: another model's file, a FIFO, a pickle.
    let out = tmp.path().join("o");
    let o = out.to_str().unwrap();
    let from = |file: &Path, model: &'static str| {
        let mut args =
            [&base_args(d, o)[..], &["--noise-multiplier", "1", "--init-from", file.to_str().unwrap()]].concat();
        args.iter_mut().filter(|a| **a == "logreg").for_each(|a| *a = model);
        dptrain(&args)
    };
    one_line_error(&from(&init, "mlp"), "dense.0.weight");
    let fifo = tmp.path().join("fifo");
    assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    one_line_error(&from(&fifo, "logreg"), "fifo");
    let pickle = tmp.path().join("model.pt");
    std::fs::write(&pickle, b"PK\x03\x04 a zip archive").unwrap();
    one_line_error(&from(&pickle, "logreg"), "pickle");
}
