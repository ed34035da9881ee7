use super::common::*;
use wginfer::ops::linear::LinearConfig;
use wginfer::ops::qk_norm::QkNorm;
use wginfer::ops::qkv_rope::{fused_row_order, pair_order, HeadShape, QkvBuffers, QkvRope};
use wginfer::ops::weight::gather_rows;
use wginfer::ops::{Weight, WeightType};

/// HF's rotate-half RoPE on one head vector.
pub fn rope_ref(v: &[f32], pos: usize, inv_freq: &[f32]) -> Vec<f32> {
    let half = v.len() / 2;
    let mut out = v.to_vec();
    for i in 0..half {
        let th = pos as f32 * inv_freq[i];
        let (s, c) = th.sin_cos();
        out[i] = v[i] * c - v[i + half] * s;
        out[i + half] = v[i + half] * c + v[i] * s;
    }
    out
}

/// Position in pair-adjacent order of element d of a head.
pub fn paired(d: usize, hd: usize) -> usize {
    if d < hd / 2 {
        2 * d
    } else {
        2 * (d - hd / 2) + 1
    }
}

/// One step of `seqs`' rows over a cache of `n_blocks` blocks of `block` positions: q rotated
/// at each row's position, k and v written to the slot of its own sequence; with `qk_norm`,
/// each q and k head RMS-normalized with its own weight before the rotation (Qwen3).
fn check(seqs: &[TestSeq], block: usize, n_blocks: usize, with_bias: bool, qk_norm: bool) {
    for kv in [KvType::F32, KvType::F16] {
        check_caches(seqs, (block, n_blocks), with_bias, qk_norm, kv);
    }
}

/// `check` writing caches of `kv` values (f16: each value within its rounding).
fn check_caches(seqs: &[TestSeq], (block, n_blocks): (usize, usize), with_bias: bool, qk_norm: bool, kv: KvType) {
    let gpu = gpu();
    let h = HeadShape { n_heads: 4, n_kv_heads: 2, head_dim: 8 };
    let (hd, qn, kvn, k) = (8usize, 32usize, 16usize, 40usize);
    let n = qn + 2 * kvn;
    let rows: usize = seqs.iter().map(|s| s.rows).sum();
    let slots = n_blocks * block;
    let x = random(rows * k, 20);
    let stacked = random(n * k, 21);
    let bias = random(n, 22);
    let order = fused_row_order(&h, false);
    let fused_w = gather_rows(bytemuck::cast_slice(&stacked), k * 4, &order);
    let fused_b: Vec<f32> = order.iter().map(|&r| bias[r]).collect();
    let inv_freq: Vec<f32> = (0..hd / 2).map(|i| 1.0 / 10000f32.powf(2.0 * i as f32 / hd as f32)).collect();
    // q_norm then k_norm, around 1 as trained norms are; the kernel gets them pair-adjacent.
    let norm_w: Vec<f32> = random(2 * hd, 23).iter().map(|v| 1.0 + 0.5 * v).collect();
    let fused_norm: Vec<f32> =
        norm_w.chunks(hd).flat_map(|w| pair_order(hd, false).into_iter().map(move |i| w[i])).collect();
    let eps = 1e-6;
    let nb = upload(gpu, &fused_norm);
    let w = Weight::upload(gpu, "qkv", WeightType::F32, n, k, &fused_w).unwrap();
    let (xb, bb, fb) = (upload(gpu, &x), upload(gpu, &fused_b), upload(gpu, &inv_freq));
    let (qb, kb, vb) = (zeros(gpu, rows * qn), zeros(gpu, slots * kvn), zeros(gpu, slots * kvn));
    let sb = step(gpu, rows as u32);
    let plan = test_plan(gpu, seqs, block, &[], 0);
    let bufs = QkvBuffers {
        norm: None,
        step: &sb,
        x: &xb,
        bias: with_bias.then_some(&bb),
        inv_freq: &fb,
        q: &qb,
        k_cache: &kb,
        v_cache: &vb,
        kv,
        plan: &plan,
        qk_norm: qk_norm.then_some(QkNorm { weight: &nb, eps }),
    };
    let op = QkvRope::new(gpu, &LinearConfig::for_adapter(&gpu.caps), &w, &h, &bufs).unwrap();
    gpu.run_pass(|p| op.record(p, rows as u32)).unwrap();

    let mut y = matmul_ref(&x, &stacked, rows, k, n);
    if with_bias {
        y.chunks_mut(n).for_each(|r| r.iter_mut().zip(&bias).for_each(|(a, b)| *a += b));
    }
    let (q, kc, vc) =
        (read(gpu, &qb, rows * qn), read_kv(gpu, &kb, slots * kvn, kv), read_kv(gpu, &vb, slots * kvn, kv));
    // f16 keeps 11 significant bits.
    let kv_tol = if kv == KvType::F16 { 1e-3 } else { 1e-4 };
    let row_seqs = seqs.iter().flat_map(|s| (0..s.rows).map(move |t| (s, s.start + t)));
    for (t, (s, pos)) in row_seqs.enumerate() {
        let slot = s.slot(pos, block);
        let row = &y[t * n..(t + 1) * n];
        let normed = |v: &[f32], w: &[f32]| if qk_norm { rmsnorm_ref(v, w, eps) } else { v.to_vec() };
        for head in 0..4 {
            let want = rope_ref(&normed(&row[head * hd..(head + 1) * hd], &norm_w[..hd]), pos, &inv_freq);
            let got: Vec<f32> = (0..hd).map(|d| q[t * qn + head * hd + paired(d, hd)]).collect();
            assert_close(&got, &want, 1e-4, &format!("q t={t} head={head}"));
        }
        for head in 0..2 {
            let want = rope_ref(&normed(&row[qn + head * hd..qn + (head + 1) * hd], &norm_w[hd..]), pos, &inv_freq);
            let got: Vec<f32> = (0..hd).map(|d| kc[slot * kvn + head * hd + paired(d, hd)]).collect();
            assert_close(&got, &want, kv_tol, &format!("k {kv:?} t={t} head={head}"));
        }
        assert_close(&vc[slot * kvn..(slot + 1) * kvn], &row[qn + kvn..], kv_tol, &format!("v {kv:?} t={t}"));
    }
}

#[test]
fn decode_rows_with_bias_wrap_the_ring() {
    // A ring slot of 16 positions; positions 14..17 wrap to slots 14, 15, 0.
    check(&[TestSeq { rows: 3, start: 14, lo: 0, blocks: vec![0] }], 16, 1, true, false);
}

#[test]
fn prefill_rows_without_bias() {
    check(&[TestSeq { rows: 9, start: 5, lo: 0, blocks: vec![0] }], 16, 1, false, false);
}

#[test]
fn rows_of_several_sequences_write_their_own_blocks() {
    // Blocks of 4 positions in a pool of 12: a prompt chunk crossing two blocks, a decode token,
    // a prompt of a third sequence, each into its own (out of order) blocks.
    let seqs = [
        TestSeq { rows: 6, start: 2, lo: 0, blocks: vec![7, 3] },
        TestSeq { rows: 1, start: 9, lo: 0, blocks: vec![0, 11, 5] },
        TestSeq { rows: 4, start: 0, lo: 0, blocks: vec![9] },
    ];
    check(&seqs, 4, 12, true, false);
}

/// Qwen3's per-head q/k norm before RoPE, on each core: one decode row, a batched decode step
/// of several sequences (the GEMV of several rows), a prefill chunk.
#[test]
fn qk_norm_before_rope_on_every_core() {
    check(&[TestSeq { rows: 1, start: 6, lo: 0, blocks: vec![0] }], 16, 1, false, true);
    let batch = [
        TestSeq { rows: 1, start: 9, lo: 0, blocks: vec![2, 0] },
        TestSeq { rows: 2, start: 3, lo: 0, blocks: vec![1] },
        TestSeq { rows: 1, start: 0, lo: 0, blocks: vec![3] },
    ];
    check(&batch, 8, 4, false, true);
    check(&[TestSeq { rows: 13, start: 2, lo: 0, blocks: vec![0] }], 16, 1, true, true);
}
