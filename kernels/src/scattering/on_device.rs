//! The scattering transform as Burn tensor operations, so that it runs where the batch is (wgpu
//! on a GPU, flex or ndarray on the CPU) with the host transform's filters and steps. Each 2-D
//! DFT is a product with the DFT matrix of each side (sizes 36, 18 and 9 for 28 x 28 inputs:
//! O(n^3) where an FFT is O(n^2 log n), but as large batched GEMMs, which a device runs at its
//! full rate); the filters multiply pointwise, the 2^j subsampling in Fourier is the mean of the
//! periodic copies (a reshape and two sums), the modulus is elementwise, and all the angles of a
//! scale go through as one batch. f32 throughout; checked against Kymatio's values on ndarray
//! and lavapipe (kernels/tests/scattering_oracle.rs).

use super::Scattering2d;
use burn::tensor::{Device, Int, Tensor, TensorData};
use std::f64::consts::PI;

/// A complex batch of images, [R, M, N] each part.
#[derive(Clone)]
struct Complex3 {
    re: Tensor<3>,
    im: Tensor<3>,
}

/// The DFT matrix of one side (symmetric): cos and -sin (forward) or sin / size (inverse) of
/// 2 pi a b / size.
struct Dft {
    cos: Tensor<2>,
    sin: Tensor<2>,
}

impl Dft {
    fn new(size: usize, inverse: bool, device: &Device) -> Self {
        let (sign, scale) = if inverse { (1.0, 1.0 / size as f64) } else { (-1.0, 1.0) };
        let angle = |k: usize| 2.0 * PI * ((k / size) * (k % size) % size) as f64 / size as f64;
        let part = |f: fn(f64) -> f64, s: f64| -> Tensor<2> {
            let values = (0..size * size).map(|k| (s * scale * f(angle(k))) as f32).collect();
            Tensor::from_data(TensorData::new(values, [size, size]), device)
        };
        Self { cos: part(f64::cos, 1.0), sin: part(f64::sin, sign) }
    }

    /// (a + i b) times this matrix on the right, for 2-D a and b.
    fn right(&self, a: Tensor<2>, b: Tensor<2>) -> (Tensor<2>, Tensor<2>) {
        let re = a.clone().matmul(self.cos.clone()) - b.clone().matmul(self.sin.clone());
        let im = a.matmul(self.sin.clone()) + b.matmul(self.cos.clone());
        (re, im)
    }
}

impl Complex3 {
    /// The 2-D DFT over the last two dimensions with `rows` (size M) and `cols` (size N).
    fn dft(self, rows: &Dft, cols: &Dft) -> Self {
        let [r, m, n] = self.re.dims();
        let (re, im) = cols.right(self.re.reshape([r * m, n]), self.im.reshape([r * m, n]));
        let flip = |t: Tensor<2>| t.reshape([r, m, n]).swap_dims(1, 2).reshape([r * n, m]);
        let (re, im) = rows.right(flip(re), flip(im));
        let back = |t: Tensor<2>| t.reshape([r, n, m]).swap_dims(1, 2);
        Self { re: back(re), im: back(im) }
    }

    /// Each image times each of the real `filters` [F, M, N]: [R F, M, N], image-major.
    fn times(self, filters: &Tensor<3>) -> Self {
        let [r, m, n] = self.re.dims();
        let f = filters.dims()[0];
        let by =
            |t: Tensor<3>| (t.unsqueeze_dim::<4>(1) * filters.clone().unsqueeze_dim::<4>(0)).reshape([r * f, m, n]);
        Self { re: by(self.re), im: by(self.im) }
    }

    /// The Fourier transform of the spatial subsampling by `k`: the mean of the k x k periodic
    /// copies.
    fn subsample(self, k: usize) -> Self {
        if k == 1 {
            return self;
        }
        let [r, m, n] = self.re.dims();
        let (mo, no) = (m / k, n / k);
        let fold = |t: Tensor<3>| {
            t.reshape([r, k, mo, k, no]).sum_dim(3).sum_dim(1).reshape([r, mo, no]).div_scalar((k * k) as f64)
        };
        Self { re: fold(self.re), im: fold(self.im) }
    }
}

/// The scattering transform of a [`Scattering2d`], on Burn tensors of one device.
pub struct DeviceScattering {
    /// Input rows and columns.
    input: (usize, usize),
    /// Scales.
    j: usize,
    /// Angles.
    l: usize,
    /// The padded image's rows and columns taken from the input (reflect padding).
    pad_rows: Tensor<1, Int>,
    pad_cols: Tensor<1, Int>,
    /// psi_{j, .} at level r, [L, M_r, N_r], at index j * J + r.
    psi: Vec<Option<Tensor<3>>>,
    /// phi_J at level r, [1, M_r, N_r].
    phi: Vec<Tensor<3>>,
    /// Forward and inverse DFT matrices of rows and columns at level r.
    forward: Vec<(Dft, Dft)>,
    inverse: Vec<(Dft, Dft)>,
    /// Output rows and columns.
    output: (usize, usize),
}

impl DeviceScattering {
    /// `host`'s transform (its filters and sizes) on `device`.
    pub fn new(host: &Scattering2d, device: &Device) -> Self {
        let (pm, pn) = host.padded;
        let (j, l) = (host.j, host.bank.psi.len() / host.j);
        let index = |padded: usize, size: usize| {
            let start = ((padded - size) / 2) as i64;
            let period = 2 * (size as i64 - 1);
            let values: Vec<i64> = (0..padded as i64)
                .map(|p| {
                    let k = (p - start).rem_euclid(period.max(1));
                    if k < size as i64 { k } else { period - k }
                })
                .collect();
            Tensor::<1, Int>::from_data(TensorData::new(values, [padded]), device)
        };
        let level = |r: usize| (pm >> r, pn >> r);
        let filters = |levels: Vec<&Vec<f64>>, r: usize| {
            let (m, n) = level(r);
            let values: Vec<f32> = levels.iter().flat_map(|v| v.iter().map(|&x| x as f32)).collect();
            Tensor::<3>::from_data(TensorData::new(values, [levels.len(), m, n]), device)
        };
        let psi = (0..j * j)
            .map(|at| {
                let (scale, r) = (at / j, at % j);
                let bank: Vec<&Vec<f64>> =
                    host.bank.psi[scale * l..(scale + 1) * l].iter().filter_map(|f| f.levels.get(r)).collect();
                (bank.len() == l).then(|| filters(bank, r))
            })
            .collect();
        let phi = host.bank.phi.levels.iter().enumerate().map(|(r, f)| filters(vec![f], r)).collect();
        let dfts = |inverse: bool| {
            (0..=j)
                .map(|r| {
                    let (m, n) = level(r);
                    (Dft::new(m, inverse, device), Dft::new(n, inverse, device))
                })
                .collect()
        };
        Self {
            input: (host.m, host.n),
            j,
            l,
            pad_rows: index(pm, host.m),
            pad_cols: index(pn, host.n),
            psi,
            phi,
            forward: dfts(false),
            inverse: dfts(true),
            output: host.output_size(),
        }
    }

    /// psi_{scale, .} at level `r`.
    fn psi(&self, scale: usize, r: usize) -> &Tensor<3> {
        self.psi[scale * self.j + r].as_ref().expect("the filter bank keeps every level the transform reads")
    }

    /// `u` (in Fourier at level r) to space, its modulus, and to Fourier again.
    fn modulus(&self, u: Complex3, r: usize) -> Complex3 {
        let ((rows, cols), (frows, fcols)) = (&self.inverse[r], &self.forward[r]);
        let space = u.dft(rows, cols);
        let abs = (space.re.clone().square() + space.im.square()).sqrt();
        Complex3 { im: abs.zeros_like(), re: abs }.dft(frows, fcols)
    }

    /// `u` (in Fourier at level r) low-passed by phi_J, subsampled to level J, back in space,
    /// its border dropped: [R, output rows, output columns].
    fn low_pass(&self, u: Complex3, r: usize) -> Tensor<3> {
        let s = u.times(&self.phi[r]).subsample(1 << (self.j - r));
        let (rows, cols) = &self.inverse[self.j];
        let s = s.dft(rows, cols).re;
        let (mo, no) = self.output;
        let rows = s.dims()[0];
        s.slice([0..rows, 1..mo + 1, 1..no + 1])
    }

    /// The scattering coefficients of `x` [R, M, N] (no gradient): [R, channels, rows, columns]
    /// in Kymatio's order, as [`Scattering2d::transform`] gives them.
    pub fn apply(&self, x: Tensor<3>) -> Tensor<4> {
        let [r, m, n] = x.dims();
        assert_eq!((m, n), self.input, "images of the transform's size");
        let (mo, no, l) = (self.output.0, self.output.1, self.l);
        let padded = x.inner().select(1, self.pad_rows.clone()).select(2, self.pad_cols.clone());
        let (rows, cols) = &self.forward[0];
        let u0 = Complex3 { im: padded.zeros_like(), re: padded }.dft(rows, cols);
        let mut first = vec![self.low_pass(u0.clone(), 0).reshape([r, 1, mo, no])];
        let mut second = Vec::new();
        for j1 in 0..self.j {
            let u1 = self.modulus(u0.clone().times(self.psi(j1, 0)).subsample(1 << j1), j1);
            first.push(self.low_pass(u1.clone(), j1).reshape([r, l, mo, no]));
            let pairs: Vec<Tensor<4>> = (j1 + 1..self.j)
                .map(|j2| {
                    let u2 = self.modulus(u1.clone().times(self.psi(j2, j1)).subsample(1 << (j2 - j1)), j2);
                    self.low_pass(u2, j2).reshape([r, l, 1, l * mo * no])
                })
                .collect();
            if !pairs.is_empty() {
                let count = pairs.len();
                second.push(Tensor::cat(pairs, 2).reshape([r, l * count * l, mo, no]));
            }
        }
        Tensor::cat([first, second].concat(), 1)
    }
}
