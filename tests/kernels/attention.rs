use super::common::*;
use wginfer::ops::attention::{Attention, AttnBuffers, AttnKind};
use wginfer::ops::qkv_rope::HeadShape;

fn attention_ref(q: &[f32], kc: &[f32], vc: &[f32], h: &HeadShape, rows: usize, start: usize, lo: usize) -> Vec<f32> {
    let (hq, hkv, hd, cap) = (h.n_heads as usize, h.n_kv_heads as usize, h.head_dim as usize, h.cache_slots as usize);
    let scale = 1.0 / (hd as f64).sqrt();
    let mut o = vec![0.0f32; rows * hq * hd];
    for t in 0..rows {
        for head in 0..hq {
            let kvh = head / (hq / hkv);
            let qv = &q[(t * hq + head) * hd..][..hd];
            let pos: Vec<usize> = (lo..=start + t).collect();
            let s: Vec<f64> = pos
                .iter()
                .map(|p| {
                    let kv = &kc[((p % cap) * hkv + kvh) * hd..][..hd];
                    qv.iter().zip(kv).map(|(a, b)| *a as f64 * *b as f64).sum::<f64>() * scale
                })
                .collect();
            let mx = s.iter().cloned().fold(f64::MIN, f64::max);
            let e: Vec<f64> = s.iter().map(|v| (v - mx).exp()).collect();
            let sum: f64 = e.iter().sum();
            for d in 0..hd {
                let acc: f64 = pos.iter().zip(&e).map(|(p, w)| w * vc[((p % cap) * hkv + kvh) * hd + d] as f64).sum();
                o[(t * hq + head) * hd + d] = (acc / sum) as f32;
            }
        }
    }
    o
}

/// Runs both kernels on the same inputs and compares each with the CPU.
fn check(h: HeadShape, rows: usize, start: usize, lo: usize) {
    let gpu = gpu();
    let (qn, kvn, cap) = (h.q_dim() as usize, h.kv_dim() as usize, h.cache_slots as usize);
    let q: Vec<f32> = random(rows * qn, 30).iter().map(|v| v * 3.0).collect();
    let kc = random(cap * kvn, 31);
    let vc = random(cap * kvn, 32);
    let (qb, kb, vb, ob) = (upload(gpu, &q), upload(gpu, &kc), upload(gpu, &vc), zeros(gpu, rows * qn));
    let sb = step(gpu, rows as u32, start as u32, lo as u32);
    let want = attention_ref(&q, &kc, &vc, &h, rows, start, lo);
    let context = (start + rows - lo) as u32;
    let bufs = AttnBuffers { step: &sb, q: &qb, k_cache: &kb, v_cache: &vb, o: &ob };
    let att = Attention::new(gpu, &h, context, &bufs).unwrap();
    assert_eq!(att.route(context), AttnKind::Plain);
    assert_eq!(att.route(context + 1), AttnKind::Flash);
    // Flash twice: a split decode step must leave its merge counters ready for the next.
    for kind in [AttnKind::Plain, AttnKind::Flash, AttnKind::Flash] {
        gpu.run_pass(|p| att.record(p, kind, rows as u32, context)).unwrap();
        assert_close(
            &read(gpu, &ob, rows * qn),
            &want,
            1e-4,
            &format!("{kind:?} {h:?} rows={rows} start={start} lo={lo}"),
        );
    }
}

#[test]
fn grouped_query_heads_over_several_tiles() {
    // 605 positions: three tiles of the flash kernel.
    check(HeadShape { n_heads: 8, n_kv_heads: 2, head_dim: 16, cache_slots: 700 }, 5, 600, 0);
}

#[test]
fn one_kv_head_wide_heads() {
    check(HeadShape { n_heads: 3, n_kv_heads: 1, head_dim: 80, cache_slots: 100 }, 1, 70, 0);
}

#[test]
fn ring_wrapped_window() {
    // 50 slots, positions 60..63: the oldest still held is 13.
    check(HeadShape { n_heads: 4, n_kv_heads: 4, head_dim: 8, cache_slots: 50 }, 3, 60, 13);
}

#[test]
fn decode_split_over_many_workgroups() {
    // One token seeing 1401 positions: the flash kernel spreads them over 6 workgroups per head
    // and merges; and a ring-wrapped 1000-position window (4 splits).
    check(HeadShape { n_heads: 6, n_kv_heads: 2, head_dim: 32, cache_slots: 1500 }, 1, 1400, 0);
    check(HeadShape { n_heads: 4, n_kv_heads: 1, head_dim: 64, cache_slots: 1000 }, 1, 2500, 1501);
}
