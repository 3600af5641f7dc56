//! The cache folder's own secret (`cache.key`, owner-only, this user's), which seals what dptrain
//! keeps between runs by an HMAC-SHA256 (`crate::seal`): the ScatterNet features (the private data in another
//! form, which a run trains on) and the digests of unpacked CIFAR-10 batches. An unkeyed digest
//! would be re-sealed by whoever edited the content (zeroed or shuffled features used to train
//! silently at 16.8% and 12.0% accuracy under the usual label); without the key, an edit is a
//! cache miss, and the content is recomputed or refused.

use dp_data::SecretKey;
use dp_data::safe_files::{OWNER_ONLY, file_error, occupied, read_secret, write_atomic};
use dp_engine::error::Result;
use std::path::Path;

/// The key file's name in the cache folder.
pub const KEY_FILE: &str = "cache.key";

/// The key of the cache folder `dir`, made (from the OS) the first time.
pub fn cache_key(dir: &Path) -> Result<SecretKey> {
    let path = dir.join(KEY_FILE);
    if !occupied(&path) {
        std::fs::create_dir_all(dir).map_err(|e| file_error(dir, e))?;
        let key = SecretKey::from_os();
        write_atomic(&path, hex::encode(key.as_bytes()).as_bytes(), OWNER_ONLY)?;
        return Ok(key);
    }
    let bytes = read_secret(&path, 2 * 32 + 1)?;
    let key = std::str::from_utf8(&bytes).ok().and_then(SecretKey::from_hex);
    Ok(key.ok_or_else(|| file_error(&path, "is not a dptrain cache key (32 bytes of hex): remove it and the cache"))?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use dp_run::seal::{seal, verifies};
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn the_key_is_made_once_owner_only_and_seals() {
        let dir = tempfile::tempdir().unwrap();
        let key = cache_key(dir.path()).unwrap();
        let path = dir.path().join(KEY_FILE);
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        assert_eq!(cache_key(dir.path()).unwrap(), key, "read back, not made again");
        let tag = seal(&key, &[b"features", b"1"]);
        assert!(verifies(&key, &[b"features", b"1"], &tag));
        assert!(!verifies(&SecretKey::from_os(), &[b"features", b"1"], &tag), "another key");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert!(cache_key(dir.path()).unwrap_err().to_string().contains("chmod 600"));
        std::fs::write(&path, b"zz").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert!(cache_key(dir.path()).unwrap_err().to_string().contains("not a dptrain cache key"));
    }
}
