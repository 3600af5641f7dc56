//! A user's own data in `dptrain train`: an image folder (one folder per class, PNGs of any size
//! resized to --image-shape) and a CSV table (numeric features, the label column by name), each
//! trained end to end to a learnt model with its epsilon; and the hostile cases, each a one-line
//! error naming the file: a truncated PNG, a PNG whose header claims 100000 x 100000 pixels, a
//! FIFO named .png, an empty class folder, no test set, a missing label, a text column, an
//! unknown test class, a label column that does not exist.

use crate::common::*;
use std::path::Path;

/// Writes a grey PNG of `w` x `h` pixels around `level` (a little texture so no two are equal).
fn png(path: &Path, w: u32, h: u32, level: u8) {
    let file = std::fs::File::create(path).unwrap();
    let mut encoder = png::Encoder::new(file, w, h);
    encoder.set_color(png::ColorType::Grayscale);
    encoder.set_depth(png::BitDepth::Eight);
    let pixels: Vec<u8> = (0..w * h).map(|i| level.saturating_add((i % 7) as u8 * 5)).collect();
    encoder.write_header().unwrap().write_image_data(&pixels).unwrap();
}

/// `root/CLASS/i.png` for the classes dark and light, `count` each, of varied sizes.
fn image_split(root: &Path, count: usize) {
    for (class, level) in [("dark", 30u8), ("light", 190u8)] {
        std::fs::create_dir_all(root.join(class)).unwrap();
        for i in 0..count {
            png(&root.join(class).join(format!("{i:03}.png")), 10 + (i % 3) as u32, 9 + (i % 4) as u32, level);
        }
    }
}

/// A PNG chunk: length, type, data, CRC.
fn chunk(kind: &[u8; 4], data: &[u8]) -> Vec<u8> {
    let mut crc = flate2::Crc::new();
    crc.update(kind);
    crc.update(data);
    [&(data.len() as u32).to_be_bytes()[..], kind, data, &crc.sum().to_be_bytes()].concat()
}

/// A PNG whose header declares `side` x `side` grey pixels, with no image data.
fn claimed_png(side: u32) -> Vec<u8> {
    let ihdr = [&side.to_be_bytes()[..], &side.to_be_bytes(), &[8, 0, 0, 0, 0]].concat();
    [&b"\x89PNG\r\n\x1a\n"[..], &chunk(b"IHDR", &ihdr), &chunk(b"IEND", &[])].concat()
}

fn train_args<'a>(dataset: &'a str, data: &'a str, out: &'a str) -> Vec<&'a str> {
    vec![
        "train",
        "--dataset",
        dataset,
        "--data-dir",
        data,
        "--out-dir",
        out,
        "--device",
        "cpu",
        "--lot-size",
        "20",
        "--epochs",
        "8",
        "--noise-multiplier",
        "0.8",
        "--seed",
        "1",
    ]
}

#[test]
fn an_image_folder_trains_end_to_end_and_hostile_images_are_one_line_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("images");
    image_split(&data.join("train"), 40);
    image_split(&data.join("test"), 10);
    let (d, out) = (data.to_str().unwrap(), tmp.path().join("run"));
    let mut args = train_args("image-folder", d, out.to_str().unwrap());
    args.extend(["--image-shape", "1x8x8", "--model", "logreg"]);
    let (report, _) = train_json(args.clone(), &out);
    assert!(report["test_accuracy"].as_f64().unwrap() >= 0.9, "{report}");
    assert_eq!(report["guarantee"], "certified");
    assert!(report["epsilon"].as_f64().unwrap().is_finite());

    // Each hostile file in turn, in a copy of the good folder.
    let hostile = |name: &str, plant: &dyn Fn(&Path), needle: &str| {
        let bad = tmp.path().join(name);
        image_split(&bad.join("train"), 3);
        image_split(&bad.join("test"), 1);
        plant(&bad);
        let out = tmp.path().join(format!("{name}-run"));
        let mut args = train_args("image-folder", bad.to_str().unwrap(), out.to_str().unwrap());
        args.extend(["--image-shape", "1x8x8", "--model", "logreg"]);
        one_line_error(&dptrain(&args), needle);
    };
    hostile(
        "truncated",
        &|d| {
            let file = d.join("train/dark/001.png");
            let bytes = std::fs::read(&file).unwrap();
            std::fs::write(&file, &bytes[..bytes.len() / 2]).unwrap();
        },
        "train/dark/001.png: is not a readable PNG or JPEG image",
    );
    hostile(
        "huge",
        &|d| std::fs::write(d.join("train/light/huge.png"), claimed_png(100_000)).unwrap(),
        "huge.png: is not a readable PNG or JPEG image",
    );
    hostile(
        "fifo",
        &|d| {
            let path = std::ffi::CString::new(d.join("train/dark/pipe.png").to_str().unwrap()).unwrap();
            assert_eq!(unsafe { libc::mkfifo(path.as_ptr(), 0o644) }, 0);
        },
        "pipe.png: is not a regular file",
    );
    hostile("empty", &|d| std::fs::create_dir(d.join("train/empty")).unwrap(), "empty: is an empty class folder");
    hostile("stray", &|d| std::fs::write(d.join("train/dark/notes.txt"), "x").unwrap(), "notes.txt: is not a .png");
    hostile(
        "other-classes",
        &|d| std::fs::rename(d.join("test/light"), d.join("test/bright")).unwrap(),
        "where the training set has",
    );
    hostile("no-test", &|d| std::fs::remove_dir_all(d.join("test")).unwrap(), "--validation N");
}

/// `rows` lines of a table whose label says whether a + b > 0, with a leading header.
fn table(rows: usize, shift: usize) -> String {
    let mut text = String::from("a,b,label\n");
    for i in 0..rows {
        let a = ((i + shift) * 37 % 101) as f64 / 50.0 - 1.0;
        let b = ((i + shift) * 53 % 97) as f64 / 48.0 - 1.0;
        text += &format!("{a:.4},{b:.4},{}\n", if a + b > 0.0 { "yes" } else { "no" });
    }
    text
}

#[test]
fn a_csv_table_trains_logreg_and_mlp_end_to_end_and_bad_tables_are_one_line_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("table");
    std::fs::create_dir(&data).unwrap();
    std::fs::write(data.join("train.csv"), table(200, 0)).unwrap();
    std::fs::write(data.join("test.csv"), table(60, 500)).unwrap();
    let d = data.to_str().unwrap();
    for model in ["logreg", "mlp"] {
        let out = tmp.path().join(model);
        let mut args = train_args("csv", d, out.to_str().unwrap());
        args.extend(["--model", model, "--label", "label", "--classes", "no,yes", "--learning-rate", "2"]);
        let (report, _) = train_json(args, &out);
        assert!(report["test_accuracy"].as_f64().unwrap() >= 0.85, "{model}: {report}");
        assert_eq!(report["guarantee"], "certified");
    }

    let bad = |name: &str, train: &str, test: &str, label: &str, needle: &str| {
        let dir = tmp.path().join(name);
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(dir.join("train.csv"), train).unwrap();
        std::fs::write(dir.join("test.csv"), test).unwrap();
        let out = tmp.path().join(format!("{name}-run"));
        let mut args = train_args("csv", dir.to_str().unwrap(), out.to_str().unwrap());
        args.extend(["--model", "logreg", "--label", label, "--classes", "no,yes"]);
        one_line_error(&dptrain(&args), needle);
    };
    let good = table(40, 0);
    // The table with the field `column` of data row `row` (every row: None) made by `field`.
    let edit = |row: Option<usize>, column: usize, field: &dyn Fn(usize) -> String| -> String {
        let lines = good.lines().enumerate().map(|(i, line)| {
            let mut fields: Vec<String> = line.split(',').map(str::to_string).collect();
            if i > 0 && row.is_none_or(|r| r + 1 == i) {
                fields[column] = field(i);
            }
            fields.join(",") + "\n"
        });
        lines.collect()
    };
    bad("missing-label", &edit(Some(3), 2, &|_| String::new()), &good, "label", "1 rows have a missing label or value");
    bad("missing-value", &edit(Some(5), 0, &|_| "NA".into()), &good, "label", "missing values by column: a (1)");
    let colours = edit(None, 1, &|i| if i % 2 == 0 { "red".into() } else { "blue".into() });
    bad("text-column", &colours.replacen("a,b,", "a,colour,", 1), &good, "label", "column 'colour' is not numeric");
    bad(
        "unknown-class",
        &good,
        &good.replacen(",no\n", ",maybe\n", 1),
        "label",
        "label 'maybe' is not a declared class (no, yes)",
    );
    // One row away from a table that trains: a class of its own is refused, not a third output.
    bad("zebra", &(good.clone() + "0.5,0.5,zebra\n"), &good, "label", "line 42: label 'zebra' is not a declared class");
    // The classes are declared, never read from the rows.
    let out = tmp.path().join("undeclared");
    let mut args = train_args("csv", d, out.to_str().unwrap());
    args.extend(["--model", "logreg", "--label", "label"]);
    one_line_error(&dptrain(&args), "needs its classes declared");
    bad("no-label-column", &good, &good, "income", "label column 'income' does not exist (columns: a, b, label)");
}
