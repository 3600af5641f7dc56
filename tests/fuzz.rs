//! A bounded fuzz harness for every parser and the checkpoint loader: IDX (raw and gzip), the
//! CIFAR-10 binary, CSV tables (mutated, and of hostile shapes: wide, one-character fields, a
//! mistyped first row), search spaces of hostile sizes, JPEG files cut short with a marker
//! appended (each must be refused), the TOML run configuration, and the checkpoints of every
//! mechanism (raw damage, which the MAC refuses; damage sealed with the run's own MAC key, which
//! reaches the header, the Burn records and every resume check; and the sampler's and noise
//! stream's positions edited under a valid MAC, which must all be refused). Each input is a valid
//! seed file mutated by a ChaCha-driven mutator (bit flips, extreme bytes, truncation,
//! duplication, insertion, appended garbage); each run must give a clean error or a correct
//! result, never a panic (caught and counted: the test fails on any), an abort (which would kill
//! the test) or an accepted forgery of the streams. The counts are printed (`--nocapture`) and
//! recorded in docs/RESULTS.md; DPTRAIN_FUZZ_ROUNDS scales them (default 10).

use crate::common::checkpoint_view;

use dp_accounting::LotSampling;
use dp_data::idx::{encode_idx, read_idx};
use dp_data::image_folder::load_image_folder;
use dp_data::{CsvOptions, Normalization, Split, cifar10::load_cifar10, load_csv};
use dp_engine::backend;
use dp_engine::privacy::mechanism::MechanismName;
use dp_run::RunOptions;
use dp_run::folder::checkpoint::Checkpoint;
use dptrain::search_space::{SpaceFile, configurations};
use dptrain::train_config::TrainConfig;
use dptrain::trainer::{Session, train};
use dptrain::zoo::ModelName;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;
use sha2::Sha256;
use std::io::Write;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;

/// Rounds of every target (scaled by DPTRAIN_FUZZ_ROUNDS).
fn rounds(base: usize) -> usize {
    base * std::env::var("DPTRAIN_FUZZ_ROUNDS").ok().and_then(|r| r.parse().ok()).unwrap_or(10)
}

/// One mutation of `seed`.
fn mutate(seed: &[u8], rng: &mut ChaCha20Rng) -> Vec<u8> {
    let mut v = seed.to_vec();
    for _ in 0..rng.random_range(1..4) {
        let at = if v.is_empty() { 0 } else { rng.random_range(0..v.len()) };
        match rng.random_range(0..7) {
            0 if !v.is_empty() => v[at] ^= 1 << rng.random_range(0..8),
            1 if !v.is_empty() => v[at] = [0x00, 0xff, 0x7f, 0x80, b'9', b'-', b'"'][rng.random_range(0..7)],
            2 => v.truncate(at),
            3 if !v.is_empty() => {
                let end = (at + rng.random_range(1..64)).min(v.len());
                let chunk = v[at..end].to_vec();
                v.splice(at..at, chunk);
            }
            4 => {
                let junk: Vec<u8> = (0..rng.random_range(1..16)).map(|_| rng.random()).collect();
                v.splice(at..at, junk);
            }
            5 => v.extend((0..rng.random_range(1..32)).map(|_| rng.random::<u8>())),
            _ if !v.is_empty() => {
                // A 32-bit field (IDX sizes, lengths) set to an extreme value.
                let end = (at + 4).min(v.len());
                let word = [u32::MAX, 0, 1 << 31, 60_000][rng.random_range(0..4)].to_be_bytes();
                v[at..end].copy_from_slice(&word[..end - at]);
            }
            _ => v.push(rng.random()),
        }
    }
    v
}

/// What a target's runs came to.
#[derive(Default)]
struct Tally {
    inputs: usize,
    accepted: usize,
    panics: Vec<String>,
}

impl Tally {
    /// Runs `f` on an input that must be refused: an Ok is counted as a failure, like a panic.
    fn refused<T, E>(&mut self, what: &str, f: impl FnOnce() -> Result<T, E>) {
        self.inputs += 1;
        match catch_unwind(AssertUnwindSafe(f)) {
            Ok(Err(_)) => {}
            Ok(Ok(_)) => self.panics.push(format!("{what}: accepted")),
            Err(_) => self.panics.push(format!("{what}: panicked")),
        }
    }

    /// Runs `f` on one input, counting an Ok, an Err or a panic.
    fn run<T, E>(&mut self, what: &str, f: impl FnOnce() -> Result<T, E>) {
        self.inputs += 1;
        match catch_unwind(AssertUnwindSafe(f)) {
            Ok(Ok(_)) => self.accepted += 1,
            Ok(Err(_)) => {}
            Err(payload) => {
                let message = payload
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                self.panics.push(format!("{what}: {message}"));
            }
        }
    }
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(bytes).unwrap();
    e.finish().unwrap()
}

fn idx_and_cifar(dir: &Path, rng: &mut ChaCha20Rng, tally: &mut Tally) {
    let images = encode_idx(&[3, 4, 4], &(0..48).map(|i| i as u8).collect::<Vec<_>>());
    let path = dir.join("f-idx");
    for seed in [images.clone(), gzip(&images)] {
        for _ in 0..rounds(1500) {
            std::fs::write(&path, mutate(&seed, rng)).unwrap();
            tally.run("idx", || read_idx(&path, 3));
        }
    }
    let cifar = dir.join("cifar");
    std::fs::create_dir_all(&cifar).unwrap();
    let record: Vec<u8> = std::iter::once(3).chain((0..3072).map(|i| i as u8)).collect();
    let seed = [record.clone(), record].concat();
    for i in 0..rounds(300) {
        let bytes = mutate(&seed, rng);
        std::fs::write(cifar.join("test_batch.bin"), if i % 2 == 0 { bytes } else { gzip(&bytes) }).unwrap();
        let normalization = Normalization { mean: vec![0.5; 3], std: vec![0.25; 3] };
        tally.run("cifar", || load_cifar10(&cifar, Split::Test, normalization));
    }
}

fn csv(dir: &Path, rng: &mut ChaCha20Rng, tally: &mut Tally) {
    let seed = b"age,colour,income,label\n39,red,77516,no\n50,?,83311,yes\n38,blue,,no\n53,red,234721,yes\n";
    let path = dir.join("t.csv");
    for _ in 0..rounds(3000) {
        std::fs::write(&path, mutate(seed, rng)).unwrap();
        let options = CsvOptions { classes: Some(vec!["no".into(), "yes".into()]), ..CsvOptions::default() };
        tally.run("csv", || load_csv(&path, &options));
    }
}

/// CSV tables of hostile shapes: wide (up to 10^5 columns), of one-character fields, a first row
/// with a typo, a unique identifier per row read as a category.
fn csv_shapes(dir: &Path, rng: &mut ChaCha20Rng, tally: &mut Tally) {
    let path = dir.join("shape.csv");
    let options = CsvOptions { classes: Some(vec!["0".into(), "1".into()]), ..CsvOptions::default() };
    for _ in 0..rounds(3) {
        let width = [2, 50, 1000, 100_000][rng.random_range(0..4)];
        let rows = (200_000 / width).clamp(2, 5000);
        let mut text = String::new();
        if rng.random_bool(0.5) {
            text += &(0..width)
                .map(|j| format!("c{}", if rng.random_bool(0.01) { 0 } else { j }))
                .collect::<Vec<_>>()
                .join(",");
            text.push('\n');
        }
        for i in 0..rows {
            let cell = |j: usize, rng: &mut ChaCha20Rng| match (j + 1 == width, rng.random_range(0..40)) {
                (true, _) => (i % 2).to_string(),
                (_, 0) => "0.5x".into(),
                (_, 1) => format!("id{i}"),
                (_, 2) => String::new(),
                (_, r) => (r % 10).to_string(),
            };
            text += &(0..width).map(|j| cell(j, rng)).collect::<Vec<_>>().join(",");
            text.push('\n');
        }
        std::fs::write(&path, mutate(text.as_bytes(), rng)).unwrap();
        tally.run("csv shape", || load_csv(&path, &options));
    }
}

/// Search spaces of hostile sizes: long lists crossed, a `[base]` of a huge list of integers, a
/// megabyte string or a quarter of a million class names.
fn space_files(rng: &mut ChaCha20Rng, tally: &mut Tally) {
    for _ in 0..rounds(2) {
        let list = |n: usize| (0..n).map(|i| format!("{}.0", i + 1)).collect::<Vec<_>>().join(", ");
        let (a, b) = (rng.random_range(1..=100), rng.random_range(1..=100));
        let base = match rng.random_range(0..4) {
            0 => format!(
                "hidden = [{}]",
                (0..rng.random_range(1..480_000)).map(|i| (i % 10).to_string()).collect::<Vec<_>>().join(",")
            ),
            1 => format!("label = \"{}\"", "x".repeat(rng.random_range(1..1 << 20))),
            2 => format!(
                "classes = [{}]",
                (0..rng.random_range(2..250_000)).map(|i| format!("\"c{i}\"")).collect::<Vec<_>>().join(",")
            ),
            _ => "model = \"logreg\"".into(),
        };
        let text = format!("[base]\n{base}\n[space]\nlearning_rate = [{}]\nmomentum = [{}]\n", list(a), list(b));
        tally.run("space", || -> Result<(), String> {
            let file: SpaceFile = toml::from_str(&text).map_err(|e| e.to_string())?;
            configurations(&file).map(|_| ()).map_err(|e| e.to_string())
        });
    }
}

/// JPEG files cut short, with an end-of-image (or another) marker appended to hide the cut, in
/// a class folder: every one must be refused, never decoded into a grey fill.
fn jpeg_cuts(dir: &Path, rng: &mut ChaCha20Rng, tally: &mut Tally) {
    let fixtures = crate::common::workspace().join("crates/dp-data/tests/data");
    let files = ["baseline-32x32.jpg", "restarts-32x32.jpg", "progressive-16x16.jpg", "progressive-restarts-32x32.jpg"];
    let seeds: Vec<Vec<u8>> = files.map(|f| std::fs::read(fixtures.join(f)).unwrap()).into();
    let root = dir.join("images");
    for class in ["a", "b"] {
        std::fs::create_dir_all(root.join(class)).unwrap();
        std::fs::write(root.join(class).join("whole.jpg"), &seeds[0]).unwrap();
    }
    assert!(load_image_folder(&root, [3, 8, 8], None).is_ok(), "the whole files are read");
    let file = root.join("a").join("cut.jpg");
    for _ in 0..rounds(30) {
        let seed = &seeds[rng.random_range(0..seeds.len())];
        let first_scan = seed.windows(2).position(|w| w == [0xFF, 0xDA]).unwrap();
        let at = rng.random_range(first_scan..seed.len() - 2);
        let marker = [0xD9, 0xD9, 0xD9, 0xDA, 0xC4, 0xD0][rng.random_range(0..6)];
        std::fs::write(&file, [&seed[..at], &[0xFF, marker, 0xFF, 0xD9][..]].concat()).unwrap();
        tally.refused("jpeg cut", || load_image_folder(&root, [3, 8, 8], None));
    }
}

fn toml_config(rng: &mut ChaCha20Rng, tally: &mut Tally) {
    let seed = toml::to_string(&TrainConfig { noise_multiplier: Some(1.1), seed: Some(3), ..TrainConfig::default() })
        .unwrap()
        .into_bytes();
    for _ in 0..rounds(3000) {
        let bytes = mutate(&seed, rng);
        tally.run("toml", || -> Result<(), String> {
            let text = std::str::from_utf8(&bytes).map_err(|e| e.to_string())?;
            let config: TrainConfig = toml::from_str(text).map_err(|e| e.to_string())?;
            let privacy = config.privacy().map_err(|e| e.to_string())?;
            config.validate(&privacy).map_err(|e| e.to_string())?;
            privacy.settings.planned_steps(60_000).map_err(|e| e.to_string()).map(|_| ())
        });
    }
}

/// A tiny MNIST-format dataset in `dir`.
fn tiny_mnist(dir: &Path) {
    for (prefix, n) in [("train", 200), ("t10k", 20)] {
        let labels: Vec<u8> = (0..n).map(|i| (i % 10) as u8).collect();
        let pixels: Vec<u8> = (0..n * 784).map(|i| (i * 7 % 256) as u8).collect();
        std::fs::write(dir.join(format!("{prefix}-images-idx3-ubyte")), encode_idx(&[n, 28, 28], &pixels)).unwrap();
        std::fs::write(dir.join(format!("{prefix}-labels-idx1-ubyte")), encode_idx(&[n], &labels)).unwrap();
    }
}

/// `body` sealed with the run's MAC key, as a checkpoint carries it: a forger holding the key,
/// so that the damage reaches every check behind the MAC.
fn sealed(body: &[u8], key: &[u8]) -> Vec<u8> {
    use hmac::Mac;
    let mut mac = hmac::Hmac::<Sha256>::new_from_slice(key).unwrap();
    mac.update(body);
    [body, mac.finalize().into_bytes().as_slice()].concat()
}

/// The MAC key in the key file of the run in `run`.
fn mac_key(run: &Path) -> Vec<u8> {
    let keys: serde_json::Value = serde_json::from_slice(&std::fs::read(run.join("run.key")).unwrap()).unwrap();
    hex::decode(keys["mac_key"].as_str().unwrap()).unwrap()
}

/// Numbers a mutated sampler or noise position takes: near the true one, at the edges, huge.
fn extreme(rng: &mut ChaCha20Rng, truth: u64) -> serde_json::Value {
    match rng.random_range(0..6) {
        0 => truth.saturating_sub(rng.random_range(1..64)).into(),
        1 => truth.saturating_add(rng.random_range(1..64)).into(),
        2 => 0.into(),
        3 => u64::MAX.into(),
        4 => (-1).into(),
        _ => rng.random::<u32>().into(),
    }
}

/// Edits one field of the sampler or noise state in `h`.
fn mutate_streams(h: &mut serde_json::Value, rng: &mut ChaCha20Rng) {
    let fields: [&[&str]; 6] = [
        &["state", "sampler", "stream", "word_pos"],
        &["state", "sampler", "stream", "stream"],
        &["state", "sampler", "cursor"],
        &["state", "sampler", "n"],
        &["state", "noise", "word_pos"],
        &["state", "noise", "stream"],
    ];
    let path = fields[rng.random_range(0..fields.len())];
    let mut at = &mut *h;
    for key in &path[..path.len() - 1] {
        at = &mut at[*key];
    }
    let last = path[path.len() - 1];
    let truth = at[last].as_u64().unwrap_or(0);
    at[last] = extreme(rng, truth);
}

/// A run of `mechanism` stopped after 4 steps, its checkpoint damaged (raw, under a recomputed
/// MAC, and in its sampler and noise positions under a recomputed MAC) and resumed.
fn checkpoints(dir: &Path, rng: &mut ChaCha20Rng, tally: &mut Tally) {
    let data = dir.join("mnist");
    std::fs::create_dir_all(&data).unwrap();
    tiny_mnist(&data);
    let device = backend::cpu();
    let mechanisms: [(MechanismName, LotSampling); 7] = [
        (MechanismName::Optimized, LotSampling::Poisson),
        (MechanismName::Gaussian, LotSampling::Poisson),
        (MechanismName::Gaussian, LotSampling::Shuffled),
        (MechanismName::LsSgd, LotSampling::Poisson),
        (MechanismName::LsAdam, LotSampling::Poisson),
        (MechanismName::OptimizedPaper, LotSampling::Poisson),
        (MechanismName::None, LotSampling::Poisson),
    ];
    for (mechanism, sampling) in mechanisms {
        let run = dir.join(format!("run-{mechanism:?}-{sampling:?}"));
        let paper = mechanism == MechanismName::OptimizedPaper;
        let config = TrainConfig {
            dataset: dp_data::DatasetName::FashionMnist,
            data_dir: Some(data.clone()),
            model: ModelName::Logreg,
            mechanism,
            sampling,
            lot_size: 20,
            epochs: 1.0,
            noise_multiplier: (!paper).then_some(1.0),
            target_epsilon: paper.then_some(2.0),
            seed: Some(9),
            out_dir: run.clone(),
            mechanism_options: if paper {
                [("sensitivity_every".into(), 3.into())].into_iter().collect()
            } else {
                toml::Table::new()
            },
            ..TrainConfig::default()
        };
        let stop = Session { resume: false, options: RunOptions { stop_after: Some(4), ..RunOptions::default() } };
        train(config.clone(), stop, &device, &mut |_| {}).expect("a valid run");
        let path = run.join("checkpoint.bin");
        let good = std::fs::read(&path).unwrap();
        let key = mac_key(&run);
        let mac = dp_data::SecretKey::from_bytes(key.clone().try_into().unwrap());
        // Raw damage: the MAC refuses it.
        for _ in 0..rounds(100) {
            std::fs::write(&path, mutate(&good, rng)).unwrap();
            tally.run("checkpoint", || Checkpoint::load(&path, &mac, u64::MAX));
        }
        // Damage under a valid MAC: every later check, through a whole resume.
        let body = &good[..good.len() - 32];
        let resume = Session { resume: true, options: RunOptions { stop_after: Some(1), ..RunOptions::default() } };
        for _ in 0..rounds(40) {
            std::fs::write(&path, sealed(&mutate(body, rng), &key)).unwrap();
            tally.run("resume", || train(config.clone(), resume, &device, &mut |_| {}));
        }
        // The sampler's and the noise's positions edited under a valid MAC: never resumed.
        let header = checkpoint_view::view(&good);
        for _ in 0..rounds(20) {
            let mut h = header.clone();
            mutate_streams(&mut h, rng);
            if h == header {
                continue;
            }
            std::fs::write(&path, sealed(&checkpoint_view::body(&good, &h), &key)).unwrap();
            tally.refused("sampler/noise state", || train(config.clone(), resume, &device, &mut |_| {}));
        }
        std::fs::write(&path, &good).unwrap();
        train(config, resume, &device, &mut |_| {}).expect("the undamaged checkpoint resumes");
    }
}

/// One fuzz target: draws its inputs from the generator and tallies what happened to each.
type Target<'a> = &'a dyn Fn(&mut ChaCha20Rng, &mut Tally);

#[test]
fn every_parser_and_the_checkpoint_loader_survive_mutated_input() {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = ChaCha20Rng::seed_from_u64(2026);
    let mut report = Vec::new();
    let targets: [(&str, Target); 7] = [
        ("idx+gzip+cifar", &|rng, t| idx_and_cifar(dir.path(), rng, t)),
        ("csv", &|rng, t| csv(dir.path(), rng, t)),
        ("csv shapes", &|rng, t| csv_shapes(dir.path(), rng, t)),
        ("space", &|rng, t| space_files(rng, t)),
        ("jpeg cuts", &|rng, t| jpeg_cuts(dir.path(), rng, t)),
        ("toml", &|rng, t| toml_config(rng, t)),
        ("checkpoint", &|rng, t| checkpoints(dir.path(), rng, t)),
    ];
    let mut panics = Vec::new();
    // Caught panics are counted and listed below, not printed as they happen.
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    for (name, target) in targets {
        let mut tally = Tally::default();
        let started = std::time::Instant::now();
        target(&mut rng, &mut tally);
        report.push(format!(
            "{name}: {} inputs, {} accepted, {} refused, {} failures (panics, accepted forgeries), {:.1} s",
            tally.inputs,
            tally.accepted,
            tally.inputs - tally.accepted - tally.panics.len(),
            tally.panics.len(),
            started.elapsed().as_secs_f64()
        ));
        panics.extend(tally.panics);
    }
    std::panic::set_hook(hook);
    println!("{}", report.join("\n"));
    assert!(panics.is_empty(), "{} panics, first: {}", panics.len(), panics[0]);
}
