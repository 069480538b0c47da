//! Kernel selection: the public [`KernelPath`] choice and the resolved `Kernel`, which pairs a
//! path with the run-time proof that the CPU supports it and dispatches one tile to the scalar
//! or SIMD implementation for a weight format.
//!
//! Invariant: every path computes bitwise the same result (the scalar one is the reference), so
//! choosing a path is purely a speed decision.

use super::quant::{ActFormat, QuantizedRows, Quantizer};
use super::scalar;
use super::QuantFormat;
#[cfg(target_arch = "x86_64")]
use super::{amx, x86};

/// Which kernel implementation computes a matmul. All produce bitwise identical results.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KernelPath {
    /// Portable scalar code; the reference.
    Scalar,
    /// AVX2 + F16C (`vpmaddubsw`), x86-64 only.
    Avx2,
    /// AVX-512 F/BW + VNNI (`vpdpbusd`), x86-64 only.
    Avx512Vnni,
    /// AMX-INT8 (`tdpbsud`) for groups of 16 activation rows, AVX-512 VNNI for fewer rows;
    /// x86-64 Linux only (the kernel must grant the tile state).
    Amx,
}

impl KernelPath {
    /// Every path, fastest last.
    pub const ALL: [KernelPath; 4] = [
        KernelPath::Scalar,
        KernelPath::Avx2,
        KernelPath::Avx512Vnni,
        KernelPath::Amx,
    ];

    /// The fastest path this CPU supports.
    pub fn best() -> Self {
        Self::ALL
            .into_iter()
            .rev()
            .find(|p| p.is_available())
            .unwrap_or(KernelPath::Scalar)
    }

    /// Whether this CPU supports the path.
    pub fn is_available(self) -> bool {
        Kernel::resolve(self).is_some()
    }
}

/// A resolved kernel: a path plus the proof that the CPU supports it.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Kernel {
    Scalar,
    #[cfg(target_arch = "x86_64")]
    Avx2(x86::Avx2),
    #[cfg(target_arch = "x86_64")]
    Avx512(x86::Avx512Vnni),
    #[cfg(target_arch = "x86_64")]
    Amx(amx::Amx),
}

impl Kernel {
    pub(crate) fn resolve(path: KernelPath) -> Option<Self> {
        match path {
            KernelPath::Scalar => Some(Kernel::Scalar),
            #[cfg(target_arch = "x86_64")]
            KernelPath::Avx2 => x86::Avx2::detect().map(Kernel::Avx2),
            #[cfg(target_arch = "x86_64")]
            KernelPath::Avx512Vnni => x86::Avx512Vnni::detect().map(Kernel::Avx512),
            #[cfg(target_arch = "x86_64")]
            KernelPath::Amx => amx::Amx::detect().map(Kernel::Amx),
            #[cfg(not(target_arch = "x86_64"))]
            KernelPath::Avx2 | KernelPath::Avx512Vnni | KernelPath::Amx => None,
        }
    }

    /// The activation quantizer that goes with this kernel (all are bitwise identical; the
    /// scalar path stays pure scalar so that it is a self-contained reference).
    pub(crate) fn quantizer(self) -> Quantizer {
        match self {
            Kernel::Scalar => Quantizer::Scalar,
            #[cfg(target_arch = "x86_64")]
            Kernel::Avx2(t) => Quantizer::Avx2(t),
            #[cfg(target_arch = "x86_64")]
            Kernel::Avx512(t) => Quantizer::Avx512(t),
            #[cfg(target_arch = "x86_64")]
            Kernel::Amx(t) => Quantizer::Avx512(t.vnni()),
        }
    }

    /// The `m` rows of `x` (`k` floats each) quantized as this kernel reads them: for the
    /// AMX kernel, the rows its tile product takes go straight into row groups.
    pub(crate) fn quantize(
        self,
        format: ActFormat,
        x: &[f32],
        m: usize,
        k: usize,
    ) -> QuantizedRows {
        let grouped = match self {
            #[cfg(target_arch = "x86_64")]
            Kernel::Amx(_) => amx::tile_rows(m),
            _ => 0,
        };
        QuantizedRows::quantize_grouped(format, self.quantizer(), x, m, k, grouped)
    }

    /// Per-thread state this kernel keeps across the tile calls of one task over `m` rows,
    /// released when the returned value is dropped: the AMX tile configuration (see
    /// `amx::Session`); nothing for the other paths.
    pub(crate) fn session(self, m: usize) -> Option<impl Drop> {
        match self {
            #[cfg(target_arch = "x86_64")]
            Kernel::Amx(t) if amx::tile_rows(m) > 0 => Some(amx::Session::new(t)),
            _ => None,
        }
    }

    /// One tile (`nb` tile blocks) against all `m` rows into `out[r * TILE + j]`, asking the
    /// caches for `next` (the next tile's bytes, or nothing) while it computes: the AVX-512
    /// and AMX kernels spread those requests over the tile's blocks, the AVX2 ones ask for it all
    /// first, the scalar reference not at all (a hint only: it changes no result).
    pub(crate) fn tile(
        self,
        format: QuantFormat,
        tile: &[u8],
        next: &[u8],
        act: &QuantizedRows,
        m: usize,
        out: &mut [f32],
    ) {
        #[cfg(target_arch = "x86_64")]
        if let Kernel::Avx2(_) = self {
            x86::prefetch(next);
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = next;
        match (self, format) {
            (Kernel::Scalar, QuantFormat::Q4_1) => scalar::q4_1_tile(tile, act, m, out),
            (Kernel::Scalar, QuantFormat::Q8_0) => scalar::q8_0_tile(tile, act, m, out),
            #[cfg(target_arch = "x86_64")]
            (Kernel::Avx2(t), QuantFormat::Q4_1) => x86::q4_1_tile_avx2(t, tile, act, m, out),
            #[cfg(target_arch = "x86_64")]
            (Kernel::Avx2(t), QuantFormat::Q8_0) => x86::q8_0_tile_avx2(t, tile, act, m, out),
            #[cfg(target_arch = "x86_64")]
            (Kernel::Avx512(t), format) => x86::rows_avx512(t, format, tile, next, act, 0..m, out),
            #[cfg(target_arch = "x86_64")]
            (Kernel::Amx(t), format) => amx::tile(t, format, tile, next, act, m, out),
        }
    }
}
