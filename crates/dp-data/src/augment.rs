//! Augmented views of an image, as De et al. (2022) draw them for augmentation multiplicity: a
//! random crop of the image's size after reflect padding, then a horizontal flip with
//! probability 1/2 where the data set's labels survive a mirror. Views are drawn from a
//! generator the caller keys (the privacy does not depend on them: each example's gradient is
//! clipped after its views are averaged).

use crate::error::{DataError, Result};
use rand::Rng;

/// Pixels of reflect padding De et al. use before a view's crop.
pub const DEFAULT_PADDING: usize = 4;

/// A random crop after reflect padding by `pad` pixels on each side, and an optional flip.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CropFlip {
    /// Pixels of reflect padding on each side (4 in De et al.).
    pad: usize,
    /// Whether views may be mirrored.
    flip: bool,
    /// [channels, height, width] of the images.
    shape: [usize; 3],
}

/// Where one view is cut: the crop's offsets into the padded image (0 to 2 pad) and whether it
/// is mirrored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ViewDraw {
    /// Rows skipped at the top of the padded image.
    pub dy: usize,
    /// Columns skipped at the left of the padded image.
    pub dx: usize,
    /// Mirrored left to right after the crop.
    pub mirrored: bool,
}

/// Index `i` of a row or column of `n` pixels padded by reflection (PyTorch's "reflect": the
/// edge pixel is not repeated), for |i| within one reflection.
fn reflect(i: isize, n: usize) -> usize {
    let last = n as isize - 1;
    let j = if i < 0 {
        -i
    } else if i > last {
        2 * last - i
    } else {
        i
    };
    j as usize
}

impl CropFlip {
    /// Views of `shape` images; refused when the padding is not smaller than the image (a
    /// reflection needs `pad` < height and width).
    pub fn new(pad: usize, flip: bool, shape: [usize; 3]) -> Result<Self> {
        let [c, h, w] = shape;
        if c == 0 || pad >= h || pad >= w {
            return Err(DataError::InvalidParameter {
                name: "augmentation padding",
                reason: format!("{pad} pixels of reflect padding need images larger than {h}x{w}"),
            });
        }
        Ok(Self { pad, flip, shape })
    }

    /// The shape of the images (and of their views).
    pub fn shape(&self) -> [usize; 3] {
        self.shape
    }

    /// A view's placement, uniform over the crops (and the two mirrors, when flipping).
    pub fn draw(&self, rng: &mut impl Rng) -> ViewDraw {
        let dy = rng.random_range(0..=2 * self.pad);
        let dx = rng.random_range(0..=2 * self.pad);
        let mirrored = self.flip && rng.random::<bool>();
        ViewDraw { dy, dx, mirrored }
    }

    /// Appends to `out` the view of `image` ([channels, height, width], row-major) at `draw`.
    pub fn view_into(&self, image: &[f32], draw: ViewDraw, out: &mut Vec<f32>) {
        let [c, h, w] = self.shape;
        let pad = self.pad as isize;
        for ch in 0..c {
            let plane = &image[ch * h * w..(ch + 1) * h * w];
            for y in 0..h {
                let row = reflect(y as isize + draw.dy as isize - pad, h) * w;
                out.extend((0..w).map(|x| {
                    let x = if draw.mirrored { w - 1 - x } else { x };
                    plane[row + reflect(x as isize + draw.dx as isize - pad, w)]
                }));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha20Rng;

    /// The image padded by reflection the long way: each padded pixel found by walking back from
    /// the border, as numpy.pad(mode="reflect") defines it.
    fn padded(image: &[f32], h: usize, w: usize, pad: usize) -> Vec<Vec<f32>> {
        let fold = |i: isize, n: isize| {
            let mut i = i;
            while i < 0 || i >= n {
                i = if i < 0 { -i } else { 2 * (n - 1) - i };
            }
            i as usize
        };
        (0..h + 2 * pad)
            .map(|y| {
                (0..w + 2 * pad)
                    .map(|x| {
                        image[fold(y as isize - pad as isize, h as isize) * w
                            + fold(x as isize - pad as isize, w as isize)]
                    })
                    .collect()
            })
            .collect()
    }

    #[test]
    fn every_view_is_a_crop_of_the_padded_image_then_a_mirror() {
        let (h, w, pad) = (6, 5, 4);
        let image: Vec<f32> = (0..h * w).map(|i| i as f32).collect();
        let big = padded(&image, h, w, pad);
        let aug = CropFlip::new(pad, true, [1, h, w]).expect("valid");
        for dy in 0..=2 * pad {
            for dx in 0..=2 * pad {
                for mirrored in [false, true] {
                    let mut out = Vec::new();
                    aug.view_into(&image, ViewDraw { dy, dx, mirrored }, &mut out);
                    let expected: Vec<f32> = (0..h)
                        .flat_map(|y| {
                            let row = &big[y + dy];
                            (0..w).map(move |x| row[dx + if mirrored { w - 1 - x } else { x }])
                        })
                        .collect();
                    assert_eq!(out, expected, "dy {dy} dx {dx} mirrored {mirrored}");
                }
            }
        }
    }

    #[test]
    fn the_centred_unmirrored_view_is_the_image_and_channels_stay_apart() {
        let shape = [3, 4, 4];
        let image: Vec<f32> = (0..48).map(|i| i as f32).collect();
        let aug = CropFlip::new(2, false, shape).expect("valid");
        let mut out = Vec::new();
        aug.view_into(&image, ViewDraw { dy: 2, dx: 2, mirrored: false }, &mut out);
        assert_eq!(out, image);
        let mut shifted = Vec::new();
        aug.view_into(&image, ViewDraw { dy: 2, dx: 3, mirrored: false }, &mut shifted);
        assert_eq!(shifted[16..20], [17.0, 18.0, 19.0, 18.0], "channel 1's first row, shifted left by one");
    }

    #[test]
    fn draws_cover_every_crop_and_flip_only_when_allowed() {
        let mut rng = ChaCha20Rng::seed_from_u64(3);
        let flips = CropFlip::new(4, true, [1, 28, 28]).expect("valid");
        let draws: Vec<ViewDraw> = (0..4000).map(|_| flips.draw(&mut rng)).collect();
        assert_eq!(draws.iter().map(|d| d.dy).max(), Some(8));
        assert_eq!(draws.iter().map(|d| d.dx).min(), Some(0));
        let mirrored = draws.iter().filter(|d| d.mirrored).count();
        assert!((1800..2200).contains(&mirrored), "{mirrored} of 4000 mirrored");
        let plain = CropFlip::new(4, false, [1, 28, 28]).expect("valid");
        assert!((0..1000).all(|_| !plain.draw(&mut rng).mirrored));
    }

    #[test]
    fn padding_as_large_as_the_image_is_refused() {
        assert!(CropFlip::new(4, false, [1, 4, 28]).is_err());
        assert!(CropFlip::new(3, false, [0, 28, 28]).is_err());
        assert!(CropFlip::new(3, false, [1, 4, 28]).is_ok());
    }
}
