//! The zoo's wrn-16-4 from a PyTorch-layout weight file: PyTorch's logits. The reference
//! (`scripts/reference/torch_wrn.py`, provenance in tests/data/wrn_16_4.json) builds the same
//! network in PyTorch (weight-standardised convolutions, GroupNorm, the shortcut convolutions),
//! fills its state dict by a formula, and records the names, shapes, fixed inputs and logits; this
//! test writes the safetensors file of that state dict by the same formula (PyTorch's names and
//! layouts, written here byte by byte, not by dp-engine) and loads it into dptrain's model.

use burn::tensor::{Tensor, TensorData};
use dp_engine::backend;
use dp_engine::lots::ImageClassifier;
use dp_engine::weights::load_weights;
use dptrain::zoo::{ModelName, ModelSpec, Normalization, build};
use rand::SeedableRng;
use serde_json::Value;

/// The reference's value of element `i` of the state dict's tensor `t` (`name`, of `rank`).
fn formula(t: usize, i: usize, name: &str, rank: usize) -> f32 {
    let v = 0.1 * (0.37 * i as f64 + 1.3 * t as f64).sin();
    (if name.ends_with("weight") && rank == 1 { v + 1.0 } else { v }) as f32
}

/// The safetensors bytes of the state dict `names` (name, shape) by [`formula`].
fn state_dict(names: &[Value]) -> Vec<u8> {
    let (mut header, mut body) = (serde_json::Map::new(), Vec::new());
    for (t, entry) in names.iter().enumerate() {
        let name = entry[0].as_str().unwrap();
        let shape: Vec<usize> = entry[1].as_array().unwrap().iter().map(|d| d.as_u64().unwrap() as usize).collect();
        let start = body.len();
        for i in 0..shape.iter().product::<usize>() {
            body.extend_from_slice(&formula(t, i, name, shape.len()).to_le_bytes());
        }
        header.insert(
            name.into(),
            serde_json::json!({"dtype": "F32", "shape": shape, "data_offsets": [start, body.len()]}),
        );
    }
    let header = serde_json::to_vec(&header).unwrap();
    [&(header.len() as u64).to_le_bytes()[..], &header, &body].concat()
}

#[test]
fn wrn_16_4_from_pytorchs_state_dict_gives_pytorchs_logits() {
    let reference: Value =
        serde_json::from_slice(&std::fs::read(crate::common::workspace().join("tests/data/wrn_16_4.json")).unwrap())
            .unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("wrn.safetensors");
    std::fs::write(&file, state_dict(reference["names"].as_array().unwrap())).unwrap();
    let device = backend::cpu().device;
    let spec = ModelSpec {
        name: ModelName::Wrn16x4,
        activation: dp_engine::nn::activation::Activation::Relu,
        hidden: None,
        normalization: Normalization::None,
    };
    let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(1);
    let model = load_weights(build(spec, [3, 32, 32], 10, &mut rng, &device).unwrap(), &file, &[]).unwrap();
    let x: Vec<f32> = reference["inputs"].as_array().unwrap().iter().map(|v| v.as_f64().unwrap() as f32).collect();
    let logits = model.logits(Tensor::from_data(TensorData::new(x, [2, 3, 32, 32]), &device));
    let got = logits.into_data().try_to_vec::<f32>().unwrap();
    let expected: Vec<f64> = reference["logits"].as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect();
    assert_eq!(got.len(), expected.len());
    for (g, e) in got.iter().zip(&expected) {
        assert!((f64::from(*g) - e).abs() < 1e-5 * e.abs().max(1.0), "{g} vs PyTorch's {e}");
    }
}
