//! A search's sealed state, the mechanism's internal state (Papernot & Steinke): its plan (K and
//! each candidate, drawn before any training), how many candidates finished and the best so
//! far, in an owner-only folder beside the key that seals it. An interrupted search resumes
//! from it without redrawing K or rerunning a finished candidate; a state edited since it was
//! written is refused, as a run folder's checkpoint is. Publishing the folder voids the bound.

use crate::seal::{SEAL_BYTES, seal, verifies};
use crate::search::plan::Planned;
use dp_data::SecretKey;
use dp_data::safe_files::{OWNER_ONLY, file_error, occupied, read_secret, temporary_name, write_atomic};
use dp_engine::error::{EngineError, Result};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// The state file in the journal's folder: the seal (hex) on its first line, then the JSON.
pub const STATE_FILE: &str = "search.json";
/// The key that seals it.
pub const KEY_FILE: &str = "search.key";
/// What the state says it is.
const FORMAT: &str = "dptrain search state 1";
/// The largest key file read (one is 64 hex digits).
const MAX_KEY_FILE: u64 = 256;
/// The largest state read (a plan of the most candidates is a few megabytes).
const MAX_STATE: u64 = 64 << 20;

/// The owner-only folder of a search's state.
#[derive(Debug)]
pub struct Journal {
    dir: PathBuf,
    key: SecretKey,
}

/// The best candidate so far: its place in the plan, its released score and its result.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Best<T> {
    pub(crate) position: usize,
    pub(crate) score: f64,
    pub(crate) value: T,
}

/// What the journal keeps.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct State<T> {
    pub(crate) format: String,
    /// Digest of the configurations, their shapes and the settings the plan was drawn for.
    pub(crate) fingerprint: String,
    pub(crate) plan: Vec<Planned>,
    /// Candidates finished, in plan order.
    pub(crate) done: usize,
    pub(crate) best: Option<Best<T>>,
}

impl<T> State<T> {
    /// A fresh state of `plan`, drawn for the search of `fingerprint`.
    pub(crate) fn new(fingerprint: String, plan: Vec<Planned>) -> Self {
        Self { format: FORMAT.into(), fingerprint, plan, done: 0, best: None }
    }
}

impl Journal {
    /// A new journal in `dir`, created here owner-only (never an existing folder or a link
    /// planted in its place), with a key drawn from the OS.
    pub fn create(dir: impl AsRef<Path>) -> Result<Self> {
        let dir = dir.as_ref().to_path_buf();
        std::fs::create_dir(&dir).map_err(|e| match e.kind() {
            std::io::ErrorKind::AlreadyExists => file_error(
                &dir,
                "already exists: continue the search it holds (Journal::open), or give another folder (a new search here would spend the data's privacy again)",
            ),
            _ => file_error(&dir, e),
        })?;
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).map_err(|e| file_error(&dir, e))?;
        let key = SecretKey::from_os();
        write_atomic(&dir.join(KEY_FILE), hex::encode(key.as_bytes()).as_bytes(), OWNER_ONLY)?;
        Ok(Self { dir, key })
    }

    /// The journal of an interrupted search in `dir`: a folder (not a link), its key this
    /// user's own and readable by no one else.
    pub fn open(dir: impl AsRef<Path>) -> Result<Self> {
        let dir = dir.as_ref().to_path_buf();
        let meta = std::fs::symlink_metadata(&dir).map_err(|e| file_error(&dir, e))?;
        if !meta.is_dir() {
            return Err(file_error(&dir, "is not a search's state folder (a link or a file)").into());
        }
        let path = dir.join(KEY_FILE);
        let bytes = read_secret(&path, MAX_KEY_FILE)?;
        let key = std::str::from_utf8(&bytes)
            .ok()
            .and_then(|text| SecretKey::from_hex(text.trim()))
            .ok_or_else(|| file_error(&path, "is not a search's key (32 bytes of hex)"))?;
        Ok(Self { dir, key })
    }

    /// The journal's folder (candidates may keep their own files in it).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// True when the folder holds anything but the key and the state (and their temporary
    /// files): what only a search whose plan was saved leaves (its candidates' folders, or
    /// links planted in their place), so a journal that has any of it but no state was tampered
    /// with.
    pub(crate) fn has_candidates(&self) -> Result<bool> {
        let own: Vec<std::ffi::OsString> = [KEY_FILE, STATE_FILE]
            .iter()
            .flat_map(|f| [PathBuf::from(f), temporary_name(Path::new(f))])
            .map(PathBuf::into_os_string)
            .collect();
        let entries = std::fs::read_dir(&self.dir).map_err(|e| file_error(&self.dir, e))?;
        for entry in entries {
            let entry = entry.map_err(|e| file_error(&self.dir, e))?;
            if !own.contains(&entry.file_name()) {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// True when the search spent nothing: no plan was drawn and no candidate left anything.
    pub fn spent_nothing(&self) -> Result<bool> {
        Ok(!occupied(&self.dir.join(STATE_FILE)) && !self.has_candidates()?)
    }

    /// The state last saved; None before the plan is.
    pub(crate) fn load<T: DeserializeOwned>(&self) -> Result<Option<State<T>>> {
        let path = self.dir.join(STATE_FILE);
        if !occupied(&path) {
            return Ok(None);
        }
        let bytes = read_secret(&path, MAX_STATE)?;
        let edited = || {
            EngineError::from(file_error(
                &path,
                "is not the state this search wrote (its seal does not verify under the search's key): refused",
            ))
        };
        let (tag, json) = bytes.split_at_checked(2 * SEAL_BYTES).ok_or_else(edited)?;
        let tag = std::str::from_utf8(tag).ok().and_then(|t| hex::decode(t).ok()).ok_or_else(edited)?;
        let json = json.strip_prefix(b"\n").ok_or_else(edited)?;
        if !verifies(&self.key, &[json], &tag) {
            return Err(edited());
        }
        let state: State<T> = serde_json::from_slice(json).map_err(|e| file_error(&path, e))?;
        if state.format != FORMAT {
            return Err(file_error(&path, format!("format '{}' is not '{FORMAT}'", state.format)).into());
        }
        Ok(Some(state))
    }

    /// Saves `state`, sealed, atomically.
    pub(crate) fn save<T: Serialize>(&self, state: &State<T>) -> Result<()> {
        let path = self.dir.join(STATE_FILE);
        let json = serde_json::to_vec(state).map_err(|e| file_error(&path, e))?;
        let bytes = [hex::encode(seal(&self.key, &[&json])).as_bytes(), b"\n", &json].concat();
        Ok(write_atomic(&path, &bytes, OWNER_ONLY)?)
    }

    /// Removes the journal and everything in its folder (the search is complete and its choice
    /// released: K and the other candidates go with it).
    pub fn remove(self) -> Result<()> {
        std::fs::remove_dir_all(&self.dir).map_err(|e| file_error(&self.dir, e))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn planned(config: usize) -> Planned {
        Planned { config, name: format!("candidate-{config}"), draw: 7, score_noise: 0.5 }
    }

    #[test]
    fn the_state_round_trips_sealed_and_an_edit_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("state");
        let journal = Journal::create(&dir).unwrap();
        assert!(journal.load::<u32>().unwrap().is_none());
        let mut state = State::new("f".into(), vec![planned(0), planned(1)]);
        state.done = 1;
        state.best = Some(Best { position: 0, score: 0.25, value: 9u32 });
        journal.save(&state).unwrap();
        let back = Journal::open(&dir).unwrap().load::<u32>().unwrap().unwrap();
        assert_eq!((back.done, back.plan, back.best.unwrap().value), (1, state.plan.clone(), 9));
        assert_eq!(std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777, 0o700);
        // Edited: one finished candidate fewer (it would rerun with fresh noise); refused.
        let path = dir.join(STATE_FILE);
        let text = std::fs::read_to_string(&path).unwrap().replace("\"done\":1", "\"done\":0");
        write_atomic(&path, text.as_bytes(), OWNER_ONLY).unwrap();
        assert!(journal.load::<u32>().unwrap_err().to_string().contains("seal does not verify"));
        write_atomic(&path, b"short", OWNER_ONLY).unwrap();
        assert!(journal.load::<u32>().is_err());
        // A second journal in the same folder, or one planted as a link: refused.
        assert!(Journal::create(&dir).unwrap_err().to_string().contains("already exists: continue the search"));
        std::os::unix::fs::symlink(&dir, tmp.path().join("link")).unwrap();
        assert!(Journal::open(tmp.path().join("link")).unwrap_err().to_string().contains("link"));
        journal.remove().unwrap();
        assert!(!dir.exists());
    }
}
