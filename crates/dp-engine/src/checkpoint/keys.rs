//! A library run's [`StreamKeys`] in a key file of their own, as the `dptrain` app keeps its
//! run's: owner-only permissions, written atomically and never through a link, refused on load
//! when others may read it or it is not this user's, and removed when the run completes (a
//! finished run's released model keeps its guarantee only while its noise cannot be
//! regenerated). Each checkpoint records the keys' fingerprint, so a resume with other keys or
//! another seed is refused ([`crate::checkpoint::restore`]).
//!
//! ```no_run
//! # use dp_engine::checkpoint::StreamKeys;
//! # fn demo<M: burn::module::Module>(dp: &dp_engine::engine::DpOptimizer<M>) -> dp_engine::Result<()> {
//! let path = std::path::Path::new("run/stream.key");
//! dp.keys().save(path)?; // beside the checkpoint, never with the model
//! let keys = StreamKeys::load(path)?; // to resume: PrivacyEngine::with_keys(keys)
//! StreamKeys::remove(path)?; // once the run is complete
//! # Ok(()) }
//! ```

use crate::error::Result;
use crate::noise::NOISE_STREAM;
use dp_data::safe_files::{OWNER_ONLY, file_error, occupied, read_secret, remove_if_present, write_atomic};
use dp_data::sampler::SAMPLER_STREAM;
use dp_data::{ChaChaState, SecretKey};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::path::Path;

/// The keys of a run's lot sampler and noise streams: secret (anyone holding the noise key can
/// subtract the noise), unless derived from a seed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamKeys {
    sampler: SecretKey,
    noise: SecretKey,
}

impl StreamKeys {
    /// Keys from `seed` (a reproducible run) or from the OS.
    pub fn for_run(seed: Option<u64>) -> Self {
        Self { sampler: SecretKey::for_run(seed), noise: SecretKey::for_run(seed) }
    }

    /// The keys `sampler` and `noise`, as a key file holds them.
    pub fn new(sampler: SecretKey, noise: SecretKey) -> Self {
        Self { sampler, noise }
    }

    /// The lot sampler's key.
    pub fn sampler_key(&self) -> &SecretKey {
        &self.sampler
    }

    /// The noise's key.
    pub fn noise_key(&self) -> &SecretKey {
        &self.noise
    }

    /// The lot sampler's stream at its start.
    pub fn sampler_stream(&self) -> ChaChaState {
        ChaChaState::keyed(self.sampler.clone(), SAMPLER_STREAM)
    }

    /// The noise stream at its start.
    pub fn noise_stream(&self) -> ChaChaState {
        ChaChaState::keyed(self.noise.clone(), NOISE_STREAM)
    }
}

/// What the key file says it is.
const FORMAT: &str = "dp-engine stream keys 1";
/// The largest key file read (one is about 200 bytes).
const MAX_KEY_FILE: u64 = 4096;

/// The key file as stored: hex keys.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct KeyFile {
    format: String,
    sampler_key: String,
    noise_key: String,
}

impl StreamKeys {
    /// Writes the keys to `path` (owner-only, atomically; refused over anything but a regular
    /// file).
    pub fn save(&self, path: &Path) -> Result<()> {
        let file = KeyFile {
            format: FORMAT.into(),
            sampler_key: hex::encode(self.sampler_key().as_bytes()),
            noise_key: hex::encode(self.noise_key().as_bytes()),
        };
        let json = serde_json::to_vec_pretty(&file).map_err(|e| file_error(path, e))?;
        Ok(write_atomic(path, &json, OWNER_ONLY)?)
    }

    /// The keys of the key file `path`, refused when it is missing, readable by others, not
    /// this user's, or damaged.
    pub fn load(path: &Path) -> Result<Self> {
        if !occupied(path) {
            return Err(
                file_error(path, "is missing: a run cannot be resumed without the keys it was made with").into()
            );
        }
        let bytes = read_secret(path, MAX_KEY_FILE)?;
        let bad = |what: &str| file_error(path, format!("is not a stream key file ({what})"));
        let file: KeyFile = serde_json::from_slice(&bytes).map_err(|e| bad(&e.to_string()))?;
        if file.format != FORMAT {
            return Err(bad(&format!("format '{}'", file.format)).into());
        }
        let key = |text: &str, name: &str| {
            SecretKey::from_hex(text).ok_or_else(|| bad(&format!("{name} is not 32 bytes of hex")))
        };
        Ok(Self::new(key(&file.sampler_key, "sampler_key")?, key(&file.noise_key, "noise_key")?))
    }

    /// Removes the key file `path`, if any (the run is complete).
    pub fn remove(path: &Path) -> Result<()> {
        Ok(remove_if_present(path)?)
    }

    /// A digest that names these keys without revealing them (SHA-256 over a domain tag and
    /// both keys): what a checkpoint records, so that a resume with other keys is refused.
    pub fn fingerprint(&self) -> String {
        let mut hash = Sha256::new();
        hash.update(b"dp-engine stream keys fingerprint 1");
        hash.update(self.sampler_key().as_bytes());
        hash.update(self.noise_key().as_bytes());
        hex::encode(hash.finalize())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn keys_round_trip_owner_only_and_are_refused_when_exposed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("stream.key");
        let keys = StreamKeys::for_run(None);
        keys.save(&path).unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        assert_eq!(StreamKeys::load(&path).unwrap(), keys);
        assert_eq!(StreamKeys::load(&path).unwrap().fingerprint(), keys.fingerprint());
        assert_ne!(StreamKeys::for_run(Some(1)).fingerprint(), keys.fingerprint());
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert!(StreamKeys::load(&path).unwrap_err().to_string().contains("chmod 600"));
        let link = dir.path().join("link.key");
        std::os::unix::fs::symlink(&path, &link).unwrap();
        assert!(StreamKeys::load(&link).unwrap_err().to_string().contains("symbolic link"));
        StreamKeys::remove(&path).unwrap();
        assert!(StreamKeys::load(&path).unwrap_err().to_string().contains("missing"));
    }
}
