//! The owner's key: it seals the report a completed run writes into its model file together
//! with the weights it describes, so that `export` and `--init-from` can tell a report this
//! user's runs wrote from one anybody who can write the file typed in (a model file is public:
//! its metadata alone proves nothing). One key per user, owner-only, kept outside every run
//! folder: `DPTRAIN_OWNER_KEY` (the key file's path), else `$XDG_CONFIG_HOME/dptrain/owner.key`,
//! else `~/.config/dptrain/owner.key`. Whoever holds it can seal any report: keep it private.

pub mod seal;

use dp_data::SecretKey;
use dp_data::safe_files::{OWNER_ONLY, file_error, occupied, read_secret, write_atomic};
use dp_engine::error::{EngineError, Result};
use std::os::unix::fs::DirBuilderExt;
use std::path::{Component, Path, PathBuf};

/// The largest key file read (one is 64 hex digits).
const MAX_KEY_FILE: u64 = 256;

/// The owner's key.
#[derive(Debug, Clone)]
pub struct OwnerKey(SecretKey);

impl OwnerKey {
    /// Where the key is kept, when the environment names a place.
    pub fn path() -> Option<PathBuf> {
        let named = |var: &str| std::env::var_os(var).filter(|v| !v.is_empty()).map(PathBuf::from);
        named("DPTRAIN_OWNER_KEY")
            .or_else(|| named("XDG_CONFIG_HOME").map(|d| d.join("dptrain").join("owner.key")))
            .or_else(|| named("HOME").map(|d| d.join(".config").join("dptrain").join("owner.key")))
    }

    /// The owner's key, when there is one (a key file that is not this user's own, or readable
    /// by others, is refused in one line).
    pub fn load() -> Result<Option<Self>> {
        let Some(path) = Self::path().filter(|p| occupied(p)) else { return Ok(None) };
        let bytes = read_secret(&path, MAX_KEY_FILE)?;
        let key = std::str::from_utf8(&bytes)
            .ok()
            .and_then(|text| SecretKey::from_hex(text.trim()))
            .ok_or_else(|| file_error(&path, "is not an owner key (32 bytes of hex)"))?;
        Ok(Some(Self(key)))
    }

    /// The owner's key, made (from the OS, owner-only, its folder too) the first time.
    fn load_or_create() -> Result<Self> {
        if let Some(key) = Self::load()? {
            return Ok(key);
        }
        let path = Self::path().ok_or_else(|| {
            EngineError::invalid(
                "owner key",
                "no place to keep it: set DPTRAIN_OWNER_KEY to a file path (or HOME / XDG_CONFIG_HOME)",
            )
        })?;
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir).map_err(|e| file_error(dir, e))?;
        }
        // Made whole under a name of this process's, then linked into place only where no key
        // is yet: two runs completing at once keep one key (the one linked first).
        let tmp = path.with_file_name(format!(".owner.key.{}.dptrain-tmp", std::process::id()));
        let key = SecretKey::from_os();
        write_atomic(&tmp, hex::encode(key.as_bytes()).as_bytes(), OWNER_ONLY)?;
        let linked = std::fs::hard_link(&tmp, &path);
        std::fs::remove_file(&tmp).map_err(|e| file_error(&tmp, e))?;
        match linked {
            Ok(()) => Ok(Self(key)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                Self::load()?.ok_or_else(|| file_error(&path, "vanished while it was read").into())
            }
            Err(e) => Err(file_error(&path, e).into()),
        }
    }

    /// The owner's key a run or search in `folder` will seal its model with (made the first
    /// time), checked before it takes a step: a key that cannot be used (no place for it, a file
    /// that is not a key, not this user's, readable by others, a link) or that lies inside
    /// `folder` (run folders are shared) is refused in one line saying how to fix it, never
    /// found out when the model is written.
    pub fn for_folder(folder: &Path) -> Result<Self> {
        let refuse = |why: String| {
            EngineError::invalid(
                "owner key",
                format!(
                    "{why}: a completed run seals its model's report with it; fix that, or set DPTRAIN_OWNER_KEY to the path of a new file outside every run folder (it is made there, owner-only)"
                ),
            )
        };
        if let Some(path) = Self::path()
            && resolved(&path).starts_with(resolved(folder))
        {
            return Err(refuse(format!(
                "{} is inside the folder {}, which is shared with the model",
                path.display(),
                folder.display()
            )));
        }
        Self::load_or_create().map_err(|e| refuse(e.to_string()))
    }

    /// The secret.
    pub(crate) fn secret(&self) -> &SecretKey {
        &self.0
    }
}

/// `path` made absolute with every link in the part of it that exists resolved, and the rest
/// (not made yet) appended with its `.` and `..` applied, so that two names of one place compare
/// equal.
fn resolved(path: &Path) -> PathBuf {
    let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let mut missing = Vec::new();
    for existing in absolute.ancestors() {
        if let Ok(mut real) = existing.canonicalize() {
            for part in missing.iter().rev() {
                match part {
                    Component::ParentDir => _ = real.pop(),
                    Component::CurDir => {}
                    other => real.push(other),
                }
            }
            return real;
        }
        missing.extend(existing.components().next_back());
    }
    absolute
}
