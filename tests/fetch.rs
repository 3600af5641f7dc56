//! `dptrain data fetch` against a local HTTP server on 127.0.0.1 (this machine has no internet):
//! a verified download, a resumed one after an interrupted transfer, a corrupt file, a 404, a
//! silent server and a slow but steady one; links, FIFOs and device nodes planted where the
//! download goes, refused with nothing written through; CIFAR-10's archive unpacked to its six
//! batches only, their digests sealed and checked on reuse; and `--dataset` without data naming
//! the fetch command.

use crate::common::{binary, dptrain, one_line_error};
use dptrain::fetch::download::{Fetched, Timeouts, download};
use dptrain::fetch::extract::{BATCH_BYTES, BATCHES, FILES, unpack, unpacked};
use dptrain::fetch::remote::RemoteFile;
use sha2::{Digest, Sha256};
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The fixture file every route serves (or damages).
fn fixture() -> Vec<u8> {
    (0..100_000u32).map(|i| (i * 31 % 251) as u8).collect()
}

/// A server on 127.0.0.1 whose first path segment says how it answers: `ok` (honours
/// `Range: bytes=N-`), `corrupt` (one byte changed), `cut` (half the body, then the connection
/// closes), `missing` (404), `slow` (says nothing for 5 s), `steady` (the body in 10 pieces
/// 200 ms apart). It records every Range header.
fn server() -> (String, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let ranges = Arc::new(Mutex::new(Vec::new()));
    let seen = ranges.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let seen = seen.clone();
            std::thread::spawn(move || answer(stream, &seen));
        }
    });
    (base, ranges)
}

fn answer(mut stream: TcpStream, ranges: &Mutex<Vec<String>>) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut request = String::new();
    reader.read_line(&mut request).unwrap();
    let mut from = 0usize;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 || line.trim().is_empty() {
            break;
        }
        if let Some(range) = line.to_ascii_lowercase().strip_prefix("range: bytes=") {
            ranges.lock().unwrap().push(range.trim().to_string());
            from = range.trim().trim_end_matches('-').parse().unwrap();
        }
    }
    let route = request.split('/').nth(1).unwrap_or("").to_string();
    let mut body = fixture();
    let _ = match route.as_str() {
        "ok" if from > 0 => {
            let head = format!(
                "HTTP/1.1 206 Partial Content\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                body.len() - from
            );
            stream.write_all(head.as_bytes()).and_then(|_| stream.write_all(&body[from..]))
        }
        "ok" | "corrupt" | "cut" => {
            if route == "corrupt" {
                body[500] ^= 1;
            }
            let head = format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n", body.len());
            let sent = if route == "cut" { &body[..body.len() / 2] } else { &body[..] };
            stream.write_all(head.as_bytes()).and_then(|_| stream.write_all(sent))
        }
        "slow" => {
            std::thread::sleep(Duration::from_secs(5));
            Ok(())
        }
        "steady" => {
            let head = format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n", body.len());
            stream.write_all(head.as_bytes()).and_then(|_| {
                body.chunks(body.len() / 10).try_for_each(|piece| {
                    std::thread::sleep(Duration::from_millis(200));
                    stream.write_all(piece).and_then(|_| stream.flush())
                })
            })
        }
        _ => stream.write_all(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"),
    };
}

/// The fixture as a published file.
fn published() -> RemoteFile {
    let sha = hex::encode(Sha256::digest(fixture()));
    RemoteFile { name: "fixture.gz", size: fixture().len() as u64, sha256: Box::leak(sha.into_boxed_str()) }
}

fn get(base: &str, route: &str, dir: &std::path::Path, idle: Duration) -> Result<Fetched, String> {
    fetch_within(base, route, dir, Timeouts { idle, total: None })
}

fn fetch_within(base: &str, route: &str, dir: &std::path::Path, timeouts: Timeouts) -> Result<Fetched, String> {
    download(&format!("{base}/{route}/fixture.gz"), &published(), dir, timeouts, &mut |_, _| {})
        .map_err(|e| e.to_string())
}

#[test]
fn downloads_are_verified_resumed_and_never_partial_under_their_name() {
    let (base, ranges) = server();
    let dir = tempfile::tempdir().unwrap();
    let (file, part) = (dir.path().join("fixture.gz"), dir.path().join("fixture.gz.part"));
    let second = Duration::from_secs(5);

    // A corrupt file: refused, nothing kept.
    let err = get(&base, "corrupt", dir.path(), second).unwrap_err();
    assert!(err.contains("SHA-256") && err.contains("nothing kept") && err.lines().count() == 1, "{err}");
    assert!(!file.exists() && !part.exists());
    // A 404: one line.
    let err = get(&base, "missing", dir.path(), second).unwrap_err();
    assert!(err.contains("404"), "{err}");
    // A silent server: the timeout, not a hang.
    let start = Instant::now();
    let err = get(&base, "slow", dir.path(), Duration::from_millis(500)).unwrap_err();
    assert!(err.contains("timeout") && start.elapsed() < Duration::from_secs(4), "{err}");
    // An interrupted transfer: no file under its name, the part kept; the next call resumes it
    // with a range request and verifies the whole.
    let err = get(&base, "cut", dir.path(), second).unwrap_err();
    assert!(err.contains("run the command again to resume"), "{err}");
    assert!(!file.exists());
    assert_eq!(std::fs::metadata(&part).unwrap().len(), 50_000);
    assert_eq!(get(&base, "ok", dir.path(), second), Ok(Fetched::Downloaded));
    assert_eq!(ranges.lock().unwrap().as_slice(), ["50000-"]);
    assert_eq!(std::fs::read(&file).unwrap(), fixture());
    assert!(!part.exists());
    // Already there and verified: the server is not asked (a 404 route would fail).
    assert_eq!(get(&base, "missing", dir.path(), second), Ok(Fetched::Present));
    // Damaged on disk: fetched again.
    std::fs::write(&file, b"damaged").unwrap();
    assert_eq!(get(&base, "ok", dir.path(), second), Ok(Fetched::Downloaded));
    assert_eq!(std::fs::read(&file).unwrap(), fixture());
    // A slow but steady server (2 s in all, 200 ms silences): the idle timeout of 500 ms does
    // not cut it; a total of 1 s does.
    std::fs::remove_file(&file).unwrap();
    assert_eq!(get(&base, "steady", dir.path(), Duration::from_millis(500)), Ok(Fetched::Downloaded));
    std::fs::remove_file(&file).unwrap();
    let capped = Timeouts { idle: second, total: Some(Duration::from_secs(1)) };
    assert!(fetch_within(&base, "steady", dir.path(), capped).is_err());
    let _ = std::fs::remove_file(&part);
}

#[test]
fn links_fifos_and_devices_where_a_download_goes_are_refused_and_never_written_through() {
    let (base, _) = server();
    let dir = tempfile::tempdir().unwrap();
    let (file, part) = (dir.path().join("fixture.gz"), dir.path().join("fixture.gz.part"));
    let second = Duration::from_secs(5);
    let victim = dir.path().join("victim");
    std::fs::write(&victim, b"7 bytes").unwrap();
    let fifo = |path: &std::path::Path| {
        let name = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o600) }, 0);
    };
    for at in [&part, &file] {
        // A link to a victim file: refused, the victim keeps its bytes.
        std::os::unix::fs::symlink(&victim, at).unwrap();
        let err = get(&base, "ok", dir.path(), second).unwrap_err();
        assert!(err.contains("symbolic link") && err.lines().count() == 1, "{err}");
        assert_eq!(std::fs::read(&victim).unwrap(), b"7 bytes");
        std::fs::remove_file(at).unwrap();
        // A link to /dev/zero and a FIFO: refused at once, not read for ever.
        std::os::unix::fs::symlink("/dev/zero", at).unwrap();
        let start = Instant::now();
        assert!(get(&base, "ok", dir.path(), second).unwrap_err().contains("symbolic link"));
        std::fs::remove_file(at).unwrap();
        fifo(at);
        assert!(get(&base, "ok", dir.path(), second).unwrap_err().contains("not a regular file"));
        assert!(start.elapsed() < Duration::from_secs(2), "no hang");
        std::fs::remove_file(at).unwrap();
    }
    // An oversized file at the part's name: refused before it is read.
    std::fs::File::create(&part).unwrap().set_len(1 << 40).unwrap();
    assert!(get(&base, "ok", dir.path(), second).unwrap_err().contains("more than the"));
    std::fs::remove_file(&part).unwrap();
    assert_eq!(get(&base, "ok", dir.path(), second), Ok(Fetched::Downloaded));
}

#[test]
fn the_cli_refuses_in_one_line_and_train_names_the_fetch_command() {
    let (base, _) = server();
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("fmnist");
    let mirror = format!("{base}/missing");
    let args = ["data", "fetch", "fashion-mnist", "--dir", folder.to_str().unwrap(), "--mirror", &mirror];
    one_line_error(&dptrain(&args), "404");
    one_line_error(&dptrain(&["data", "fetch", "imagenet"]), "imagenet");
    one_line_error(&dptrain(&["data", "fetch", "mnist", "--timeout", "-1"]), "invalid --timeout");
    let out = std::process::Command::new(binary())
        .args(["train", "--dataset", "mnist", "-z", "1", "--out-dir", dir.path().join("run").to_str().unwrap()])
        .env("DPTRAIN_CACHE_DIR", dir.path().join("empty-cache"))
        .output()
        .unwrap();
    one_line_error(&out, "dptrain data fetch mnist");
}

#[test]
fn cifar10_archives_unpack_their_six_batches_and_nothing_else() {
    let dir = tempfile::tempdir().unwrap();
    let archive = dir.path().join("cifar-10-binary.tar.gz");
    let gz = flate2::write::GzEncoder::new(std::fs::File::create(&archive).unwrap(), flate2::Compression::fast());
    let mut tar = tar::Builder::new(gz);
    let mut add = |path: &str, bytes: &[u8]| {
        let mut header = tar::Header::new_gnu();
        header.set_size(bytes.len() as u64);
        header.set_mode(0o644);
        header.set_cksum();
        tar.append_data(&mut header, path, bytes).unwrap();
    };
    let batch = vec![3u8; BATCH_BYTES as usize];
    for name in FILES {
        add(&format!("{BATCHES}/{name}"), &batch);
    }
    add(&format!("{BATCHES}/readme.html"), b"<html></html>");
    tar.into_inner().unwrap().finish().unwrap();
    let key = dp_data::SecretKey::from_os();
    assert!(!unpacked(dir.path(), &key));
    unpack(&archive, dir.path(), &key).unwrap();
    assert!(unpacked(dir.path(), &key));
    assert!(!unpacked(dir.path(), &dp_data::SecretKey::from_os()), "digests sealed by another key");
    let kept: Vec<_> = std::fs::read_dir(dir.path().join(BATCHES)).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(kept.len(), FILES.len() + 1, "only the batches the loader reads, and their digests: {kept:?}");
    // A batch zeroed at its size: no longer "unpacked" (it used to pass as verified).
    let first = dir.path().join(BATCHES).join(FILES[0]);
    std::fs::write(&first, vec![0u8; BATCH_BYTES as usize]).unwrap();
    assert!(!unpacked(dir.path(), &key));
    std::fs::write(&first, &batch).unwrap();
    assert!(unpacked(dir.path(), &key));
    let data =
        dp_data::DatasetName::Cifar10.load(dir.path(), dp_data::Split::Test, &dp_data::OwnData::default()).unwrap();
    assert_eq!(data.len(), 10_000);
    // A truncated archive: refused, nothing half unpacked replaces the batches.
    let bytes = std::fs::read(&archive).unwrap();
    std::fs::write(&archive, &bytes[..bytes.len() / 2]).unwrap();
    assert!(unpack(&archive, dir.path(), &key).unwrap_err().to_string().contains("unpacking"));
    assert!(unpacked(dir.path(), &key), "the batches unpacked before are untouched");
}
