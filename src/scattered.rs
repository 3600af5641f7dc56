//! A dataset's ScatterNet features (Tramèr and Boneh 2021): the library's
//! `dp_engine::nn::scatter_net::ScatterNet` (J = 2, L = 8, checked against Kymatio) of every image, computed once and
//! cached on disk under a name that is the SHA-256 of the transform and of the dataset (shape,
//! classes, labels, normalised values), so that another dataset or another transform can never
//! read it. A cache file is sealed by an HMAC under the cache folder's key (`crate::cache_key`)
//! and written atomically, owner-only (the features are the private data in another form); a
//! damaged or edited one is recomputed. The computation stops within a chunk (about a second)
//! when the run is interrupted. Features
//! are a fixed, data-independent function of each example alone, so DP-SGD on them is DP for
//! the images.

use crate::cache_key::cache_key;
use dp_data::safe_files::{OWNER_ONLY, read_regular, write_atomic};
use dp_data::{ImageDataset, SecretKey};
use dp_engine::error::{EngineError, Result};
use dp_engine::nn::scatter_net::ScatterNet;
use dp_run::seal::{SEAL_BYTES, seal, verifies};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

/// What the cache key names as the transform (changing the transform's code changes it).
const TRANSFORM: &str = "scattering J=2 L=8 order 2 (Kymatio 0.3 layout), f32, v1";
/// The first bytes of a cache file.
const MAGIC: &[u8; 8] = b"DPTSCAT2";
/// Bytes before the values: the magic and the seal.
const HEAD: usize = 8 + SEAL_BYTES;
/// Examples transformed per chunk (bounds the f64 copy in memory).
const CHUNK: usize = 2048;

/// The shape of the features of `shape` images: 81 channels per image channel.
pub fn feature_shape(shape: [usize; 3]) -> Result<[usize; 3]> {
    Ok(ScatterNet::new(shape)?.output_shape())
}

/// `data`'s normalised values, [`CHUNK`] examples at a time, in order.
fn chunks(data: &ImageDataset) -> impl Iterator<Item = Vec<f32>> + '_ {
    (0..data.len()).step_by(CHUNK).map(|start| {
        let indices: Vec<usize> = (start..(start + CHUNK).min(data.len())).collect();
        data.batch(&indices).0
    })
}

/// The cache file of `data`'s features in `dir`.
fn cache_file(dir: &Path, data: &ImageDataset) -> PathBuf {
    let mut key = Sha256::new();
    key.update(TRANSFORM.as_bytes());
    key.update(format!("{:?} {}", data.shape(), data.classes()).as_bytes());
    key.update(data.labels());
    for values in chunks(data) {
        values.iter().for_each(|x| key.update(x.to_le_bytes()));
    }
    dir.join(format!("scattering-{}.bin", hex::encode(key.finalize())))
}

/// The features a cache file holds, when it is whole: `len` values under their seal by `key`.
fn read_cache(path: &Path, len: usize, key: &SecretKey) -> Option<Vec<f32>> {
    let bytes = read_regular(path, (len as u64).saturating_mul(4).saturating_add(HEAD as u64)).ok()?;
    let (head, body) = bytes.split_at_checked(HEAD)?;
    if &head[..8] != MAGIC || body.len() != len * 4 || !verifies(key, &[MAGIC, body], &head[8..]) {
        return None;
    }
    Some(body.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect())
}

/// Writes `features` to the cache file `path`, sealed by `key`.
fn write_cache(path: &Path, features: &[f32], key: &SecretKey) -> Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| EngineError::invalid("cache", format!("{}: {e}", dir.display())))?;
    }
    let body: Vec<u8> = features.iter().flat_map(|x| x.to_le_bytes()).collect();
    let bytes = [MAGIC.as_slice(), &seal(key, &[MAGIC, &body]), &body].concat();
    Ok(write_atomic(path, &bytes, OWNER_ONLY)?)
}

/// The `len` features of `data` through `net`, chunk by chunk, stopped between chunks when
/// `interrupt` is raised.
fn compute(net: &ScatterNet, data: &ImageDataset, len: usize, interrupt: Option<&AtomicBool>) -> Result<Vec<f32>> {
    let mut features = Vec::with_capacity(len);
    for values in chunks(data) {
        if interrupt.is_some_and(|flag| flag.load(Ordering::SeqCst)) {
            return Err(EngineError::Interrupted(
                "while computing the ScatterNet features, before the first step: nothing to resume, run the command again".into(),
            ));
        }
        features.extend(net.features_of(&values));
    }
    Ok(features)
}

/// `data`'s ScatterNet features, read from the cache in `cache` when it holds them under its
/// key, else computed (`computing` is told how many examples first) and cached there; stopped
/// between chunks when `interrupt` is raised. A cache that cannot be used or written is
/// skipped: the features are the same.
pub fn scattered(
    data: &ImageDataset,
    cache: Option<&Path>,
    interrupt: Option<&AtomicBool>,
    computing: &mut dyn FnMut(usize),
) -> Result<ImageDataset> {
    let net = ScatterNet::new(data.shape())?;
    let shape = net.output_shape();
    let len =
        data.len().checked_mul(shape.iter().product()).ok_or_else(|| EngineError::invalid("dataset", "too large"))?;
    dp_data::memory::check("the ScatterNet features", (len as u128).checked_mul(8))?;
    // A cache whose key cannot be read or made is not used (the features are recomputed).
    let cached = cache.and_then(|dir| cache_key(dir).ok().map(|key| (cache_file(dir, data), key)));
    let features = match cached.as_ref().and_then(|(f, key)| read_cache(f, len, key)) {
        Some(features) => features,
        None => {
            computing(data.len());
            let features = compute(&net, data, len, interrupt)?;
            if let Some((f, key)) = &cached {
                // The features are the same without a cache: a folder that cannot be written
                // costs the next run a recomputation, nothing else.
                let _ = write_cache(f, &features, key);
            }
            features
        }
    };
    ImageDataset::from_features(features, data.labels().to_vec(), shape, data.classes()).map_err(EngineError::from)
}

#[cfg(test)]
mod tests {
    use super::*;
    use dp_data::Normalization;

    fn images(n: usize, shift: u8) -> ImageDataset {
        let pixels = (0..n * 784).map(|i| (i as u8).wrapping_mul(7).wrapping_add(shift)).collect();
        let labels = (0..n).map(|i| (i % 10) as u8).collect();
        ImageDataset::new(pixels, labels, [1, 28, 28], 10, Normalization { mean: vec![0.3], std: vec![0.4] }).unwrap()
    }

    #[test]
    fn features_are_cached_per_dataset_and_recomputed_when_damaged() {
        let dir = tempfile::tempdir().unwrap();
        let data = images(3, 0);
        let mut computed = 0;
        let first = scattered(&data, Some(dir.path()), None, &mut |n| computed += n).unwrap();
        assert_eq!((computed, first.shape()), (3, [81, 7, 7]));
        let again = scattered(&data, Some(dir.path()), None, &mut |n| computed += n).unwrap();
        assert_eq!(computed, 3, "read from the cache");
        assert_eq!(again.batch(&[0, 1, 2]), first.batch(&[0, 1, 2]));
        // One image through the transform alone gives the same features.
        let alone = dp_kernels::scattering::Scattering2d::new(28, 28, 2, 8)
            .unwrap()
            .transform(&data.batch(&[1]).0.into_iter().map(f64::from).collect::<Vec<_>>());
        assert_eq!(first.batch(&[1]).0, alone.into_iter().map(|x| x as f32).collect::<Vec<_>>());
        // A damaged cache file is recomputed; another dataset has its own file.
        let file = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| p.extension().is_some_and(|e| e == "bin"))
            .unwrap();
        let mut bytes = std::fs::read(&file).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        std::fs::write(&file, bytes).unwrap();
        let repaired = scattered(&data, Some(dir.path()), None, &mut |n| computed += n).unwrap();
        assert_eq!((computed, repaired.batch(&[2])), (6, first.batch(&[2])));
        scattered(&images(3, 1), Some(dir.path()), None, &mut |n| computed += n).unwrap();
        assert_eq!((computed, std::fs::read_dir(dir.path()).unwrap().count()), (9, 3), "two caches and the key");
        // Zeroed features re-sealed by an unkeyed digest (what the old seal was) are not used.
        let zeroed =
            [MAGIC.as_slice(), &Sha256::digest(vec![0u8; 3 * 81 * 49 * 4]), &vec![0u8; 3 * 81 * 49 * 4]].concat();
        std::fs::write(&file, zeroed).unwrap();
        let again = scattered(&data, Some(dir.path()), None, &mut |n| computed += n).unwrap();
        assert_eq!((computed, again.batch(&[0])), (12, first.batch(&[0])), "recomputed");
        // Sealed under another key (another user's cache): recomputed as well.
        let forged = [
            MAGIC.as_slice(),
            &seal(&SecretKey::from_os(), &[MAGIC, &vec![0u8; 3 * 81 * 49 * 4]]),
            &vec![0u8; 3 * 81 * 49 * 4],
        ]
        .concat();
        std::fs::write(&file, forged).unwrap();
        scattered(&data, Some(dir.path()), None, &mut |n| computed += n).unwrap();
        assert_eq!(computed, 15);
    }

    #[test]
    fn an_interrupt_stops_the_computation() {
        let raised = AtomicBool::new(true);
        let err = scattered(&images(3, 0), None, Some(&raised), &mut |_| {}).unwrap_err();
        assert!(matches!(err, EngineError::Interrupted(_)), "{err}");
    }

    #[test]
    fn images_too_small_are_refused() {
        let data =
            ImageDataset::new(vec![0; 4], vec![0], [1, 2, 2], 2, Normalization { mean: vec![0.0], std: vec![1.0] })
                .unwrap();
        let err = scattered(&data, None, None, &mut |_| {}).unwrap_err().to_string();
        assert!(err.contains("too small"), "{err}");
    }
}
