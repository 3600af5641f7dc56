//! Synthetic images for pretraining without public data (`dptrain data synth`): dead leaves
//! (Lee, Mumford & Huang 2001), the random process Baradad et al. 2021 and Tang et al.'s DP-RandP
//! pretrain on: discs or squares of random grey (or colour) levels, with radii drawn from the
//! power law p(r) ~ r^-3 between a third of a maximum and that maximum, laid over one another.
//! Each class is one setting of the process (its shape, and its largest radius), so that a zoo classifier can be
//! pretrained on them with `--dataset image-folder` and `--mechanism none`: no real example is
//! involved, so the pretraining costs no privacy, and its weights are public. Written as an image
//! folder (`train/c0/00000.png`, ..., `test/...`) from a seed.

use anyhow::{Context, Result, bail};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;
use std::path::Path;

/// The classes: each shape with each of these largest radii (as fractions of the side).
const RADII: [f64; 5] = [0.1, 0.18, 0.28, 0.4, 0.6];
/// Leaves laid per image.
const LEAVES: usize = 64;
/// The most images written per class and split.
pub const MAX_PER_CLASS: usize = 100_000;

/// Number of classes the process has (disc and square, each with every largest radius).
pub fn classes() -> usize {
    2 * RADII.len()
}

/// A radius from p(r) ~ r^-3 on [r_min, r_max], by inverting its distribution function.
fn radius(rng: &mut ChaCha20Rng, [r_min, r_max]: [f64; 2]) -> f64 {
    let u: f64 = rng.random();
    (r_min.powi(-2) - u * (r_min.powi(-2) - r_max.powi(-2))).powf(-0.5)
}

/// One dead-leaves image of `class` with `channels` (1 or 3) and sides `side`, HWC bytes.
pub fn image(class: usize, channels: usize, side: usize, rng: &mut ChaCha20Rng) -> Vec<u8> {
    let square = class % 2 == 1;
    let r_max = (RADII[(class / 2) % RADII.len()] * side as f64).max(1.0);
    let background: Vec<u8> = (0..channels).map(|_| rng.random()).collect();
    let mut pixels: Vec<u8> = background.iter().copied().cycle().take(side * side * channels).collect();
    for _ in 0..LEAVES {
        let (cx, cy) = (rng.random::<f64>() * side as f64, rng.random::<f64>() * side as f64);
        let r = radius(rng, [r_max / 3.0, r_max]);
        let colour: Vec<u8> = (0..channels).map(|_| rng.random()).collect();
        for y in 0..side {
            for x in 0..side {
                let (dx, dy) = ((x as f64 + 0.5 - cx).abs(), (y as f64 + 0.5 - cy).abs());
                let inside = if square { dx.max(dy) <= r } else { dx * dx + dy * dy <= r * r };
                if inside {
                    let at = (y * side + x) * channels;
                    pixels[at..at + channels].copy_from_slice(&colour);
                }
            }
        }
    }
    pixels
}

/// Writes `pixels` (HWC, `channels` 1 or 3, `side` x `side`) as the PNG `path`.
fn write_png(path: &Path, pixels: &[u8], channels: usize, side: usize) -> Result<()> {
    let file = std::fs::File::create(path).with_context(|| format!("{}: cannot create", path.display()))?;
    let mut encoder = png::Encoder::new(std::io::BufWriter::new(file), side as u32, side as u32);
    encoder.set_color(if channels == 1 { png::ColorType::Grayscale } else { png::ColorType::Rgb });
    encoder.set_depth(png::BitDepth::Eight);
    encoder.write_header()?.write_image_data(pixels).with_context(|| format!("{}: cannot write", path.display()))?;
    Ok(())
}

/// Writes the image folder `dir` (which must not exist): `train/` with `per_class` images of each
/// class, `test/` with a tenth of that (at least one), `channels` x `side` x `side`, from `seed`;
/// `progress` is told the images written so far and in all.
pub fn write_folder(
    dir: &Path,
    per_class: usize,
    [channels, side]: [usize; 2],
    seed: u64,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<()> {
    if !(channels == 1 || channels == 3) || !(4..=1024).contains(&side) {
        bail!("--shape: give 1 or 3 channels and sides from 4 to 1024 (CxHxW with H = W)");
    }
    if per_class == 0 || per_class > MAX_PER_CLASS {
        bail!("--per-class: give 1 to {MAX_PER_CLASS} images");
    }
    if dir.symlink_metadata().is_ok() {
        bail!("{}: already exists (synthetic images are written into a new folder)", dir.display());
    }
    let splits = [("train", per_class), ("test", (per_class / 10).max(1))];
    let total = (classes() * (splits[0].1 + splits[1].1)) as u64;
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let mut done = 0;
    for (split, count) in splits {
        for class in 0..classes() {
            let folder = dir.join(split).join(format!("c{class}"));
            std::fs::create_dir_all(&folder).with_context(|| format!("{}: cannot create", folder.display()))?;
            for i in 0..count {
                write_png(
                    &folder.join(format!("{i:05}.png")),
                    &image(class, channels, side, &mut rng),
                    channels,
                    side,
                )?;
                done += 1;
                progress(done, total);
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn radii_follow_the_power_law_and_classes_differ_in_their_leaves() {
        // P(r > t) = (t^-2 - r_max^-2) / (r_min^-2 - r_max^-2) for the r^-3 law on [r_min, r_max].
        let mut rng = ChaCha20Rng::seed_from_u64(1);
        let (range, t, n) = ([1.5, 10.0], 2.0f64, 200_000);
        let above = (0..n).filter(|_| radius(&mut rng, range) > t).count() as f64 / n as f64;
        let expected = (t.powi(-2) - range[1].powi(-2)) / (range[0].powi(-2) - range[1].powi(-2));
        assert!((above - expected).abs() < 0.005, "P(r > 2) = {above}, law {expected}");
        assert!((0..1000).all(|_| (range[0]..=range[1]).contains(&radius(&mut rng, range))));
        // A class of small leaves changes level between neighbours more often than one of large.
        let edges = |class: usize| {
            let mut rng = ChaCha20Rng::seed_from_u64(2);
            let side = 28;
            (0..50)
                .map(|_| {
                    let p = image(class, 1, side, &mut rng);
                    p.windows(2).enumerate().filter(|(i, w)| (i + 1) % side != 0 && w[0] != w[1]).count()
                })
                .sum::<usize>()
        };
        assert!(edges(0) > 2 * edges(8), "small discs {} edges, large {}", edges(0), edges(8));
    }
}
