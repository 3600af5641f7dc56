//! The hyperbolic tangent for `ops::activation`. Flex computes `tanh` one element at a time
//! through libm (expm1f), which kept the CPU's vector units idle: on WRN-16-4 with tanh it was a
//! third of a step. Here the host value is a branch-free approximation that the compiler
//! vectorises (Cephes' odd polynomial below 0.625, 1 - 2 / (e^2|x| + 1) above, with e^y from a
//! polynomial and an exponent shift; within 4e-7 relative of the true value, NaN and infinities
//! included), and the backward, g (1 - y^2) from the output y. The other backends keep Burn's own
//! tanh and compute the backward in Burn's operations.

use crate::ops::pointwise::Pointwise;
use burn::backend::Backend;
use burn::backend::tensor::FloatTensor;
use burn::tensor::Scalar;

/// tanh, with g (1 - y^2) as its backward.
pub struct Tanh;

impl Pointwise for Tanh {
    fn value(x: f32) -> f32 {
        tanh_f32(x)
    }

    fn backward(y: f32, grad: f32) -> f32 {
        grad * (1.0 - y * y)
    }

    fn burn_value<B: Backend>(x: FloatTensor<B>) -> FloatTensor<B> {
        B::float_tanh(x)
    }

    fn burn_backward<B: Backend>(y: FloatTensor<B>, grad: FloatTensor<B>) -> FloatTensor<B> {
        let slope = B::float_add_scalar(B::float_neg(B::float_mul(y.clone(), y)), Scalar::Float(1.0));
        B::float_mul(grad, slope)
    }
}

/// e^y for y in [0, 20] (Cephes' expf: y = n ln 2 + r, |r| <= ln 2 / 2, a degree-6 polynomial in
/// r, 2^n by the exponent bits), branch-free.
#[inline(always)]
fn exp_small(y: f32) -> f32 {
    // Rounds to the nearest integer without a libm call (valid far beyond 18 / ln 2).
    const ROUND: f32 = 12_582_912.0;
    let n = (y * std::f32::consts::LOG2_E + ROUND) - ROUND;
    let r = y - n * 0.693_359_4 - n * -2.121_944_4e-4;
    let p =
        ((((1.987_569_1e-4 * r + 1.398_2e-3) * r + 8.333_452e-3) * r + 4.166_579_6e-2) * r + 1.666_666_5e-1) * r + 5e-1;
    let e = p * r * r + r + 1.0;
    e * f32::from_bits(((n as i32 + 127) as u32) << 23)
}

/// tanh(x) within 4e-7 relative, branch-free (selects only), NaN-propagating.
#[inline(always)]
fn tanh_f32(x: f32) -> f32 {
    let a = x.abs();
    // tanh(10) rounds to 1 in f32 (tanh(9) does not); NaN stays NaN (the comparison is false).
    let c = if a > 10.0 { 10.0 } else { a };
    let s = c * c;
    let small =
        ((((-5.704_988_7e-3 * s + 2.063_909e-2) * s - 5.373_971_6e-2) * s + 1.333_144_2e-1) * s - 3.333_328e-1) * s * c
            + c;
    let large = 1.0 - 2.0 / (exp_small(2.0 * c) + 1.0);
    let t = if c < 0.625 { small } else { large };
    t.copysign(x)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_approximation_is_within_4e_7_of_tanh() {
        let mut worst = 0.0f64;
        // Every 1/4096 over [-20, 20], both branches and their boundary at 0.625 included.
        for i in -81_920..=81_920 {
            let x = i as f32 / 4096.0;
            let (got, want) = (tanh_f32(x) as f64, (x as f64).tanh());
            let error = (got - want).abs() / want.abs().max(f64::MIN_POSITIVE);
            worst = worst.max(if want == 0.0 { got.abs() } else { error });
        }
        assert!(worst <= 4e-7, "worst relative error {worst}");
        for x in [1e-30f32, -1e-30, 1e-40, 0.624_999_9, 0.625, 9.0, 9.5, 10.0, 1e10] {
            let want = (x as f64).tanh();
            assert!((tanh_f32(x) as f64 - want).abs() <= 4e-7 * want.abs(), "tanh({x}) = {}", tanh_f32(x));
        }
        assert_eq!(tanh_f32(f32::INFINITY), 1.0);
        assert_eq!(tanh_f32(f32::NEG_INFINITY), -1.0);
        assert!(tanh_f32(f32::NAN).is_nan());
        assert!(tanh_f32(-0.0).is_sign_negative() && tanh_f32(-0.0) == 0.0);
    }
}
