use super::common::*;
use super::qkv_rope::{paired, rope_ref};
use wginfer::ops::qk_norm::{QkNorm, QkNormBuffers, QkNormRope};
use wginfer::ops::qkv_rope::HeadShape;

/// The pass alone on q and K-cache contents as qkv_rope stores them for it (pair-adjacent,
/// unrotated): every q head of each row and every k head in the row's KV slot becomes
/// rope(rmsnorm(head) * weight); the other slots stay as they were.
fn check(head_dim: usize) {
    for kv in [KvType::F32, KvType::F16] {
        check_cache(head_dim, kv);
    }
}

/// `check` on a K cache of `kv` values (f16: each value within its rounding).
fn check_cache(head_dim: usize, kv: KvType) {
    let gpu = gpu();
    let h = HeadShape { n_heads: 2, n_kv_heads: 1, head_dim: head_dim as u32 };
    let (hd, qn, kvn) = (head_dim, 2 * head_dim, head_dim);
    let seqs =
        [TestSeq { rows: 3, start: 5, lo: 0, blocks: vec![1] }, TestSeq { rows: 1, start: 2, lo: 0, blocks: vec![0] }];
    let (block, slots, rows) = (8, 16, 4);
    let q0 = random(rows * qn, 30);
    let (kb, k0) = upload_kv(gpu, &random(slots * kvn, 31), kv);
    let norm_w: Vec<f32> = random(2 * hd, 32).iter().map(|v| 1.0 + 0.5 * v).collect();
    let inv_freq: Vec<f32> = (0..hd / 2).map(|i| 1.0 / 10000f32.powf(2.0 * i as f32 / hd as f32)).collect();
    // The kernel's weight is pair-adjacent like the heads.
    let unpair = |v: &[f32]| -> Vec<f32> { (0..hd).map(|d| v[paired(d, hd)]).collect() };
    let fused_w: Vec<f32> = norm_w
        .chunks(hd)
        .flat_map(|w| {
            let mut out = vec![0.0; hd];
            (0..hd).for_each(|d| out[paired(d, hd)] = w[d]);
            out
        })
        .collect();
    let (qb, wb, fb) = (upload(gpu, &q0), upload(gpu, &fused_w), upload(gpu, &inv_freq));
    let plan = test_plan(gpu, &seqs, block, &[], 0);
    let eps = 1e-6;
    let bufs =
        QkNormBuffers { norm: QkNorm { weight: &wb, eps }, inv_freq: &fb, q: &qb, k_cache: &kb, kv, plan: &plan };
    let op = QkNormRope::new(gpu, &h, &bufs).unwrap();
    gpu.run_pass(|p| op.record(p, rows as u32)).unwrap();
    let (q, kc) = (read(gpu, &qb, rows * qn), read_kv(gpu, &kb, slots * kvn, kv));
    let kv_tol = if kv == KvType::F16 { 1e-3 } else { 1e-4 };

    let expect = |v: &[f32], w: &[f32], pos: usize| rope_ref(&rmsnorm_ref(&unpair(v), w, eps), pos, &inv_freq);
    let row_seqs = seqs.iter().flat_map(|s| (0..s.rows).map(move |t| (s, s.start + t)));
    let mut written = vec![false; slots];
    for (t, (s, pos)) in row_seqs.enumerate() {
        for head in 0..2 {
            let at = t * qn + head * hd;
            let got = unpair(&q[at..at + hd]);
            assert_close(&got, &expect(&q0[at..at + hd], &norm_w[..hd], pos), 1e-4, &format!("q t={t} head={head}"));
        }
        let at = s.slot(pos, block) * kvn;
        written[s.slot(pos, block)] = true;
        let got = unpair(&kc[at..at + hd]);
        assert_close(&got, &expect(&k0[at..at + hd], &norm_w[hd..], pos), kv_tol, &format!("k {kv:?} t={t}"));
    }
    for slot in (0..slots).filter(|&s| !written[s]) {
        assert_eq!(&kc[slot * kvn..(slot + 1) * kvn], &k0[slot * kvn..(slot + 1) * kvn], "slot {slot} untouched");
    }
}

#[test]
fn heads_smaller_than_a_workgroup() {
    check(16);
}

#[test]
fn heads_with_more_pairs_than_threads() {
    // 144 pairs: 128 threads, some taking two.
    check(288);
}
