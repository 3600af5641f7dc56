//! One file fetched over HTTP(S) into a folder: streamed into `NAME.part`, resumed from where an
//! interrupted transfer stopped (an HTTP range request), checked against its size and SHA-256,
//! and only then renamed to its name; so the final name never holds a partial or unverified
//! file. A file that is already there and verifies is not fetched again.

use super::remote::RemoteFile;
use dp_engine::error::{EngineError, Result};
use sha2::{Digest, Sha256};
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// What happened to a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fetched {
    /// It was there and verified.
    Present,
    /// It was downloaded (or its download finished) and verified.
    Downloaded,
}

/// One line naming `url`.
fn failed(url: &str, reason: impl std::fmt::Display) -> EngineError {
    EngineError::Data(format!("fetching {url}: {reason}"))
}

/// The SHA-256 of `path` and its length.
fn digest_of(path: &Path) -> std::io::Result<(Sha256, u64)> {
    let mut file = File::open(path)?;
    let mut hash = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    let mut read = 0u64;
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            return Ok((hash, read));
        }
        hash.update(&buf[..n]);
        read += n as u64;
    }
}

/// True when `path` holds exactly `file`.
pub fn verified(path: &Path, file: &RemoteFile) -> bool {
    digest_of(path).is_ok_and(|(h, n)| n == file.size && hex::encode(h.finalize()) == file.sha256)
}

/// The `.part` file of `path`.
fn part_of(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".part");
    path.with_file_name(name)
}

/// Fetches `file` from `url` into `dir`, giving up on a server silent for `timeout`;
/// `progress` is told (bytes so far, bytes in all).
pub fn download(
    url: &str,
    file: &RemoteFile,
    dir: &Path,
    timeout: Duration,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<Fetched> {
    let path = dir.join(file.name);
    if verified(&path, file) {
        progress(file.size, file.size);
        return Ok(Fetched::Present);
    }
    let part = part_of(&path);
    let io = |e: std::io::Error| failed(url, e);
    let (mut hash, mut have) = match digest_of(&part) {
        Ok((hash, have)) if have < file.size => (hash, have),
        _ => (Sha256::new(), 0),
    };
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_connect(Some(timeout))
        .timeout_recv_response(Some(timeout))
        .timeout_recv_body(Some(timeout))
        .http_status_as_error(false)
        .build()
        .into();
    let mut request = agent.get(url);
    if have > 0 {
        request = request.header("Range", format!("bytes={have}-"));
    }
    let mut response = request.call().map_err(|e| failed(url, e))?;
    let status = response.status().as_u16();
    let resumed = match status {
        206 if have > 0 => true,
        200 => false,
        other => return Err(failed(url, format!("HTTP status {other}"))),
    };
    if !resumed {
        (hash, have) = (Sha256::new(), 0);
    }
    let mut out =
        OpenOptions::new().create(true).write(true).append(resumed).truncate(!resumed).open(&part).map_err(io)?;
    let mut body = response.body_mut().with_config().limit(file.size - have).reader();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = match body.read(&mut buf) {
            Ok(n) => n,
            Err(e) => {
                out.flush().map_err(io)?;
                return Err(failed(
                    url,
                    format!(
                        "the transfer stopped after {have} of {} bytes ({e}): run the command again to resume",
                        file.size
                    ),
                ));
            }
        };
        if n == 0 {
            break;
        }
        out.write_all(&buf[..n]).map_err(io)?;
        hash.update(&buf[..n]);
        have += n as u64;
        progress(have, file.size);
    }
    out.sync_all().map_err(io)?;
    drop(out);
    if have != file.size {
        return Err(failed(
            url,
            format!("the transfer stopped after {have} of {} bytes: run the command again to resume", file.size),
        ));
    }
    if hex::encode(hash.finalize()) != file.sha256 {
        let _ = std::fs::remove_file(&part);
        return Err(failed(url, format!("its SHA-256 is not the published {} (nothing kept)", file.sha256)));
    }
    std::fs::rename(&part, &path).map_err(io)?;
    Ok(Fetched::Downloaded)
}
