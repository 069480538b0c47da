//! Philox4x32-10, the counter-based RNG of Salmon, Moraes, Dror & Shaw (2011, "Parallel random
//! numbers: as easy as 1, 2, 3"; Random123, and cuRAND's `Philox4_32_10`): output is a pure
//! function of (counter, key), so the CPU sampler and the CUDA kernel (`cuda/sampling.cu`,
//! `philox`) draw the same bits for a row without sharing any state, and a draw never depends
//! on which other rows were in the batch.
//!
//! Ponder's use: key = the row's 64-bit seed (low word first), counter = (offset low, offset
//! high, 0, 0) with `offset` the row's draw index (e.g. its token position); the draw is
//! output words 0 and 1 as one u64, word 0 high. Checked against Random123's known-answer
//! vectors.

const M0: u32 = 0xD251_1F53;
const M1: u32 = 0xCD9E_8D57;
const W0: u32 = 0x9E37_79B9;
const W1: u32 = 0xBB67_AE85;

/// Philox4x32 with 10 rounds: the block of four words for `counter` under `key`.
pub fn philox4x32_10(counter: [u32; 4], key: [u32; 2]) -> [u32; 4] {
    let mut c = counter;
    let [mut k0, mut k1] = key;
    for round in 0..10 {
        if round > 0 {
            k0 = k0.wrapping_add(W0);
            k1 = k1.wrapping_add(W1);
        }
        let p0 = u64::from(M0) * u64::from(c[0]);
        let p1 = u64::from(M1) * u64::from(c[2]);
        let (hi0, lo0) = ((p0 >> 32) as u32, p0 as u32);
        let (hi1, lo1) = ((p1 >> 32) as u32, p1 as u32);
        c = [hi1 ^ c[1] ^ k0, lo1, hi0 ^ c[3] ^ k1, lo0];
    }
    c
}

/// The 64-bit draw for `(seed, offset)`, as the CUDA sampler computes it.
pub fn draw_u64(seed: u64, offset: u64) -> u64 {
    let out = philox4x32_10(
        [offset as u32, (offset >> 32) as u32, 0, 0],
        [seed as u32, (seed >> 32) as u32],
    );
    (u64::from(out[0]) << 32) | u64::from(out[1])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Random123's `kat_vectors` for philox4x32_10.
    #[test]
    fn matches_random123_known_answers() {
        let cases = [
            (
                [0u32; 4],
                [0u32; 2],
                [0x6627_e8d5, 0xe169_c58d, 0xbc57_ac4c, 0x9b00_dbd8],
            ),
            (
                [u32::MAX; 4],
                [u32::MAX; 2],
                [0x408f_276d, 0x41c8_3b0e, 0xa20b_c7c6, 0x6d54_51fd],
            ),
            (
                [0x243f_6a88, 0x85a3_08d3, 0x1319_8a2e, 0x0370_7344],
                [0xa409_3822, 0x299f_31d0],
                [0xd16c_fe09, 0x94fd_cceb, 0x5001_e420, 0x2412_6ea1],
            ),
        ];
        for (counter, key, want) in cases {
            assert_eq!(philox4x32_10(counter, key), want, "{counter:x?} {key:x?}");
        }
    }

    #[test]
    fn draws_differ_by_seed_and_offset() {
        let a = draw_u64(7, 0);
        assert_eq!(a, draw_u64(7, 0));
        assert_ne!(a, draw_u64(7, 1));
        assert_ne!(a, draw_u64(8, 0));
        assert_ne!(draw_u64(0, 1 << 32), draw_u64(0, 1));
    }
}
