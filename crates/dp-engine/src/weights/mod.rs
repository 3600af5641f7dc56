//! Weight files in and out: a model's parameters loaded from safetensors (pretrained weights for
//! DP fine-tuning; PyTorch's `safetensors.torch.save_file(model.state_dict(), path)` writes one)
//! and saved as safetensors in PyTorch's names and layouts, with metadata (a run's privacy
//! report). A pickle (`torch.save`) is refused with that conversion: unpickling runs code.
//! burn-store reads and writes the files; [`torch_layout`] maps the DP layers to PyTorch's. A file that does not fit the model exactly
//! (a tensor missing, one the model lacks, a shape or type that differs) is refused in one line
//! naming the tensor, never partly loaded.

pub mod torch_layout;

use crate::error::{EngineError, Result};
use burn::module::Module;
use burn::store::burn_pack::Tensor as PackTensor;
use burn::store::{
    ApplyError, ApplyResult, BurnToPyTorchAdapter, KeyRemapper, ModuleAdapter, ModuleSnapshot, ModuleStore,
    PyTorchToBurnAdapter, SafetensorsStore, bridge,
};
use dp_data::safe_files::{PUBLIC, file_error, open_regular, read_bounded, write_atomic};
use std::collections::HashSet;
use std::path::Path;
use torch_layout::DpTorchLayout;

/// The largest weight file read (the zoo's largest model, WRN-16-4, is 11 MB in float32).
pub const MAX_WEIGHTS_FILE: u64 = 4 << 30;

/// A rename of the file's tensor names to the model's: a regular expression and its
/// replacement (`$1` for a group), as `("^features\\.", "convs.")`.
pub type Rename<'a> = (&'a str, &'a str);

/// `model` with every parameter from the safetensors file `path`, the file's names after
/// `renames`, in PyTorch's layouts.
pub fn load_weights<M: Module>(mut model: M, path: &Path, renames: &[Rename<'_>]) -> Result<M> {
    let remapper = remapper(renames)?;
    let bytes = file_bytes(path)?;
    refuse_foreign_names(&model, &header_names(&bytes, path)?, &remapper).map_err(|reason| file_error(path, reason))?;
    let (tensors, _) = remapper.remap(file_tensors(bytes, path)?);
    let adapter: Box<dyn ModuleAdapter> = Box::new(DpTorchLayout(PyTorchToBurnAdapter));
    check(&model.apply(tensors, None, Some(adapter), true)).map_err(|reason| file_error(path, reason))?;
    Ok(model)
}

/// Refuses a file whose tensor `names` (renamed by `remapper`) include one `model` lacks, from
/// the header alone, before any tensor is converted (a header listing 20,000 empty tensors took
/// minutes when each was converted first): the missing ones named first, as the full check
/// does. A file without such a name goes on to the full check, whose shape errors come first.
fn refuse_foreign_names<M: Module>(
    model: &M,
    names: &[String],
    remapper: &KeyRemapper,
) -> std::result::Result<(), String> {
    let expected: HashSet<String> = model
        .collect(None, Some(Box::new(DpTorchLayout(BurnToPyTorchAdapter))), true)
        .into_iter()
        .map(|t| t.name)
        .collect();
    let patterns = remapper.to_regex_pairs();
    let present: HashSet<String> = names
        .iter()
        .map(|name| {
            patterns.iter().fold(name.clone(), |n, (pattern, to)| match pattern.is_match(&n) {
                true => pattern.replace_all(&n, to.as_str()).into_owned(),
                false => n,
            })
        })
        .collect();
    let mut unused: Vec<String> = present.iter().filter(|n| !expected.contains(*n)).cloned().collect();
    if unused.is_empty() {
        return Ok(());
    }
    let mut missing: Vec<(String, String)> =
        expected.iter().filter(|n| !present.contains(*n)).map(|n| (n.clone(), String::new())).collect();
    missing.sort();
    unused.sort();
    check(&ApplyResult { applied: Vec::new(), skipped: Vec::new(), missing, unused, errors: Vec::new() })
}

/// The remapper of `renames`, refused in one line where a pattern is not a regular expression
/// (burn-store's own `with_key_remapping` panics on one).
fn remapper(renames: &[Rename<'_>]) -> Result<KeyRemapper> {
    KeyRemapper::from_patterns(renames.to_vec())
        .map_err(|e| EngineError::invalid("rename", e.to_string().replace('\n', " ")))
}

/// The bytes of the weight file `path`, refused when it is a PyTorch pickle.
fn file_bytes(path: &Path) -> Result<Vec<u8>> {
    let (file, len) = open_regular(path)?;
    dp_data::memory::check(&format!("the weight file {}", path.display()), Some(u128::from(len) * 2))?;
    let bytes = read_bounded(file, len, path, MAX_WEIGHTS_FILE)?;
    // A `torch.save` file is a zip archive ("PK") or a legacy pickle (protocol 2 and up: 0x80).
    if bytes.starts_with(b"PK") || bytes.starts_with(&[0x80]) {
        return Err(file_error(
            path,
            "is a PyTorch pickle (torch.save), which is not read (unpickling runs code): convert it with `safetensors.torch.save_file(model.state_dict(), \"model.safetensors\")`",
        )
        .into());
    }
    Ok(bytes)
}

/// The tensor names a safetensors file's header lists (its 8-byte length, then a JSON object of
/// tensors beside `__metadata__`), read without converting any tensor.
fn header_names(bytes: &[u8], path: &Path) -> Result<Vec<String>> {
    let bad = |why: &str| EngineError::from(file_error(path, format!("is not a safetensors file ({why})")));
    let len =
        bytes.get(..8).map(|b| u64::from_le_bytes(b.try_into().unwrap_or([0; 8]))).ok_or_else(|| bad("too short"))?;
    let header = usize::try_from(len)
        .ok()
        .and_then(|n| bytes.get(8..8usize.checked_add(n)?))
        .ok_or_else(|| bad("its header is longer than the file"))?;
    let map: serde_json::Map<String, serde_json::Value> =
        serde_json::from_slice(header).map_err(|_| bad("its header is not a JSON object"))?;
    Ok(map.into_iter().map(|(k, _)| k).filter(|k| k != "__metadata__").collect())
}

/// Every tensor of the weight file's `bytes`, read into memory as f32 (a damaged file fails
/// here, not halfway through the model).
fn file_tensors(bytes: Vec<u8>, path: &Path) -> Result<Vec<PackTensor>> {
    let bad = |e: &dyn std::fmt::Display| EngineError::from(file_error(path, e.to_string().replace('\n', " ")));
    let lazy: Vec<PackTensor> =
        SafetensorsStore::from_bytes(Some(bytes)).get_all_tensors().map_err(|e| bad(&e))?.values().cloned().collect();
    lazy.into_iter()
        .map(|t| {
            let name = t.name.clone();
            if !t.dtype.is_float() {
                let reason = format!("tensor `{name}` holds {:?} values, not floating-point weights", t.dtype);
                return Err(file_error(path, reason).into());
            }
            let data = bridge::into_data(t).map_err(|e| bad(&e))?;
            // The engine's parameters are f32: half, bfloat16 and double precision are converted.
            let data = data.try_cast_as::<f32>().map_err(|e| bad(&format!("tensor `{name}`: {e:?}")))?;
            Ok(bridge::from_data(data, name, None))
        })
        .collect()
}

/// Nothing less, nothing more, nothing else: the file's tensors are exactly the model's.
fn check(result: &ApplyResult) -> std::result::Result<(), String> {
    if let Some(error) = result.errors.first() {
        return Err(match error {
            ApplyError::ShapeMismatch { path, expected, found } => format!(
                "tensor `{path}` is {:?} in the file where the model's is {:?}",
                found.as_slice(),
                expected.as_slice()
            ),
            ApplyError::DTypeMismatch { path, expected, found } => {
                format!("tensor `{path}` is {found:?} in the file where the model's is {expected:?}")
            }
            other => other.to_string(),
        });
    }
    if let Some((path, _)) = result.missing.first() {
        return Err(format!(
            "holds no tensor `{path}` ({} of the model's missing): rename the file's tensors to the model's",
            result.missing.len()
        ));
    }
    if let Some(path) = result.unused.first() {
        return Err(format!("holds tensor `{path}`, which the model does not have ({} unused)", result.unused.len()));
    }
    Ok(())
}

/// Writes `model`'s parameters to `path` as safetensors ([`weights_bytes`]).
pub fn save_weights<M: Module>(
    model: &M,
    path: &Path,
    metadata: &[(String, String)],
    renames: &[Rename<'_>],
) -> Result<()> {
    let bytes = weights_bytes(model, metadata, renames).map_err(|e| file_error(path, e))?;
    Ok(write_atomic(path, &bytes, PUBLIC)?)
}

/// `model`'s parameters as a safetensors file, in PyTorch's names and layouts after `renames`
/// (the model's names to the file's), with `metadata` (string pairs); what fails, in one line.
pub fn weights_bytes<M: Module>(
    model: &M,
    metadata: &[(String, String)],
    renames: &[Rename<'_>],
) -> std::result::Result<Vec<u8>, String> {
    // Enum modules (a choice of architectures) leave no variant name in the tensors' names.
    let mut store = SafetensorsStore::from_bytes(None)
        .remap(remapper(renames).map_err(|e| e.to_string())?)
        .skip_enum_variants(true)
        .with_to_adapter(DpTorchLayout(BurnToPyTorchAdapter));
    for (key, value) in metadata {
        store = store.metadata(key.clone(), value.clone());
    }
    model.save_into(&mut store).map_err(|e| e.to_string())?;
    store.get_bytes().map_err(|e| e.to_string())
}
