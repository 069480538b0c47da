//! GPU parity (feature `cuda`): every CUDA kernel against its CPU reference on random inputs:
//! attention (f32 / f16 / bf16 KV; grouped automatically, by explicit groups and ungrouped)
//! against plain softmax over gathered KV, KV append / block copy bitwise against the CPU, the
//! decoder layer's small kernels (`decoder_ops`, in `gpu/decoder_ops.rs`); plus argument
//! errors and a timing of the shared-prefix decode step.
//!
//! Each test prints one `GPU_CHECK {json}` line, which `scripts/gpu-check.sh` collects into
//! its summary. Without a GPU or driver each test prints why and passes (nothing to check);
//! `gpu-check.sh` reports that as "skipped", never as parity.

use std::sync::mpsc::{channel, Receiver, Sender};
use std::time::{Duration, Instant};

use half::{bf16, f16};
use ponder_kernels::attention::{paged_attention, AttentionParams, PrefixGroup};
use ponder_kernels::cuda::cudarc::driver::{result, sys, CudaSlice, DeviceRepr};
use ponder_kernels::cuda::{CudaError, CudaKernels, CudaPagedKv, Grouping, SeqSpan};
use ponder_kernels::kv::{append, copy_blocks, KvElem, KvLayout};
use rand::seq::SliceRandom;
use rand::Rng;

use crate::cascade::{as_groups, edge_batch, Fixture, ATTN_TOL, GEOMETRIES};
use crate::common::rng;
use crate::kv::LAYOUTS;

mod decoder_ops;

fn kernels(test: &str) -> Option<CudaKernels> {
    match CudaKernels::new(0) {
        Ok(k) => Some(k),
        Err(e) => {
            eprintln!("{test}: skipped, no usable GPU: {e}");
            println!(
                "GPU_CHECK {{\"test\": \"{test}\", \"skipped\": true, \"reason\": {}}}",
                json_str(&e.to_string())
            );
            None
        }
    }
}

/// `s` as a JSON string literal.
fn json_str(s: &str) -> String {
    let mut out = String::from('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn check<T>(r: Result<T, CudaError>, what: &str) -> T {
    r.unwrap_or_else(|e| panic!("{what}: {e}"))
}

fn max_err(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

/// The fixture's KV rounded through `T`, so the CPU sees exactly what the GPU holds.
fn round_kv<T: KvElem>(f: &mut Fixture) {
    for x in f.k.iter_mut().chain(f.v.iter_mut()) {
        *x = T::from_f32(*x).to_f32();
    }
}

struct OnDevice<T> {
    k: CudaSlice<T>,
    v: CudaSlice<T>,
    q: CudaSlice<f32>,
}

fn upload<T: KvElem + DeviceRepr>(kern: &CudaKernels, f: &Fixture) -> OnDevice<T> {
    let s = kern.stream();
    let conv = |x: &[f32]| x.iter().map(|&v| T::from_f32(v)).collect::<Vec<T>>();
    let q: Vec<f32> = f.seqs.iter().flat_map(|s| s.0.iter().copied()).collect();
    OnDevice {
        k: check(
            s.clone_htod(&conv(&f.k)).map_err(CudaError::from),
            "upload k",
        ),
        v: check(
            s.clone_htod(&conv(&f.v)).map_err(CudaError::from),
            "upload v",
        ),
        q: check(s.clone_htod(&q).map_err(CudaError::from), "upload q"),
    }
}

fn spans(f: &Fixture) -> Vec<SeqSpan<'_>> {
    let row = f.num_heads * f.head_dim;
    f.seqs
        .iter()
        .map(|(q, table, start)| SeqSpan {
            len: q.len() / row,
            block_table: table,
            start_pos: *start,
        })
        .collect()
}

/// Max error of GPU attention against the reference, over every way of calling it: auto
/// grouping (one-shot), explicit groups, ungrouped, and plans (every shared run grouped; none)
/// launched for three "layers" each (the cache, the cache with K and V swapped, the cache
/// again), which checks that a plan's scratch and merge counters are reusable run after run.
fn attention_case<T: KvElem + DeviceRepr>(
    kern: &CudaKernels,
    f: &mut Fixture,
    groups: &[PrefixGroup<'_>],
) -> f32 {
    round_kv::<T>(f);
    let want = f.reference();
    std::mem::swap(&mut f.k, &mut f.v);
    let want_swapped = f.reference();
    std::mem::swap(&mut f.k, &mut f.v);
    let d = upload::<T>(kern, f);
    let kv = CudaPagedKv {
        k: &d.k,
        v: &d.v,
        block_size: f.block_size,
        num_kv_heads: f.num_kv_heads,
        head_dim: f.head_dim,
    };
    let swapped = CudaPagedKv {
        k: &d.v,
        v: &d.k,
        ..kv
    };
    let (sp, p) = (spans(f), f.params());
    let s = kern.stream();
    let alloc = || {
        check(
            s.alloc_zeros::<f32>(f.out_len()).map_err(CudaError::from),
            "alloc out",
        )
    };
    let download =
        |out: &CudaSlice<f32>| check(s.clone_dtoh(out).map_err(CudaError::from), "download out");
    let mut cpu = vec![0f32; f.out_len()];
    let cpu_stats = paged_attention(&f.kv(), &f.queries(), &p, &mut cpu).expect("cpu");
    let mut worst = 0f32;
    for mode in 0..3 {
        let mut out = alloc();
        match mode {
            0 => {
                let stats = check(
                    kern.paged_attention(&kv, &d.q, &sp, &p, &mut out),
                    "paged_attention",
                );
                // Auto may decline groups that would not pay: it saves at most the CPU's
                // loads, and counts the same blocks in all.
                assert!(stats.shared_block_reads_saved <= cpu_stats.shared_block_reads_saved);
                assert_eq!(
                    stats.kv_blocks_read + stats.shared_block_reads_saved,
                    cpu_stats.kv_blocks_read + cpu_stats.shared_block_reads_saved
                );
            }
            1 => check(
                kern.cascade_attention(&kv, &d.q, &sp, groups, &p, &mut out),
                "cascade_attention",
            ),
            _ => check(
                kern.cascade_attention(&kv, &d.q, &sp, &[], &p, &mut out),
                "ungrouped",
            ),
        }
        worst = worst.max(max_err(&download(&out), &want));
    }
    for grouping in [Grouping::Always, Grouping::Off] {
        let mut plan = check(
            kern.plan_attention(&kv, &sp, &p, grouping),
            "plan_attention",
        );
        if matches!(grouping, Grouping::Always) {
            assert_eq!(
                plan.stats(),
                cpu_stats,
                "block-load stats differ from the CPU's"
            );
        }
        for (layer, want) in [(&kv, &want), (&swapped, &want_swapped), (&kv, &want)] {
            let mut out = alloc();
            check(
                kern.run_attention(&mut plan, layer, &d.q, &mut out),
                "run_attention",
            );
            worst = worst.max(max_err(&download(&out), want));
        }
    }
    worst
}

fn attention_all<T: KvElem + DeviceRepr>(kern: &CudaKernels, seed: u64) -> (f32, usize) {
    let mut rng = rng(seed);
    let (mut worst, mut cases) = (0f32, 0);
    for (geom, bs) in GEOMETRIES {
        let (mut f, groups) = edge_batch(&mut rng, geom, bs);
        worst = worst.max(attention_case::<T>(kern, &mut f, &as_groups(&groups)));
        cases += 1;
    }
    // Decode steps the cascade exists for: 16 branches over a long prompt, two geometries.
    // Head dim 256 takes the widest kernels (`paged_partial_*_d8_v`, `cascade_prefix_*_d256`).
    for (geom, bs, prefix) in [
        ((9, 3, 64), 16, 512),
        ((32, 8, 128), 16, 2048),
        ((8, 2, 256), 16, 520usize),
    ] {
        let mut f = Fixture::new(&mut rng, prefix.div_ceil(bs) + 16 * 3 + 8, bs, geom);
        let pre = f.blocks(prefix.div_ceil(bs));
        let members: Vec<usize> = (0..16)
            .map(|b| f.add(&mut rng, &pre, prefix + 16 + b, 1))
            .collect();
        let groups = [PrefixGroup {
            members: &members,
            prefix_len: prefix,
        }];
        worst = worst.max(attention_case::<T>(kern, &mut f, &groups));
        cases += 1;
    }
    (worst, cases)
}

#[test]
fn gpu_attention_matches_cpu_reference() {
    let Some(kern) = kernels("attention") else {
        return;
    };
    let (f32_err, n) = attention_all::<f32>(&kern, 70);
    let (f16_err, _) = attention_all::<f16>(&kern, 71);
    let (bf16_err, _) = attention_all::<bf16>(&kern, 72);
    let worst = f32_err.max(f16_err).max(bf16_err);
    println!(
        "GPU_CHECK {{\"test\": \"attention\", \"ok\": {}, \"cases_per_dtype\": {n}, \"modes\": [\"auto\", \"groups\", \"ungrouped\", \"plan_reused\"], \"max_abs_err\": {{\"f32\": {f32_err:e}, \"f16\": {f16_err:e}, \"bf16\": {bf16_err:e}}}, \"tol\": {ATTN_TOL:e}}}",
        worst <= ATTN_TOL
    );
    assert!(
        worst <= ATTN_TOL,
        "attention: max error {worst} > {ATTN_TOL}"
    );
}

fn kv_case<T: KvElem + DeviceRepr + PartialEq>(kern: &CudaKernels, seed: u64) -> usize {
    let mut rng = rng(seed);
    let s = kern.stream();
    let mut cases = 0;
    for l in LAYOUTS {
        let num_blocks = 64;
        let n = num_blocks * l.block_size * l.num_kv_heads * l.head_dim;
        let init: Vec<T> = (0..n)
            .map(|_| T::from_f32(rng.random_range(-4.0..4.0)))
            .collect();
        let mut all: Vec<u32> = (0..(num_blocks * l.block_size) as u32).collect();
        all.shuffle(&mut rng);
        let slots = &all[..3 * l.block_size + 1];
        let m = slots.len() * l.num_kv_heads * l.head_dim;
        let k_new: Vec<f32> = (0..m).map(|_| rng.random_range(-3.0..3.0)).collect();
        let v_new: Vec<f32> = (0..m).map(|_| rng.random_range(-3.0..3.0)).collect();
        let pairs: Vec<(u32, u32)> = (0..8).map(|i| (i, 63 - i)).collect();
        let (mut k, mut v) = (init.clone(), init.clone());
        append(&l, &mut k, &mut v, &k_new, &v_new, slots).expect("cpu append");
        copy_blocks(&l, &mut k, &mut v, &pairs).expect("cpu copy");
        let up = |x: &[T]| check(s.clone_htod(x).map_err(CudaError::from), "upload");
        let (mut kd, mut vd) = (up(&init), up(&init));
        let kn = check(s.clone_htod(&k_new).map_err(CudaError::from), "upload");
        let vn = check(s.clone_htod(&v_new).map_err(CudaError::from), "upload");
        check(
            kern.kv_append(&l, &mut kd, &mut vd, &kn, &vn, slots),
            "kv_append",
        );
        check(
            kern.kv_copy_blocks(&l, &mut kd, &mut vd, &pairs),
            "kv_copy_blocks",
        );
        let kg = check(s.clone_dtoh(&kd).map_err(CudaError::from), "download");
        let vg = check(s.clone_dtoh(&vd).map_err(CudaError::from), "download");
        assert!(
            kg == k && vg == v,
            "{:?} {l:?}: GPU cache differs from the CPU's",
            T::DTYPE
        );
        cases += 1;
    }
    cases
}

#[test]
fn gpu_kv_append_and_copy_equal_cpu_bitwise() {
    let Some(kern) = kernels("kv_cache") else {
        return;
    };
    let n = kv_case::<f32>(&kern, 80) + kv_case::<f16>(&kern, 81) + kv_case::<bf16>(&kern, 82);
    println!(
        "GPU_CHECK {{\"test\": \"kv_cache\", \"ok\": true, \"cases\": {n}, \"bitwise\": true}}"
    );
}

#[test]
fn gpu_bad_arguments_are_typed_errors_before_launch() {
    let Some(kern) = kernels("errors") else {
        return;
    };
    let mut rng = rng(95);
    let mut f = Fixture::new(&mut rng, 8, 4, (4, 2, 16));
    f.add(&mut rng, &[], 5, 1);
    f.seqs[0].1[1] = 99;
    let d = upload::<f32>(&kern, &f);
    let kv = CudaPagedKv {
        k: &d.k,
        v: &d.v,
        block_size: 4,
        num_kv_heads: 2,
        head_dim: 16,
    };
    let mut out = check(
        kern.stream()
            .alloc_zeros::<f32>(f.out_len())
            .map_err(CudaError::from),
        "alloc",
    );
    let err = kern
        .paged_attention(&kv, &d.q, &spans(&f), &f.params(), &mut out)
        .expect_err("block 99");
    assert!(err.to_string().contains("block_table[1]"), "{err}");
    let params = AttentionParams {
        num_heads: 3,
        scale: 1.0,
    };
    assert!(kern
        .paged_attention(&kv, &d.q, &spans(&f), &params, &mut out)
        .is_err());
    // A plan run with arguments of another shape is a typed error, not a launch.
    let mut f = Fixture::new(&mut rng, 8, 4, (4, 2, 16));
    f.add(&mut rng, &[], 5, 1);
    let d = upload::<f32>(&kern, &f);
    let kv = CudaPagedKv {
        k: &d.k,
        v: &d.v,
        block_size: 4,
        num_kv_heads: 2,
        head_dim: 16,
    };
    let mut plan = check(
        kern.plan_attention(&kv, &spans(&f), &f.params(), Grouping::Auto),
        "plan",
    );
    let mut short = check(
        kern.stream().alloc_zeros::<f32>(8).map_err(CudaError::from),
        "alloc",
    );
    assert!(matches!(
        kern.run_attention(&mut plan, &kv, &d.q, &mut short),
        Err(CudaError::PlanMismatch {
            arg: "out",
            planned: 64,
            got: 8
        })
    ));
    let layout = KvLayout {
        block_size: 4,
        num_kv_heads: 2,
        head_dim: 16,
    };
    let (mut k, mut v) = (d.k.clone(), d.v.clone());
    assert!(kern
        .kv_copy_blocks(&layout, &mut k, &mut v, &[(0, 8)])
        .is_err());
    println!("GPU_CHECK {{\"test\": \"errors\", \"ok\": true}}");
}

/// Median host microseconds of `iters` calls of `f` after a warm-up, each followed by a sync.
fn host_us(kern: &CudaKernels, iters: usize, mut f: impl FnMut()) -> f64 {
    f();
    check(kern.stream().synchronize().map_err(CudaError::from), "sync");
    let mut t: Vec<f64> = (0..iters)
        .map(|_| {
            let start = Instant::now();
            f();
            check(kern.stream().synchronize().map_err(CudaError::from), "sync");
            start.elapsed().as_secs_f64() * 1e6
        })
        .collect();
    t.sort_by(f64::total_cmp);
    t[t.len() / 2]
}

/// Holds the stream until the returned sender is sent to or dropped (or 30 s pass): a host
/// callback queued on the stream that waits on a channel, as cudarc's own event tests do.
#[allow(unsafe_code)]
fn hold_stream(kern: &CudaKernels) -> Sender<()> {
    unsafe extern "C" fn wait_for_release(data: *mut std::ffi::c_void) {
        // SAFETY: `data` is the `Box<Receiver>` leaked below, handed to this callback alone;
        // the callback makes no CUDA calls.
        let receiver = unsafe { Box::from_raw(data.cast::<Receiver<()>>()) };
        let _ = receiver.recv_timeout(Duration::from_secs(30));
    }
    let (release, receiver) = channel::<()>();
    let receiver = Box::into_raw(Box::new(receiver));
    check(
        kern.context().bind_to_thread().map_err(CudaError::from),
        "bind context",
    );
    // SAFETY: the stream is live for the call; the callback owns `receiver` from here on.
    let launched = unsafe {
        result::stream::launch_host_function(
            kern.stream().cu_stream(),
            wait_for_release,
            receiver.cast(),
        )
    };
    if let Err(e) = launched {
        // SAFETY: a failed launch did not hand `receiver` to the callback.
        unsafe { drop(Box::from_raw(receiver)) };
        panic!("cuLaunchHostFunc: {e}");
    }
    release
}

/// GPU microseconds per call of `f` (CUDA events around `iters` calls after 10 warm-ups),
/// every call queued while the stream is held, so the GPU runs them back to back and host
/// launch overhead stays out of the measurement; and host microseconds per call to queue one.
fn gpu_us(kern: &CudaKernels, iters: usize, mut f: impl FnMut()) -> (f64, f64) {
    for _ in 0..10 {
        f();
    }
    let ctx = kern.context();
    let event = || {
        check(
            ctx.new_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT))
                .map_err(CudaError::from),
            "event",
        )
    };
    let (start, end) = (event(), event());
    let release = hold_stream(kern);
    check(
        start.record(kern.stream()).map_err(CudaError::from),
        "record",
    );
    let queued = Instant::now();
    for _ in 0..iters {
        f();
    }
    let queue_us = queued.elapsed().as_secs_f64() * 1e6 / iters as f64;
    check(end.record(kern.stream()).map_err(CudaError::from), "record");
    let _ = release.send(());
    let ms = check(start.elapsed_ms(&end).map_err(CudaError::from), "elapsed");
    (f64::from(ms) * 1e3 / iters as f64, queue_us)
}

/// Timing, not a check: one decode step of `branches` sequences sharing a prompt, bf16 KV.
/// Per case: the host cost of planning (grouping, metadata upload, scratch), paid once per
/// step; the GPU time of one run (one layer) with the prefix attended once (`cascade`: every
/// shared run grouped), by every branch (`ungrouped`), and as `Grouping::Auto` chooses; the
/// old one-shot call (plan + run + sync per call) for comparison with earlier reports; and
/// the largest difference between the two paths' outputs. `gpu-check.sh` runs it.
#[test]
#[ignore = "timing; run by scripts/gpu-check.sh"]
fn gpu_bench_shared_prefix_decode() {
    const ITERS: usize = 200;
    let Some(kern) = kernels("bench") else { return };
    let mut rng = rng(99);
    let mut results = Vec::new();
    for (name, geom, branches, prefix) in [
        ("smollm2-135m", (9, 3, 64), 16, 512),
        ("llama3-8b", (32, 8, 128), 16, 4096),
        ("llama3-8b", (32, 8, 128), 64, 4096),
        ("llama3-8b", (32, 8, 128), 64, 8192),
    ] {
        let bs = 16;
        let mut f = Fixture::new(&mut rng, prefix / bs + branches * 6 + 8, bs, geom);
        let pre = f.blocks(prefix / bs);
        for b in 0..branches {
            f.add(&mut rng, &pre, prefix + 16 + b, 1);
        }
        let d = upload::<bf16>(&kern, &f);
        let kv = CudaPagedKv {
            k: &d.k,
            v: &d.v,
            block_size: bs,
            num_kv_heads: f.num_kv_heads,
            head_dim: f.head_dim,
        };
        let (sp, p) = (spans(&f), f.params());
        let alloc = || {
            check(
                kern.stream()
                    .alloc_zeros::<f32>(f.out_len())
                    .map_err(CudaError::from),
                "alloc",
            )
        };
        let plan = |g: Grouping<'_>| check(kern.plan_attention(&kv, &sp, &p, g), "plan");
        let plan_us = host_us(&kern, 20, || drop(plan(Grouping::Always)));
        let plan_off_us = host_us(&kern, 20, || drop(plan(Grouping::Off)));
        let mut cascade = plan(Grouping::Always);
        let mut flat = plan(Grouping::Off);
        let mut auto = plan(Grouping::Auto);
        let (mut out_c, mut out_f, mut out_a) = (alloc(), alloc(), alloc());
        let (cascade_us, queue_us) = gpu_us(&kern, ITERS, || {
            check(
                kern.run_attention(&mut cascade, &kv, &d.q, &mut out_c),
                "run",
            );
        });
        let (flat_us, _) = gpu_us(&kern, ITERS, || {
            check(kern.run_attention(&mut flat, &kv, &d.q, &mut out_f), "run");
        });
        let (auto_us, _) = gpu_us(&kern, ITERS, || {
            check(kern.run_attention(&mut auto, &kv, &d.q, &mut out_a), "run");
        });
        let oneshot_us = host_us(&kern, 20, || {
            check(
                kern.paged_attention(&kv, &d.q, &sp, &p, &mut out_a),
                "paged_attention",
            );
        });
        let get = |out: &CudaSlice<f32>| {
            check(
                kern.stream().clone_dtoh(out).map_err(CudaError::from),
                "download",
            )
        };
        let diff = max_err(&get(&out_c), &get(&out_f));
        let (lc, lf) = (cascade.layout(), flat.layout());
        results.push(format!(
            "{{\"case\": \"{name}\", \"branches\": {branches}, \"prefix\": {prefix}, \"kv\": \"bf16\", \"iters\": {ITERS}, \"plan_us\": {plan_us:.1}, \"plan_ungrouped_us\": {plan_off_us:.1}, \"cascade_us\": {cascade_us:.2}, \"ungrouped_us\": {flat_us:.2}, \"speedup\": {:.2}, \"auto_grouped\": {}, \"auto_us\": {auto_us:.2}, \"cascade_queue_us\": {queue_us:.2}, \"oneshot_auto_us\": {oneshot_us:.1}, \"cascade_layout\": {{\"prefix_split\": {}, \"prefix_ctas\": {}, \"suffix_split\": {}, \"suffix_ctas\": {}, \"launches\": {}}}, \"ungrouped_layout\": {{\"split\": {}, \"ctas\": {}}}, \"max_abs_diff\": {diff:e}}}",
            flat_us / cascade_us,
            auto.layout().groups > 0,
            lc.prefix_split,
            lc.prefix_ctas,
            lc.suffix_split,
            lc.suffix_ctas,
            lc.launches,
            lf.suffix_split,
            lf.suffix_ctas,
        ));
    }
    println!(
        "GPU_CHECK {{\"test\": \"bench_shared_prefix_decode\", \"ok\": true, \"timing\": \"cuda events per run, runs queued back to back; plan_us host\", \"results\": [{}]}}",
        results.join(", ")
    );
}
