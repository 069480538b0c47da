//! A decoder's tensors in device memory, and the projection `y = x Wᵀ (+ b)` by cuBLAS.
//!
//! Matrices are f32 or bf16 ([`WeightDtype`]); activations stay f32 and every product
//! accumulates in f32 (`CUBLAS_COMPUTE_32F`, no TF32), so an f32 model on the GPU agrees with
//! the CPU within float rounding. Uploading reads the CPU [`ModelWeights`] (GGUF matrices are
//! dequantized on the host first); [`CudaWeights::random`] generates a model on the device.

use std::ffi::c_void;

use candle_core::quantized::QMatMul;
use candle_core::{DType, Device, Tensor};
use cudarc::cublas::{result::gemm_ex, sys};
use cudarc::driver::{CudaSlice, DevicePtr, DevicePtrMut};
use half::bf16;

use super::ops::DeviceData;
use super::{cuda_err, Gpu};
use crate::config::ModelConfig;
use crate::error::{EngineError, Result};
use crate::weights::{Linear, ModelWeights, Projection};

pub(crate) use crate::device::WeightDtype;

/// A projection on the device: `[out, in]` row-major, with an optional f32 bias.
#[derive(Debug)]
pub(crate) struct DeviceLinear {
    pub(crate) w: DeviceData,
    pub(crate) out_dim: usize,
    pub(crate) in_dim: usize,
    pub(crate) bias: Option<CudaSlice<f32>>,
}

/// One decoder block on the device.
#[derive(Debug)]
pub(crate) struct DeviceLayer {
    pub(crate) attn_norm: CudaSlice<f32>,
    pub(crate) q: DeviceLinear,
    pub(crate) k: DeviceLinear,
    pub(crate) v: DeviceLinear,
    /// Per-head query and key norms, `[head_dim]` each (the architecture's `qk_norm`).
    pub(crate) qk_norm: Option<(CudaSlice<f32>, CudaSlice<f32>)>,
    pub(crate) o: DeviceLinear,
    pub(crate) ffn_norm: CudaSlice<f32>,
    pub(crate) gate: DeviceLinear,
    pub(crate) up: DeviceLinear,
    pub(crate) down: DeviceLinear,
}

/// All of a model's tensors on the device.
#[derive(Debug)]
pub(crate) struct CudaWeights {
    /// `[vocab, hidden]`.
    pub(crate) embed: DeviceData,
    pub(crate) layers: Vec<DeviceLayer>,
    pub(crate) final_norm: CudaSlice<f32>,
    pub(crate) lm_head: Option<DeviceLinear>,
}

fn host_f32(t: &Tensor) -> Result<Vec<f32>> {
    Ok(t.to_device(&Device::Cpu)?
        .to_dtype(DType::F32)?
        .flatten_all()?
        .to_vec1()?)
}

fn upload_data(gpu: &Gpu, data: &[f32], dtype: WeightDtype) -> Result<DeviceData> {
    let stream = gpu.stream();
    Ok(match dtype {
        WeightDtype::F32 => DeviceData::F32(
            stream
                .clone_htod(data)
                .map_err(|e| cuda_err("uploading weights", e))?,
        ),
        WeightDtype::Bf16 => {
            let narrowed: Vec<bf16> = data.iter().map(|&x| bf16::from_f32(x)).collect();
            DeviceData::Bf16(
                stream
                    .clone_htod(&narrowed)
                    .map_err(|e| cuda_err("uploading weights", e))?,
            )
        }
    })
}

fn upload_f32(gpu: &Gpu, data: &[f32]) -> Result<CudaSlice<f32>> {
    gpu.stream()
        .clone_htod(data)
        .map_err(|e| cuda_err("uploading weights", e))
}

fn upload_linear(gpu: &Gpu, l: &Linear, dtype: WeightDtype) -> Result<DeviceLinear> {
    let w =
        match l.weight() {
            Projection::Candle(QMatMul::QTensor(q)) => q.dequantize(&Device::Cpu)?,
            Projection::Candle(QMatMul::Tensor(t) | QMatMul::TensorF16(t)) => t.clone(),
            Projection::Kernel(_) => return Err(EngineError::InvalidInput {
                field: "matmul",
                reason:
                    "CPU kernel matrices cannot be uploaded; load for CUDA with MatmulImpl::Candle"
                        .into(),
            }),
        };
    let (out_dim, in_dim) = w.dims2()?;
    let bias = match l.bias() {
        Some(b) => Some(upload_f32(gpu, &host_f32(b)?)?),
        None => None,
    };
    Ok(DeviceLinear {
        w: upload_data(gpu, &host_f32(&w)?, dtype)?,
        out_dim,
        in_dim,
        bias,
    })
}

impl CudaWeights {
    /// Copies `weights` (on the CPU) to the device as `dtype`.
    pub(crate) fn upload(gpu: &Gpu, weights: &ModelWeights, dtype: WeightDtype) -> Result<Self> {
        let mut layers = Vec::with_capacity(weights.layers.len());
        for l in &weights.layers {
            layers.push(DeviceLayer {
                attn_norm: upload_f32(gpu, &host_f32(&l.attn_norm)?)?,
                q: upload_linear(gpu, &l.q_proj, dtype)?,
                k: upload_linear(gpu, &l.k_proj, dtype)?,
                v: upload_linear(gpu, &l.v_proj, dtype)?,
                qk_norm: match &l.qk_norm {
                    Some((q, k)) => Some((
                        upload_f32(gpu, &host_f32(q)?)?,
                        upload_f32(gpu, &host_f32(k)?)?,
                    )),
                    None => None,
                },
                o: upload_linear(gpu, &l.o_proj, dtype)?,
                ffn_norm: upload_f32(gpu, &host_f32(&l.ffn_norm)?)?,
                gate: upload_linear(gpu, &l.gate_proj, dtype)?,
                up: upload_linear(gpu, &l.up_proj, dtype)?,
                down: upload_linear(gpu, &l.down_proj, dtype)?,
            });
        }
        let lm_head = match &weights.lm_head {
            Some(l) => Some(upload_linear(gpu, l, dtype)?),
            None => None,
        };
        Ok(Self {
            embed: upload_data(gpu, &host_f32(&weights.embed)?, dtype)?,
            layers,
            final_norm: upload_f32(gpu, &host_f32(&weights.final_norm)?)?,
            lm_head,
        })
    }

    /// A model of `config`'s shape with uniform random matrices (scaled by `1/sqrt(in)`), unit
    /// norms (q/k norms too, where the architecture has them) and no biases, generated on the device from `seed` (for benchmarks: nothing is
    /// read from disk or copied from the host).
    pub(crate) fn random(
        gpu: &Gpu,
        config: &ModelConfig,
        dtype: WeightDtype,
        seed: u64,
    ) -> Result<Self> {
        let mut next_seed = seed;
        let mut matrix = |rows: usize, cols: usize| -> Result<DeviceLinear> {
            next_seed = next_seed.wrapping_add(1);
            let stream = gpu.stream();
            let n = rows * cols;
            let mut w = match dtype {
                WeightDtype::F32 => DeviceData::F32(
                    stream
                        .alloc_zeros::<f32>(n)
                        .map_err(|e| cuda_err("allocating weights", e))?,
                ),
                WeightDtype::Bf16 => DeviceData::Bf16(
                    stream
                        .alloc_zeros::<bf16>(n)
                        .map_err(|e| cuda_err("allocating weights", e))?,
                ),
            };
            gpu.fill_random(&mut w, next_seed, 1.0 / (cols as f32).sqrt())?;
            Ok(DeviceLinear {
                w,
                out_dim: rows,
                in_dim: cols,
                bias: None,
            })
        };
        let (h, i) = (config.hidden_size, config.intermediate_size);
        let (q, kv) = (
            config.num_heads * config.head_dim,
            config.num_kv_heads * config.head_dim,
        );
        let ones = |n: usize| upload_f32(gpu, &vec![1f32; n]);
        let mut layers = Vec::with_capacity(config.num_layers);
        for _ in 0..config.num_layers {
            layers.push(DeviceLayer {
                attn_norm: ones(h)?,
                q: matrix(q, h)?,
                k: matrix(kv, h)?,
                v: matrix(kv, h)?,
                qk_norm: if config.architecture.layer.qk_norm {
                    Some((ones(config.head_dim)?, ones(config.head_dim)?))
                } else {
                    None
                },
                o: matrix(h, q)?,
                ffn_norm: ones(h)?,
                gate: matrix(i, h)?,
                up: matrix(i, h)?,
                down: matrix(h, i)?,
            });
        }
        // The embedding is read row by row: unit-scale entries, as a trained model's are roughly.
        let mut embed = matrix(config.vocab_size, h)?;
        gpu.fill_random(&mut embed.w, seed ^ 0x5eed, 1.0)?;
        let lm_head = Some(matrix(config.vocab_size, h)?);
        Ok(Self {
            embed: embed.w,
            layers,
            final_norm: ones(h)?,
            lm_head,
        })
    }
}

impl Gpu {
    /// `y[rows, out] = x[rows, in] · Wᵀ (+ b) + beta · y` (`beta` 1 accumulates into a residual).
    /// `scratch` holds the bf16 copy of `x` for bf16 weights (grown as needed).
    pub(crate) fn linear(
        &self,
        l: &DeviceLinear,
        x: &CudaSlice<f32>,
        rows: usize,
        y: &mut CudaSlice<f32>,
        beta: f32,
        scratch: &mut Option<CudaSlice<bf16>>,
    ) -> Result<()> {
        let (m, k) = (l.out_dim, l.in_dim);
        for (arg, got, need) in [
            ("gemm input x, elements", x.len(), rows * k),
            ("gemm output y, elements", y.len(), rows * m),
            ("gemm weights w, elements", l.w.len(), m * k),
        ] {
            if got < need {
                return Err(EngineError::SizeMismatch {
                    what: arg,
                    expected: need,
                    got,
                });
            }
        }
        if rows == 0 {
            return Ok(());
        }
        let int = |arg: &'static str, v: usize| i32::try_from(v).map_err(|e| cuda_err(arg, e));
        let (mi, ni, ki) = (
            int("gemm size out (as i32)", m)?,
            int("gemm size rows (as i32)", rows)?,
            int("gemm size in (as i32)", k)?,
        );
        let stream = self.stream();
        if let DeviceData::Bf16(_) = &l.w {
            let need = rows * k;
            if scratch.as_ref().is_none_or(|s| s.len() < need) {
                *scratch = Some(
                    stream
                        .alloc_zeros::<bf16>(need)
                        .map_err(|e| cuda_err("allocating scratch", e))?,
                );
            }
            if let Some(s) = scratch.as_mut() {
                self.cast_bf16(x, s, need)?;
            }
        }
        let (alpha, beta) = (1f32, beta);
        {
            let (y_ptr, _y_sync) = y.device_ptr_mut(stream);
            // Row-major y = x Wᵀ is column-major yᵀ = W xᵀ: A = W read transposed (lda = in),
            // B = x (ldb = in), C = y (ldc = out).
            let status = match (&l.w, scratch.as_ref()) {
                (DeviceData::F32(w), _) => {
                    let (w_ptr, _w_sync) = w.device_ptr(stream);
                    let (x_ptr, _x_sync) = x.device_ptr(stream);
                    // SAFETY: W holds m * k f32, x rows * k, y rows * m (checked above); the handle
                    // is bound to this stream, so the product is ordered after earlier launches.
                    unsafe {
                        gemm_ex(
                            *self.blas.handle(),
                            sys::cublasOperation_t::CUBLAS_OP_T,
                            sys::cublasOperation_t::CUBLAS_OP_N,
                            mi,
                            ni,
                            ki,
                            (&alpha as *const f32).cast::<c_void>(),
                            w_ptr as *const c_void,
                            sys::cudaDataType::CUDA_R_32F,
                            ki,
                            x_ptr as *const c_void,
                            sys::cudaDataType::CUDA_R_32F,
                            ki,
                            (&beta as *const f32).cast::<c_void>(),
                            y_ptr as *mut c_void,
                            sys::cudaDataType::CUDA_R_32F,
                            mi,
                            sys::cublasComputeType_t::CUBLAS_COMPUTE_32F,
                            sys::cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT,
                        )
                    }
                }
                (DeviceData::Bf16(w), Some(xs)) => {
                    let (w_ptr, _w_sync) = w.device_ptr(stream);
                    let (x_ptr, _x_sync) = xs.device_ptr(stream);
                    // SAFETY: as above, with W and the bf16 copy of x (rows * k, cast above).
                    unsafe {
                        gemm_ex(
                            *self.blas.handle(),
                            sys::cublasOperation_t::CUBLAS_OP_T,
                            sys::cublasOperation_t::CUBLAS_OP_N,
                            mi,
                            ni,
                            ki,
                            (&alpha as *const f32).cast::<c_void>(),
                            w_ptr as *const c_void,
                            sys::cudaDataType::CUDA_R_16BF,
                            ki,
                            x_ptr as *const c_void,
                            sys::cudaDataType::CUDA_R_16BF,
                            ki,
                            (&beta as *const f32).cast::<c_void>(),
                            y_ptr as *mut c_void,
                            sys::cudaDataType::CUDA_R_32F,
                            mi,
                            sys::cublasComputeType_t::CUBLAS_COMPUTE_32F,
                            sys::cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT,
                        )
                    }
                }
                (DeviceData::Bf16(_), None) => {
                    return Err(EngineError::MissingOutput {
                        what: "bf16 scratch for cuBLAS",
                        seq: None,
                    })
                }
            };
            status.map_err(|e| cuda_err("cublasGemmEx", e))?;
        }
        if let Some(b) = &l.bias {
            self.add_bias(y, b, rows, m)?;
        }
        Ok(())
    }
}
