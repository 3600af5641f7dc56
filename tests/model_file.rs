//! Models in and out of `dptrain train`: a completed run leaves `model.safetensors` (its released
//! model in PyTorch's names and layouts, its report in the metadata, no key, and a kept key is
//! warned of); `--init-from` starts another run from it (the accuracy it reached is where the
//! next starts); a file that does not fit the model, a FIFO and a pickle are one-line errors.

use crate::common::*;
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
    let (mut exported_meta, names) = header(&file);
    assert_eq!(names, ["head.bias", "head.weight", "layers.0.bias", "layers.0.weight"]);
    let seal = exported_meta.as_object_mut().unwrap().remove("report_seal").unwrap();
    assert_ne!(Some(&seal), meta.get("report_seal"), "sealed again under its new names");
    let mut unsealed = meta.clone();
    unsealed.as_object_mut().unwrap().remove("report_seal").unwrap();
    assert_eq!(exported_meta, unsealed, "the report travels unchanged");
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
    one_line_error(&export(&other, &["^dense.0.bias$=__metadata__"]), "keeps `__metadata__` for the metadata");
    one_line_error(&dptrain(&["export", d, "--out", other.to_str().unwrap()]), "holds no completed run");
    let bytes = std::fs::read(&model).unwrap();
    std::fs::write(&model, &bytes[..bytes.len() / 2]).unwrap();
    one_line_error(&export(&other, &[]), "model.safetensors");
    assert!(!other.exists(), "nothing written on a refusal");
}

/// `path`'s safetensors file with its metadata edited by `edit` (tensors unchanged).
fn with_metadata(path: &Path, edit: &dyn Fn(&mut serde_json::Map<String, Value>)) {
    let (bytes, mut header, data) = parsed(path);
    edit(header.get_mut("__metadata__").unwrap().as_object_mut().unwrap());
    let text = serde_json::to_vec(&header).unwrap();
    std::fs::write(path, [&(text.len() as u64).to_le_bytes()[..], &text, &bytes[data..]].concat()).unwrap();
}

#[test]
fn a_model_files_report_is_believed_only_where_its_seal_verifies() {
    let (tmp, data) = temp_with_dataset(300);
    let d = data.to_str().unwrap();
    let run = |name: &str, extra: &[&str]| {
        let out = tmp.path().join(name);
        let args = [&base_args(d, out.to_str().unwrap())[..], &["--epochs", "1", "--seed", "2"], extra].concat();
        (train_json(args, &out).0, out)
    };
    let (_, private) = run("private", &["--noise-multiplier", "1"]);
    let (_, open) = run("open", &["--mechanism", "none"]);
    let export = |dir: &Path, out: &str| {
        dptrain(&["export", dir.to_str().unwrap(), "--out", tmp.path().join(out).to_str().unwrap()])
    };
    let sealed = export(&private, "sealed.safetensors");
    assert!(
        String::from_utf8_lossy(&sealed.stdout).contains("certified"),
        "{}",
        String::from_utf8_lossy(&sealed.stdout)
    );

    // Anyone who can write the file can write its metadata: a smaller epsilon is not believed.
    let model = private.join("model.safetensors");
    let original = std::fs::read(&model).unwrap();
    with_metadata(&model, &|m| _ = m.insert("epsilon".into(), Value::from("0.001")));
    let forged = export(&private, "forged.safetensors");
    let printed = String::from_utf8_lossy(&forged.stdout);
    assert!(
        forged.status.success() && printed.contains("epsilon 0.001") && !printed.contains("certified"),
        "{printed}"
    );
    assert!(printed.contains("none: its report is not sealed"), "{printed}");
    assert!(header(&tmp.path().join("forged.safetensors")).0.get("report_seal").is_none(), "no seal travels");

    // The weights of a run without noise under the private run's report and seal: not believed.
    std::fs::write(&model, &original).unwrap();
    let (private_meta, _) = header(&model);
    let open_model = open.join("model.safetensors");
    with_metadata(&open_model, &|m| *m = private_meta.as_object().unwrap().clone());
    let swapped = export(&open, "swapped.safetensors");
    assert!(!String::from_utf8_lossy(&swapped.stdout).contains("certified"));

    // A run started from a file records its digest, and its report where the seal verifies.
    let digest = |p: &Path| {
        let out = std::process::Command::new("sha256sum").arg(p).output().unwrap();
        String::from_utf8_lossy(&out.stdout).split_whitespace().next().unwrap().to_string()
    };
    let (from_sealed, _) = run("from-sealed", &["--noise-multiplier", "1", "--init-from", model.to_str().unwrap()]);
    let initial = &from_sealed["initial_weights"];
    assert_eq!(initial["sha256"].as_str().unwrap(), digest(&model));
    assert_eq!(initial["report"]["epsilon"], private_meta["epsilon"], "{initial}");
    assert!(from_sealed["notes"].to_string().contains("spends it again"), "{}", from_sealed["notes"]);
    let (from_swapped, _) =
        run("from-swapped", &["--noise-multiplier", "1", "--init-from", open_model.to_str().unwrap()]);
    assert!(from_swapped["initial_weights"]["report"].is_null(), "{}", from_swapped["initial_weights"]);
    assert_eq!(from_swapped["initial_weights"]["sha256"].as_str().unwrap(), digest(&open_model));
}

#[test]
fn a_run_whose_owner_key_cannot_be_used_takes_no_step() {
    use std::ffi::OsStr;
    use std::os::unix::fs::{PermissionsExt, symlink};
    let (tmp, data) = temp_with_dataset(200);
    let keys = tmp.path().join("keys");
    std::fs::create_dir(&keys).unwrap();
    let key = |name: &str, text: &[u8], mode: u32| {
        let path = keys.join(name);
        std::fs::write(&path, text).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        path
    };
    let valid = key("valid.key", "ab".repeat(32).as_bytes(), 0o600);
    let cases = [
        key("empty.key", b"", 0o600),
        key("short.key", "ab".repeat(31).as_bytes(), 0o600),
        key("long.key", "ab".repeat(33).as_bytes(), 0o600),
        key("not-hex.key", "zz".repeat(32).as_bytes(), 0o600),
        key("bom.key", &[b"\xef\xbb\xbf".as_slice(), "ab".repeat(32).as_bytes()].concat(), 0o600),
        key("raw.key", &[7u8; 32], 0o600),
        key("shared.key", "ab".repeat(32).as_bytes(), 0o644),
        key("group.key", "ab".repeat(32).as_bytes(), 0o640),
        {
            let link = keys.join("link.key");
            symlink(&valid, &link).unwrap();
            link
        },
        {
            let dangling = keys.join("dangling.key");
            symlink(keys.join("nothing"), &dangling).unwrap();
            dangling
        },
        {
            let fifo = keys.join("fifo.key");
            assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
            fifo
        },
        {
            let sparse = keys.join("sparse.key");
            let file = std::fs::File::create(&sparse).unwrap();
            file.set_len(1 << 30).unwrap();
            std::fs::set_permissions(&sparse, std::fs::Permissions::from_mode(0o600)).unwrap();
            sparse
        },
        keys.clone(),
        "/dev/null".into(),
        "/dev/zero".into(),
        "/proc/self/environ".into(),
        format!("{}/", keys.join("k").display()).into(),
        keys.join("x".repeat(5000)),
    ];
    let d = data.to_str().unwrap();
    for (i, case) in cases.iter().enumerate() {
        let out = tmp.path().join(format!("run-{i}"));
        let args = [&base_args(d, out.to_str().unwrap())[..], &["--noise-multiplier", "1"]].concat();
        let run = dptrain_with(&args, &[("DPTRAIN_OWNER_KEY", Some(case.as_os_str()))]);
        one_line_error(&run, "owner key");
        assert!(String::from_utf8_lossy(&run.stderr).contains("DPTRAIN_OWNER_KEY"), "{}", case.display());
        assert!(!out.join("checkpoint.bin").exists() && !out.join("config.toml").exists(), "{}", case.display());
    }
    // No place to keep one at all.
    let out = tmp.path().join("homeless");
    let args = [&base_args(d, out.to_str().unwrap())[..], &["--noise-multiplier", "1"]].concat();
    let none: Option<&OsStr> = None;
    let run = dptrain_with(&args, &[("DPTRAIN_OWNER_KEY", none), ("XDG_CONFIG_HOME", none), ("HOME", none)]);
    one_line_error(&run, "no place to keep it");
    // A usable key: the completed run's model is sealed.
    let out = tmp.path().join("sealed");
    let args = [&base_args(d, out.to_str().unwrap())[..], &["--noise-multiplier", "1"]].concat();
    let run = dptrain_with(&args, &[("DPTRAIN_OWNER_KEY", Some(valid.as_os_str()))]);
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    assert!(header(&out.join("model.safetensors")).0["report_seal"].is_string());
}

#[test]
fn an_owner_key_inside_the_run_folder_is_refused() {
    let (tmp, data) = temp_with_dataset(200);
    let d = data.to_str().unwrap();
    let out = tmp.path().join("run");
    let o = out.to_str().unwrap();
    let args = [&base_args(d, o)[..], &["--noise-multiplier", "1"]].concat();
    let inside = out.join("owner.key");
    let nested = out.join("sub").join("..").join("owner.key");
    for env in [
        ("DPTRAIN_OWNER_KEY", inside.as_os_str()),
        ("DPTRAIN_OWNER_KEY", nested.as_os_str()),
        ("XDG_CONFIG_HOME", out.as_os_str()),
    ] {
        let unset = if env.0 == "XDG_CONFIG_HOME" { vec![("DPTRAIN_OWNER_KEY", None)] } else { vec![] };
        let run = dptrain_with(&args, &[&[(env.0, Some(env.1))][..], &unset[..]].concat());
        one_line_error(&run, "is inside the folder");
        assert!(!inside.exists() && !out.join("dptrain").exists(), "no key made there");
    }
    // The run folder's own files as the key: inside, refused (a completed run's report.json).
    let key = tmp.path().join("owner.key");
    let good = [("DPTRAIN_OWNER_KEY", Some(key.as_os_str()))];
    assert!(dptrain_with(&args, &good).status.success());
    let report = out.join("report.json");
    let again = [&args[..], &["--overwrite"]].concat();
    one_line_error(&dptrain_with(&again, &[("DPTRAIN_OWNER_KEY", Some(report.as_os_str()))]), "is inside the folder");
}

#[test]
fn a_resumed_run_reports_the_initial_weights_it_started_from() {
    let (tmp, data) = temp_with_dataset(400);
    let d = data.to_str().unwrap();
    let base = tmp.path().join("base");
    let args = [&base_args(d, base.to_str().unwrap())[..], &["--mechanism", "none", "--epochs", "1"]].concat();
    assert!(dptrain(&args).status.success());
    let file = tmp.path().join("init.safetensors");
    std::fs::copy(base.join("model.safetensors"), &file).unwrap();
    let digest = hex::encode(<sha2::Sha256 as sha2::Digest>::digest(std::fs::read(&file).unwrap()));
    let other = tmp.path().join("other");
    let args =
        [&base_args(d, other.to_str().unwrap())[..], &["--mechanism", "none", "--epochs", "1", "--seed", "5"]].concat();
    assert!(dptrain(&args).status.success());
    for replace in [false, true] {
        let out = tmp.path().join(format!("from-{replace}"));
        let o = out.to_str().unwrap();
        let init = ["--noise-multiplier", "1", "--epochs", "2", "--init-from", file.to_str().unwrap()];
        let stop = dptrain(&[&base_args(d, o)[..], &init, &["--stop-after", "3"]].concat());
        assert!(stop.status.success(), "{}", String::from_utf8_lossy(&stop.stderr));
        // The file gone, or another model in its place.
        match replace {
            false => std::fs::remove_file(&file).unwrap(),
            true => std::fs::copy(other.join("model.safetensors"), &file).map(|_| ()).unwrap(),
        }
        let (report, _) = train_json(vec!["train", "--resume", "--device", "cpu", "--out-dir", o], &out);
        let recorded = &report["initial_weights"];
        assert_eq!(recorded["sha256"], digest.as_str(), "replaced {replace}: {recorded}");
        assert_eq!(recorded["report"]["mechanism"], "none", "the sealed report of the file it started from");
        let notes = report["notes"].as_array().unwrap();
        assert!(notes.iter().any(|n| n.as_str().unwrap().contains(&digest)), "{notes:?}");
        std::fs::copy(base.join("model.safetensors"), &file).unwrap();
    }
}
