//! HMAC-SHA256 under a secret key: what seals a run's checkpoints (under the run's MAC key) and
//! what a program caches (dptrain: under its cache folder's key), so that nobody without
//! the key can edit them into something that verifies; and the plain SHA-256 digests files name.

use dp_data::SecretKey;
use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};

/// Bytes of a seal.
pub const SEAL_BYTES: usize = 32;

/// Hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// The HMAC-SHA256 state of `parts` under `key`.
fn mac(key: &SecretKey, parts: &[&[u8]]) -> Hmac<Sha256> {
    // HMAC takes keys of any length: this cannot fail.
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(key.as_bytes())
        .unwrap_or_else(|_| unreachable!("HMAC accepts any key length"));
    parts.iter().for_each(|p| mac.update(p));
    mac
}

/// The HMAC-SHA256 of `parts` (concatenated) under `key`.
pub fn seal(key: &SecretKey, parts: &[&[u8]]) -> [u8; SEAL_BYTES] {
    mac(key, parts).finalize().into_bytes().into()
}

/// True when `tag` is the seal of `parts` under `key` (compared in constant time).
pub fn verifies(key: &SecretKey, parts: &[&[u8]], tag: &[u8]) -> bool {
    mac(key, parts).verify_slice(tag).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seal_verifies_its_parts_under_its_key_only() {
        let key = SecretKey::from_os();
        let tag = seal(&key, &[b"features", b"1"]);
        assert!(verifies(&key, &[b"features", b"1"], &tag));
        assert!(verifies(&key, &[b"features1"], &tag), "the parts are concatenated");
        assert!(!verifies(&key, &[b"features", b"2"], &tag));
        assert!(!verifies(&SecretKey::from_os(), &[b"features", b"1"], &tag), "another key");
        assert!(!verifies(&key, &[b"features", b"1"], &tag[..31]), "a cut tag");
    }
}
