//! GPU parity of `cuda/decoder_ops.cu` against its CPU references (`decoder_ops`, `math`,
//! `KvElem::from_f32`): row gathers, RoPE (both pairings), the bias add, the narrowing casts
//! and the random fill bitwise; RMSNorm and the SiLU gate within a stated tolerance (the
//! kernel's tree sum and CUDA's `expf`); an index past its table leaves its row untouched on
//! both; a short buffer is a typed error before any launch.

use half::{bf16, f16};
use ponder_kernels::cuda::cudarc::driver::{CudaSlice, DeviceRepr};
use ponder_kernels::cuda::{CudaError, CudaKernels};
use ponder_kernels::decoder_ops::{add_bias, fill_random, gather_rows, rms_norm, rope};
use ponder_kernels::kv::KvElem;
use ponder_kernels::math::silu_mul;
use rand::Rng;

use super::{check, json_str, kernels};
use crate::common::{assert_bitwise, rng};

/// Largest `|gpu - cpu| / max(1, |cpu|)` allowed for RMSNorm and the SiLU gate.
const TOL: f32 = 1e-5;

fn up<T: DeviceRepr>(kern: &CudaKernels, x: &[T]) -> CudaSlice<T> {
    check(
        kern.stream().clone_htod(x).map_err(CudaError::from),
        "upload",
    )
}

fn down<T: DeviceRepr>(kern: &CudaKernels, x: &CudaSlice<T>) -> Vec<T> {
    check(
        kern.stream().clone_dtoh(x).map_err(CudaError::from),
        "download",
    )
}

fn rel_err(gpu: &[f32], cpu: &[f32]) -> f32 {
    assert_eq!(gpu.len(), cpu.len());
    gpu.iter()
        .zip(cpu)
        .map(|(g, c)| (g - c).abs() / c.abs().max(1.0))
        .fold(0.0, f32::max)
}

fn gather_case<T: KvElem + DeviceRepr>(kern: &CudaKernels, seed: u64) {
    let mut r = rng(seed);
    let (rows, width) = (50usize, 96usize);
    let table: Vec<T> = (0..rows * width)
        .map(|_| T::from_f32(r.random_range(-2.0..2.0)))
        .collect();
    let ids: Vec<u32> = vec![3, 49, 0, 3, 50, 17, u32::MAX, 8];
    let mut want = vec![-7f32; ids.len() * width];
    gather_rows(&table, &ids, width, &mut want);
    let mut out = up(kern, &vec![-7f32; ids.len() * width]);
    check(
        kern.gather_rows(
            &up(kern, &table),
            &up(kern, &ids),
            ids.len(),
            width,
            &mut out,
        ),
        "gather_rows",
    );
    assert_bitwise(
        &down(kern, &out),
        &want,
        &format!("gather_rows {:?}", T::DTYPE),
    );
}

fn cast_case<T: KvElem + DeviceRepr + Default + PartialEq>(kern: &CudaKernels) {
    let mut r = rng(91);
    let mut x: Vec<f32> = (0..4099)
        .map(|_| r.random_range(-70_000.0..70_000.0))
        .collect();
    x.extend([
        0.0,
        -0.0,
        1.0 + f32::EPSILON,
        3.4e38,
        -3.4e38,
        f32::INFINITY,
        1e-40,
    ]);
    let want: Vec<T> = x.iter().map(|&v| T::from_f32(v)).collect();
    let mut out = up(kern, &vec![T::default(); x.len()]);
    check(kern.from_f32(&up(kern, &x), &mut out, x.len()), "from_f32");
    let got = down(kern, &out);
    assert!(
        got == want,
        "from_f32 {:?} differs from the CPU's",
        T::DTYPE
    );
}

fn fill_case<T: KvElem + DeviceRepr + Default + PartialEq>(kern: &CudaKernels) {
    let n = 100_003;
    let mut want = vec![T::default(); n];
    fill_random(&mut want, 0x5eed, 0.03);
    let mut out = up(kern, &vec![T::default(); n]);
    check(kern.fill_random(&mut out, 0x5eed, 0.03), "fill_random");
    assert!(
        down(kern, &out) == want,
        "fill_random {:?} differs",
        T::DTYPE
    );
}

#[test]
fn gpu_decoder_ops_match_cpu_reference() {
    let Some(kern) = kernels("decoder_ops") else {
        return;
    };
    let mut r = rng(90);
    gather_case::<f32>(&kern, 1);
    gather_case::<f16>(&kern, 2);
    gather_case::<bf16>(&kern, 3);
    cast_case::<f32>(&kern);
    cast_case::<f16>(&kern);
    cast_case::<bf16>(&kern);
    fill_case::<f32>(&kern);
    fill_case::<f16>(&kern);
    fill_case::<bf16>(&kern);

    // RMSNorm over a residual-stream width and a per-head width (q/k norms), row counts that
    // do and do not fill a CTA's threads.
    let mut norm_err = 0f32;
    for (rows, width) in [(7usize, 576usize), (33, 64), (2, 1000)] {
        let x: Vec<f32> = (0..rows * width)
            .map(|_| r.random_range(-3.0..3.0))
            .collect();
        let w: Vec<f32> = (0..width).map(|_| r.random_range(-2.0..2.0)).collect();
        let mut want = vec![0f32; rows * width];
        rms_norm(&x, &w, 1e-5, &mut want);
        let mut out = up(&kern, &vec![0f32; rows * width]);
        check(
            kern.rms_norm(&up(&kern, &x), &up(&kern, &w), &mut out, rows, width, 1e-5),
            "rms_norm",
        );
        norm_err = norm_err.max(rel_err(&down(&kern, &out), &want));
    }

    // RoPE, both pairings, one position past the tables (left unrotated on both sides).
    let (tokens, heads, half, context) = (9usize, 5usize, 32usize, 40usize);
    let cos: Vec<f32> = (0..context * half)
        .map(|_| r.random_range(-1.0..1.0))
        .collect();
    let sin: Vec<f32> = (0..context * half)
        .map(|_| r.random_range(-1.0..1.0))
        .collect();
    let pos: Vec<usize> = vec![0, 39, 12, 12, 40, 7, 1, 38, 20];
    let pos32: Vec<u32> = pos.iter().map(|&p| p as u32).collect();
    let x: Vec<f32> = (0..tokens * heads * 2 * half)
        .map(|_| r.random_range(-4.0..4.0))
        .collect();
    let (cos_d, sin_d, pos_d) = (up(&kern, &cos), up(&kern, &sin), up(&kern, &pos32));
    for interleaved in [false, true] {
        let mut want = x.clone();
        rope(&mut want, heads, &pos, (&cos, &sin), half, interleaved);
        let mut xd = up(&kern, &x);
        check(
            kern.rope(
                &mut xd,
                &pos_d,
                &cos_d,
                &sin_d,
                tokens,
                heads,
                half,
                interleaved,
            ),
            "rope",
        );
        assert_bitwise(
            &down(&kern, &xd),
            &want,
            &format!("rope interleaved={interleaved}"),
        );
    }

    // The SiLU gate and the bias add.
    let n = 3 * 1536 + 5;
    let g: Vec<f32> = (0..n).map(|_| r.random_range(-12.0..12.0)).collect();
    let u: Vec<f32> = (0..n).map(|_| r.random_range(-3.0..3.0)).collect();
    let mut want = g.clone();
    silu_mul(&mut want, &u);
    let mut gd = up(&kern, &g);
    check(kern.silu_mul(&mut gd, &up(&kern, &u), n), "silu_mul");
    let silu_err = rel_err(&down(&kern, &gd), &want);
    let (rows, cols) = (6usize, 896usize);
    let y: Vec<f32> = (0..rows * cols)
        .map(|_| r.random_range(-3.0..3.0))
        .collect();
    let b: Vec<f32> = (0..cols).map(|_| r.random_range(-1.0..1.0)).collect();
    let mut want = y.clone();
    add_bias(&mut want, &b);
    let mut yd = up(&kern, &y);
    check(
        kern.add_bias(&mut yd, &up(&kern, &b), rows, cols),
        "add_bias",
    );
    assert_bitwise(&down(&kern, &yd), &want, "add_bias");

    // A buffer shorter than the sizes given is refused before any launch.
    let mut short = up(&kern, &[0f32; 10]);
    let err = kern.silu_mul(&mut short, &up(&kern, &[0f32; 11]), 11);
    assert!(
        matches!(
            err,
            Err(CudaError::DeviceLen {
                arg: "g",
                got: 10,
                expected: 11
            })
        ),
        "{err:?}"
    );

    let ok = norm_err <= TOL && silu_err <= TOL;
    println!(
        "GPU_CHECK {{\"test\": \"decoder_ops\", \"ok\": {ok}, \"bitwise\": [\"gather_rows\", \"rope\", \"add_bias\", \"from_f32\", \"fill_random\"], \"max_rel_err\": {{\"rms_norm\": {norm_err:e}, \"silu_mul\": {silu_err:e}}}, \"tol\": {TOL:e}, \"note\": {}}}",
        json_str("rms_norm sums in a tree, silu_mul uses CUDA's expf")
    );
    assert!(
        norm_err <= TOL,
        "rms_norm: max relative error {norm_err} > {TOL}"
    );
    assert!(
        silu_err <= TOL,
        "silu_mul: max relative error {silu_err} > {TOL}"
    );
}
