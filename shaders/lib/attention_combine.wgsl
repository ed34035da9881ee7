// The attention kernels' weighted sum of V: threads form PARTS groups of D4 = HD / 4 lanes, lane
// d4 of a group owning dimensions 4*d4 .. 4*d4+3 (one 16-byte load per position), each group
// taking every PARTS-th position (attention_plain's v_part, attention_flash's tile loop);
// combine_parts adds the groups and writes o = sum / denominator.
const D4: u32 = HD / 4u;

const PARTS: u32 = WG_THREADS / D4;

var<workgroup> partial: array<vec4<f32>, WG_THREADS>;

// q . K[slot) (q already scaled, in qs), by SCORE_LANES adjacent lanes (lane = 0 ..
// SCORE_LANES - 1) that each read every SCORE_LANES-th vec4 of the K row: neighbouring lanes
// read neighbouring 16 bytes, and score_lanes_sum (lib/score_sum_*) adds their parts.
fn score(slot: u32, kvh: u32, lane: u32) -> f32 {
    let ko = (slot * HKV + kvh) * D4;
    var s = 0.0;
    for (var e = 0u; e < D4 / SCORE_LANES; e++) {
        let i = e * SCORE_LANES + lane;
        s += dot(qs[i], k_at(ko + i));
    }
    return score_lanes_sum(s);
}

// The groups' sums added: dimensions 4*lid .. 4*lid+3 in threads lid < D4.
fn sum_parts(lid: u32, acc: vec4<f32>) -> vec4<f32> {
    partial[lid] = acc;
    workgroupBarrier();
    var total = vec4<f32>(0.0);
    if (lid < D4) {
        for (var g = 0u; g < PARTS; g++) {
            total += partial[g * D4 + lid];
        }
    }
    return total;
}

fn combine_parts(lid: u32, acc: vec4<f32>, denominator: f32, qo: u32) {
    let total = sum_parts(lid, acc);
    if (lid < D4) {
        let v = total / denominator;
        o[qo + lid] = v;
        store_f16x4(qo + lid, v);
    }
}
