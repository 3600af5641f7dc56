//! Models in and out of `dptrain train`: a completed run leaves `model.safetensors` (its released
//! model in PyTorch's names and layouts, its report in the metadata, no key, and a kept key is
//! warned of); `--init-from` starts another run from it (the accuracy it reached is where the
//! next starts); a file that does not fit the model, a FIFO and a pickle are one-line errors.

mod common;

use common::*;
use serde_json::Value;
use std::path::Path;

/// A safetensors file's bytes, its JSON header, and where its tensor data starts.
fn parsed(path: &Path) -> (Vec<u8>, serde_json::Map<String, Value>, usize) {
    let bytes = std::fs::read(path).unwrap();
    let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let header = serde_json::from_slice(&bytes[8..8 + n]).unwrap();
    (bytes, header, 8 + n)
}

/// A safetensors file's metadata and tensor names.
fn header(path: &Path) -> (Value, Vec<String>) {
    let (_, mut header, _) = parsed(path);
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

/// The bytes of tensor `name` in the safetensors file `path`.
fn tensor_bytes(path: &Path, name: &str) -> Vec<u8> {
    let (bytes, header, data) = parsed(path);
    let offsets = &header[name]["data_offsets"];
    let (from, to) = (offsets[0].as_u64().unwrap() as usize, offsets[1].as_u64().unwrap() as usize);
    bytes[data + from..data + to].to_vec()
}

#[test]
fn a_frozen_fine_tune_names_its_trained_parameters_and_exports_renamed_with_its_report() {
    let (tmp, data) = temp_with_dataset(400);
    let d = data.to_str().unwrap();
    let run = |name: &str, extra: &[&str]| {
        let out = tmp.path().join(name);
        let mut args =
            [&base_args(d, out.to_str().unwrap())[..], &["--noise-multiplier", "1", "--seed", "1"], extra].concat();
        args.iter_mut().filter(|a| **a == "logreg").for_each(|a| *a = "mlp");
        (train_json(args, &out).0, out)
    };
    let (_, pretrained) = run("pretrained", &["--epochs", "2"]);
    let init = pretrained.join("model.safetensors");
    let (report, tuned) =
        run("tuned", &["--init-from", init.to_str().unwrap(), "--freeze", "^dense\\.0\\.", "--keep-key"]);
    assert_eq!(report["trained_parameters"], serde_json::json!(["dense.1.weight", "dense.1.bias"]));
    assert_eq!(report["frozen_parameters"], serde_json::json!(["dense.0.weight", "dense.0.bias"]));
    let model = tuned.join("model.safetensors");
    assert_eq!(tensor_bytes(&model, "dense.0.weight"), tensor_bytes(&init, "dense.0.weight"), "frozen: bit for bit");
    assert_ne!(tensor_bytes(&model, "dense.1.weight"), tensor_bytes(&init, "dense.1.weight"), "the head was trained");
    let (meta, _) = header(&model);
    assert_eq!(meta["frozen_parameters"], r#"["dense.0.weight","dense.0.bias"]"#);

    // Exported with the user's names: the same tensors and report; the kept key warned of.
    let file = tmp.path().join("mlp.safetensors");
    let export = |out: &Path, renames: &[&str]| {
        let mut args = vec!["export", tuned.to_str().unwrap(), "--out", out.to_str().unwrap()];
        renames.iter().for_each(|r| args.extend(["--rename", r]));
        dptrain(&args)
    };
    let done = export(&file, &["^dense\\.(\\d)\\.=layers.$1.", "^layers\\.1\\.=head."]);
    assert!(done.status.success(), "{}", String::from_utf8_lossy(&done.stderr));
    assert!(String::from_utf8_lossy(&done.stderr).contains("never publish it with the model"));
    let (exported_meta, names) = header(&file);
    assert_eq!(names, ["head.bias", "head.weight", "layers.0.bias", "layers.0.weight"]);
    assert_eq!(exported_meta, meta, "the report travels unchanged");
    assert_eq!(tensor_bytes(&file, "head.weight"), tensor_bytes(&model, "dense.1.weight"));
    let printed = String::from_utf8_lossy(&done.stdout);
    assert!(
        printed.contains(&format!("epsilon {}", meta["epsilon"].as_str().unwrap())) && printed.contains("certified"),
        "{printed}"
    );

    // Hostile: an existing file, renames that match nothing or merge names, no run, a damaged model.
    one_line_error(&export(&file, &[]), "already exists");
    let other = tmp.path().join("other.safetensors");
    one_line_error(&export(&other, &["^conv=x"]), "`^conv` matches no tensor (dense.0.bias");
    one_line_error(&export(&other, &["^dense\\.\\d\\.=x."]), "two tensors would both be named");
    one_line_error(&export(&other, &["no-equals"]), "give PATTERN=REPLACEMENT");
    one_line_error(&dptrain(&["export", d, "--out", other.to_str().unwrap()]), "holds no completed run");
    let bytes = std::fs::read(&model).unwrap();
    std::fs::write(&model, &bytes[..bytes.len() / 2]).unwrap();
    one_line_error(&export(&other, &[]), "model.safetensors");
    assert!(!other.exists(), "nothing written on a refusal");
}
