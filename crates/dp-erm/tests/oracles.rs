//! The ERM math against independent oracles: finite differences of the losses, a dense LU solve
//! of a finite-difference Hessian, leave-one-out retraining, and the theorems' formulas by hand.

use crate::common::synthetic;
use dp_erm::inverse_hessian::{InverseHessian, conjugate_gradient};
use dp_erm::linalg::{correlation, norm};
use dp_erm::logistic::Logistic;
use dp_erm::methods::{ObjectiveNoise, contribution_ratio, influence, output_sensitivity};
use dp_erm::mlp::Mlp;
use dp_erm::model::{Model, finite_difference_mixed_norm};
use dp_erm::objective::Objective;
use dp_erm::rng::NoiseRng;
use dp_erm::softmax::Softmax;
use dp_erm::solver::Minimizer;

fn random_theta(p: usize, scale: f64, seed: u64) -> Vec<f64> {
    NoiseRng::new(Some(seed), 5).gaussian(p, scale)
}

fn minimize(objective: &Objective<'_>) -> Vec<f64> {
    let m = Minimizer { constants: None, radius: None, tolerance: 1e-11, max_iterations: 100_000 };
    m.minimize(|t| (objective.value(t), objective.gradient(t)), vec![0.0; objective.model.dim()]).unwrap()
}

/// Solves A x = b by Gaussian elimination with partial pivoting (the dense oracle).
fn gaussian_elimination(mut a: Vec<Vec<f64>>, mut b: Vec<f64>) -> Vec<f64> {
    let n = b.len();
    for col in 0..n {
        let pivot = (col..n).max_by(|&i, &j| a[i][col].abs().total_cmp(&a[j][col].abs())).unwrap();
        a.swap(col, pivot);
        b.swap(col, pivot);
        let pivot_row = a[col].clone();
        for row in col + 1..n {
            let f = a[row][col] / pivot_row[col];
            a[row].iter_mut().zip(&pivot_row).skip(col).for_each(|(x, p)| *x -= f * p);
            b[row] -= f * b[col];
        }
    }
    let mut x = vec![0.0; n];
    for i in (0..n).rev() {
        let s: f64 = (i + 1..n).map(|k| a[i][k] * x[k]).sum();
        x[i] = (b[i] - s) / a[i][i];
    }
    x
}

/// Every model's analytic gradient equals a central difference of its loss.
#[test]
fn gradients_match_finite_differences() {
    let data = synthetic(5, 4, 3, 1);
    let models: Vec<Box<dyn Model>> = vec![
        Box::new(Logistic { features: 4 }),
        Box::new(Softmax { features: 4, classes: 3 }),
        Box::new(Mlp { features: 4, classes: 3 }),
    ];
    for model in &models {
        let theta = random_theta(model.dim(), 0.7, 2);
        for i in 0..data.len() {
            let (x, y) = (data.row(i), data.labels[i] % if model.name().starts_with("logistic") { 2 } else { 3 });
            let mut g = vec![0.0; model.dim()];
            model.add_gradient(&theta, x, y, 1.0, &mut g);
            for k in 0..model.dim() {
                let h = 1e-6;
                let (mut tp, mut tm) = (theta.clone(), theta.clone());
                tp[k] += h;
                tm[k] -= h;
                let fd = (model.loss(&tp, x, y) - model.loss(&tm, x, y)) / (2.0 * h);
                assert!((fd - g[k]).abs() < 1e-7, "{}: coordinate {k}: {fd} vs {}", model.name(), g[k]);
            }
        }
    }
}

/// The exact Hessian's solve equals Gaussian elimination (LU) on a Hessian assembled column by
/// column from finite differences of the gradient.
#[test]
fn exact_inverse_hessian_matches_a_dense_solve() {
    for (model, data) in [
        (Box::new(Logistic { features: 5 }) as Box<dyn Model>, synthetic(60, 5, 2, 3)),
        (Box::new(Softmax { features: 4, classes: 3 }), synthetic(60, 4, 3, 4)),
    ] {
        let objective = Objective { model: model.as_ref(), data: &data, lambda: 0.05 };
        let theta = random_theta(model.dim(), 1.0, 6);
        let p = model.dim();
        let mut dense = vec![vec![0.0; p]; p];
        for k in 0..p {
            let h = 1e-5;
            let (mut tp, mut tm) = (theta.clone(), theta.clone());
            tp[k] += h;
            tm[k] -= h;
            let (gp, gm) = (objective.gradient(&tp), objective.gradient(&tm));
            for r in 0..p {
                dense[r][k] = (gp[r] - gm[r]) / (2.0 * h);
            }
        }
        let v = random_theta(p, 1.0, 7);
        let lu = gaussian_elimination(dense, v.clone());
        let exact = InverseHessian::at(&objective, &theta).unwrap().solve(&objective, &v).unwrap();
        let diff: f64 = exact.iter().zip(lu.iter()).map(|(a, b)| (a - b).powi(2)).sum::<f64>().sqrt();
        assert!(diff < 1e-6 * norm(&exact), "{}: {diff} vs norm {}", model.name(), norm(&exact));
        // Conjugate gradient on Hessian-vector products (the MLP's path) agrees too.
        let cg = conjugate_gradient(|u| objective.hessian_vector(&theta, u), &v, 1e-10, 10 * p).unwrap();
        let cg_diff: f64 = exact.iter().zip(&cg).map(|(a, b)| (a - b).powi(2)).sum::<f64>().sqrt();
        assert!(cg_diff < 1e-5 * norm(&exact), "{}: CG {cg_diff}", model.name());
    }
}

/// Eq. (14)'s influence estimate against actual leave-one-out retraining (exact minimizers),
/// over every coordinate of every removed example.
#[test]
fn influence_predicts_leave_one_out_retraining() {
    let data = synthetic(40, 4, 2, 8);
    let model = Logistic { features: 4 };
    let objective = Objective { model: &model, data: &data, lambda: 0.05 };
    let optimum = minimize(&objective);
    let inverse = InverseHessian::at(&objective, &optimum).unwrap();
    let (mut predicted, mut actual) = (Vec::new(), Vec::new());
    for i in 0..data.len() {
        let rest: Vec<usize> = (0..data.len()).filter(|&j| j != i).collect();
        let without = data.select(&rest);
        let loo = minimize(&objective.on(&without));
        let c = influence(&inverse, &objective, &objective.example_gradient(&optimum, data.row(i), data.labels[i]))
            .unwrap();
        predicted.extend(c);
        actual.extend(loo.iter().zip(&optimum).map(|(a, b)| a - b));
    }
    let r = correlation(&predicted, &actual);
    assert!(r > 0.9, "correlation {r}");
    eprintln!("influence vs leave-one-out: correlation {r:.4} over {} coordinates", predicted.len());
}

/// A softmax over many classes (a 1,000-class table) has no dense Hessian built: beyond
/// DENSE_LIMIT parameters H^{-1} v is conjugate gradient on Hessian-vector products (the dense
/// p x p factor took minutes and p^2 floats), and its solve satisfies H x = v.
#[test]
fn a_softmax_over_many_classes_solves_by_conjugate_gradient() {
    let model = Softmax { features: 5, classes: 900 };
    assert!(model.dim() > dp_erm::inverse_hessian::DENSE_LIMIT, "{} parameters", model.dim());
    let data = synthetic(30, 5, 900, 12);
    let objective = Objective { model: &model, data: &data, lambda: 0.05 };
    let theta = random_theta(model.dim(), 0.1, 13);
    let inverse = InverseHessian::at(&objective, &theta).unwrap();
    assert!(matches!(inverse, InverseHessian::ConjugateGradient { .. }), "a dense factor was built");
    let v = random_theta(model.dim(), 1.0, 14);
    let x = inverse.solve(&objective, &v).unwrap();
    let hx = objective.hessian_vector(&theta, &x);
    let residual: f64 = hx.iter().zip(&v).map(|(a, b)| (a - b).powi(2)).sum::<f64>().sqrt();
    assert!(residual < 1e-5 * norm(&v), "||Hx - v|| = {residual}");
}

/// The logistic closed form of w = ||d/dx grad_theta l||_2 against finite differences with power
/// iteration (the MLP's method), at random points including large margins.
#[test]
fn mixed_norm_closed_form_matches_finite_differences() {
    let model = Logistic { features: 6 };
    let data = synthetic(10, 6, 2, 9);
    for (k, scale) in [0.1, 1.0, 5.0].into_iter().enumerate() {
        let theta = random_theta(6, scale, 10 + k as u64);
        for i in 0..data.len() {
            let (x, y) = (data.row(i), data.labels[i]);
            let closed = model.mixed_norm(&theta, x, y);
            let fd = finite_difference_mixed_norm(&model, &theta, x, y);
            assert!((closed - fd).abs() < 1e-6 * closed.max(1e-3), "scale {scale}: {closed} vs {fd}");
        }
    }
}

/// Output and objective perturbation noise by hand from the theorems.
#[test]
fn baseline_noise_scales_by_hand() {
    // Output: 2 G0 / (n lambda) (1 - (1 - lambda/L)^T); G0 = 1, n = 455, lambda = 0.01, L = 0.26.
    let s = output_sensitivity(1.0, 455, 0.01, 0.26, 5000);
    let limit = 2.0 / (455.0 * 0.01);
    assert!((s - limit * (1.0 - (1.0f64 - 0.01 / 0.26).powi(5000))).abs() < 1e-15);
    assert!((s - 0.439_560_439_56).abs() < 1e-9);
    assert!((output_sensitivity(1.0, 455, 0.01, 0.26, 1) - 2.0 / 455.0 / 0.26).abs() < 1e-15);
    // Kifer et al. 2012: zeta = 1, beta = 1/4, eps = 0.5, delta = 1e-5:
    // Delta = 2 (1/4) / 0.5 = 1; sigma^2 = (8 ln(2e5) + 2) / 0.25 = 398.6447...
    let k = ObjectiveNoise::new(1.0, 0.25, 0.5, 1e-5);
    assert!((k.regularization - 1.0).abs() < 1e-15);
    assert!((k.sigma * k.sigma - (8.0 * 2e5f64.ln() + 2.0) / 0.25).abs() < 1e-9);
    assert!((k.sigma - 19.964_827).abs() < 1e-5, "{}", k.sigma);
}

/// Line 9's ratio: c = 0 gives sqrt(p); a zero coordinate of theta gives infinity.
#[test]
fn contribution_ratio_as_written() {
    assert!((contribution_ratio(&[0.0; 4], &[1.0, -2.0, 3.0, 0.5]) - 2.0).abs() < 1e-15);
    assert!((contribution_ratio(&[0.5, 0.0], &[1.0, 1.0]) - (1.5f64 * 1.5 + 1.0).sqrt()).abs() < 1e-15);
    assert!(contribution_ratio(&[0.1, 0.1], &[1.0, 0.0]).is_infinite());
}
