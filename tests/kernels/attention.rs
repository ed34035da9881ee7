use super::common::*;
use wginfer::ops::attention::{
    split_for, Attention, AttnBuffers, AttnKind, AttnOptions, AttnStep, Thresholds, COOP_MIN_ROWS_PER_TILE,
};
use wginfer::ops::attention_coop;
use wginfer::ops::attention_grouped::AttentionGrouped;
use wginfer::ops::attention_plain::{AttentionPlain, PlainShape};
use wginfer::ops::attention_split::{self, AttentionSplit};
use wginfer::ops::linear::GEMV_MAX_ROWS;
use wginfer::ops::qkv_rope::HeadShape;

/// Attention of every row of `seqs` (in order) over its own sequence's positions lo..=pos (the
/// last `opts.window` of them at most), keys and values found where `TestSeq::slot` puts them.
fn attention_ref(
    q: &[f32],
    kc: &[f32],
    vc: &[f32],
    h: &HeadShape,
    opts: AttnOptions,
    seqs: &[TestSeq],
    block: usize,
) -> Vec<f32> {
    let (hq, hkv, hd) = (h.n_heads as usize, h.n_kv_heads as usize, h.head_dim as usize);
    let scale = f64::from(opts.scale);
    let rows: Vec<(&TestSeq, usize)> = seqs.iter().flat_map(|s| (0..s.rows).map(move |t| (s, s.start + t))).collect();
    let mut o = vec![0.0f32; rows.len() * hq * hd];
    for (t, (s, pos)) in rows.into_iter().enumerate() {
        for head in 0..hq {
            let kvh = head / (hq / hkv);
            let qv = &q[(t * hq + head) * hd..][..hd];
            let lo = opts.window.map_or(s.lo, |w| s.lo.max((pos + 1).saturating_sub(w as usize)));
            let slots: Vec<usize> = (lo..=pos).map(|p| s.slot(p, block)).collect();
            let scores: Vec<f64> = slots
                .iter()
                .map(|&slot| {
                    let kv = &kc[(slot * hkv + kvh) * hd..][..hd];
                    qv.iter().zip(kv).map(|(a, b)| *a as f64 * *b as f64).sum::<f64>() * scale
                })
                .collect();
            let mx = scores.iter().cloned().fold(f64::MIN, f64::max);
            let e: Vec<f64> = scores.iter().map(|v| (v - mx).exp()).collect();
            let sum: f64 = e.iter().sum();
            for d in 0..hd {
                let acc: f64 = slots.iter().zip(&e).map(|(&slot, w)| w * vc[(slot * hkv + kvh) * hd + d] as f64).sum();
                o[(t * hq + head) * hd + d] = (acc / sum) as f32;
            }
        }
    }
    o
}

/// Runs every kernel the adapter has on one step made of `seqs` over a cache of `n_blocks`
/// blocks of `block` positions, and compares each with the CPU (the tensor-core kernel, which
/// rounds Q, K, V and the softmax weights to f16, within an f16 tolerance).
fn check(h: HeadShape, seqs: &[TestSeq], block: usize, n_blocks: usize) {
    check_with(h, AttnOptions::full(&h), seqs, block, n_blocks);
}

fn check_with(h: HeadShape, opts: AttnOptions, seqs: &[TestSeq], block: usize, n_blocks: usize) {
    for kv in [KvType::F32, KvType::F16] {
        check_caches(h, opts, seqs, (block, n_blocks), kv);
    }
}

/// `check_with` over caches of `kv` values.
fn check_caches(h: HeadShape, opts: AttnOptions, seqs: &[TestSeq], (block, n_blocks): (usize, usize), kv: KvType) {
    let gpu = gpu();
    let rows: usize = seqs.iter().map(|s| s.rows).sum();
    let (qn, kvn) = (h.q_dim() as usize, h.kv_dim() as usize);
    let q: Vec<f32> = random(rows * qn, 30).iter().map(|v| v * 3.0).collect();
    let (kb, kc) = upload_kv(gpu, &random(n_blocks * block * kvn, 31), kv);
    let (vb, vc) = upload_kv(gpu, &random(n_blocks * block * kvn, 32), kv);
    let (qb, ob) = (upload(gpu, &q), zeros(gpu, rows * qn));
    let plan = test_plan(gpu, seqs, block, &[], attention_coop::tile_rows(&gpu.caps, h.head_dim));
    let want = attention_ref(&q, &kc, &vc, &h, opts, seqs, block);
    let context = seqs.iter().map(|s| (s.start + s.rows - s.lo) as u32).max().unwrap();
    // Where the adapter has f16, o is also written as f16 rows (`AttnOptions::o_f16`) in steps of
    // more than GEMV_MAX_ROWS rows, by every kernel that serves them: their o projection reads it.
    let o16 = gpu.caps.shader_f16.then(|| gpu.storage("o f16", (rows * qn * 2).next_multiple_of(4) as u64).unwrap());
    let opts = AttnOptions { o_f16: o16.is_some(), ..opts };
    let bufs = AttnBuffers { q: &qb, k_cache: &kb, v_cache: &vb, kv, o: &ob, plan: &plan, o_f16: o16.as_ref() };
    let att = Attention::new(gpu, &h, opts, Thresholds::all(context), &bufs).unwrap();
    // A step of one row per tile (decode rows) is routed by its context: short ones to the
    // plain kernel, or with enough rows to the grouped-heads one where the adapter takes it.
    let step = AttnStep { rows: rows as u32, context, tiles: plan.tiles };
    let decode = AttnStep { tiles: rows as u32, ..step };
    assert!(matches!(att.route(decode), AttnKind::Plain | AttnKind::Grouped), "{decode:?}");
    if h.n_heads > h.n_kv_heads {
        assert_eq!(att.route(AttnStep { rows: 1, context, tiles: 1 }), AttnKind::Plain);
    }
    // Past the threshold: the split kernel where the adapter takes it for the step's rows.
    let split = match rows as u32 <= attention_split::MAX_ROWS && split_for(&gpu.caps) {
        true => AttentionSplit::new(gpu, &h, opts, &bufs).unwrap(),
        false => None,
    };
    let long = if split.is_some() { AttnKind::Split } else { AttnKind::Flash };
    assert_eq!(att.route(AttnStep { context: context + 1, ..decode }), long, "{decode:?}");
    // Each kernel starts from NaN outputs, so one that leaves a value unwritten fails.
    let past_gemv = rows as u32 > GEMV_MAX_ROWS;
    let run = |label: String, tol: f32, copy: bool, record: &dyn Fn(&mut wgpu::ComputePass<'_>)| {
        gpu.queue.write_buffer(&ob, 0, bytemuck::cast_slice(&vec![f32::NAN; rows * qn]));
        gpu.run_pass(|p| record(p)).unwrap();
        assert_close(&read(gpu, &ob, rows * qn), &want, tol, &label);
        if let (Some(o16), true) = (&o16, copy) {
            assert_f16_copy_of(gpu, &ob, o16, rows * qn, &label);
        }
    };
    // Flash twice: a split decode step must leave its merge counters ready for the next.
    let mut kinds = vec![AttnKind::Plain, AttnKind::Flash, AttnKind::Flash];
    if att.has_coop() {
        let full_tiles = step.rows >= COOP_MIN_ROWS_PER_TILE * step.tiles;
        assert_eq!(att.route(step) == AttnKind::Coop, full_tiles, "{step:?}");
        kinds.push(AttnKind::Coop);
    }
    // The grouped-heads kernel, whichever kernel the router gives short contexts here.
    let label = |kind: &str| format!("{kind} {kv:?} {h:?} {opts:?} {} sequences, block {block}", seqs.len());
    if let Some(grouped) = AttentionGrouped::new(gpu, &h, opts, context, &bufs).unwrap() {
        run(label("Grouped"), 1e-4, past_gemv, &|p| grouped.record(p, rows as u32));
    }
    // Both variants of the plain kernel, whichever the adapter's steps of these rows take, with
    // bitwise equal outputs (a sequence's rows change variant with the batch's size).
    let mut variants = Vec::new();
    for few_rows in [false, true] {
        let shape = PlainShape { few_rows, ..PlainShape::for_adapter(&gpu.caps, h.head_dim) };
        if shape.fits(&gpu.caps, h.head_dim, context, 1) {
            let plain = AttentionPlain::kernel(gpu, &h, opts, context, &bufs, shape).unwrap();
            // The few-rows variant serves GEMV rows only.
            let copy = past_gemv && !few_rows;
            run(label(&format!("Plain {shape:?}")), 1e-4, copy, &|p| plain.record(p, [h.n_heads, rows as u32, 1]));
            variants.push(read(gpu, &ob, rows * qn).iter().map(|v| v.to_bits()).collect::<Vec<_>>());
        }
    }
    assert!(variants.windows(2).all(|w| w[0] == w[1]), "{}: the plain kernel's variants differ", label("Plain"));
    // The split kernel on steps of as few rows as the router gives it, on every adapter (GPUs
    // do not route to it); twice, as the flash kernel.
    let split = split.or_else(|| match rows as u32 <= attention_split::MAX_ROWS {
        true => AttentionSplit::new(gpu, &h, opts, &bufs).unwrap(),
        false => None,
    });
    if let Some(split) = split {
        for _ in 0..2 {
            run(label("Split"), 1e-4, false, &|p| split.record(p, rows as u32, context));
        }
    }
    for kind in kinds {
        let tol = if kind == AttnKind::Coop { 4e-3 } else { 1e-4 };
        run(label(&format!("{kind:?}")), tol, past_gemv, &|p| att.record(p, kind, step));
    }
}

/// One sequence in a ring slot of `cap` positions (one block).
fn ring(rows: usize, start: usize, lo: usize) -> TestSeq {
    TestSeq { rows, start, lo, blocks: vec![0] }
}

#[test]
fn grouped_query_heads_over_several_tiles() {
    // 605 positions: three tiles of the flash kernel.
    check(HeadShape { n_heads: 8, n_kv_heads: 2, head_dim: 16 }, &[ring(5, 600, 0)], 700, 1);
}

#[test]
fn one_kv_head_wide_heads() {
    check(HeadShape { n_heads: 3, n_kv_heads: 1, head_dim: 80 }, &[ring(1, 70, 0)], 100, 1);
}

#[test]
fn ring_wrapped_window() {
    // 50 slots, positions 60..63: the oldest still held is 13.
    check(HeadShape { n_heads: 4, n_kv_heads: 4, head_dim: 8 }, &[ring(3, 60, 13)], 50, 1);
}

#[test]
fn decode_split_over_many_workgroups() {
    // One token seeing 1401 positions: the flash kernel spreads them over workgroups per head
    // (22 tiles of 64 positions where subgroups give 2 lanes per score, else 11 of 128) and
    // merges; a ring-wrapped 1000-position window; 3601 positions of head_dim 80 (57 splits,
    // or 15), more than the merge's 12 thread groups of 20 (256 threads, 16 in none); 4201
    // positions (67 splits: three rounds of the merge's loads, 32 splits each); head_dim 128 (a
    // tile's V values 8 a thread where 4 lanes score).
    check(HeadShape { n_heads: 6, n_kv_heads: 2, head_dim: 32 }, &[ring(1, 1400, 0)], 1500, 1);
    check(HeadShape { n_heads: 4, n_kv_heads: 1, head_dim: 64 }, &[ring(1, 2500, 1501)], 1000, 1);
    check(HeadShape { n_heads: 2, n_kv_heads: 1, head_dim: 80 }, &[ring(1, 3600, 0)], 3700, 1);
    check(HeadShape { n_heads: 2, n_kv_heads: 1, head_dim: 64 }, &[ring(1, 4200, 0)], 4300, 1);
    check(HeadShape { n_heads: 2, n_kv_heads: 2, head_dim: 128 }, &[ring(1, 2000, 0)], 2100, 1);
}

/// Decode rows of several sequences at long and short contexts split together: the split
/// kernel spreads each row over as many workgroups as the longest needs, the shorter rows'
/// extra splits hold no positions.
#[test]
fn decode_rows_of_several_lengths_split() {
    let h = HeadShape { n_heads: 14, n_kv_heads: 2, head_dim: 64 };
    let seqs = [
        TestSeq { rows: 1, start: 2100, lo: 0, blocks: (0..34).collect() },
        TestSeq { rows: 1, start: 40, lo: 0, blocks: vec![40] },
        TestSeq { rows: 1, start: 700, lo: 400, blocks: (34..40).rev().collect() },
    ];
    check(h, &seqs, 64, 41);
}

#[test]
fn rows_of_several_sequences_in_scattered_blocks() {
    // A paged pool of 40 blocks of 16: a prompt chunk continuing at 30, a decode token at 300
    // (its 19 blocks out of order), a fresh 7-token prompt; each row sees only its own.
    let h = HeadShape { n_heads: 4, n_kv_heads: 2, head_dim: 16 };
    let scattered: Vec<u32> = (0..19).map(|b| (b * 7 + 3) % 40).collect();
    let seqs = [
        TestSeq { rows: 4, start: 30, lo: 0, blocks: vec![21, 5, 39] },
        TestSeq { rows: 1, start: 300, lo: 0, blocks: scattered },
        TestSeq { rows: 7, start: 0, lo: 0, blocks: vec![1] },
    ];
    check(h, &seqs, 16, 40);
}

#[test]
fn ring_slots_of_several_sequences() {
    // Three slots of 64 positions: one sequence wrapped (positions 70..72 see 9..), one short,
    // one decoding at its last position.
    let h = HeadShape { n_heads: 2, n_kv_heads: 1, head_dim: 32 };
    let seqs = [
        TestSeq { rows: 3, start: 70, lo: 9, blocks: vec![2] },
        TestSeq { rows: 2, start: 0, lo: 0, blocks: vec![0] },
        TestSeq { rows: 1, start: 63, lo: 0, blocks: vec![1] },
    ];
    check(h, &seqs, 64, 3);
}

/// A local layer (Gemma 3): each row sees the last 16 positions at most, scores scaled by its
/// own factor; a prompt chunk crossing the window, a decode token far past it (the flash kernel
/// split over what the window holds), a short prompt inside it, and a ring-wrapped slot whose
/// oldest held position is newer than the window's start.
#[test]
fn local_layer_window_and_scale() {
    let h = HeadShape { n_heads: 4, n_kv_heads: 2, head_dim: 32 };
    let opts = AttnOptions { scale: 0.2, window: Some(16), o_f16: false };
    let seqs = [
        TestSeq { rows: 20, start: 5, lo: 0, blocks: vec![0, 1] },
        TestSeq { rows: 1, start: 700, lo: 0, blocks: (2..46).collect() },
        TestSeq { rows: 7, start: 0, lo: 0, blocks: vec![46] },
    ];
    check_with(h, opts, &seqs, 16, 47);
    check_with(h, opts, &[ring(3, 60, 50)], 50, 1);
}

/// Prompt chunks of several query tiles (the tensor-core kernel's workgroups): Qwen2.5-0.5B's
/// heads, a 150-row chunk continuing at 40 in scattered paged blocks beside a decode row and a
/// fresh 37-row prompt; head_dim 128 over a ring slot; a chunk whose positions wrap around a
/// 64-slot ring; a local layer's window inside the tiles.
#[test]
fn prompt_chunks_of_many_tiles() {
    let h = HeadShape { n_heads: 14, n_kv_heads: 2, head_dim: 64 };
    let scattered: Vec<u32> = (0..13).map(|b| (b * 5 + 2) % 30).collect();
    let seqs = [
        TestSeq { rows: 150, start: 40, lo: 0, blocks: scattered },
        TestSeq { rows: 1, start: 90, lo: 0, blocks: (13..19).collect() },
        TestSeq { rows: 37, start: 0, lo: 0, blocks: vec![27, 28, 29] },
    ];
    check(h, &seqs, 16, 30);
    check(HeadShape { n_heads: 4, n_kv_heads: 1, head_dim: 128 }, &[ring(100, 300, 250)], 400, 1);
    // Positions 90..129 in 64 slots: the oldest still held is 66.
    check(HeadShape { n_heads: 4, n_kv_heads: 2, head_dim: 32 }, &[ring(40, 90, 66)], 64, 1);
    let opts = AttnOptions { scale: 0.1, window: Some(40), o_f16: false };
    check_with(HeadShape { n_heads: 2, n_kv_heads: 1, head_dim: 64 }, opts, &[ring(90, 10, 0)], 128, 1);
}
