//! x86-64 AMX-INT8 tile kernels for batched matmuls: one `tdpbsud` computes the integer part
//! of a 32-element block for 16 activation rows x 16 output columns at once, and the f32
//! epilogue then runs per row exactly as in the AVX-512 kernel (`x86.rs`).
//!
//! Owns: detecting AMX and asking Linux for the tile state ([`Amx::detect`]), the per-thread
//! tile configuration and the two tile kernels, which read the activations as
//! [`RowGroups`] (`groups.rs`: 16 rows' quants per block in one panel, as the tile loads want
//! them). It must not change a bit of any result: integer block sums are exact
//! (|sum| < 2^31: 32 products of at most 255 x 128) and each lane's f32 tail is `scalar.rs`'s
//! operation sequence (convert, multiply, multiply, multiply, add, add; never FMA), so every
//! output is bitwise the scalar reference's, whatever the row grouping. Rows that do not fill
//! a group worth the tile product go to the AVX-512 VNNI kernel, which computes the same bits.
//!
//! Per tile block: `A` is 16 rows x 32 activation quants (i8, one [`RowGroups`] panel), `B`
//! is 8 x 64 bytes in the layout's "4 k-values of 16 columns per row" order (u8: Q8_0 quants
//! stored `q + 128` are read in place; Q4_1 nibbles are split into low rows 0..4 and high rows
//! 4..8 in a small buffer first), `C` is 16 x 16 i32. `C` reaches the epilogue through a tile
//! store: a load of what a tile store wrote waits for that store to retire, so the loop is
//! software-pipelined: in step `b` it stores block `b - 2`'s `C`, runs block `b - 3`'s
//! epilogue, unpacks block `b + 1` and starts block `b`'s product (four `C` tiles, two `A`
//! and two `B` tiles in turn). Measured on the development VM (one thread, cache-warm,
//! 1536 x 576, 16 rows): 1.5-1.6x the VNNI kernel; the epilogue and the tile unit's loads,
//! product and store take about equal time and overlap only partly.
//!
//! Unsafe code: the tile instructions are inline assembly (Rust has no stable AMX
//! intrinsics). Every tile load reads 16 rows of 32 bytes or 8 rows of 64 bytes from a buffer
//! of at least that size, every tile store writes 16 x 64 bytes into a 1 KiB buffer; the
//! SIMD loads and stores are bounded by the fixed-size arrays they touch. Tile instructions
//! need the kernel's permission (asked once per process) and a configuration per thread: a
//! [`Session`] loads it for a matmul task's tile calls and puts back whatever was there before
//! (candle-core has AMX kernels of its own that keep their configuration per thread).
#![allow(unsafe_code)]

use core::arch::asm;
use core::arch::x86_64::*;
use std::cell::Cell;
use std::mem::MaybeUninit;
use std::sync::OnceLock;

use super::groups::{Entry, RowGroups, GROUP};
use super::layout::{Q4_1_M, Q4_1_QS, Q8_0_QS, TB_Q4_1, TB_Q8_0, TILE};
use super::quant::{QuantizedRows, QK};
use super::x86::{self, Avx512Vnni};
use super::QuantFormat;

/// The environment variable that keeps the AMX path off when set.
pub(crate) const NO_AMX_ENV: &str = "PONDER_NO_AMX";

/// The fewest rows worth a (zero-padded) tile product: below this the VNNI kernel, which
/// costs per row, is faster than one group's product and 16-row epilogue.
pub(crate) const MIN_ROWS: usize = 10;

/// Proof that the CPU has AMX-TILE and AMX-INT8, that Linux lets this process use them, and
/// that AVX-512 VNNI is there for the epilogue and the leftover rows.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Amx(Avx512Vnni);

impl Amx {
    /// `Some` when AMX-INT8 is usable and not switched off; asks the kernel for the tile
    /// state once per process. Setting [`NO_AMX_ENV`] (to anything) switches it off, so that
    /// an operator can fall back to the VNNI kernel (same bits) on a host whose hypervisor
    /// mishandles the tile state.
    pub(crate) fn detect() -> Option<Self> {
        static USABLE: OnceLock<bool> = OnceLock::new();
        let vnni = Avx512Vnni::detect()?;
        USABLE
            .get_or_init(|| {
                std::env::var_os(NO_AMX_ENV).is_none() && cpu_has_amx_int8() && os_grants_amx()
            })
            .then_some(Self(vnni))
    }

    /// The AVX-512 VNNI token this one implies.
    pub(crate) fn vnni(self) -> Avx512Vnni {
        self.0
    }
}

/// CPUID leaf 7: EDX bit 24 is AMX-TILE, bit 25 AMX-INT8.
fn cpu_has_amx_int8() -> bool {
    let (max_leaf, edx) = (__cpuid(0).eax, __cpuid_count(7, 0).edx);
    max_leaf >= 7 && edx & (1 << 24) != 0 && edx & (1 << 25) != 0
}

/// Linux keeps the 8 KiB tile state off until a process asks for it (permission is per
/// process, so threads started before or after share it).
#[cfg(target_os = "linux")]
fn os_grants_amx() -> bool {
    const ARCH_REQ_XCOMP_PERM: libc::c_long = 0x1023;
    const XFEATURE_XTILEDATA: libc::c_long = 18;
    // SAFETY: arch_prctl with these arguments only changes this process's permissions.
    unsafe {
        libc::syscall(
            libc::SYS_arch_prctl,
            ARCH_REQ_XCOMP_PERM,
            XFEATURE_XTILEDATA,
        ) == 0
    }
}

#[cfg(not(target_os = "linux"))]
fn os_grants_amx() -> bool {
    false
}

/// A tile configuration: the 64-byte memory operand of `ldtilecfg` / `sttilecfg`.
#[derive(Clone, Copy, PartialEq, Eq)]
#[repr(C, align(64))]
struct TileConfig {
    palette: u8,
    start_row: u8,
    reserved: [u8; 14],
    colsb: [u16; 16],
    rows: [u8; 16],
}

/// Palette 1: tmm0-3 `C` (16 x 64 bytes), tmm4-5 `A` (16 x 32 bytes), tmm6-7 `B` (8 x 64).
const CONFIG: TileConfig = {
    let (mut colsb, mut rows) = ([0u16; 16], [0u8; 16]);
    let mut t = 0;
    while t < 8 {
        (colsb[t], rows[t]) = match t {
            0..=3 => (64, GROUP as u8),
            4 | 5 => (QK as u16, GROUP as u8),
            _ => (64, (QK / 4) as u8),
        };
        t += 1;
    }
    TileConfig {
        palette: 1,
        start_row: 0,
        reserved: [0; 14],
        colsb,
        rows,
    }
};

/// [`CONFIG`] loaded on this thread while it lives. Tile configuration is per-thread state
/// that other code on the same thread may use too (candle-core has AMX kernels of its own),
/// so whatever was loaded before is put back when this is dropped.
struct Configured {
    /// The configuration found on entry, when it was not ours.
    previous: Option<TileConfig>,
}

impl Configured {
    fn new(_: Amx) -> Self {
        let mut found = TileConfig {
            palette: 0,
            start_row: 0,
            reserved: [0; 14],
            colsb: [0; 16],
            rows: [0; 16],
        };
        // SAFETY: the token proves AMX is usable; `sttilecfg` writes exactly the 64 bytes of
        // `found` (all zero when no tiles are configured).
        unsafe { asm!("sttilecfg [{0}]", in(reg) &mut found as *mut TileConfig, options(nostack)) };
        if found == CONFIG {
            return Self { previous: None };
        }
        // SAFETY: CONFIG is a valid palette-1 configuration.
        unsafe { asm!("ldtilecfg [{0}]", in(reg) &CONFIG as *const TileConfig, options(nostack)) };
        Self {
            previous: Some(found),
        }
    }
}

impl Drop for Configured {
    fn drop(&mut self) {
        match &self.previous {
            None => {}
            // SAFETY: `tilerelease` returns the tiles to their initial (unconfigured) state,
            // which is what palette 0 found on entry meant.
            Some(found) if found.palette == 0 => unsafe {
                asm!("tilerelease", options(nostack, nomem))
            },
            // SAFETY: `found` was read from this thread's tile configuration, so it is valid.
            Some(found) => unsafe {
                asm!("ldtilecfg [{0}]", in(reg) found as *const TileConfig, options(nostack))
            },
        }
    }
}

thread_local! {
    /// Whether a [`Session`] holds [`CONFIG`] on this thread.
    static HELD: Cell<bool> = const { Cell::new(false) };
}

/// [`CONFIG`] held on this thread across several tile calls (a matmul task): loading a tile
/// configuration and releasing it costs ~100 ns, more than a sixth of a tile call's work at
/// 16 rows, so the matmul opens one session per task and each [`tile`] call inside it finds
/// the configuration loaded. Sessions nest: only the outermost one loads and restores.
pub(crate) struct Session(Option<Configured>);

impl Session {
    pub(crate) fn new(t: Amx) -> Self {
        if HELD.get() {
            return Self(None);
        }
        HELD.set(true);
        Self(Some(Configured::new(t)))
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        if let Some(configured) = self.0.take() {
            drop(configured);
            HELD.set(false);
        }
    }
}

/// 64-byte aligned bytes.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Aligned<const N: usize>([u8; N]);

/// Which activation rows the tile product takes for `m` rows: whole groups, plus one padded
/// group when the rest has at least [`MIN_ROWS`] rows. The rest goes to the VNNI kernel.
pub(crate) fn tile_rows(m: usize) -> usize {
    let rest = m % GROUP;
    if rest >= MIN_ROWS {
        m
    } else {
        m - rest
    }
}

/// One tile (`nb` tile blocks of `format`) against all `m` rows of `act` into
/// `out[r * TILE + j]`, asking the caches for `next` as the VNNI kernel does. `act` must carry
/// [`RowGroups`] of the first [`tile_rows`]`(m)` rows when that is not zero (`Kernel::quantize`
/// sees to it), and plain blocks of the rest, which go to the VNNI kernel.
pub(crate) fn tile(
    t: Amx,
    format: QuantFormat,
    tile: &[u8],
    next: &[u8],
    act: &QuantizedRows,
    m: usize,
    out: &mut [f32],
) {
    let mut done = 0;
    if let Some(groups) = act.row_groups() {
        let rows = tile_rows(m);
        debug_assert_eq!(
            groups.rows(),
            rows,
            "`Kernel::quantize` groups the tile rows"
        );
        let _session = (rows > 0).then(|| Session::new(t));
        let mut ahead = next;
        for g in 0..rows.div_ceil(GROUP) {
            let real = GROUP.min(rows - g * GROUP);
            let ahead = std::mem::take(&mut ahead);
            // SAFETY: the token proves AMX and AVX-512 F/BW are usable; tiles are configured.
            unsafe {
                match format {
                    QuantFormat::Q4_1 => group::<false>(tile, ahead, groups, g, real, out),
                    QuantFormat::Q8_0 => group::<true>(tile, ahead, groups, g, real, out),
                }
            }
        }
        done = rows;
    }
    let next = if done == 0 { next } else { &[] };
    x86::rows_avx512(t.vnni(), format, tile, next, act, done..m, out);
}

/// Starts block `b`'s product into `C` tile `b % 4`: zero it, load `A` (16 rows of 32 bytes
/// at `a`) and `B` (8 rows of 64 bytes at `b_rows`) into tile set `b % 2`, multiply.
///
/// # Safety
/// AMX must be usable and configured on this thread; `a` must be readable for 512 bytes and
/// `b_rows` for 512.
#[inline(always)]
unsafe fn product(b: usize, a: *const i8, b_rows: *const u8) {
    macro_rules! go {
        ($c:literal, $a:literal, $b:literal) => {
            // SAFETY: the caller's contract covers both loads.
            unsafe {
                asm!(
                    concat!("tilezero tmm", $c),
                    concat!("tileloadd tmm", $a, ", [{a} + {sa} * 1]"),
                    concat!("tileloadd tmm", $b, ", [{b} + {sb} * 1]"),
                    concat!("tdpbsud tmm", $c, ", tmm", $a, ", tmm", $b),
                    a = in(reg) a,
                    sa = in(reg) QK,
                    b = in(reg) b_rows,
                    sb = in(reg) 64usize,
                    options(nostack),
                )
            }
        };
    }
    match b % 4 {
        0 => go!("0", "4", "6"),
        1 => go!("1", "5", "7"),
        2 => go!("2", "4", "6"),
        _ => go!("3", "5", "7"),
    }
}

/// Stores `C` tile `b % 4` (block `b`'s product) into `c`.
///
/// # Safety
/// AMX must be usable and configured on this thread, and block `b`'s [`product`] started.
#[inline(always)]
unsafe fn store(b: usize, c: &mut MaybeUninit<Aligned<1024>>) {
    macro_rules! go {
        ($c:literal) => {
            // SAFETY: writes exactly 16 rows of 64 bytes into the 1 KiB buffer.
            unsafe {
                asm!(
                    concat!("tilestored [{o} + {so} * 1], tmm", $c),
                    o = in(reg) c.as_mut_ptr().cast::<u8>(),
                    so = in(reg) 64usize,
                    options(nostack),
                )
            }
        };
    }
    match b % 4 {
        0 => go!("0"),
        1 => go!("1"),
        2 => go!("2"),
        _ => go!("3"),
    }
}

/// Splits a Q4_1 tile block's nibbles into `B`'s 8 rows: low nibbles (elements 0..16) in rows
/// 0..4, high nibbles (elements 16..32) in rows 4..8. Writes all 512 bytes of `buf` (zeros for
/// a block too short to hold quants), so `buf` may start uninitialised.
#[target_feature(enable = "avx512f,avx512bw")]
fn unpack_q4_1(blk: &[u8], buf: &mut MaybeUninit<Aligned<512>>) {
    let Some(quants) = blk.get(Q4_1_QS..TB_Q4_1) else {
        buf.write(Aligned([0; 512]));
        return;
    };
    let mask = _mm512_set1_epi8(0x0F);
    let dst = buf.as_mut_ptr().cast::<u8>();
    for g in 0..4 {
        // SAFETY: `quants` is the block's 256 quant bytes, row `g` is [64g, 64g + 64); the
        // stores write rows g and 4 + g of the 512-byte, 64-aligned buffer.
        unsafe {
            let v = _mm512_loadu_si512(quants.as_ptr().add(64 * g).cast());
            _mm512_store_si512(dst.add(64 * g).cast(), _mm512_and_si512(v, mask));
            let hi = _mm512_and_si512(_mm512_srli_epi16::<4>(v), mask);
            _mm512_store_si512(dst.add(64 * (4 + g)).cast(), hi);
        }
    }
}

/// Block `b`'s f32 epilogue for the 16 rows of group `g`, from its product in `c`: each
/// row's lanes get `scalar.rs`'s operations in its order.
#[target_feature(enable = "avx512f,avx512bw")]
fn epilogue<const Q8: bool>(
    blk: &[u8],
    c: &Aligned<1024>,
    entry: &Entry,
    acc: &mut [__m512; GROUP],
) {
    let (d, s, bias) = (&entry.d, &entry.s, &entry.bias);
    let (scales, mins) = (&blk[..2 * TILE], &blk[Q4_1_M..Q4_1_M + 2 * TILE]);
    // SAFETY: each load reads the 32 bytes of one 16 x f16 slice above.
    let dx = unsafe { _mm512_cvtph_ps(_mm256_loadu_si256(scales.as_ptr().cast())) };
    let mx = if Q8 {
        _mm512_setzero_ps()
    } else {
        // SAFETY: as above.
        unsafe { _mm512_cvtph_ps(_mm256_loadu_si256(mins.as_ptr().cast())) }
    };
    macro_rules! row {
        ($($rr:literal)*) => {$({
            // SAFETY: row `rr` of the 1 KiB, 64-aligned product buffer.
            let sumi = unsafe { _mm512_load_si512(c.0.as_ptr().add(64 * $rr).cast()) };
            let t = if Q8 {
                // sum((q + 128) * a) - 128 * sum(a) = sum(q * a), exactly (|.| < 2^21).
                let exact = _mm512_sub_epi32(sumi, _mm512_set1_epi32(bias[$rr]));
                _mm512_mul_ps(
                    _mm512_mul_ps(_mm512_cvtepi32_ps(exact), dx),
                    _mm512_set1_ps(d[$rr]),
                )
            } else {
                let scaled = _mm512_mul_ps(
                    _mm512_mul_ps(_mm512_cvtepi32_ps(sumi), dx),
                    _mm512_set1_ps(d[$rr]),
                );
                _mm512_add_ps(scaled, _mm512_mul_ps(mx, _mm512_set1_ps(s[$rr])))
            };
            acc[$rr] = _mm512_add_ps(acc[$rr], t);
        })*};
    }
    row!(0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15);
}

/// Group `g` (its first `real` rows stored) of one tile, software-pipelined (module doc);
/// asks for block `b` of `ahead` while it starts block `b`.
///
/// # Safety
/// AMX must be usable and configured on this thread, and AVX-512 F/BW available.
#[target_feature(enable = "avx512f,avx512bw")]
unsafe fn group<const Q8: bool>(
    tile: &[u8],
    ahead: &[u8],
    groups: &RowGroups,
    g: usize,
    real: usize,
    out: &mut [f32],
) {
    let tb = if Q8 { TB_Q8_0 } else { TB_Q4_1 };
    let nb = groups.nb();
    let block = |b: usize| &tile[b * tb..(b + 1) * tb];
    let mut acc = [_mm512_setzero_ps(); GROUP];
    // Written in full before they are read (`unpack_q4_1` one step ahead of the product that
    // loads it, a tile store one step ahead of the epilogue), so not zeroed: 3 KiB of zeroing
    // per group was ~3 % of a 16-row decode step.
    let mut nibbles = [const { MaybeUninit::<Aligned<512>>::uninit() }; 2];
    let mut c = [const { MaybeUninit::<Aligned<1024>>::uninit() }; 2];
    if !Q8 && nb > 0 {
        unpack_q4_1(block(0), &mut nibbles[0]);
    }
    for b in 0..nb + 3 {
        if (2..nb + 2).contains(&b) {
            // SAFETY: block b - 2's product was started two steps ago.
            unsafe { store(b - 2, &mut c[b % 2]) };
        }
        if b >= 3 {
            let e = b - 3;
            // SAFETY: block e's product was stored into `c[e % 2]` (all 1 KiB) in the step
            // before, and the store of block e + 1 went to the other buffer.
            let product = unsafe { c[e % 2].assume_init_ref() };
            epilogue::<Q8>(block(e), product, groups.entry(g, e), &mut acc);
        }
        if b < nb {
            x86::prefetch_block(ahead, b, tb);
            let b_rows = if Q8 {
                block(b)[Q8_0_QS..].as_ptr()
            } else {
                if b + 1 < nb {
                    unpack_q4_1(block(b + 1), &mut nibbles[(b + 1) % 2]);
                }
                // `unpack_q4_1` filled it in the step before (or before the loop, for block 0).
                nibbles[b % 2].as_ptr().cast::<u8>()
            };
            // SAFETY: a panel is 512 bytes; `b_rows` is a 512-byte buffer or the last 512
            // bytes of a 544-byte Q8_0 tile block.
            unsafe { product(b, groups.entry(g, b).qs.as_ptr(), b_rows) };
        }
    }
    for (rr, acc) in acc.iter().enumerate().take(real) {
        let r = g * GROUP + rr;
        let dst = &mut out[r * TILE..(r + 1) * TILE];
        // SAFETY: `dst` is exactly 16 f32s (the range index checked it).
        unsafe { _mm512_storeu_ps(dst.as_mut_ptr(), *acc) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::kernel::Kernel;
    use crate::cpu::quant::ActFormat;

    #[test]
    fn tile_rows_take_whole_groups_and_a_large_enough_rest() {
        assert_eq!(tile_rows(1), 0);
        assert_eq!(tile_rows(MIN_ROWS - 1), 0);
        assert_eq!(tile_rows(MIN_ROWS), MIN_ROWS);
        assert_eq!(tile_rows(16), 16);
        assert_eq!(tile_rows(17), 16);
        assert_eq!(tile_rows(16 + MIN_ROWS), 16 + MIN_ROWS);
        assert_eq!(tile_rows(512), 512);
    }

    #[test]
    fn config_describes_four_c_two_a_two_b_tiles() {
        assert_eq!(std::mem::size_of::<TileConfig>(), 64);
        assert_eq!(&CONFIG.rows[..8], &[16, 16, 16, 16, 16, 16, 8, 8]);
        assert_eq!(&CONFIG.colsb[..8], &[64, 64, 64, 64, 32, 32, 64, 64]);
        assert!(CONFIG.rows[8..].iter().all(|&r| r == 0));
    }

    /// A random Q4_1 tile of `nb` blocks and `m` activation rows quantized for the AMX kernel
    /// and, all in plain blocks, for the VNNI kernel.
    fn fixture(t: Amx, nb: usize, m: usize) -> (Vec<u8>, QuantizedRows, QuantizedRows) {
        let mut state = 12345u32;
        let mut next = || {
            state = state.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            state >> 8
        };
        let mut tile = vec![0u8; nb * TB_Q4_1];
        for blk in tile.chunks_exact_mut(TB_Q4_1) {
            for (j, scale) in blk[..Q4_1_QS].chunks_exact_mut(2).enumerate() {
                let v = if j < TILE { 0.01 } else { -0.05 } * (1.0 + (next() % 64) as f32 / 64.0);
                scale.copy_from_slice(&half::f16::from_f32(v).to_le_bytes());
            }
            for q in &mut blk[Q4_1_QS..] {
                *q = next() as u8;
            }
        }
        let k = nb * QK;
        let x: Vec<f32> = (0..m * k)
            .map(|_| (next() % 2000) as f32 / 1000.0 - 1.0)
            .collect();
        let act = Kernel::Amx(t).quantize(ActFormat::Q8_1, &x, m, k);
        let plain = Kernel::Avx512(t.vnni()).quantize(ActFormat::Q8_1, &x, m, k);
        (tile, act, plain)
    }

    fn read_config() -> TileConfig {
        let mut found = CONFIG;
        // SAFETY: writes the 64 bytes of `found`.
        unsafe { asm!("sttilecfg [{0}]", in(reg) &mut found as *mut TileConfig) };
        found
    }

    #[test]
    fn a_tile_call_leaves_the_threads_tile_configuration_as_it_found_it() {
        let Some(t) = Amx::detect() else {
            eprintln!("no AMX: skipped");
            return;
        };
        let (nb, m) = (18, 16);
        let (tile_bytes, act, plain) = fixture(t, nb, m);
        let mut expected = vec![0f32; m * TILE];
        x86::rows_avx512(
            t.vnni(),
            QuantFormat::Q4_1,
            &tile_bytes,
            &[],
            &plain,
            0..m,
            &mut expected,
        );
        // Another library's configuration (palette 1, one 8 x 32 tile), then none at all.
        let mut foreign = CONFIG;
        (foreign.colsb, foreign.rows) = ([0; 16], [0; 16]);
        (foreign.colsb[0], foreign.rows[0]) = (32, 8);
        // SAFETY: `foreign` is a valid palette-1 configuration.
        unsafe { asm!("ldtilecfg [{0}]", in(reg) &foreign as *const TileConfig) };
        let mut out = vec![0f32; m * TILE];
        tile(t, QuantFormat::Q4_1, &tile_bytes, &[], &act, m, &mut out);
        assert!(
            read_config() == foreign,
            "the foreign configuration is back"
        );
        assert_eq!(
            out.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
            expected.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
        );
        // SAFETY: returns the tiles to the unconfigured state.
        unsafe { asm!("tilerelease") };
        tile(t, QuantFormat::Q4_1, &tile_bytes, &[], &act, m, &mut out);
        assert_eq!(read_config().palette, 0, "still unconfigured afterwards");
        assert_eq!(
            out.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
            expected.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
        );
    }

    #[test]
    fn a_session_holds_the_configuration_until_its_outermost_guard_drops() {
        let Some(t) = Amx::detect() else {
            eprintln!("no AMX: skipped");
            return;
        };
        // SAFETY: starts from the unconfigured state.
        unsafe { asm!("tilerelease") };
        let outer = Session::new(t);
        assert!(read_config() == CONFIG);
        let inner = Session::new(t);
        drop(inner);
        assert!(read_config() == CONFIG, "an inner session leaves it loaded");
        let (tile_bytes, act, _) = fixture(t, 4, 16);
        let mut out = vec![0f32; 16 * TILE];
        tile(t, QuantFormat::Q4_1, &tile_bytes, &[], &act, 16, &mut out);
        assert!(
            read_config() == CONFIG,
            "a tile call inside a session leaves it loaded"
        );
        drop(outer);
        assert_eq!(
            read_config().palette,
            0,
            "released with the outermost session"
        );
    }

    #[test]
    fn q4_1_unpack_puts_low_then_high_nibbles_in_b_rows() {
        let Some(_) = Amx::detect() else {
            eprintln!("no AMX: skipped");
            return;
        };
        let mut blk = [0u8; TB_Q4_1];
        for (i, byte) in blk[Q4_1_QS..].iter_mut().enumerate() {
            *byte = (i as u8).wrapping_mul(37);
        }
        let mut buf = MaybeUninit::uninit();
        // SAFETY: Amx::detect proved AVX-512 F/BW.
        unsafe { unpack_q4_1(&blk, &mut buf) };
        // SAFETY: `unpack_q4_1` writes all 512 bytes.
        let buf = unsafe { buf.assume_init() };
        for g in 0..4 {
            for i in 0..64 {
                let byte = blk[Q4_1_QS + 64 * g + i];
                assert_eq!(buf.0[64 * g + i], byte & 0x0F);
                assert_eq!(buf.0[64 * (4 + g) + i], byte >> 4);
            }
        }
    }
}
