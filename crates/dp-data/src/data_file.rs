//! A data file opened as a hostile folder may hold it: a link is followed (data folders are often
//! links into a shared store) but what it names must be a regular file, opened without blocking
//! (a FIFO used to hang the loader for ever, a link to `/dev/zero` to read until memory ran out).

use crate::error::{DataError, Result};
use std::fs::{File, OpenOptions};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// Opens `path` for reading, refused unless it is a regular file; gives it with its size.
pub fn open_regular(path: &Path) -> Result<(File, u64)> {
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
        .map_err(|reason| DataError::Io { path: path.to_path_buf(), reason })?;
    let meta = file.metadata().map_err(|reason| DataError::Io { path: path.to_path_buf(), reason })?;
    if !meta.is_file() {
        return Err(DataError::corrupt(
            path,
            "is not a regular file (a FIFO, a device or a folder): give the data file itself",
        ));
    }
    Ok((file, meta.len()))
}

#[cfg(test)]
mod tests {
    use super::*;

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
    }
}
