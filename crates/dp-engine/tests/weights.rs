//! Weight files against PyTorch: a small CNN of DP layers (conv, GroupNorm, conv, linear) loads
//! PyTorch's state dict as safetensors and gives PyTorch's logits on fixed inputs to 1e-5
//! (reference files and values from `scripts/reference/torch_weights.py`, provenance in
//! small_cnn.json); exported, it writes
//! PyTorch's own names, shapes and bytes (the linear weight transposed back, the norm's gamma and
//! beta as weight and bias) with its metadata; half-precision weights are converted. A renamed
//! or reshaped tensor, integers, a header that lies about its length, a truncated file, a
//! FIFO, a bad rename and a `torch.save` pickle (refused: unpickling runs code) are one-line
//! errors.

use burn::module::Module;
use burn::tensor::activation::tanh;
use burn::tensor::{Device, Tensor, TensorData};
use dp_engine::backend;
use dp_engine::nn::{Conv2d, Conv2dConfig, GroupNorm, GroupNormConfig, Linear, LinearConfig, PaddingConfig2d};
use dp_engine::weights::{load_weights, save_weights};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// PyTorch's `SmallCnn` of the reference script, in DP layers with the same names.
#[derive(Module, Debug)]
struct SmallCnn {
    conv1: Conv2d,
    norm: GroupNorm,
    conv2: Conv2d,
    fc: Linear,
}

impl SmallCnn {
    fn new(device: &Device) -> Self {
        Self {
            conv1: Conv2dConfig::new([1, 4], [3, 3]).with_padding(PaddingConfig2d::Explicit(1, 1, 1, 1)).init(device),
            norm: GroupNormConfig::new(2, 4).init(device),
            conv2: Conv2dConfig::new([4, 6], [3, 3])
                .with_stride([2, 2])
                .with_padding(PaddingConfig2d::Explicit(1, 1, 1, 1))
                .init(device),
            fc: LinearConfig::new(96, 10).init(device),
        }
    }

    fn logits(&self, x: Tensor<4>) -> Vec<f32> {
        let h = tanh(self.norm.forward(self.conv1.forward(x)));
        let h = tanh(self.conv2.forward(h));
        self.fc.forward(h.flatten::<2>(1, 3)).into_data().try_to_vec::<f32>().unwrap()
    }
}

fn data(file: &str) -> PathBuf {
    // Cargo names the checkout under test when it runs the tests; the path compiled in is the
    // one that built them, which a target folder shared by several checkouts may outlive.
    let crate_dir =
        std::env::var_os("CARGO_MANIFEST_DIR").map_or_else(|| env!("CARGO_MANIFEST_DIR").into(), PathBuf::from);
    crate_dir.join("tests/data/weights").join(file)
}

fn reference() -> Value {
    serde_json::from_slice(&std::fs::read(data("small_cnn.json")).unwrap()).unwrap()
}

fn inputs(device: &Device) -> Tensor<4> {
    let r = reference();
    let x: Vec<f32> = r["inputs"].as_array().unwrap().iter().map(|v| v.as_f64().unwrap() as f32).collect();
    Tensor::from_data(TensorData::new(x, [3, 1, 8, 8]), device)
}

fn assert_torch_logits(model: &SmallCnn, device: &Device, what: &str) {
    let expected: Vec<f64> = reference()["logits"].as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect();
    let got = model.logits(inputs(device));
    assert_eq!(got.len(), expected.len());
    for (g, e) in got.iter().zip(&expected) {
        assert!((f64::from(*g) - e).abs() < 1e-5, "{what}: {g} vs PyTorch's {e}");
    }
}

/// A safetensors file's header (names to dtype, shape, offsets) and its data.
fn safetensors(path: &Path) -> (BTreeMap<String, Value>, Vec<u8>) {
    let bytes = std::fs::read(path).unwrap();
    let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let header: BTreeMap<String, Value> = serde_json::from_slice(&bytes[8..8 + n]).unwrap();
    (header, bytes[8 + n..].to_vec())
}

/// The shape, type and bytes of each tensor of a safetensors file, by name.
fn tensor_bytes(path: &Path) -> BTreeMap<String, (Value, Vec<u8>)> {
    let (header, body) = safetensors(path);
    header
        .into_iter()
        .filter(|(k, _)| k != "__metadata__")
        .map(|(k, v)| {
            let (a, b) =
                (v["data_offsets"][0].as_u64().unwrap() as usize, v["data_offsets"][1].as_u64().unwrap() as usize);
            (k, (serde_json::json!([v["shape"], v["dtype"]]), body[a..b].to_vec()))
        })
        .collect()
}

/// The reference safetensors file with `from` replaced by `to` in its header (same length).
fn edited(dir: &Path, from: &str, to: &str) -> PathBuf {
    assert_eq!(from.len(), to.len());
    let bytes = std::fs::read(data("small_cnn.safetensors")).unwrap();
    let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let header = String::from_utf8(bytes[8..8 + n].to_vec()).unwrap().replacen(from, to, 1);
    let path = dir.join(format!("edited-{}.safetensors", to.replace(['"', ',', '[', ']'], "")));
    std::fs::write(&path, [&bytes[..8], header.as_bytes(), &bytes[8 + n..]].concat()).unwrap();
    path
}

#[test]
fn a_pytorch_state_dict_loads_with_pytorchs_logits_and_exports_as_pytorchs_bytes() {
    let device = backend::cpu().device;
    let from_safetensors = load_weights(SmallCnn::new(&device), &data("small_cnn.safetensors"), &[]).unwrap();
    assert_torch_logits(&from_safetensors, &device, "safetensors");
    let from_pt = from_safetensors;

    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("exported.safetensors");
    let metadata = [("epsilon".to_string(), "3".to_string()), ("guarantee".to_string(), "certified".to_string())];
    save_weights(&from_pt, &out, &metadata, &[]).unwrap();
    let (exported, torch) = (tensor_bytes(&out), tensor_bytes(&data("small_cnn.safetensors")));
    assert_eq!(exported.keys().collect::<Vec<_>>(), torch.keys().collect::<Vec<_>>(), "PyTorch's names");
    for (name, (shape, bytes)) in &torch {
        assert_eq!(&exported[name].0, shape, "{name}: PyTorch's shape and type");
        assert!(exported[name].1 == *bytes, "{name}: PyTorch's bytes");
    }
    let meta = &safetensors(&out).0["__metadata__"];
    assert_eq!((meta["epsilon"].as_str(), meta["guarantee"].as_str()), (Some("3"), Some("certified")));
    let back = load_weights(SmallCnn::new(&device), &out, &[]).unwrap();
    assert_torch_logits(&back, &device, "exported and loaded back");

    // Names mapped: a model whose names differ takes the file through a rename.
    let renamed = tmp.path().join("renamed.safetensors");
    save_weights(&from_pt, &renamed, &[], &[("^fc\\.", "head.")]).unwrap();
    assert!(tensor_bytes(&renamed).contains_key("head.weight"));
    let err = load_weights(SmallCnn::new(&device), &renamed, &[]).unwrap_err().to_string();
    assert!(err.contains("holds no tensor `fc.") && err.contains("2 of the model's missing"), "{err}");
    assert_torch_logits(
        &load_weights(SmallCnn::new(&device), &renamed, &[("^head\\.", "fc.")]).unwrap(),
        &device,
        "renamed",
    );
}

#[test]
fn a_file_that_does_not_fit_the_model_is_a_one_line_error() {
    let device = backend::cpu().device;
    let tmp = tempfile::tempdir().unwrap();
    let refused = |path: &Path, renames: &[(&str, &str)], needle: &str| {
        let err = load_weights(SmallCnn::new(&device), path, renames).unwrap_err().to_string();
        assert!(err.contains(needle) && !err.contains('\n'), "{}: {err}", path.display());
    };
    refused(&edited(tmp.path(), "\"fc.weight\"", "\"fc.wXight\""), &[], "fc.weight");
    refused(
        &edited(tmp.path(), "[4,1,3,3]", "[4,1,9,1]"),
        &[],
        "conv1.weight` is [4, 1, 9, 1] in the file where the model's is [4, 1, 3, 3]",
    );
    refused(&edited(tmp.path(), "\"F32\"", "\"F16\""), &[], "edited-F16.safetensors");
    refused(&edited(tmp.path(), "\"F32\"", "\"I32\""), &[], "values, not floating-point weights");
    // Half precision (as PyTorch writes it after .half()): converted, PyTorch's logits to f16's precision.
    let half = load_weights(SmallCnn::new(&device), &data("small_cnn_f16.safetensors"), &[]).unwrap();
    let expected = reference()["logits"].as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect::<Vec<_>>();
    for (g, e) in half.logits(inputs(&device)).iter().zip(&expected) {
        assert!((f64::from(*g) - e).abs() < 1e-2, "f16 weights: {g} vs {e}");
    }
    let lying = tmp.path().join("lying.safetensors");
    let mut bytes = std::fs::read(data("small_cnn.safetensors")).unwrap();
    bytes[..8].copy_from_slice(&u64::MAX.to_le_bytes());
    std::fs::write(&lying, &bytes).unwrap();
    refused(&lying, &[], "lying.safetensors");
    let truncated = tmp.path().join("truncated.safetensors");
    let bytes = std::fs::read(data("small_cnn.safetensors")).unwrap();
    std::fs::write(&truncated, &bytes[..bytes.len() / 2]).unwrap();
    refused(&truncated, &[], "truncated.safetensors");
    refused(&data("small_cnn.pt"), &[], "safetensors.torch.save_file");
    std::fs::write(tmp.path().join("empty"), b"").unwrap();
    refused(&tmp.path().join("empty"), &[], "empty");
    let fifo = tmp.path().join("fifo");
    assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    refused(&fifo, &[], "fifo");
    refused(&data("small_cnn.safetensors"), &[("(", "x")], "rename");
    // The model's tensors and 20,000 empty ones: refused from the header, before any tensor is
    // converted (it took minutes when each was converted and burn-store re-read the header).
    let padded = tmp.path().join("padded.safetensors");
    let bytes = std::fs::read(data("small_cnn.safetensors")).unwrap();
    let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let mut header: serde_json::Map<String, serde_json::Value> = serde_json::from_slice(&bytes[8..8 + n]).unwrap();
    for i in 0..20_000 {
        header.insert(format!("pad.{i}"), serde_json::json!({"dtype": "F32", "shape": [0], "data_offsets": [0, 0]}));
    }
    let text = serde_json::to_vec(&header).unwrap();
    std::fs::write(&padded, [&(text.len() as u64).to_le_bytes()[..], &text, &bytes[8 + n..]].concat()).unwrap();
    refused(&padded, &[], "which the model does not have (20000 unused)");
}
