//! Every file dptrain reads or writes (a run folder's, a data folder's, the cache's, a plot's) as
//! a boundary a hostile folder may have planted links, FIFOs and device nodes in: read without
//! following symbolic links or blocking, refused unless regular and of a bounded size (a
//! `metrics.jsonl` pointing at `/dev/zero` is one line of error, not memory exhaustion); written
//! atomically through a temporary file that is created exclusively and never followed (a link
//! planted at `checkpoint.tmp` is removed, not written through), synced, renamed only over a
//! regular file or nothing (never over `/dev/full` or a link), and the folder synced.

use crate::error::{DataError, Result};
use std::fs::{self, File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

/// Permissions of public files.
pub const PUBLIC: u32 = 0o644;
/// Permissions of secrets (a run's key file, the cache's key): owner only.
pub const OWNER_ONLY: u32 = 0o600;

/// An error about the file `path`.
pub fn file_error(path: &Path, reason: impl ToString) -> DataError {
    DataError::File { path: path.to_path_buf(), reason: reason.to_string() }
}

/// Why opening `path` failed, in the user's terms (a link is named as one).
fn open_error(path: &Path, e: std::io::Error) -> DataError {
    if e.raw_os_error() == Some(libc::ELOOP) {
        file_error(path, "is a symbolic link: dptrain reads and writes regular files only")
    } else {
        file_error(path, e)
    }
}

/// Refuses `file` (opened from `path`) unless it is a regular file.
pub fn regular(file: &File, path: &Path) -> Result<u64> {
    let meta = file.metadata().map_err(|e| file_error(path, e))?;
    if !meta.is_file() {
        return Err(file_error(path, "is not a regular file: dptrain reads and writes regular files only"));
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
    read_bounded(file, len, path, cap)
}

/// The bytes of `file` (opened from `path`, `len` bytes long), refused when it holds, or grows
/// while read to, more than `cap`.
pub fn read_bounded(file: File, len: u64, path: &Path, cap: u64) -> Result<Vec<u8>> {
    if len > cap {
        return Err(file_error(path, format!("holds {len} bytes, more than the {cap} such a file may have")));
    }
    let mut bytes = Vec::with_capacity(len as usize);
    file.take(cap.saturating_add(1)).read_to_end(&mut bytes).map_err(|e| file_error(path, e))?;
    if bytes.len() as u64 > cap {
        return Err(file_error(path, format!("grew beyond the {cap} bytes such a file may have while read")));
    }
    Ok(bytes)
}

/// The bytes of the secret `path` (a key file): [`read_regular`], refused unless it belongs to
/// this user and no one else may read it.
pub fn read_secret(path: &Path, cap: u64) -> Result<Vec<u8>> {
    let file = open(path, OpenOptions::new().read(true))?;
    let len = regular(&file, path)?;
    // The file read is the one checked: its own metadata, not the path's again.
    let meta = file.metadata().map_err(|e| file_error(path, e))?;
    let mode = meta.permissions().mode();
    if mode & 0o077 != 0 {
        return Err(file_error(
            path,
            format!("is readable by others (mode {:o}): it holds secret keys; chmod 600 it", mode & 0o777),
        ));
    }
    // SAFETY: geteuid has no preconditions and cannot fail.
    if meta.uid() != unsafe { libc::geteuid() } {
        return Err(file_error(
            path,
            format!("belongs to user {}, not to this one: a secret must be this user's own", meta.uid()),
        ));
    }
    read_bounded(file, len, path, cap)
}

/// Opens the data file `path` for reading, following a link (data folders are often links into a
/// shared store) but refused unless what it names is a regular file, without blocking on a FIFO;
/// gives it with its size.
pub fn open_regular(path: &Path) -> Result<(File, u64)> {
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
        .map_err(|reason| DataError::Io { path: path.to_path_buf(), reason })?;
    let len = regular(&file, path)?;
    Ok((file, len))
}

/// The bytes of the file `path` as [`open_regular`] opens it (a link to a regular file is
/// followed: a user's own file, kept where they like), refused when it holds more than `cap`.
pub fn read_following(path: &Path, cap: u64) -> Result<Vec<u8>> {
    let (file, len) = open_regular(path)?;
    read_bounded(file, len, path, cap)
}

/// True when anything (a link included) is at `path`.
pub fn occupied(path: &Path) -> bool {
    fs::symlink_metadata(path).is_ok()
}

/// Removes the file or link at `path`, if any.
pub fn remove_if_present(path: &Path) -> Result<()> {
    match fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(file_error(path, e)),
        _ => Ok(()),
    }
}

/// Removes whatever is at `path`, if anything: a folder with its contents, a file, or a link
/// (never what the link points to).
pub fn remove_entry(path: &Path) -> Result<()> {
    let removed = match fs::symlink_metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => Err(e),
        Ok(meta) if meta.is_dir() => fs::remove_dir_all(path),
        Ok(_) => fs::remove_file(path),
    };
    removed.map_err(|e| file_error(path, e))
}

/// Refuses `path` unless it holds a regular file or nothing: what an output may replace.
pub fn replaceable(path: &Path) -> Result<()> {
    match fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_symlink() => {
            Err(file_error(path, "is a symbolic link: dptrain replaces only a regular file or nothing"))
        }
        Ok(meta) if !meta.is_file() => Err(file_error(
            path,
            "is not a regular file (a device, a FIFO or a folder): dptrain replaces only a regular file or nothing",
        )),
        _ => Ok(()),
    }
}

/// Renames the finished temporary file `tmp` to `path`, only over a regular file or nothing,
/// and syncs the folder so that the rename is durable.
pub fn rename_over(tmp: &Path, path: &Path) -> Result<()> {
    if let Err(e) = replaceable(path) {
        let _ = fs::remove_file(tmp);
        return Err(e);
    }
    fs::rename(tmp, path).map_err(|e| file_error(path, e))?;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        File::open(dir).and_then(|d| d.sync_all()).map_err(|e| file_error(dir, e))?;
    }
    Ok(())
}

/// The temporary file `path` is written as before it is renamed into place: a hidden name in
/// dptrain's own namespace beside it (`.NAME.dptrain-tmp`), never a name a user's file may have
/// (`X.tmp` beside `X.safetensors` is the user's).
pub fn temporary_name(path: &Path) -> std::path::PathBuf {
    let name = path.file_name().map_or_else(|| "file".into(), |n| n.to_string_lossy().into_owned());
    path.with_file_name(format!(".{name}.dptrain-tmp"))
}

/// Writes `bytes` to `path` atomically with permissions `mode`: a crash leaves either the old
/// file or the new one, a link at the temporary name is never followed, and anything at `path`
/// but a regular file is refused, not replaced.
pub fn write_atomic(path: &Path, bytes: &[u8], mode: u32) -> Result<()> {
    replaceable(path)?;
    let tmp = temporary_name(path);
    remove_if_present(&tmp)?;
    let mut file = open(&tmp, OpenOptions::new().write(true).create_new(true).mode(mode))?;
    file.write_all(bytes).and_then(|()| file.sync_all()).map_err(|e| file_error(&tmp, e))?;
    rename_over(&tmp, path)
}

/// Appends `line` and a newline to the regular file `path` (created when missing).
pub fn append_line(path: &Path, line: &str) -> Result<()> {
    let mut file = open(path, OpenOptions::new().append(true).create(true).mode(PUBLIC))?;
    regular(&file, path)?;
    file.write_all(format!("{line}\n").as_bytes()).map_err(|e| file_error(path, e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{FileTypeExt, symlink};

    #[test]
    fn links_and_special_files_are_refused_and_never_written_through() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("target");
        fs::write(&target, b"keep").unwrap();
        // A link at the temporary name is replaced, not followed.
        let file = dir.path().join("checkpoint.bin");
        assert_eq!(temporary_name(&file), dir.path().join(".checkpoint.bin.dptrain-tmp"));
        symlink(&target, temporary_name(&file)).unwrap();
        // A user's own file of a name like the output's is none of dptrain's business.
        fs::write(dir.path().join("checkpoint.tmp"), b"mine").unwrap();
        write_atomic(&file, b"new", PUBLIC).unwrap();
        assert_eq!(fs::read(&target).unwrap(), b"keep");
        assert_eq!(read_regular(&file, 16).unwrap(), b"new");
        assert_eq!(fs::read(dir.path().join("checkpoint.tmp")).unwrap(), b"mine");
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
        // An output is never renamed over a device node, a FIFO or a link.
        let e = write_atomic(Path::new("/dev/full"), b"svg", PUBLIC).unwrap_err().to_string();
        assert!(e.contains("not a regular file"), "{e}");
        assert!(Path::new("/dev/full").metadata().unwrap().file_type().is_char_device());
        assert!(write_atomic(&fifo, b"x", PUBLIC).unwrap_err().to_string().contains("not a regular file"));
        let link = dir.path().join("link.svg");
        symlink(&target, &link).unwrap();
        assert!(write_atomic(&link, b"x", PUBLIC).unwrap_err().to_string().contains("symbolic link"));
        assert_eq!(fs::read(&target).unwrap(), b"keep");
        assert!(!temporary_name(&link).exists(), "the temporary file is not left behind");
    }

    #[test]
    fn fifos_and_devices_are_refused_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("train-images-idx3-ubyte");
        let name = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o600) }, 0);
        assert!(open_regular(&fifo).unwrap_err().to_string().contains("not a regular file"));
        let zero = dir.path().join("zero");
        std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
        assert!(open_regular(&zero).unwrap_err().to_string().contains("not a regular file"));
        let file = dir.path().join("file");
        std::fs::write(&file, b"1234").unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&file, &link).unwrap();
        assert_eq!(open_regular(&link).unwrap().1, 4, "a link to a regular file is read");
        assert_eq!(read_following(&link, 4).unwrap(), b"1234");
        assert!(read_following(&link, 3).unwrap_err().to_string().contains("more than the 3"));
        assert!(read_following(&fifo, 16).unwrap_err().to_string().contains("not a regular file"));
    }
}
