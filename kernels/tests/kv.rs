//! KV appends and copy-on-write block copies (the CPU reference for `cuda/kv_cache.cu`) against
//! element-by-element loops, for f32, f16 and bf16 caches; and their argument errors.

use half::{bf16, f16};
use ponder_kernels::kv::{append, copy_blocks, KvElem, KvError, KvLayout};
use rand::seq::SliceRandom;
use rand::Rng;

use crate::common::rng;

pub(crate) const LAYOUTS: [KvLayout; 4] = [
    KvLayout {
        block_size: 16,
        num_kv_heads: 3,
        head_dim: 64,
    },
    KvLayout {
        block_size: 1,
        num_kv_heads: 2,
        head_dim: 17,
    },
    KvLayout {
        block_size: 5,
        num_kv_heads: 1,
        head_dim: 40,
    },
    KvLayout {
        block_size: 32,
        num_kv_heads: 4,
        head_dim: 8,
    },
];

/// Element `(slot, head, dim)` written the slow way.
fn naive_append<T: KvElem>(l: &KvLayout, cache: &mut [T], new: &[f32], slots: &[u32]) {
    for (t, &slot) in slots.iter().enumerate() {
        for h in 0..l.num_kv_heads {
            for d in 0..l.head_dim {
                let src = (t * l.num_kv_heads + h) * l.head_dim + d;
                let dst = (slot as usize * l.num_kv_heads + h) * l.head_dim + d;
                cache[dst] = T::from_f32(new[src]);
            }
        }
    }
}

fn check<T: KvElem + PartialEq>(seed: u64) {
    let mut rng = rng(seed);
    for l in LAYOUTS {
        let num_blocks = 12;
        let slot_len = l.num_kv_heads * l.head_dim;
        let n = num_blocks * l.block_size * slot_len;
        let init: Vec<T> = (0..n)
            .map(|_| T::from_f32(rng.random_range(-4.0..4.0)))
            .collect();
        let (mut k, mut v) = (init.clone(), init.clone());
        let mut slots: Vec<u32> = (0..(num_blocks * l.block_size) as u32).collect();
        slots.shuffle(&mut rng);
        // Both block-boundary slots and a random subset, including the very last slot.
        slots.truncate(l.block_size + 3);
        let last = (num_blocks * l.block_size - 1) as u32;
        if !slots.contains(&last) {
            slots.push(last);
        }
        let mut sorted = slots.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), slots.len(), "test slots must be distinct");
        let k_new: Vec<f32> = (0..slots.len() * slot_len)
            .map(|_| rng.random_range(-3.0..3.0))
            .collect();
        let v_new: Vec<f32> = (0..slots.len() * slot_len)
            .map(|_| rng.random_range(-3.0..3.0))
            .collect();
        append(&l, &mut k, &mut v, &k_new, &v_new, &slots).expect("valid append");
        let (mut k_want, mut v_want) = (init.clone(), init.clone());
        naive_append(&l, &mut k_want, &k_new, &slots);
        naive_append(&l, &mut v_want, &v_new, &slots);
        assert!(k == k_want && v == v_want, "{:?} append {l:?}", T::DTYPE);

        let pairs = [(0u32, 5u32), (5 + 1, 11), (3, 2)];
        let (mut k2, mut v2) = (k.clone(), v.clone());
        copy_blocks(&l, &mut k2, &mut v2, &pairs).expect("valid copies");
        let block = l.block_size * slot_len;
        for (b, (kb, vb)) in k2.chunks(block).zip(v2.chunks(block)).enumerate() {
            let from = pairs
                .iter()
                .find(|p| p.1 as usize == b)
                .map_or(b, |p| p.0 as usize);
            assert!(
                kb == &k[from * block..][..block],
                "{:?} copy k block {b}",
                T::DTYPE
            );
            assert!(
                vb == &v[from * block..][..block],
                "{:?} copy v block {b}",
                T::DTYPE
            );
        }
    }
}

#[test]
fn append_and_copy_match_element_loops_f32() {
    check::<f32>(50);
}

#[test]
fn append_and_copy_match_element_loops_f16() {
    check::<f16>(51);
}

#[test]
fn append_and_copy_match_element_loops_bf16() {
    check::<bf16>(52);
}

#[test]
fn narrowing_rounds_to_nearest_even() {
    // 1 + 2^-11 is halfway between two f16 values: ties go to the even mantissa (1.0).
    assert_eq!(
        f16::from_f32(1.0 + 2f32.powi(-11)).to_bits(),
        f16::ONE.to_bits()
    );
    assert_eq!(
        <bf16 as KvElem>::from_f32(1.0 + 2f32.powi(-8)).to_bits(),
        bf16::ONE.to_bits()
    );
    assert_eq!(
        <f16 as KvElem>::to_f32(f16::from_f32(0.1)),
        f16::from_f32(0.1).to_f32()
    );
}

#[test]
fn bad_appends_and_copies_are_typed_errors() {
    let l = KvLayout {
        block_size: 4,
        num_kv_heads: 2,
        head_dim: 3,
    };
    let (mut k, mut v) = (vec![0f32; 2 * 24], vec![0f32; 2 * 24]);
    let new = vec![1f32; 2 * 6];
    let mut run = |slots: &[u32], k_new: &[f32], v_len: usize| {
        let mut v_cache = vec![0f32; v_len];
        append(&l, &mut k, &mut v_cache, k_new, &new, slots)
    };
    assert_eq!(
        run(&[0, 8], &new, 48),
        Err(KvError::SlotOutOfRange {
            index: 1,
            slot: 8,
            num_slots: 8
        })
    );
    assert_eq!(
        run(&[3, 3], &new, 48),
        Err(KvError::DuplicateSlot { index: 1, slot: 3 })
    );
    assert!(matches!(
        run(&[0, 1], &new[..11], 48),
        Err(KvError::NewLen { arg: "k_new", .. })
    ));
    assert!(matches!(
        run(&[0, 1], &new, 47),
        Err(KvError::CacheLen { arg: "v_cache", .. })
    ));
    assert!(matches!(
        run(&[0, 1], &new, 24),
        Err(KvError::CacheMismatch { k: 48, v: 24 })
    ));
    assert_eq!(
        copy_blocks(&l, &mut k, &mut v, &[(0, 2)]),
        Err(KvError::BlockOutOfRange {
            index: 0,
            side: "dst",
            block: 2,
            num_blocks: 2
        })
    );
    let (mut k4, mut v4) = (vec![0f32; 4 * 24], vec![0f32; 4 * 24]);
    assert_eq!(
        copy_blocks(&l, &mut k4, &mut v4, &[(0, 1), (2, 1)]),
        Err(KvError::DuplicateDestination { index: 1, block: 1 })
    );
    assert_eq!(
        copy_blocks(&l, &mut k4, &mut v4, &[(0, 1), (1, 3)]),
        Err(KvError::DestinationIsSource { index: 0, block: 1 })
    );
    let zero = KvLayout { head_dim: 0, ..l };
    assert_eq!(
        copy_blocks(&zero, &mut k4, &mut v4, &[]),
        Err(KvError::ZeroDim {
            arg: "layout.head_dim"
        })
    );
    assert!(v4.iter().all(|&x| x == 0.0), "nothing written on error");
}
