//! A run's secrets, in a key file of their own (`run.key`, owner-only permissions): the keys of
//! its lot sampler and noise streams, whose holder could regenerate every lot and every noise
//! vector of the run and so undo its privacy, and the key of the MAC that seals its checkpoints,
//! whose holder could forge one. Nothing else in the folder holds them: the checkpoint records
//! only where each stream is. A `--seed` run's keys derive from the seed, so the seed is kept
//! here too (and not in config.toml). The file is removed when the run completes: a finished
//! run has nothing left to resume, and its released model keeps its guarantee only while the
//! noise cannot be regenerated.

use dp_data::Result;
use dp_data::SecretKey;
use dp_data::safe_files::{OWNER_ONLY, file_error, read_secret, remove_if_present, write_atomic};
use dp_engine::checkpoint::StreamKeys;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The key file's name in the run folder.
pub const KEY_FILE: &str = "run.key";

/// What the key file says it is.
const FORMAT: &str = "dptrain run key 1";

/// The largest key file read (one is about 250 bytes).
const MAX_KEY_FILE: u64 = 4096;

/// The secrets of one run.
#[derive(Debug, Clone)]
pub struct RunKeys {
    /// The seed of a reproducible run (its keys derive from it).
    pub seed: Option<u64>,
    streams: StreamKeys,
    mac: SecretKey,
}

/// The key file as stored: hex keys.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct KeyFile {
    format: String,
    seed: Option<u64>,
    sampler_key: String,
    noise_key: String,
    mac_key: String,
}

/// The key file of the run in `run_dir`.
pub fn key_path(run_dir: &Path) -> PathBuf {
    run_dir.join(KEY_FILE)
}

impl RunKeys {
    /// New keys for a run: the sampler's and the noise's from `seed` (reproducible) or from the
    /// OS, the MAC's always from the OS.
    pub fn generate(seed: Option<u64>) -> Self {
        Self { seed, streams: StreamKeys::for_run(seed), mac: SecretKey::from_os() }
    }

    /// The keys of the lot sampler's and the noise's streams.
    pub fn streams(&self) -> &StreamKeys {
        &self.streams
    }

    /// The key of the checkpoints' MAC.
    pub fn mac(&self) -> &SecretKey {
        &self.mac
    }

    /// Writes the key file of `run_dir` (owner-only permissions, atomically).
    pub fn save(&self, run_dir: &Path) -> Result<()> {
        let file = KeyFile {
            format: FORMAT.into(),
            seed: self.seed,
            sampler_key: hex::encode(self.streams.sampler_key().as_bytes()),
            noise_key: hex::encode(self.streams.noise_key().as_bytes()),
            mac_key: hex::encode(self.mac.as_bytes()),
        };
        let path = key_path(run_dir);
        let json = serde_json::to_vec_pretty(&file).map_err(|e| file_error(&path, e))?;
        write_atomic(&path, &json, OWNER_ONLY)
    }

    /// Reads the key file of `run_dir`, refused when it is missing, readable by others, damaged,
    /// or holds keys that are not its seed's.
    pub fn load(run_dir: &Path) -> Result<Self> {
        let path = key_path(run_dir);
        if !dp_data::safe_files::occupied(&path) {
            return Err(file_error(
                &path,
                "is missing: a run's key file is removed when it completes (RunOptions::keep_key keeps it), and a run cannot be resumed without it",
            ));
        }
        let bytes = read_secret(&path, MAX_KEY_FILE)?;
        let bad = |what: &str| file_error(&path, format!("is not a dptrain key file ({what})"));
        let file: KeyFile = serde_json::from_slice(&bytes).map_err(|e| bad(&e.to_string()))?;
        if file.format != FORMAT {
            return Err(bad(&format!("format '{}'", file.format)));
        }
        let key = |text: &str, name: &str| {
            SecretKey::from_hex(text).ok_or_else(|| bad(&format!("{name} is not 32 bytes of hex")))
        };
        let keys = Self {
            seed: file.seed,
            streams: StreamKeys::new(key(&file.sampler_key, "sampler_key")?, key(&file.noise_key, "noise_key")?),
            mac: key(&file.mac_key, "mac_key")?,
        };
        if let Some(seed) = keys.seed {
            let derived = SecretKey::from_seed(seed);
            if *keys.streams.sampler_key() != derived || *keys.streams.noise_key() != derived {
                return Err(file_error(&path, "its keys are not those of its seed"));
            }
        }
        Ok(keys)
    }

    /// Removes the key file of `run_dir` (the run is complete).
    pub fn remove(run_dir: &Path) -> Result<()> {
        remove_if_present(&key_path(run_dir))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn the_key_file_is_owner_only_and_round_trips() {
        let dir = tempfile::tempdir().unwrap();
        let keys = RunKeys::generate(None);
        keys.save(dir.path()).unwrap();
        let mode = std::fs::metadata(key_path(dir.path())).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let back = RunKeys::load(dir.path()).unwrap();
        assert_eq!(back.mac(), keys.mac());
        assert_eq!(back.streams().noise_stream(), keys.streams().noise_stream());
        assert_eq!(back.streams().sampler_stream(), keys.streams().sampler_stream());
        assert_ne!(keys.streams().noise_stream().key(), keys.streams().sampler_stream().key(), "independent OS keys");
        // Opened up to the group: refused.
        let path = key_path(dir.path());
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).unwrap();
        assert!(RunKeys::load(dir.path()).unwrap_err().to_string().contains("chmod 600"));
        // A seeded file whose keys are not the seed's: refused.
        RunKeys::generate(Some(3)).save(dir.path()).unwrap();
        assert_eq!(RunKeys::load(dir.path()).unwrap().seed, Some(3));
        let text = std::fs::read_to_string(&path).unwrap().replace("\"seed\": 3", "\"seed\": 4");
        write_atomic(&path, text.as_bytes(), OWNER_ONLY).unwrap();
        assert!(RunKeys::load(dir.path()).unwrap_err().to_string().contains("not those of its seed"));
        RunKeys::remove(dir.path()).unwrap();
        assert!(RunKeys::load(dir.path()).unwrap_err().to_string().contains("missing"));
    }
}
