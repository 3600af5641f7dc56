//! A run folder's checkpoint as JSON a test can edit, and back: the app's header, with the
//! library state's `state` metadata under `state` (the sizes of its allocation tensors under
//! `state.allocation`, null when it has none). Written back unsealed, so a test seals it with
//! the key of the forger it plays.

use burn_pack::{Bytes, DType, Reader, Tensor, Writer};
use serde_json::Value;

/// Where the app's header ends in a checkpoint file.
fn header_end(bytes: &[u8]) -> usize {
    16 + u64::from_le_bytes(bytes[8..16].try_into().unwrap()) as usize
}

/// The library's burnpack inside a checkpoint file.
fn pack(bytes: &[u8]) -> Reader {
    Reader::from_bytes(Bytes::from_bytes_vec(bytes[header_end(bytes)..bytes.len() - 32].to_vec())).unwrap()
}

/// The sizes of the allocation tensors of `tensors`, in order (null when there are none).
fn allocation_sizes(tensors: &[Tensor]) -> Value {
    let mut named: Vec<(&str, usize)> = tensors
        .iter()
        .filter(|t| t.name.starts_with("allocation."))
        .map(|t| (t.name.as_str(), t.shape.num_elements()))
        .collect();
    named.sort();
    if named.is_empty() { Value::Null } else { named.into_iter().map(|(_, n)| n).collect() }
}

/// The checkpoint file `bytes` as editable JSON.
pub fn view(bytes: &[u8]) -> Value {
    let mut header: Value = serde_json::from_slice(&bytes[16..header_end(bytes)]).unwrap();
    let pack = pack(bytes);
    let mut state: Value = serde_json::from_str(&pack.metadata()["state"]).unwrap();
    state["allocation"] = allocation_sizes(&pack.into_tensors().unwrap());
    header["state"] = state;
    header
}

/// The body (all but the MAC) of the checkpoint file `bytes` edited into `view`: an allocation
/// of other sizes is replaced by zeros of those sizes.
pub fn body(bytes: &[u8], view: &Value) -> Vec<u8> {
    let mut header = view.clone();
    let mut state = header.as_object_mut().unwrap().remove("state").unwrap();
    let sizes = state.as_object_mut().unwrap().remove("allocation").unwrap();
    let pack = pack(bytes);
    let metadata = pack.metadata().clone();
    let mut tensors = pack.into_tensors().unwrap();
    if allocation_sizes(&tensors) != sizes {
        tensors.retain(|t| !t.name.starts_with("allocation."));
        for (i, n) in sizes.as_array().into_iter().flatten().enumerate() {
            let n = n.as_u64().unwrap() as usize;
            let zeros = Bytes::from_bytes_vec(vec![0; 4 * n]);
            tensors.push(Tensor::new(format!("allocation.{i:05}"), DType::F32, [n], None, zeros));
        }
    }
    let mut writer = Writer::new(tensors);
    for (key, value) in &metadata {
        let value = if key == "state" { state.to_string() } else { value.clone() };
        writer = writer.with_metadata(key, &value);
    }
    let json = serde_json::to_vec(&header).unwrap();
    [&bytes[..8], &(json.len() as u64).to_le_bytes(), &json, &writer.into_bytes().unwrap()].concat()
}
