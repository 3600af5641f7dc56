//! One file fetched over HTTP(S) into a folder: streamed into `NAME.part`, resumed from where an
//! interrupted transfer stopped (an HTTP range request), checked against its size and SHA-256,
//! and only then renamed to its name; so the final name never holds a partial or unverified
//! file. A file that is already there and verifies is not fetched again. The folder may be
//! hostile: a link, FIFO or device at the final or the `.part` name is refused, never read,
//! written through or renamed over (`dp_data::safe_files`), and nothing is read past the size the
//! file should have.

use super::remote::RemoteFile;
use dp_data::safe_files::{PUBLIC, file_error, occupied, open, regular, rename_over, replaceable};
use dp_engine::error::{EngineError, Result};
use sha2::{Digest, Sha256};
use std::fs::OpenOptions;
use std::io::{Read, Write};
use std::os::unix::fs::OpenOptionsExt;
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
    EngineError::data(format!("fetching {url}: {reason}"))
}

/// The SHA-256 and length of the regular file `path`, None when nothing is there; refused when
/// it is not a regular file or holds more than `size` bytes.
pub(super) fn digest_of(path: &Path, size: u64) -> dp_data::Result<Option<(Sha256, u64)>> {
    if !occupied(path) {
        return Ok(None);
    }
    let mut file = open(path, OpenOptions::new().read(true))?;
    let len = regular(&file, path)?;
    if len > size {
        return Err(file_error(
            path,
            format!("holds {len} bytes, more than the {size} of the published file: remove it"),
        ));
    }
    let mut hash = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    let mut read = 0u64;
    loop {
        let n = file.read(&mut buf).map_err(|e| file_error(path, e))?;
        if n == 0 {
            return Ok(Some((hash, read)));
        }
        hash.update(&buf[..n]);
        read += n as u64;
        if read > size {
            return Err(file_error(path, format!("grew beyond the {size} bytes of the published file while read")));
        }
    }
}

/// True when `path` holds exactly `file`; an error when something other than a regular file of
/// at most its size is there.
pub fn verified(path: &Path, file: &RemoteFile) -> dp_data::Result<bool> {
    Ok(digest_of(path, file.size)?.is_some_and(|(h, n)| n == file.size && hex::encode(h.finalize()) == file.sha256))
}

/// The `.part` file of `path`.
fn part_of(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".part");
    path.with_file_name(name)
}

/// How long a download may take: `idle` bounds each silence of the server (connecting, the
/// response, every read of the body), `total` the whole transfer when given.
#[derive(Debug, Clone, Copy)]
pub struct Timeouts {
    /// The longest silence.
    pub idle: Duration,
    /// The longest whole transfer (None: no limit).
    pub total: Option<Duration>,
}

/// The response of `url` from byte `have` on (a range request when `have` > 0) within
/// `timeouts`, and whether the server resumed there (206) or sends the whole file (200).
fn get(url: &str, have: u64, timeouts: Timeouts) -> Result<(ureq::http::Response<ureq::Body>, bool)> {
    let idle = Some(timeouts.idle);
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_connect(idle)
        .timeout_recv_response(idle)
        .timeout_per_read(idle)
        .timeout_global(timeouts.total)
        .http_status_as_error(false)
        .build()
        .into();
    let mut request = agent.get(url);
    if have > 0 {
        request = request.header("Range", format!("bytes={have}-"));
    }
    let response = request.call().map_err(|e| failed(url, e))?;
    let status = response.status().as_u16();
    match status {
        206 if have > 0 => Ok((response, true)),
        200 => Ok((response, false)),
        other => Err(failed(url, format!("HTTP status {other}"))),
    }
}

/// Appends what `body` sends to `out`, hashing it on from `have` bytes of `size`; `progress` is
/// told (bytes so far, bytes in all). Gives the bytes had; a stopped transfer is an error saying
/// how to resume.
fn copy_body(
    body: &mut impl Read,
    out: &mut std::fs::File,
    (hash, mut have): (&mut Sha256, u64),
    (url, size): (&str, u64),
    progress: &mut dyn FnMut(u64, u64),
) -> Result<u64> {
    let io = |e: std::io::Error| failed(url, e);
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = match body.read(&mut buf) {
            Ok(n) => n,
            Err(e) => {
                out.flush().map_err(io)?;
                return Err(failed(
                    url,
                    format!("the transfer stopped after {have} of {size} bytes ({e}): run the command again to resume"),
                ));
            }
        };
        if n == 0 {
            return Ok(have);
        }
        out.write_all(&buf[..n]).map_err(io)?;
        hash.update(&buf[..n]);
        have += n as u64;
        progress(have, size);
    }
}

/// Fetches `file` from `url` into `dir` within `timeouts`; `progress` is told (bytes so far,
/// bytes in all).
pub fn download(
    url: &str,
    file: &RemoteFile,
    dir: &Path,
    timeouts: Timeouts,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<Fetched> {
    let path = dir.join(file.name);
    if verified(&path, file)? {
        progress(file.size, file.size);
        return Ok(Fetched::Present);
    }
    replaceable(&path)?;
    let part = part_of(&path);
    let io = |e: std::io::Error| failed(url, e);
    let (mut hash, mut have) = match digest_of(&part, file.size)? {
        Some((hash, have)) if have < file.size => (hash, have),
        _ => (Sha256::new(), 0),
    };
    let (mut response, resumed) = get(url, have, timeouts)?;
    if !resumed {
        (hash, have) = (Sha256::new(), 0);
    }
    // Never through a link, never into a FIFO or a device.
    let mut out = open(&part, OpenOptions::new().create(true).write(true).append(resumed).mode(PUBLIC))?;
    regular(&out, &part)?;
    if !resumed {
        out.set_len(0).map_err(io)?;
    }
    let mut body = response.body_mut().with_config().limit(file.size - have).reader();
    have = copy_body(&mut body, &mut out, (&mut hash, have), (url, file.size), progress)?;
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
    rename_over(&part, &path)?;
    Ok(Fetched::Downloaded)
}
