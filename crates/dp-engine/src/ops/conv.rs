//! 2-D convolution as a backend extension whose gradients, on Burn's flex CPU backend, are one
//! GEMM per example over its patches. The weight's: each example's patches (unfolded into one
//! buffer per part of the examples) times its output gradient, accumulated over fixed parts of
//! the examples. Burn's own weight gradient convolves the input with the output gradient, batch
//! and channels swapped: on flex, per input channel, an im2col buffer of B H' W' rows and a GEMM
//! only kh kw columns wide. It took more than half of a plain cifar10-cnn step (about 165 of 314
//! ms for a lot of 128 on two cores). The input's: W^T G_b [C_in kh kw, P] per example, folded
//! back onto the input (col2im, `dp_kernels::im2col::fold_example`); Burn's transposed
//! convolution reads a zero-dilated output gradient where the stride is 2 (flex's
//! `conv_transpose3d`, the largest non-GEMM cost of a WRN-16-4 step on the Intel Xeon of issue
//! 39). The forward pass on flex is the same GEMM per example, W [C_out, K] times its patches,
//! written straight into its output (Burn's copies the batch to NHWC on one thread and scatters
//! each tile's product: 35% slower on the zoo's CNNs). A 3x3 kernel at stride 1 between 16
//! channels or more goes instead by Winograd's F(2x2, 3x3) (`host::winograd`, 2.25 times fewer
//! multiply-adds) in all three: the forward pass, the input gradient (the same correlation of the
//! output gradient with the kernel flipped and transposed) and the weight gradient. Every other
//! backend, and any case the flex passes do not cover (groups, asymmetric padding, another
//! dtype), keeps Burn's passes. A DP step
//! computes no weight gradient (its parameters carry none: the tape computes per-example
//! gradients), but the input's in both steps.

// The extension names Burn's deprecated ndarray backend, the oracle tests' reference, and the
// code it generates for it cannot carry an attribute of its own.
#![allow(deprecated)]

use crate::grad_sample::host_products::{Operands, summed_products};
use crate::host::buffers::{Reused, zeros};
use crate::host::flex::{contiguous_f32, dims};
use crate::host::gemm::{Strided, gemm_into};
use crate::host::kernel_log::{Kernel, Layer, Pass, note};
use crate::host::winograd;
use burn::backend::autodiff::NodeId;
use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::checkpoint::strategy::CheckpointStrategy;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops, OpsKind};
use burn::backend::flex::FlexTensor;
use burn::backend::tensor::FloatTensor;
use burn::backend::{Autodiff, Backend, Flex, TensorMetadata, backend_extension};
use burn::tensor::ops::ConvOptions;
use burn::tensor::{Tensor, TensorData};
use dp_kernels::Patches;
use dp_kernels::im2col::{fold_example, unfold_example};
use rayon::prelude::*;

/// The convolution of x [B, C_in, H, W] with `weight` [C_out, C_in, kh, kw], no bias.
pub fn conv2d(x: Tensor<4>, weight: Tensor<4>, options: ConvOptions<2>) -> Tensor<4> {
    let out = <burn::backend::Dispatch as ConvBackend>::dp_conv2d(x.into_dispatch(), weight.into_dispatch(), options);
    Tensor::from_dispatch(out)
}

/// The convolution as a backend extension, so that its autodiff step can choose the weight
/// gradient per backend.
#[allow(deprecated)] // NdArray: the oracle tests' reference backend (the `ndarray` feature).
#[backend_extension(Flex, NdArray: cfg(feature = "ndarray"), Cube: cfg(feature = "wgpu"), Autodiff)]
pub trait ConvBackend: Backend {
    /// Burn's convolution of x by `weight`, without bias.
    fn dp_conv2d(x: FloatTensor<Self>, weight: FloatTensor<Self>, options: ConvOptions<2>) -> FloatTensor<Self> {
        burns_forward::<Self>(x, weight, options)
    }
}

/// The gradients of the convolution, per backend.
pub trait ConvGrads: Backend {
    /// The gradient of `weight` given the output's gradient `grad`: Burn's unless overridden.
    fn weight_grad(tensors: [FloatTensor<Self>; 3], options: ConvOptions<2>) -> FloatTensor<Self> {
        burns_grad::<Self>(Pass::WeightGradient, tensors, options)
    }

    /// The gradient of the input `x` given the output's gradient `grad`: Burn's unless overridden.
    fn input_grad(tensors: [FloatTensor<Self>; 3], options: ConvOptions<2>) -> FloatTensor<Self> {
        burns_grad::<Self>(Pass::InputGradient, tensors, options)
    }
}

/// The convolution of x by `weight` as the kernel log names it; None for another rank.
fn conv_layer<T: TensorMetadata>(x: &T, weight: &T, options: &ConvOptions<2>) -> Option<Layer> {
    let (x, w) = (x.shape(), weight.shape());
    (x.num_dims() == 4 && w.num_dims() == 4).then(|| Layer::Conv {
        input: std::array::from_fn(|i| x[i]),
        outputs: w[0],
        patches: Patches {
            kernel: [w[2], w[3]],
            stride: options.stride,
            padding: options.padding_begin(),
            dilation: options.dilation,
        },
        groups: options.groups,
    })
}

/// Burn's own forward pass on backend B, noted in the kernel log.
fn burns_forward<B: Backend>(x: FloatTensor<B>, weight: FloatTensor<B>, options: ConvOptions<2>) -> FloatTensor<B> {
    if let Some(layer) = conv_layer(&x, &weight, &options) {
        note(&layer, Pass::Forward, Kernel::Burn);
    }
    B::conv2d(x, weight, None, options)
}

/// Burn's own gradient of the input or the weight (`pass`) on backend B, noted in the kernel log.
fn burns_grad<B: Backend>(
    pass: Pass,
    [x, weight, grad]: [FloatTensor<B>; 3],
    options: ConvOptions<2>,
) -> FloatTensor<B> {
    if let Some(layer) = conv_layer(&x, &weight, &options) {
        note(&layer, pass, Kernel::Burn);
    }
    match pass {
        Pass::InputGradient => B::conv2d_x_backward(x, weight, grad, options),
        _ => B::conv2d_weight_backward(x, weight, grad, options),
    }
}

#[cfg(feature = "ndarray")]
impl ConvBackend for burn::backend::NdArray {}
#[cfg(feature = "ndarray")]
impl ConvGrads for burn::backend::NdArray {}
#[cfg(feature = "wgpu")]
impl ConvBackend for burn_cubecl::Cube {}
#[cfg(feature = "wgpu")]
impl ConvGrads for burn_cubecl::Cube {}
impl ConvBackend for Flex {
    fn dp_conv2d(x: FloatTensor<Self>, weight: FloatTensor<Self>, options: ConvOptions<2>) -> FloatTensor<Self> {
        match flex_forward(&x, &weight, &options) {
            Some(y) => y,
            None => burns_forward::<Self>(x, weight, options),
        }
    }
}

impl ConvGrads for Flex {
    fn weight_grad([x, weight, grad]: [FloatTensor<Self>; 3], options: ConvOptions<2>) -> FloatTensor<Self> {
        match flex_weight_grad(&x, &weight, &grad, &options) {
            Some(g) => g,
            None => burns_grad::<Self>(Pass::WeightGradient, [x, weight, grad], options),
        }
    }

    fn input_grad([x, weight, grad]: [FloatTensor<Self>; 3], options: ConvOptions<2>) -> FloatTensor<Self> {
        match flex_input_grad(&x, &weight, &grad, &options) {
            Some(g) => g,
            None => burns_grad::<Self>(Pass::InputGradient, [x, weight, grad], options),
        }
    }
}

/// The geometry of a convolution of x [B, C_in, H, W] by weight [C_out, C_in, kh, kw] that the
/// flex passes cover: ([B, C_in, H, W], [C_out, K, P], the patches); None for groups, asymmetric
/// padding or shapes that disagree.
fn flex_shapes(
    x: &FlexTensor,
    weight: &FlexTensor,
    options: &ConvOptions<2>,
) -> Option<([usize; 4], [usize; 3], Patches)> {
    if options.groups != 1 || options.is_asymmetric() {
        return None;
    }
    let ([b, c_in, h, w], [c_out, c_w, kh, kw]) = (dims(x)?, dims(weight)?);
    let patches = Patches {
        kernel: [kh, kw],
        stride: options.stride,
        padding: options.padding_begin(),
        dilation: options.dilation,
    };
    // Every patch inside the padded input (Burn's own pass says what else means).
    let fits = (0..2).all(|i| {
        let (kernel, stride, dilation) = (patches.kernel[i], patches.stride[i], patches.dilation[i]);
        kernel > 0 && stride > 0 && dilation > 0 && [h, w][i] + 2 * patches.padding[i] > dilation * (kernel - 1)
    });
    if c_w != c_in || !fits {
        return None;
    }
    let [ho, wo] = patches.output_size([h, w]);
    // Buffers (the output, the input, one example's patches) too large to address go to Burn's
    // pass, which refuses them by name.
    let (k, positions) = (c_in.checked_mul(kh)?.checked_mul(kw)?, ho.checked_mul(wo)?);
    let buffers = [[b, c_out, positions], [b, c_in, h.checked_mul(w)?], [1, k, positions]];
    let addressable = buffers.iter().all(|d| d.iter().try_fold(1usize, |n, &x| n.checked_mul(x)).is_some());
    addressable.then_some(([b, c_in, h, w], [c_out, k, positions], patches))
}

/// [`flex_shapes`] where the output gradient `grad` [B, C_out, H', W'] agrees with them.
fn flex_geometry(
    x: &FlexTensor,
    weight: &FlexTensor,
    grad: &FlexTensor,
    options: &ConvOptions<2>,
) -> Option<([usize; 4], [usize; 3], Patches)> {
    let shapes @ ([b, _, h, w], [c_out, _, _], patches) = flex_shapes(x, weight, options)?;
    let [gb, gc, ho, wo] = dims(grad)?;
    (gb == b && gc == c_out && patches.output_size([h, w]) == [ho, wo]).then_some(shapes)
}

/// W [C_out, K] times each example's patches [K, P], written straight into the example's output
/// [C_out, H', W'], in parallel over the examples (each its own, so the result does not depend on
/// the threads); a 1x1 kernel at stride 1 without padding reads the input as its own patches.
/// Burn's flex convolution first copies the whole batch to NHWC on one thread, then scatters
/// each tile's product into the output; None where this pass does not apply.
fn flex_forward(x: &FlexTensor, weight: &FlexTensor, options: &ConvOptions<2>) -> Option<FlexTensor> {
    let ([b, c_in, h, w], [c_out, k, positions], patches) = flex_shapes(x, weight, options)?;
    let (x, weight) = (contiguous_f32(x)?, contiguous_f32(weight)?);
    let (xs, ws) = (x.storage::<f32>(), weight.storage::<f32>());
    let pointwise = patches.kernel == [1, 1] && patches.stride == [1, 1] && patches.padding == [0, 0];
    let mut y: Vec<f32> = zeros(b * c_out * positions);
    let layer = Layer::conv([b, c_in, h, w], c_out, patches);
    if !y.is_empty() && winograd::applies(&patches, [b, c_in, h, w], c_out) {
        note(&layer, Pass::Forward, Kernel::WinogradF2x2_3x3);
        let u = winograd::transformed_weight(ws, [c_out, c_in], false);
        winograd::conv3x3(xs, [b, c_in, h, w], &u, c_out, patches.padding, &mut y);
    } else if !y.is_empty() {
        note(&layer, Pass::Forward, if pointwise { Kernel::PointwiseGemm } else { Kernel::Im2colGemm });
        y.par_chunks_mut(c_out * positions).enumerate().for_each_init(
            // A pointwise convolution takes no buffer from the pool.
            || (!pointwise).then(|| Reused::take(k * positions)),
            |cols, (e, out)| {
                let example = &xs[e * c_in * h * w..][..c_in * h * w];
                let a = match cols {
                    None => example,
                    Some(cols) => {
                        unfold_example(example, [c_in, h, w], &patches, cols.values_mut());
                        cols.values()
                    }
                };
                let lhs = Strided::row_major(ws, k);
                gemm_into(out, [c_out, k, positions], lhs, Strided::row_major(a, positions), 1.0, false);
            },
        );
    }
    let [ho, wo] = patches.output_size([h, w]);
    Some(FlexTensor::from_data(TensorData::new(y, [b, c_out, ho, wo])))
}

/// W^T G_b [K, P] folded onto each example's input gradient [C_in, H, W], in parallel over the
/// examples (each its own, so the result does not depend on the threads); None where this pass
/// does not apply.
fn flex_input_grad(
    x: &FlexTensor,
    weight: &FlexTensor,
    grad: &FlexTensor,
    options: &ConvOptions<2>,
) -> Option<FlexTensor> {
    let ([b, c_in, h, w], [c_out, k, positions], patches) = flex_geometry(x, weight, grad, options)?;
    let (weight, grad) = (contiguous_f32(weight)?, contiguous_f32(grad)?);
    let (ws, gs) = (weight.storage::<f32>(), grad.storage::<f32>());
    let mut dx: Vec<f32> = zeros(b * c_in * h * w);
    let [ho, wo] = patches.output_size([h, w]);
    let layer = Layer::conv([b, c_in, h, w], c_out, patches);
    if !dx.is_empty() && winograd::applies(&patches, [b, c_out, ho, wo], c_in) {
        note(&layer, Pass::InputGradient, Kernel::WinogradF2x2_3x3);
        // The output gradient correlated with the kernel flipped and transposed, padded by 2 - p.
        let u = winograd::transformed_weight(ws, [c_in, c_out], true);
        winograd::conv3x3(gs, [b, c_out, ho, wo], &u, c_in, patches.padding.map(|p| 2 - p), &mut dx);
    } else if !dx.is_empty() {
        note(&layer, Pass::InputGradient, Kernel::Im2colGemm);
        dx.par_chunks_mut(c_in * h * w).enumerate().for_each_init(
            || Reused::take(k * positions),
            |cols, (e, out)| {
                let g = Strided::row_major(&gs[e * c_out * positions..][..c_out * positions], positions);
                gemm_into(cols.values_mut(), [k, c_out, positions], Strided::transposed(ws, k), g, 1.0, false);
                fold_example(cols.values(), [c_in, h, w], &patches, out);
            },
        );
    }
    Some(FlexTensor::from_data(TensorData::new(dx, [b, c_in, h, w])))
}

/// Σ_b G_b A_b^T over the examples: G_b [C_out, P] the output gradient of example b, A_b
/// [C_in kh kw, P] its patches; None where this pass does not apply.
fn flex_weight_grad(
    x: &FlexTensor,
    weight: &FlexTensor,
    grad: &FlexTensor,
    options: &ConvOptions<2>,
) -> Option<FlexTensor> {
    let ([b, c_in, h, w], [c_out, k, _], patches) = flex_geometry(x, weight, grad, options)?;
    let [kh, kw] = patches.kernel;
    let (x, grad) = (contiguous_f32(x)?, contiguous_f32(grad)?);
    // Each example adds cols_b G_b^T [K, C_out] (the `gemm` crate's faster orientation here);
    // the sum is transposed once at the end.
    let ops = Operands::of_convolution(x.storage::<f32>(), [b, c_in, h, w], patches, grad.storage::<f32>(), c_out);
    let sum = summed_products(&ops, None, Pass::WeightGradient);
    let weight: Vec<f32> = (0..c_out * k).map(|i| sum[i % k * c_out + i / k]).collect();
    Some(FlexTensor::from_data(TensorData::new(weight, [c_out, c_in, kh, kw])))
}

/// The autodiff step of the convolution: both gradients are the backend's [`ConvGrads`].
#[derive(Debug)]
struct DpConv;

impl<B: Backend + ConvGrads> Backward<B, 2> for DpConv {
    type State = (NodeId, NodeId, ConvOptions<2>);

    fn backward(self, ops: Ops<Self::State, 2>, grads: &mut Gradients, checkpointer: &mut Checkpointer) {
        let [node_x, node_weight] = ops.parents;
        let grad = grads.consume::<B>(&ops.node);
        let (x_state, weight_state, options) = ops.state;
        let x = checkpointer.retrieve_node_output::<B::FloatTensorPrimitive>(x_state);
        let weight = checkpointer.retrieve_node_output::<B::FloatTensorPrimitive>(weight_state);
        if let Some(node) = node_x {
            let g = B::input_grad([x.clone(), weight.clone(), grad.clone()], options.clone());
            grads.register::<B>(node.id, g);
        }
        if let Some(node) = node_weight {
            grads.register::<B>(node.id, B::weight_grad([x, weight, grad], options));
        }
    }
}

impl<B: Backend + ConvBackend + ConvGrads, C: CheckpointStrategy> ConvBackend for Autodiff<B, C> {
    fn dp_conv2d(x: FloatTensor<Self>, weight: FloatTensor<Self>, options: ConvOptions<2>) -> FloatTensor<Self> {
        match DpConv.prepare::<C>([x.node(), weight.node()]).compute_bound().stateful() {
            OpsKind::Tracked(mut prep) => {
                let x_state = prep.checkpoint(&x);
                let weight_state = prep.checkpoint(&weight);
                let out = B::dp_conv2d(x.into_primitive(), weight.into_primitive(), options.clone());
                prep.finish((x_state, weight_state, options), out)
            }
            OpsKind::UnTracked(prep) => prep.finish(B::dp_conv2d(x.into_primitive(), weight.into_primitive(), options)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tensor_io::to_host;
    use burn::tensor::Device;

    /// Output, input gradient and weight gradient of `conv` on `device`, the loss weighting
    /// output i by i mod 5 - 2.
    fn convolved(
        conv: &dyn Fn(Tensor<4>, Tensor<4>) -> Tensor<4>,
        x: (&[f32], [usize; 4]),
        w: (&[f32], [usize; 4]),
        device: &Device,
    ) -> [Vec<f32>; 3] {
        let device = device.clone().autodiff();
        let x = Tensor::<4>::from_data(TensorData::new(x.0.to_vec(), x.1), &device).require_grad();
        let w = Tensor::<4>::from_data(TensorData::new(w.0.to_vec(), w.1), &device).require_grad();
        let y = conv(x.clone(), w.clone());
        let n = y.shape().num_elements();
        let weights = (0..n).map(|i| (i % 5) as f32 - 2.0).collect::<Vec<_>>();
        let grads = (y.clone() * Tensor::<4>::from_data(TensorData::new(weights, y.dims()), &device)).sum().backward();
        [
            to_host(&y.inner()),
            to_host(&x.grad(&grads).expect("an input gradient")),
            to_host(&w.grad(&grads).expect("a weight gradient")),
        ]
    }

    /// On flex (the GEMM pass), ndarray and wgpu (lavapipe in CI).
    #[test]
    fn the_extension_equals_burns_convolution_forward_and_backward() {
        let reference = Device::ndarray();
        // Geometries of the zoo's layers and the odd ones: stride, padding, dilation, a 1x1 kernel.
        for (shape, c_out, kernel, stride, padding, dilation) in [
            ([3, 2, 9, 8], 4, [3, 3], [1, 1], [1, 1], [1, 1]),
            ([2, 3, 11, 10], 5, [3, 2], [2, 1], [0, 1], [1, 1]),
            ([2, 2, 12, 12], 3, [3, 3], [2, 2], [2, 2], [2, 2]),
            ([4, 6, 5, 5], 2, [1, 1], [1, 1], [0, 0], [1, 1]),
            // Ragged: one example, one output channel, a stride-2 1x1 (the residual shortcut's), a
            // 5x5 kernel wider than the unpadded input.
            ([1, 1, 7, 5], 1, [3, 3], [2, 2], [1, 1], [1, 1]),
            ([3, 4, 9, 7], 6, [1, 1], [2, 2], [0, 0], [1, 1]),
            ([2, 3, 4, 3], 5, [5, 5], [1, 1], [2, 2], [1, 1]),
            // Winograd's (3x3 at stride 1 between 16 channels or more): odd sizes, each padding.
            ([3, 16, 7, 6], 17, [3, 3], [1, 1], [1, 1], [1, 1]),
            ([2, 17, 5, 9], 16, [3, 3], [1, 1], [0, 2], [1, 1]),
            ([1, 16, 4, 4], 16, [3, 3], [1, 1], [2, 0], [1, 1]),
        ] {
            let x: Vec<f32> =
                (0..shape.iter().product::<usize>()).map(|i| ((i * 37 % 23) as f32 - 11.0) / 7.0).collect();
            let w_shape = [c_out, shape[1], kernel[0], kernel[1]];
            let w: Vec<f32> =
                (0..w_shape.iter().product::<usize>()).map(|i| ((i * 13 % 17) as f32 - 8.0) / 9.0).collect();
            let options = ConvOptions::new(stride, padding, dilation, 1);
            let ours = |x: Tensor<4>, w: Tensor<4>| conv2d(x, w, options.clone());
            let burns = |x: Tensor<4>, w: Tensor<4>| burn::tensor::module::conv2d(x, w, None, options.clone());
            let want = convolved(&burns, (&x, shape), (&w, w_shape), &reference);
            // wgpu runs Burn's own passes: one geometry checks the wiring (lavapipe is slow).
            let wgpu = dp_kernels::wgpu_probe::wgpu_for_tests().filter(|_| shape == [3, 2, 9, 8]);
            let devices = [Some(Device::flex()), Some(reference.clone()), wgpu];
            for device in devices.into_iter().flatten() {
                let got = convolved(&ours, (&x, shape), (&w, w_shape), &device);
                for (part, (g, e)) in ["output", "input gradient", "weight gradient"].iter().zip(got.iter().zip(&want))
                {
                    let worst = g.iter().zip(e).map(|(a, b)| (a - b).abs() / b.abs().max(1.0)).fold(0.0f32, f32::max);
                    assert!(
                        worst < 1e-5,
                        "{part} of {shape:?} k {kernel:?} s {stride:?} p {padding:?} d {dilation:?} on {device:?}: {worst:e}"
                    );
                }
            }
        }
    }
}
