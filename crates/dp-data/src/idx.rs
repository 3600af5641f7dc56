//! The IDX format of MNIST and Fashion-MNIST (raw or gzip-compressed, detected by content):
//! a magic number 0x0000TTNN (TT = 0x08 for unsigned bytes, NN = number of dimensions), NN
//! big-endian u32 sizes, then the data.

use crate::error::{DataError, Result};
use crate::safe_files::open_regular;
use flate2::read::MultiGzDecoder;
use std::io::{BufReader, Read, Seek, SeekFrom};
use std::path::Path;

/// An n-dimensional array of bytes read from an IDX file.
#[derive(Debug, Clone, PartialEq)]
pub struct IdxArray {
    /// Sizes of each dimension, outermost first.
    pub dims: Vec<usize>,
    /// The values in row-major order.
    pub data: Vec<u8>,
}

/// Opens `path` for reading, gunzipping it when it starts with the gzip magic bytes (every
/// member of a multi-member file, as the format allows; bytes after the last member that are not
/// another member are an error when read).
fn open_maybe_gzip(path: &Path) -> Result<Box<dyn Read>> {
    let io = |reason| DataError::Io { path: path.to_path_buf(), reason };
    let (mut file, _) = open_regular(path)?;
    let mut magic = Vec::with_capacity(2);
    (&mut file).take(2).read_to_end(&mut magic).map_err(io)?;
    file.seek(SeekFrom::Start(0)).map_err(io)?;
    Ok(if magic == [0x1f, 0x8b] {
        Box::new(MultiGzDecoder::new(BufReader::new(file)))
    } else {
        Box::new(BufReader::new(file))
    })
}

/// Appends at most `n` more bytes of `reader` to `out`.
fn read_up_to(reader: &mut dyn Read, n: usize, out: &mut Vec<u8>, path: &Path) -> Result<()> {
    reader
        .take(n as u64)
        .read_to_end(out)
        .map(|_| ())
        .map_err(|e| DataError::corrupt(path, format!("invalid gzip data ({e})")))
}

/// Reads `path` (gunzipped when compressed), refused when it holds more than `cap` bytes: a
/// small compressed file cannot make it allocate more than that.
pub fn read_maybe_gzip(path: &Path, cap: usize) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    read_up_to(open_maybe_gzip(path)?.as_mut(), cap.saturating_add(1), &mut out, path)?;
    if out.len() > cap {
        return Err(DataError::corrupt(path, format!("holds more than the {cap} bytes this file may have")));
    }
    Ok(out)
}

/// Reads an IDX file of unsigned bytes with `expected_rank` dimensions. Only as many bytes as its
/// header announces (and one more, to detect trailing data) are ever decompressed.
pub fn read_idx(path: &Path, expected_rank: usize) -> Result<IdxArray> {
    let mut reader = open_maybe_gzip(path)?;
    let mut bytes = Vec::new();
    read_up_to(reader.as_mut(), 4, &mut bytes, path)?;
    let rank = if bytes.len() == 4 { usize::from(bytes[3]) } else { 0 };
    read_up_to(reader.as_mut(), 4 * rank, &mut bytes, path)?;
    let announced = bytes
        .get(4..4 + 4 * rank)
        .filter(|sizes| sizes.len() == 4 * rank)
        .and_then(|sizes| {
            sizes
                .chunks_exact(4)
                .try_fold(1usize, |acc, c| acc.checked_mul(u32::from_be_bytes([c[0], c[1], c[2], c[3]]) as usize))
        })
        .unwrap_or(0);
    crate::memory::check(&format!("the {announced} bytes {} announces", path.display()), Some(announced as u128))?;
    read_up_to(reader.as_mut(), announced.saturating_add(1), &mut bytes, path)?;
    parse_idx(bytes, expected_rank).map_err(|reason| DataError::corrupt(path, reason))
}

fn parse_idx(mut bytes: Vec<u8>, expected_rank: usize) -> std::result::Result<IdxArray, String> {
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
    bytes.drain(..header);
    Ok(IdxArray { dims, data: bytes })
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
        let a = parse_idx(bytes, 2).unwrap();
        assert_eq!(a.dims, vec![2, 3]);
        assert_eq!(a.data, vec![1, 2, 3, 4, 5, 6]);
    }

    #[test]
    fn rejects_corruption() {
        let good = encode_idx(&[2, 3], &[1, 2, 3, 4, 5, 6]);
        assert!(parse_idx(good[..good.len() - 1].to_vec(), 2).unwrap_err().contains("truncated"));
        let mut extra = good.clone();
        extra.push(0);
        assert!(parse_idx(extra, 2).unwrap_err().contains("trailing"));
        assert!(parse_idx(good.clone(), 3).unwrap_err().contains("dimensions"));
        let mut wrong_type = good.clone();
        wrong_type[2] = 0x0d;
        assert!(parse_idx(wrong_type, 2).unwrap_err().contains("unsigned bytes"));
        assert!(parse_idx(b"PK\x03\x04".to_vec(), 1).unwrap_err().contains("magic"));
        assert!(parse_idx(vec![0, 0], 1).is_err());
    }

    fn gzip(bytes: &[u8]) -> Vec<u8> {
        use flate2::write::GzEncoder;
        use std::io::Write;
        let mut e = GzEncoder::new(Vec::new(), flate2::Compression::fast());
        e.write_all(bytes).unwrap();
        e.finish().unwrap()
    }

    fn read_file(bytes: &[u8], rank: usize) -> Result<IdxArray> {
        let file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(file.path(), bytes).unwrap();
        read_idx(file.path(), rank)
    }

    /// The error of reading `bytes` with a memory budget of 1 MiB (set for this process only
    /// while it reads; the budget is read from the environment at each check).
    fn read_file_under_budget(bytes: &[u8], rank: usize) -> String {
        let file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(file.path(), bytes).unwrap();
        crate::memory::with_budget(1 << 20, || read_idx(file.path(), rank)).unwrap_err().to_string()
    }

    #[test]
    fn gzip_is_read_as_the_format_allows_and_no_further() {
        let good = encode_idx(&[2, 3], &[1, 2, 3, 4, 5, 6]);
        assert_eq!(read_file(&gzip(&good), 2).unwrap().data, vec![1, 2, 3, 4, 5, 6]);
        // Two members (what `cat a.gz b.gz` makes) are one stream.
        let two = [gzip(&good[..7]), gzip(&good[7..])].concat();
        assert_eq!(read_file(&two, 2).unwrap().data, vec![1, 2, 3, 4, 5, 6]);
        // Garbage after the stream is refused, not ignored.
        let garbage = [gzip(&good), b"not gzip".to_vec()].concat();
        assert!(read_file(&garbage, 2).unwrap_err().to_string().contains("gzip"));
        // A bomb: 6 bytes announced, 64 MiB compressed to a few KiB; refused after 7 bytes.
        let mut bomb = encode_idx(&[6], &[0; 6]);
        bomb.resize(64 << 20, 0);
        let err = read_file(&gzip(&bomb), 1).unwrap_err().to_string();
        assert!(err.contains("trailing"), "{err}");
        // One 65535x65535 image announced by a 20-byte header: refused from arithmetic under a
        // 1 MiB budget, before a byte of it is read.
        let huge = encode_idx(&[1, 65535, 65535], &[]);
        let err = read_file_under_budget(&gzip(&huge), 3);
        assert!(err.contains("memory budget"), "{err}");
        // A truncated compressed file is an error too.
        let whole = gzip(&good);
        assert!(read_file(&whole[..whole.len() - 9], 2).is_err());
    }
}
