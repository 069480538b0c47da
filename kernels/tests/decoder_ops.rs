//! The decoder layer's row-wise arithmetic (`decoder_ops`): the residual add + RMSNorm and RoPE
//! bitwise against candle-nn 0.11.1 (the engine's parity with candle-transformers rests on it),
//! the gathers, bias and random fill against element loops, and the out-of-range rule (an
//! index past its table leaves the output row as it was, as the CUDA kernels do).

use crate::common::assert_bitwise;
use candle_core::{Device, Tensor};
use half::bf16;
use ponder_kernels::decoder_ops::{
    add_and_norm, add_bias, fill_random, gather_rows, random_uniform, rms_norm, rope,
};

fn val(i: usize, s: usize) -> f32 {
    ((i * 7919 + s * 104_729) % 2003) as f32 / 301.5 - 3.3
}

#[test]
fn add_and_norm_is_candles_add_then_rms_norm_bitwise() -> candle_core::Result<()> {
    let (rows, width, eps) = (16usize, 576usize, 1e-5f32);
    let x: Vec<f32> = (0..rows * width).map(|i| val(i, 1)).collect();
    let delta: Vec<f32> = (0..rows * width).map(|i| val(i, 2)).collect();
    let alpha: Vec<f32> = (0..width).map(|i| val(i, 3)).collect();
    let dev = Device::Cpu;
    let sum = (Tensor::from_slice(&x, (rows, width), &dev)?
        + Tensor::from_slice(&delta, (rows, width), &dev)?)?;
    let want = candle_nn::ops::rms_norm(&sum, &Tensor::from_slice(&alpha, width, &dev)?, eps)?;
    // With the hot helper too: the split halves must give the serial bits.
    #[cfg(not(loom))]
    let _hot_helper = ponder_kernels::HotHelper::start();
    for r in [1, 2, 3, 11, rows] {
        let n = r * width;
        let (mut got_x, mut got) = (x[..n].to_vec(), vec![0f32; n]);
        add_and_norm(&mut got_x, Some(&delta[..n]), &alpha, eps, &mut got);
        let want_x: Vec<f32> = sum.narrow(0, 0, r)?.flatten_all()?.to_vec1()?;
        let want_out: Vec<f32> = want.narrow(0, 0, r)?.flatten_all()?.to_vec1()?;
        assert_bitwise(&got_x, &want_x, &format!("residual, {r} rows"));
        assert_bitwise(&got, &want_out, &format!("norm, {r} rows"));
        // Without a delta the stream is normed as it is.
        let (mut summed, mut normed) = (want_x.clone(), vec![0f32; n]);
        add_and_norm(&mut summed, None, &alpha, eps, &mut normed);
        assert_bitwise(&normed, &want_out, &format!("norm alone, {r} rows"));
        let mut plain = vec![0f32; n];
        rms_norm(&want_x, &alpha, eps, &mut plain);
        assert_bitwise(&plain, &want_out, &format!("rms_norm, {r} rows"));
    }
    Ok(())
}

/// `[context, half]` angle tables as the engine builds them.
fn tables(context: usize, half: usize) -> (Vec<f32>, Vec<f32>) {
    let inv: Vec<f32> = (0..half)
        .map(|i| 1f32 / 10_000f32.powf((2 * i) as f32 / (2 * half) as f32))
        .collect();
    let angles: Vec<f32> = (0..context)
        .flat_map(|p| inv.iter().map(move |f| p as f32 * f))
        .collect();
    (
        angles.iter().map(|a| a.cos()).collect(),
        angles.iter().map(|a| a.sin()).collect(),
    )
}

#[test]
fn rope_is_candles_rope_bitwise_at_any_positions() -> candle_core::Result<()> {
    let (heads, half, context) = (3usize, 8usize, 64usize);
    let d = 2 * half;
    let (cos, sin) = tables(context, half);
    let positions = [5usize, 0, 63, 17, 17, 40];
    let t = positions.len();
    let x: Vec<f32> = (0..t * heads * d).map(|i| val(i, 4)).collect();
    let dev = Device::Cpu;
    // candle takes per-token rows of the tables: gather them at the positions.
    let pick = |table: &[f32]| -> Vec<f32> {
        positions
            .iter()
            .flat_map(|&p| table[p * half..(p + 1) * half].iter().copied())
            .collect()
    };
    let cos_t = Tensor::from_vec(pick(&cos), (t, half), &dev)?;
    let sin_t = Tensor::from_vec(pick(&sin), (t, half), &dev)?;
    // Token-major [1, t, heads, d]; candle's rope_i wants [1, heads, t, d].
    let xs = Tensor::from_slice(&x, (1, t, heads, d), &dev)?;
    let halves = candle_nn::rotary_emb::rope_thd(&xs, &cos_t, &sin_t)?;
    let interleaved =
        candle_nn::rotary_emb::rope_i(&xs.transpose(1, 2)?.contiguous()?, &cos_t, &sin_t)?
            .transpose(1, 2)?
            .contiguous()?;
    for (want, il) in [(halves, false), (interleaved, true)] {
        let mut got = x.clone();
        rope(&mut got, heads, &positions, (&cos, &sin), half, il);
        let want: Vec<f32> = want.flatten_all()?.to_vec1()?;
        assert_bitwise(&got, &want, &format!("rope, interleaved = {il}"));
    }
    // A position past the tables leaves its token as it was; the others still rotate.
    let mut got = x.clone();
    rope(&mut got, heads, &[context, 5], (&cos, &sin), half, false);
    assert_bitwise(&got[..heads * d], &x[..heads * d], "token past the tables");
    assert_ne!(&got[heads * d..2 * heads * d], &x[heads * d..2 * heads * d]);
    Ok(())
}

#[test]
fn gather_rows_widens_the_rows_named_and_skips_indices_past_the_table() {
    let (rows, width) = (7usize, 5usize);
    let table: Vec<bf16> = (0..rows * width)
        .map(|i| bf16::from_f32(val(i, 5)))
        .collect();
    let ids = [6u32, 0, 6, 3, 7, u32::MAX];
    let mut out = vec![-1f32; ids.len() * width];
    gather_rows(&table, &ids, width, &mut out);
    for (r, &id) in ids.iter().enumerate() {
        let got = &out[r * width..(r + 1) * width];
        if (id as usize) < rows {
            let want: Vec<f32> = table[id as usize * width..(id as usize + 1) * width]
                .iter()
                .map(|v| v.to_f32())
                .collect();
            assert_bitwise(got, &want, &format!("row {r}"));
        } else {
            assert!(
                got.iter().all(|&v| v == -1.0),
                "row {r} (id {id}) untouched"
            );
        }
    }
}

#[test]
fn add_bias_adds_the_bias_to_every_row() {
    let (rows, cols) = (4usize, 6usize);
    let mut y: Vec<f32> = (0..rows * cols).map(|i| val(i, 6)).collect();
    let bias: Vec<f32> = (0..cols).map(|i| val(i, 7)).collect();
    let want: Vec<f32> = y
        .iter()
        .enumerate()
        .map(|(i, v)| v + bias[i % cols])
        .collect();
    add_bias(&mut y, &bias);
    assert_bitwise(&y, &want, "add_bias");
}

#[test]
fn random_fill_is_a_function_of_seed_and_index_uniform_in_the_unit_interval() {
    let n = 1 << 14;
    let mut a = vec![0f32; n];
    fill_random(&mut a, 42, 1.0);
    // The index alone decides a value: a suffix of the fill is the same values.
    for i in [0usize, 1, 1000, n - 1] {
        assert_eq!(a[i].to_bits(), random_uniform(42, i as u64).to_bits());
    }
    assert!(a.iter().all(|v| (-1.0..1.0).contains(v)));
    let mean = a.iter().sum::<f32>() / n as f32;
    assert!(mean.abs() < 0.03, "mean {mean}");
    // Each eighth of [-1, 1) gets about an eighth of the values.
    let mut bins = [0usize; 8];
    for v in &a {
        bins[((v + 1.0) * 4.0) as usize] += 1;
    }
    assert!(bins.iter().all(|&b| b.abs_diff(n / 8) < n / 64), "{bins:?}");
    let mut other = vec![0f32; 64];
    fill_random(&mut other, 43, 1.0);
    assert_ne!(&other[..], &a[..64], "another seed, other values");
    // Scaled and narrowed: the f32 value times the scale, rounded once.
    let mut narrow = vec![bf16::ZERO; 64];
    fill_random(&mut narrow, 42, 0.5);
    for (i, v) in narrow.iter().enumerate() {
        assert_eq!(*v, bf16::from_f32(a[i] * 0.5));
    }
}
