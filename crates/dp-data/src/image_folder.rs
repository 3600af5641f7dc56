//! A user's own images as a classification dataset: one folder per class (`train/cat/0001.png`,
//! as torchvision's `ImageFolder` reads them), PNG or JPEG, decoded by the `image` crate and
//! resized to the run's shape. burn-dataset's `ImageFolderDataset` is not used: it panics on an
//! unreadable image (`image::open(..).unwrap()` when an item is read), where a run needs the
//! file named before it starts. Every image is decoded before training, within bounds checked
//! first: the memory the dataset will take against the budget, each file's size, and each
//! image's declared width and height (a 100000x100000 PNG header is refused, never allocated).
//! Examples are put in a fixed order that depends on their count only (a permutation drawn with
//! seed 0), so that examples held out from the end (`--validation`) mix the classes.

use crate::error::{DataError, Result};
use crate::image_dataset::{ImageDataset, Normalization};
use crate::jpeg;
use crate::safe_files::{file_error, open_regular, read_bounded};
use image::imageops::FilterType;
use image::{ImageReader, Limits};
use rand::SeedableRng;
use rand::seq::SliceRandom;
use rand_chacha::ChaCha20Rng;
use std::fs;
use std::io::Cursor;
use std::path::{Path, PathBuf};

/// The largest image file read.
pub const MAX_IMAGE_FILE: u64 = 64 << 20;
/// The largest width or height an image may declare.
pub const MAX_IMAGE_SIDE: u32 = 16_384;
/// The most memory one image's decoding may allocate.
const MAX_DECODE_BYTES: u64 = 512 << 20;
/// The file name endings read (compared without case).
const EXTENSIONS: [&str; 3] = ["png", "jpg", "jpeg"];

/// Own images are scaled from [0, 1] with this public mean and deviation per channel (to
/// [-1, 1]): never statistics of the private images.
pub const NORMALIZATION: (f32, f32) = (0.5, 0.5);

/// The entries of `dir` that are not hidden, sorted by name.
fn entries(dir: &Path) -> Result<Vec<PathBuf>> {
    let io = |reason| DataError::Io { path: dir.to_path_buf(), reason };
    let mut names = Vec::new();
    for entry in fs::read_dir(dir).map_err(io)? {
        let entry = entry.map_err(io)?;
        if !entry.file_name().to_string_lossy().starts_with('.') {
            names.push(entry.path());
        }
    }
    names.sort();
    Ok(names)
}

/// The class names of the image folder `dir`: its class folders' names, sorted.
pub fn class_names(dir: &Path) -> Result<Vec<String>> {
    Ok(listing(dir)?.into_iter().map(|(name, _)| name).collect())
}

/// The class folders of `dir` (sorted by name: a class's index is its place) and each one's
/// image files.
fn listing(dir: &Path) -> Result<Vec<(String, Vec<PathBuf>)>> {
    let mut classes = Vec::new();
    for class in entries(dir)? {
        if !class.is_dir() {
            return Err(file_error(&class, "is not in a class folder: the images of class `c` go in a folder named c"));
        }
        let files = entries(&class)?;
        if files.is_empty() {
            return Err(file_error(&class, "is an empty class folder: give it images, or remove it"));
        }
        for file in &files {
            let ext = file.extension().map(|e| e.to_string_lossy().to_ascii_lowercase()).unwrap_or_default();
            if !EXTENSIONS.contains(&ext.as_str()) {
                return Err(file_error(
                    file,
                    "is not a .png, .jpg or .jpeg file (folders within a class folder are not read)",
                ));
            }
        }
        // Compared with the test set's and written into reports: a name that is not UTF-8 would be
        // compared by a lossy rendering, which two different names can share.
        let name = class.file_name().and_then(|n| n.to_str()).map(str::to_string).ok_or_else(|| {
            file_error(&class, "is a class folder whose name is not UTF-8: rename it (class names must be text)")
        })?;
        classes.push((name, files));
    }
    if classes.len() < 2 {
        return Err(file_error(dir, format!("holds {} class folders: a classifier needs at least 2", classes.len())));
    }
    if classes.len() > 256 {
        return Err(file_error(dir, format!("holds {} class folders: at most 256 are read", classes.len())));
    }
    Ok(classes)
}

/// The image file `path` decoded and resized to `shape` (1 channel: grey, 3: RGB), in CHW order.
fn decode(path: &Path, [c, h, w]: [usize; 3]) -> Result<Vec<u8>> {
    let (file, len) = open_regular(path)?;
    let bytes = read_bounded(file, len, path, MAX_IMAGE_FILE)?;
    let bad = |e: &dyn std::fmt::Display| file_error(path, format!("is not a readable PNG or JPEG image ({e})"));
    let image = match bytes.starts_with(&[0xFF, 0xD8]) {
        true => jpeg::decode_strict(&bytes, MAX_IMAGE_SIDE, MAX_DECODE_BYTES).map_err(|e| bad(&e))?,
        false => {
            let mut reader = ImageReader::new(Cursor::new(bytes)).with_guessed_format().map_err(|e| bad(&e))?;
            let mut limits = Limits::default();
            limits.max_image_width = Some(MAX_IMAGE_SIDE);
            limits.max_image_height = Some(MAX_IMAGE_SIDE);
            limits.max_alloc = Some(MAX_DECODE_BYTES);
            reader.limits(limits);
            reader.decode().map_err(|e| bad(&e))?
        }
    };
    let image = image.resize_exact(w as u32, h as u32, FilterType::Triangle);
    Ok(match c {
        1 => image.to_luma8().into_raw(),
        _ => {
            let hwc = image.to_rgb8().into_raw();
            (0..3).flat_map(|k| hwc.iter().skip(k).step_by(3).copied().collect::<Vec<_>>()).collect()
        }
    })
}

/// The images under `dir` (one folder per class), resized to `shape` (channels 1 or 3), with
/// their class names; `classes`, when given (a test set's), must be the folders' names.
pub fn load_image_folder(
    dir: &Path,
    shape: [usize; 3],
    classes: Option<&[String]>,
) -> Result<(ImageDataset, Vec<String>)> {
    let invalid = |reason: String| DataError::InvalidParameter { name: "image shape", reason };
    let [c, h, w] = shape;
    if !(c == 1 || c == 3) || h == 0 || w == 0 || h > MAX_IMAGE_SIDE as usize || w > MAX_IMAGE_SIDE as usize {
        return Err(invalid(format!("{c}x{h}x{w}: give 1 or 3 channels and sides from 1 to {MAX_IMAGE_SIDE}")));
    }
    let listed = listing(dir)?;
    let names: Vec<String> = listed.iter().map(|(n, _)| n.clone()).collect();
    if let Some(expected) = classes.filter(|e| *e != names.as_slice()) {
        return Err(file_error(
            dir,
            format!("has the class folders {names:?} where the training set has {expected:?}: they must be the same"),
        ));
    }
    let mut files: Vec<(usize, &PathBuf)> =
        listed.iter().enumerate().flat_map(|(k, (_, fs))| fs.iter().map(move |f| (k, f))).collect();
    files.shuffle(&mut ChaCha20Rng::seed_from_u64(0));
    let per_image = c * h * w;
    let need = (files.len() as u128) * (per_image as u128);
    crate::memory::check(&format!("the {} images of {} at {c}x{h}x{w}", files.len(), dir.display()), Some(need))?;
    let mut pixels = Vec::with_capacity(files.len() * per_image);
    let mut labels = Vec::with_capacity(files.len());
    for (k, path) in files {
        pixels.extend(decode(path, shape)?);
        labels.push(k as u8);
    }
    let normalization = Normalization { mean: vec![NORMALIZATION.0; c], std: vec![NORMALIZATION.1; c] };
    Ok((ImageDataset::new(pixels, labels, shape, names.len(), normalization)?, names))
}

#[cfg(test)]
mod tests {
    use super::*;
    use image::{ImageEncoder, codecs::jpeg::JpegEncoder, codecs::png::PngEncoder};

    /// Writes `pixels` (HWC, RGB) of `w` x `h` as a PNG or JPEG at `path`.
    fn write(path: &Path, pixels: &[u8], (w, h): (u32, u32), jpeg: bool) {
        let file = fs::File::create(path).unwrap();
        match jpeg {
            true => JpegEncoder::new_with_quality(file, 100).write_image(pixels, w, h, image::ExtendedColorType::Rgb8),
            false => PngEncoder::new(file).write_image(pixels, w, h, image::ExtendedColorType::Rgb8),
        }
        .unwrap();
    }

    #[test]
    fn png_and_jpeg_decode_to_chw_in_class_order_with_the_public_scaling() {
        let dir = tempfile::tempdir().unwrap();
        for class in ["b", "a"] {
            fs::create_dir(dir.path().join(class)).unwrap();
        }
        // Class a: a 2x2 PNG whose pixels are all different; class b: a flat 8x8 JPEG.
        let png: Vec<u8> = (0..12).map(|i| (i * 20) as u8).collect();
        write(&dir.path().join("a/x.PNG"), &png, (2, 2), false);
        write(&dir.path().join("b/y.jpg"), &[100, 150, 200].repeat(64), (8, 8), true);
        fs::write(dir.path().join(".DS_Store"), "hidden files are skipped").unwrap();
        let (data, names) = load_image_folder(dir.path(), [3, 2, 2], None).unwrap();
        assert_eq!(names, ["a", "b"]);
        assert_eq!((data.len(), data.classes(), data.shape()), (2, 2, [3, 2, 2]));
        let at = |label: u8| data.labels().iter().position(|&l| l == label).unwrap();
        let example = |i: usize| data.batch(&[i]).0;
        // CHW: the red plane, then green, then blue; x/255 scaled by (x - 0.5) / 0.5.
        let scaled = |x: u8| (f32::from(x) / 255.0 - 0.5) / 0.5;
        let chw: Vec<f32> =
            (0..3).flat_map(|c| (0..4).map(move |p| (p, c))).map(|(p, c)| scaled(png[p * 3 + c])).collect();
        let got = example(at(0));
        assert!(got.iter().zip(&chw).all(|(g, w)| (g - w).abs() < 1e-6), "{got:?} vs {chw:?}");
        let flat = example(at(1));
        for (c, level) in [100u8, 150, 200].into_iter().enumerate() {
            assert!(flat[c * 4..c * 4 + 4].iter().all(|v| (v - scaled(level)).abs() < 0.03), "{flat:?}");
        }
        // Grey: one plane; the test split must have the training set's classes.
        let (grey, _) = load_image_folder(dir.path(), [1, 4, 4], Some(&names)).unwrap();
        assert_eq!(grey.shape(), [1, 4, 4]);
        let err = load_image_folder(dir.path(), [1, 4, 4], Some(&["a".into(), "c".into()])).unwrap_err().to_string();
        assert!(err.contains("must be the same"), "{err}");
        let err = load_image_folder(dir.path(), [2, 4, 4], None).unwrap_err().to_string();
        assert!(err.contains("1 or 3 channels"), "{err}");
    }

    #[test]
    fn a_jpeg_cut_short_is_refused_and_a_whole_one_read() {
        let dir = tempfile::tempdir().unwrap();
        let pixels: Vec<u8> = (0..48 * 48 * 3).map(|i| ((i * 7919) % 251) as u8).collect();
        let path = dir.path().join("a/x.jpg");
        std::fs::create_dir_all(dir.path().join("a")).unwrap();
        write(&path, &pixels, (48, 48), true);
        std::fs::create_dir_all(dir.path().join("b")).unwrap();
        write(&dir.path().join("b/y.jpg"), &pixels, (48, 48), true);
        assert!(load_image_folder(dir.path(), [3, 8, 8], None).is_ok());
        let whole = std::fs::read(&path).unwrap();
        std::fs::write(&path, &whole[..whole.len() * 6 / 10]).unwrap();
        let err = load_image_folder(dir.path(), [3, 8, 8], None).unwrap_err().to_string();
        assert!(err.contains("x.jpg") && err.contains("cut short"), "{err}");
        // The cut hidden by an end-of-image marker appended: refused too, naming the file.
        for at in [600, whole.len() / 2] {
            std::fs::write(&path, [&whole[..at], &[0xFF, 0xD9][..]].concat()).unwrap();
            let err = load_image_folder(dir.path(), [3, 8, 8], None).unwrap_err().to_string();
            assert!(err.contains("x.jpg") && err.contains("JPEG"), "{err}");
        }
    }

    #[test]
    fn class_folders_whose_names_are_not_utf8_are_refused() {
        use std::os::unix::ffi::OsStrExt;
        let dir = tempfile::tempdir().unwrap();
        let (train, test) = (dir.path().join("train"), dir.path().join("test"));
        // Lossily both train's and test's pairs read as the same two names.
        for (root, names) in [(&train, [0xfe_u8, 0xff]), (&test, [0xfd, 0xfe])] {
            for name in names {
                let class = root.join(std::ffi::OsStr::from_bytes(&[name]));
                fs::create_dir_all(&class).unwrap();
                write(&class.join("x.png"), &[9; 12], (2, 2), false);
            }
        }
        for root in [&train, &test] {
            let e = load_image_folder(root, [3, 2, 2], None).unwrap_err().to_string();
            assert!(e.contains("not UTF-8"), "{e}");
        }
    }
}
