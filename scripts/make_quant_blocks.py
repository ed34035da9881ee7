#!/usr/bin/env python3
"""Reference rows for the GGML block formats the engine dequantizes.

Writes tests/fixtures/quant_blocks.json: a few rows of 512 float32 values,
each quantized to Q8_0, Q4_0, Q4_1, Q5_0, Q4_K, Q6_K, Q5_1, Q5_K, Q3_K, Q2_K,
IQ4_NL and IQ4_XS, stored as the raw block bytes exactly as they sit in a GGUF
tensor, together with the float32 values gguf-py's `gguf.quants.dequantize`
(the CPU reference) gets back.

Quantizers: gguf.quants.quantize for Q8_0 / Q4_0 / Q4_1 / Q5_0 / Q5_1 (a port
of ggml's reference quantizers). gguf 0.19 has no quantizer for the K and IQ4
types, so their blocks are made here (LOCAL_QUANTIZERS): same byte layout as
ggml's block_q4_K etc., simpler scale search than ggml's make_qkx2_quants /
make_qx_quants / quantize_row_iq4_nl, so bytes are valid but not necessarily
the ones llama-quantize would write. The dequantized values are always gguf-py's
decoding of the stored bytes, so they are what any correct dequantizer must
produce from them.

Layout of the JSON:
  "types": {name: {"ggml_type" (enum value), "block_size" (values per block),
                   "type_size" (bytes per block), "layout", "quantizer"}}
  "rows":  [{"name", "description", "input_f32_hex"}]
  "cases": [{"type", "row", "quant_hex" (n_blocks * type_size bytes),
             "dequant_f32_hex" (512 little-endian float32), "dequant_head"
             (first 8 values as JSON numbers, for reading), "max_abs_error"}]
Every *_hex string is raw little-endian bytes in lowercase hex.

Usage:  python3 scripts/make_quant_blocks.py     (needs numpy, gguf)
"""

import json
from pathlib import Path

import numpy as np
from gguf import GGML_QUANT_SIZES
from gguf import GGMLQuantizationType as Q
from gguf.quants import dequantize, quantize

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "tests" / "fixtures" / "quant_blocks.json"

ROW_LEN = 512
SEED = 20240531
QK_K = 256

LAYOUTS = {
    "Q8_0": "d: f16, qs: int8[32]; x = d * q",
    "Q4_0": "d: f16, qs: u8[16] (byte j: low nibble = x[j], high nibble = x[j+16]); x = d * (q - 8)",
    "Q4_1": "d: f16, m: f16, qs: u8[16] (low nibble = x[j], high nibble = x[j+16]); x = d * q + m",
    "Q5_0": "d: f16, qh: u32 (bit j = 5th bit of x[j]), qs: u8[16] (low nibble x[j], high nibble "
            "x[j+16]); x = d * ((nibble | bit << 4) - 16)",
    "Q4_K": "d: f16, dmin: f16, scales: u8[12] (8 x 6-bit scale + 8 x 6-bit min, packed as ggml "
            "get_scale_min_k4), qs: u8[128] (4 chunks of 32 bytes: low nibbles = sub-block 2c, "
            "high nibbles = sub-block 2c+1); x = d * sc[j] * q - dmin * m[j], 8 sub-blocks of 32",
    "Q6_K": "ql: u8[128], qh: u8[64], scales: i8[16], d: f16; per 128-value half: ql[l] = low "
            "nibbles of x[l] | x[l+64] << 4, ql[l+32] = x[l+32] | x[l+96] << 4, qh[l] = 2-bit "
            "highs of x[l], x[l+32], x[l+64], x[l+96] at bits 0,2,4,6; x = d * scales[j] * (q - 32), "
            "16 sub-blocks of 16",
    "Q5_1": "d: f16, m: f16, qh: u32 (bit j = 5th bit of x[j]), qs: u8[16] (low nibble x[j], high "
            "nibble x[j+16]); x = d * (nibble | bit << 4) + m",
    "Q5_K": "d: f16, dmin: f16, scales: u8[12] (as Q4_K), qh: u8[32] (bit s of byte l = 5th bit of "
            "x[32s+l]), qs: u8[128] (as Q4_K); x = d * sc[s] * q - dmin * m[s], 8 sub-blocks of 32",
    "Q3_K": "hmask: u8[32] (bit s of byte l = 3rd bit of x[32s+l]), qs: u8[64] (x[128h+32s+l] at bits "
            "2s of byte 32h+l), scales: u8[12] (16 x 6-bit: low nibble of sub-block s at byte s%8 "
            "nibble s/8, high 2 bits at byte 8+s%4 bits 2(s/4)), d: f16; x = d * (scale - 32) * (q - 4), "
            "16 sub-blocks of 16",
    "Q2_K": "scales: u8[16] (sub-block s: low nibble scale, high nibble min), qs: u8[64] (as Q3_K's "
            "qs), d: f16, dmin: f16; x = d * sc[s] * q - dmin * m[s], 16 sub-blocks of 16",
    "IQ4_NL": "d: f16, qs: u8[16] (nibbles as Q4_0); x = d * kvalues[q], kvalues = -127, -104, -83, "
              "-65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113",
    "IQ4_XS": "d: f16, scales_h: u16 (bits 2s: high 2 bits of sub-block s's scale), scales_l: u8[4] "
              "(low nibble of sub-block s's scale at byte s/2, nibble s%2), qs: u8[128] (sub-block s: "
              "16 bytes, nibbles as IQ4_NL); x = d * (scale - 32) * kvalues[q], 8 sub-blocks of 32",
}

TYPES = [Q.Q8_0, Q.Q4_0, Q.Q4_1, Q.Q5_0, Q.Q4_K, Q.Q6_K, Q.Q5_1, Q.Q5_K, Q.Q3_K, Q.Q2_K, Q.IQ4_NL, Q.IQ4_XS]

# Largest |error| allowed per type, relative to the row's largest |x|: the local quantizers must
# round-trip like real ones (a wrong byte layout fails this, since gguf-py decodes the bytes).
MAX_REL_ERROR = {Q.Q8_0: 0.01, Q.Q6_K: 0.04, Q.Q5_0: 0.05, Q.Q5_1: 0.05, Q.Q3_K: 0.3, Q.Q2_K: 0.4}


# ---------------------------------------------------------------- K quantizers


def nearest_int(x):
    return np.rint(x).astype(np.int32)  # ties to even, like ggml's nearest_int


def affine_k(x, sub, qmax, smax):
    """ggml's asymmetric K scheme: super-blocks of 256 in sub-blocks of `sub`, each
    x ~= d * ls * q - dmin * lm with q in 0..qmax and codes ls, lm in 0..smax.
    Returns d16, dmin16 (per super-block), ls, lm (per sub-block) and q."""
    xb = x.astype(np.float32).reshape(-1, QK_K // sub, sub)
    mn = np.minimum(xb.min(-1), 0.0)  # ggml keeps min <= 0
    mx = xb.max(-1)
    scale = (mx - mn) / qmax
    the_min = -mn
    max_scale, max_min = scale.max(-1, keepdims=True), the_min.max(-1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        inv_scale = np.where(max_scale > 0, smax / max_scale, 0.0)
        inv_min = np.where(max_min > 0, smax / max_min, 0.0)
    ls = np.clip(nearest_int(inv_scale * scale), 0, smax).astype(np.uint8)
    lm = np.clip(nearest_int(inv_min * the_min), 0, smax).astype(np.uint8)
    d16 = (max_scale[:, 0] / smax).astype(np.float16)
    dmin16 = (max_min[:, 0] / smax).astype(np.float16)
    d = d16.astype(np.float32)[:, None] * ls
    dm = dmin16.astype(np.float32)[:, None] * lm
    with np.errstate(divide="ignore", invalid="ignore"):
        q = np.where(d[..., None] > 0, nearest_int((xb + dm[..., None]) / d[..., None]), 0)
    return d16, dmin16, ls, lm, np.clip(q, 0, qmax).astype(np.uint8)


def symmetric_k(x, sub, qneg, sneg):
    """ggml's symmetric K scheme: sub-blocks of `sub`, x ~= d * sc * q with q in -qneg..qneg-1
    and signed codes sc in -sneg..sneg-1; the value of largest magnitude of a sub-block maps to
    q = -qneg (as ggml's make_qx_quants starts). Returns d16, sc and q + qneg (unsigned)."""
    xb = x.astype(np.float32).reshape(-1, QK_K // sub, sub)
    idx = np.abs(xb).argmax(-1)
    maxv = np.take_along_axis(xb, idx[..., None], -1)[..., 0]  # signed value of largest magnitude
    scale = -maxv / qneg
    big = np.take_along_axis(scale, np.abs(scale).argmax(-1)[:, None], -1)  # signed max scale
    with np.errstate(divide="ignore", invalid="ignore"):
        iscale = np.where(big != 0, -sneg / big, 0.0)
    sc = np.clip(nearest_int(iscale * scale), -sneg, sneg - 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        d16 = np.where(iscale != 0, 1.0 / iscale, 0.0)[:, 0].astype(np.float16)
    dj = d16.astype(np.float32)[:, None] * sc.astype(np.float32)
    with np.errstate(divide="ignore", invalid="ignore"):
        L = np.where(dj[..., None] != 0, nearest_int(xb / dj[..., None]), 0)
    return d16, sc, (np.clip(L, -qneg, qneg - 1) + qneg).astype(np.uint8)


def pack_k4_scales(ls, lm):
    """8 six-bit scales and mins -> the 12 bytes ggml's get_scale_min_k4 reads (Q4_K, Q5_K)."""
    scales = np.zeros((ls.shape[0], 12), dtype=np.uint8)
    for j in range(4):
        scales[:, j] = (ls[:, j] & 0x3F) | ((ls[:, j + 4] >> 4) << 6)
        scales[:, j + 4] = (lm[:, j] & 0x3F) | ((lm[:, j + 4] >> 4) << 6)
        scales[:, j + 8] = (ls[:, j + 4] & 0x0F) | ((lm[:, j + 4] & 0x0F) << 4)
    return scales


def f16_bytes(d16):
    return d16.view(np.uint8).reshape(-1, 2)


def crumbs(q):
    """[nb, 256] 2-bit values -> 64 bytes: value 128h + 32s + l at bits 2s of byte 32h + l."""
    q = q.reshape(-1, 2, 4, 32)
    return (q[:, :, 0] | (q[:, :, 1] << 2) | (q[:, :, 2] << 4) | (q[:, :, 3] << 6)).reshape(-1, 64)


def quantize_q4_k(x):
    """float32 [n*256] -> block_q4_K bytes [n*144]."""
    d16, dmin16, ls, lm, q = affine_k(x, 32, 15, 63)
    nb = q.shape[0]
    qs = (q[:, 0::2, :] | (q[:, 1::2, :] << 4)).reshape(nb, 128)
    return np.concatenate([f16_bytes(d16), f16_bytes(dmin16), pack_k4_scales(ls, lm), qs], axis=1).reshape(-1)


def quantize_q5_k(x):
    """float32 [n*256] -> block_q5_K bytes [n*176]: Q4_K's nibbles plus qh (bit s of byte l =
    fifth bit of value 32s + l)."""
    d16, dmin16, ls, lm, q = affine_k(x, 32, 31, 63)
    nb = q.shape[0]
    lo = q & 0x0F
    qs = (lo[:, 0::2, :] | (lo[:, 1::2, :] << 4)).reshape(nb, 128)
    qh = np.zeros((nb, 32), dtype=np.uint8)
    for s in range(8):
        qh |= ((q[:, s, :] >> 4) & 1) << s
    return np.concatenate([f16_bytes(d16), f16_bytes(dmin16), pack_k4_scales(ls, lm), qh, qs],
                          axis=1).reshape(-1)


def quantize_q2_k(x):
    """float32 [n*256] -> block_q2_K bytes [n*84]: 16 sub-blocks of 16, 4-bit scale and min."""
    d16, dmin16, ls, lm, q = affine_k(x, 16, 3, 15)
    scales = ls | (lm << 4)
    return np.concatenate([scales, crumbs(q), f16_bytes(d16), f16_bytes(dmin16)], axis=1).reshape(-1)


def quantize_q3_k(x):
    """float32 [n*256] -> block_q3_K bytes [n*110]: hmask (bit s of byte l = third bit of value
    32s + l), 2-bit lows as Q2_K, 16 six-bit scales (+32) packed in 12 bytes, d."""
    d16, sc, L = symmetric_k(x, 16, 4, 32)
    nb = L.shape[0]
    L = L.reshape(nb, 8, 32)
    hmask = np.zeros((nb, 32), dtype=np.uint8)
    for s in range(8):
        hmask |= ((L[:, s, :] >> 2) & 1) << s
    code = (sc + 32).astype(np.uint8)
    scales = np.zeros((nb, 12), dtype=np.uint8)
    for s in range(16):
        scales[:, s % 8] |= (code[:, s] & 0x0F) << (4 * (s // 8))
        scales[:, 8 + s % 4] |= (code[:, s] >> 4) << (2 * (s // 4))
    return np.concatenate([hmask, crumbs(L & 3), scales, f16_bytes(d16)], axis=1).reshape(-1)


def quantize_q6_k(x):
    """float32 [n*256] -> block_q6_K bytes [n*210]."""
    d16, sc, L = symmetric_k(x, 16, 32, 128)
    nb = L.shape[0]
    L = L.reshape(nb, 2, 128)  # two halves of 128
    ql = np.zeros((nb, 2, 64), dtype=np.uint8)
    qh = np.zeros((nb, 2, 32), dtype=np.uint8)
    for h in range(2):
        part = L[:, h]
        q1, q2, q3, q4 = part[:, 0:32], part[:, 32:64], part[:, 64:96], part[:, 96:128]
        ql[:, h, 0:32] = (q1 & 0xF) | ((q3 & 0xF) << 4)
        ql[:, h, 32:64] = (q2 & 0xF) | ((q4 & 0xF) << 4)
        qh[:, h] = (q1 >> 4) | ((q2 >> 4) << 2) | ((q3 >> 4) << 4) | ((q4 >> 4) << 6)
    return np.concatenate([ql.reshape(nb, 128), qh.reshape(nb, 64), sc.astype(np.int8).view(np.uint8),
                           f16_bytes(d16)], axis=1).reshape(-1)


IQ4_VALUES = np.array([-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113], np.float32)


def iq4_indices(xb, dl):
    """Index of the nearest IQ4 table value of each x / dl (0 where dl is 0)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.where(dl != 0, xb / dl, 0.0)
    return np.abs(t[..., None] - IQ4_VALUES).argmin(-1).astype(np.uint8)


def signed_max(xb):
    return np.take_along_axis(xb, np.abs(xb).argmax(-1)[..., None], -1)[..., 0]


def quantize_iq4_nl(x):
    """float32 [n*32] -> block_iq4_nl bytes [n*18]: d, then nibbles as Q4_0 indexing the table;
    the value of largest magnitude maps to -127."""
    xb = x.astype(np.float32).reshape(-1, 32)
    d16 = (-signed_max(xb) / 127.0).astype(np.float16)
    q = iq4_indices(xb, d16.astype(np.float32)[:, None])
    return np.concatenate([f16_bytes(d16), q[:, :16] | (q[:, 16:] << 4)], axis=1).reshape(-1)


def quantize_iq4_xs(x):
    """float32 [n*256] -> block_iq4_xs bytes [n*136]: d, scales_h (u16: 2 high bits of sub-block
    s's 6-bit scale + 32 at bits 2s), scales_l (4 bytes: low nibbles, sub-block s at byte s / 2,
    nibble s % 2), then per sub-block of 32 16 bytes of nibbles as IQ4_NL."""
    xb = x.astype(np.float32).reshape(-1, 8, 32)
    nb = xb.shape[0]
    sub_d = -signed_max(xb) / 127.0
    big = signed_max(sub_d)[:, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        iscale = np.where(big != 0, -32.0 / big, 0.0)
    ls = np.clip(nearest_int(iscale * sub_d), -32, 31)
    with np.errstate(divide="ignore", invalid="ignore"):
        d16 = np.where(iscale != 0, 1.0 / iscale, 0.0)[:, 0].astype(np.float16)
    q = iq4_indices(xb, (d16.astype(np.float32)[:, None] * ls)[..., None])
    code = (ls + 32).astype(np.uint16)  # sub-block scale d * (code - 32)
    scales_h = np.zeros(nb, dtype=np.uint16)
    for s in range(8):
        scales_h |= ((code[:, s] >> 4) & 3) << (2 * s)
    lo = (code & 0x0F).astype(np.uint8)
    scales_l = lo[:, 0::2] | (lo[:, 1::2] << 4)
    qs = (q[:, :, :16] | (q[:, :, 16:] << 4)).reshape(nb, 128)
    return np.concatenate([f16_bytes(d16), scales_h.view(np.uint8).reshape(nb, 2), scales_l, qs],
                          axis=1).reshape(-1)


LOCAL_QUANTIZERS = {Q.Q4_K: quantize_q4_k, Q.Q5_K: quantize_q5_k, Q.Q6_K: quantize_q6_k,
                    Q.Q3_K: quantize_q3_k, Q.Q2_K: quantize_q2_k, Q.IQ4_NL: quantize_iq4_nl,
                    Q.IQ4_XS: quantize_iq4_xs}


def quantize_row(x, qtype):
    if qtype in LOCAL_QUANTIZERS:
        return LOCAL_QUANTIZERS[qtype](x)
    return quantize(x, qtype).reshape(-1)


# ---------------------------------------------------------------- rows


def make_rows():
    rng = np.random.default_rng(SEED)
    rows = []
    rows.append(("normal", "standard normal", rng.standard_normal(ROW_LEN)))
    rows.append(("zeros", "all zeros (every scale 0)", np.zeros(ROW_LEN)))
    rows.append(("ramp", "(i - 256) / 64 for i in 0..512: -4 .. 3.984375",
                 (np.arange(ROW_LEN) - 256) / 64.0))
    large = rng.standard_normal(ROW_LEN) * 3000.0
    large[[5, 100, 300, 511]] = [60000.0, -60000.0, 45000.0, -30000.0]
    rows.append(("large", "normal * 3000 with spikes of +-60000 (f16 scales near their range)", large))
    mixed = np.empty(ROW_LEN)
    mixed[:256] = rng.uniform(0.5, 1.5, 256)
    mixed[32:64] = 0.75  # a constant block
    mixed[256:] = 0.0
    hits = rng.choice(np.arange(256, ROW_LEN), 24, replace=False)
    mixed[hits] = rng.uniform(-1e-3, 1e-3, 24)
    rows.append(("offset_and_tiny",
                 "values 0..255 uniform in [0.5, 1.5) (all positive, 32..63 constant 0.75); "
                 "256..511 mostly 0 with a few |x| < 1e-3 (subnormal f16 scales)", mixed))
    return [(n, d, v.astype(np.float32)) for n, d, v in rows]


def main():
    rows = make_rows()
    types = {}
    for qt in TYPES:
        block_size, type_size = GGML_QUANT_SIZES[qt]
        types[qt.name] = {
            "ggml_type": int(qt), "block_size": block_size, "type_size": type_size,
            "layout": LAYOUTS[qt.name],
            "quantizer": "local (gguf 0.19 has none)" if qt in LOCAL_QUANTIZERS else "gguf.quants.quantize",
        }
    cases = []
    for qt in TYPES:
        block_size, type_size = GGML_QUANT_SIZES[qt]
        worst = []
        for name, _, x in rows:
            raw = quantize_row(x, qt).astype(np.uint8)
            assert raw.size == ROW_LEN // block_size * type_size, (qt.name, raw.size)
            deq = dequantize(raw, qt).astype(np.float32).reshape(-1)
            assert deq.shape == (ROW_LEN,)
            err = float(np.abs(deq - x).max())
            rel = err / max(float(np.abs(x).max()), 1e-30)
            assert rel < MAX_REL_ERROR.get(qt, 0.15), (qt.name, name, rel)
            if name == "zeros":
                assert not deq.any()
            worst.append(f"{name} {err:.3g}")
            cases.append({
                "type": qt.name, "row": name,
                "quant_hex": raw.tobytes().hex(),
                "dequant_f32_hex": deq.astype("<f4").tobytes().hex(),
                "dequant_head": [float(v) for v in deq[:8]],
                "max_abs_error": float(f"{err:.6g}"),
            })
        print(f"{qt.name:6s} block {block_size:3d} values / {type_size:3d} bytes; max |error|: " + ", ".join(worst))
    doc = {
        "row_len": ROW_LEN,
        "seed": SEED,
        "encoding": "every *_hex field is raw little-endian bytes as lowercase hex; "
                    "quant_hex is the tensor data exactly as stored in a GGUF file",
        "types": types,
        "rows": [{"name": n, "description": d, "input_f32_hex": x.astype("<f4").tobytes().hex()}
                 for n, d, x in rows],
        "cases": cases,
    }
    OUT.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {OUT.relative_to(REPO)} ({OUT.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
