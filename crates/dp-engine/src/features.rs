//! What flows between layers: image feature maps [B, C, H, W] or flat features [B, F].

use burn::tensor::Tensor;

/// A batch of activations.
#[derive(Debug, Clone)]
pub enum Features {
    /// Feature maps [batch, channels, height, width].
    Image(Tensor<4>),
    /// Flat features [batch, features].
    Flat(Tensor<2>),
}

impl Features {
    /// As flat features [batch, everything else].
    pub fn into_flat(self) -> Tensor<2> {
        match self {
            Features::Image(t) => t.flatten(1, 3),
            Features::Flat(t) => t,
        }
    }

    /// Appends `rows` all-zero examples (the padding of a physical batch).
    pub fn pad_rows(self, rows: usize) -> Features {
        self.map(|t| zero_rows_appended(t, rows), |t| zero_rows_appended(t, rows))
    }

    /// Applies an element-wise function whatever the rank.
    pub fn map(self, f4: impl FnOnce(Tensor<4>) -> Tensor<4>, f2: impl FnOnce(Tensor<2>) -> Tensor<2>) -> Features {
        match self {
            Features::Image(t) => Features::Image(f4(t)),
            Features::Flat(t) => Features::Flat(f2(t)),
        }
    }
}

/// `t` with `rows` all-zero rows appended along the batch dimension.
pub fn zero_rows_appended<const D: usize>(t: Tensor<D>, rows: usize) -> Tensor<D> {
    if rows == 0 {
        return t;
    }
    let mut dims = t.dims();
    dims[0] = rows;
    let zeros = Tensor::zeros(dims, &t.device());
    Tensor::cat(vec![t, zeros], 0)
}
