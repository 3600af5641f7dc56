//! The run folder's files as a boundary: read without following symbolic links, refused unless
//! regular and of a bounded size (a `metrics.jsonl` pointing at `/dev/zero` is one line of error,
//! not memory exhaustion); written atomically through a temporary file that is created
//! exclusively and never followed (a link planted at `checkpoint.tmp` is removed, not written
//! through), synced, renamed over the old file, and the folder synced.

use dp_engine::error::{EngineError, Result};
use std::fs::{self, File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// Permissions of a run's public files.
pub const PUBLIC: u32 = 0o644;
/// Permissions of its key file: owner only.
pub const OWNER_ONLY: u32 = 0o600;

/// An error about `path` in the run folder.
pub fn folder_error(path: &Path, reason: impl ToString) -> EngineError {
    EngineError::RunFolder { path: path.to_path_buf(), reason: reason.to_string() }
}

/// Why opening `path` failed, in the user's terms (a link is named as one).
fn open_error(path: &Path, e: std::io::Error) -> EngineError {
    if e.raw_os_error() == Some(libc::ELOOP) {
        folder_error(path, "is a symbolic link: a run folder's files must be regular files")
    } else {
        folder_error(path, e)
    }
}

/// Refuses `file` (opened from `path`) unless it is a regular file.
pub fn regular(file: &File, path: &Path) -> Result<u64> {
    let meta = file.metadata().map_err(|e| folder_error(path, e))?;
    if !meta.is_file() {
        return Err(folder_error(path, "is not a regular file: a run folder's files must be regular files"));
    }
    Ok(meta.len())
}

/// Opens `path` without following a link or blocking on a FIFO.
pub fn open(path: &Path, options: &mut OpenOptions) -> Result<File> {
    options
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| open_error(path, e))
}

/// The bytes of the regular file `path`, refused when it holds more than `cap`.
pub fn read_regular(path: &Path, cap: u64) -> Result<Vec<u8>> {
    let file = open(path, OpenOptions::new().read(true))?;
    let len = regular(&file, path)?;
    if len > cap {
        return Err(folder_error(path, format!("holds {len} bytes, more than the {cap} such a file may have")));
    }
    let mut bytes = Vec::with_capacity(len as usize);
    file.take(cap.saturating_add(1)).read_to_end(&mut bytes).map_err(|e| folder_error(path, e))?;
    if bytes.len() as u64 > cap {
        return Err(folder_error(path, format!("grew beyond the {cap} bytes such a file may have while read")));
    }
    Ok(bytes)
}

/// True when anything (a link included) is at `path`.
pub fn occupied(path: &Path) -> bool {
    fs::symlink_metadata(path).is_ok()
}

/// Removes the file or link at `path`, if any.
pub fn remove_if_present(path: &Path) -> Result<()> {
    match fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(folder_error(path, e)),
        _ => Ok(()),
    }
}

/// Writes `bytes` to `path` atomically with permissions `mode`: a crash leaves either the old
/// file or the new one, and a link at the temporary name is never followed.
pub fn write_atomic(path: &Path, bytes: &[u8], mode: u32) -> Result<()> {
    let tmp = path.with_extension("tmp");
    remove_if_present(&tmp)?;
    let mut file = open(&tmp, OpenOptions::new().write(true).create_new(true).mode(mode))?;
    file.write_all(bytes).and_then(|()| file.sync_all()).map_err(|e| folder_error(&tmp, e))?;
    fs::rename(&tmp, path).map_err(|e| folder_error(path, e))?;
    // The rename itself is durable once the folder is synced.
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        File::open(dir).and_then(|d| d.sync_all()).map_err(|e| folder_error(dir, e))?;
    }
    Ok(())
}

/// Appends `line` and a newline to the regular file `path` (created when missing).
pub fn append_line(path: &Path, line: &str) -> Result<()> {
    let mut file = open(path, OpenOptions::new().append(true).create(true).mode(PUBLIC))?;
    regular(&file, path)?;
    file.write_all(format!("{line}\n").as_bytes()).map_err(|e| folder_error(path, e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    #[test]
    fn links_and_special_files_are_refused_and_never_written_through() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("target");
        fs::write(&target, b"keep").unwrap();
        // A link at the temporary name is replaced, not followed.
        let file = dir.path().join("checkpoint.bin");
        symlink(&target, dir.path().join("checkpoint.tmp")).unwrap();
        write_atomic(&file, b"new", PUBLIC).unwrap();
        assert_eq!(fs::read(&target).unwrap(), b"keep");
        assert_eq!(read_regular(&file, 16).unwrap(), b"new");
        // Reading or appending through a link, a device or a FIFO is refused.
        let metrics = dir.path().join("metrics.jsonl");
        symlink("/dev/zero", &metrics).unwrap();
        assert!(read_regular(&metrics, 1 << 20).unwrap_err().to_string().contains("symbolic link"));
        assert!(append_line(&metrics, "{}").unwrap_err().to_string().contains("symbolic link"));
        assert!(read_regular(Path::new("/dev/zero"), 1 << 20).unwrap_err().to_string().contains("regular"));
        let fifo = dir.path().join("fifo");
        let name = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o600) }, 0);
        assert!(read_regular(&fifo, 16).unwrap_err().to_string().contains("regular"));
        // Too large.
        assert!(read_regular(&target, 2).unwrap_err().to_string().contains("more than the 2"));
    }
}
