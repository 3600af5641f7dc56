//! The IDX format of MNIST and Fashion-MNIST (raw or gzip-compressed, detected by content):
//! a magic number 0x0000TTNN (TT = 0x08 for unsigned bytes, NN = number of dimensions), NN
//! big-endian u32 sizes, then the data.

use crate::error::{DataError, Result};
use flate2::read::GzDecoder;
use std::io::Read;
use std::path::Path;

/// An n-dimensional array of bytes read from an IDX file.
#[derive(Debug, Clone, PartialEq)]
pub struct IdxArray {
    /// Sizes of each dimension, outermost first.
    pub dims: Vec<usize>,
    /// The values in row-major order.
    pub data: Vec<u8>,
}

/// Reads the whole file, gunzipping it when it starts with the gzip magic bytes.
pub fn read_maybe_gzip(path: &Path) -> Result<Vec<u8>> {
    let raw = std::fs::read(path).map_err(|reason| DataError::Io { path: path.to_path_buf(), reason })?;
    if raw.starts_with(&[0x1f, 0x8b]) {
        let mut out = Vec::new();
        GzDecoder::new(&raw[..])
            .read_to_end(&mut out)
            .map_err(|e| DataError::corrupt(path, format!("invalid gzip data ({e})")))?;
        Ok(out)
    } else {
        Ok(raw)
    }
}

/// Reads an IDX file of unsigned bytes with `expected_rank` dimensions.
pub fn read_idx(path: &Path, expected_rank: usize) -> Result<IdxArray> {
    let bytes = read_maybe_gzip(path)?;
    parse_idx(&bytes, expected_rank).map_err(|reason| DataError::corrupt(path, reason))
}

fn parse_idx(bytes: &[u8], expected_rank: usize) -> std::result::Result<IdxArray, String> {
    if bytes.len() < 4 {
        return Err("not an IDX file (shorter than its 4-byte header)".into());
    }
    if bytes[0] != 0 || bytes[1] != 0 {
        return Err(format!(
            "not an IDX file (magic {:02x}{:02x}{:02x}{:02x})",
            bytes[0], bytes[1], bytes[2], bytes[3]
        ));
    }
    if bytes[2] != 0x08 {
        return Err(format!("IDX element type 0x{:02x} is not unsigned bytes (0x08)", bytes[2]));
    }
    let rank = usize::from(bytes[3]);
    if rank != expected_rank {
        return Err(format!("IDX file has {rank} dimensions, expected {expected_rank}"));
    }
    let header = 4 + 4 * rank;
    if bytes.len() < header {
        return Err("truncated IDX header".into());
    }
    let dims: Vec<usize> =
        bytes[4..header].chunks_exact(4).map(|c| u32::from_be_bytes([c[0], c[1], c[2], c[3]]) as usize).collect();
    let expected = dims.iter().try_fold(1usize, |acc, &d| acc.checked_mul(d)).ok_or("IDX sizes overflow")?;
    let actual = bytes.len() - header;
    if actual != expected {
        return Err(format!(
            "IDX data has {actual} bytes but its header {dims:?} says {expected} ({})",
            if actual < expected { "truncated" } else { "trailing bytes" }
        ));
    }
    Ok(IdxArray { dims, data: bytes[header..].to_vec() })
}

/// Encodes an array as IDX bytes (for tests and tools that write MNIST-format files).
pub fn encode_idx(dims: &[usize], data: &[u8]) -> Vec<u8> {
    let mut out = vec![0, 0, 0x08, dims.len() as u8];
    for &d in dims {
        out.extend_from_slice(&(d as u32).to_be_bytes());
    }
    out.extend_from_slice(data);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roundtrip() {
        let bytes = encode_idx(&[2, 3], &[1, 2, 3, 4, 5, 6]);
        let a = parse_idx(&bytes, 2).unwrap();
        assert_eq!(a.dims, vec![2, 3]);
        assert_eq!(a.data, vec![1, 2, 3, 4, 5, 6]);
    }

    #[test]
    fn rejects_corruption() {
        let good = encode_idx(&[2, 3], &[1, 2, 3, 4, 5, 6]);
        assert!(parse_idx(&good[..good.len() - 1], 2).unwrap_err().contains("truncated"));
        let mut extra = good.clone();
        extra.push(0);
        assert!(parse_idx(&extra, 2).unwrap_err().contains("trailing"));
        assert!(parse_idx(&good, 3).unwrap_err().contains("dimensions"));
        let mut wrong_type = good.clone();
        wrong_type[2] = 0x0d;
        assert!(parse_idx(&wrong_type, 2).unwrap_err().contains("unsigned bytes"));
        assert!(parse_idx(b"PK\x03\x04", 1).unwrap_err().contains("magic"));
        assert!(parse_idx(&[0, 0], 1).is_err());
    }
}
