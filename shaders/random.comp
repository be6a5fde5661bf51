// RANDOM_UNIFORM / RANDOM_STANDARD_NORMAL / MULTINOMIAL (compiler/ops/random.py; LiteRT's random_ops.cc
// over TF's Philox4x32-10).  `st` is the node's persistent generator state, 6 words: the 128-bit counter
// (words 0..3, word 0 lowest) and the 64-bit key (words 4, 5).  Block b of a run is Philox(key,
// counter + b): 4 words.
// MODE 0 uniform: invocation b writes elements 4b..4b+3 from block b (each word's 23 low bits as the
//   mantissa of [1, 2), minus 1).
// MODE 1 normal: as 0, Box-Muller on word pairs (u1 = max(uniform, 1e-7), v = float(2 pi_double u2),
//   sqrt(-2 log u1) * (sin v, cos v)) in float-float (ff_math.glsl).
// MODE 2: one invocation advances the state's counter by ADV_LO + 2^32 ADV_HI blocks (`out_` is `st`).
// MODE 3 multinomial CDF: invocation r writes row r's running sum of exp(logit - max finite logit) over
//   the finite logits (float-float pairs, as LiteRT's double CDF), skipping non-finite ones.
// MODE 4 multinomial draw: invocation g (row g / NS) takes words 2g, 2g+1 as a [0, 1) value of 52 bits,
//   times the row's total, and writes the index of the first CDF entry above it (C if none).
// Defines: MODE N (elements / samples) C (classes) NS (samples per row) I64 (int64 indices) ADV_LO ADV_HI
// @include ff_math.glsl

uvec4 philox(uvec2 key, uvec4 c) {
    uint k0 = key.x, k1 = key.y;
    for (int i = 0; i < 10; ++i) {
        uint hi0, lo0, hi1, lo1;
        umulExtended(0xD2511F53u, c.x, hi0, lo0);
        umulExtended(0xCD9E8D57u, c.z, hi1, lo1);
        c = uvec4(hi1 ^ c.y ^ k0, lo1, hi0 ^ c.w ^ k1, lo0);
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    return c;
}

uvec4 add128(uvec4 c, uint lo, uint hi) {       // counter + (hi 2^32 + lo), carries through all 4 words
    uint carry;
    c.x = uaddCarry(c.x, lo, carry);
    uint c2;
    c.y = uaddCarry(c.y, hi, c2);
    c.y = uaddCarry(c.y, carry, carry);
    carry += c2;
    c.z = uaddCarry(c.z, carry, carry);
    c.w += carry;
    return c;
}

#if MODE == 0 || MODE == 1 || MODE == 4
uvec4 block(uint b) {
    return philox(uvec2(st[4], st[5]), add128(uvec4(st[0], st[1], st[2], st[3]), b, 0u));
}
#endif

float unit(uint w) { return uintBitsToFloat((w & 0x7FFFFFu) | 0x3F800000u) - 1.0; }

void main() {
    uint gid = gpuc_gid();
    if (gid >= TOTAL) return;
#if MODE == 0
    uvec4 w = block(gid);
    for (uint i = 0u; i < 4u && 4u * gid + i < uint(N); ++i) out_[4u * gid + i] = unit(w[i]);
#elif MODE == 1
    uvec4 w = block(gid);
    for (uint i = 0u; i < 4u && 4u * gid + i < uint(N); i += 2u) {
        float u1 = max(unit(w[i]), FF_F(0x33D6BF95u));       // 1e-7f
        vec2 v = ff_mul(vec2(unit(w[i + 1u]), 0.0), vec2(FF_F(0x40C90FDBu), FF_F(0xB43BBD2Eu)));  // 2 * M_PI
        float r = ff_sqrt(-2.0 * ff_log(u1).x);
        vec2 sc = ff_sincos(v.x);
        precise float f0 = sc.x * r;
        precise float f1 = sc.y * r;
        out_[4u * gid + i] = f0;
        if (4u * gid + i + 1u < uint(N)) out_[4u * gid + i + 1u] = f1;
    }
#elif MODE == 2
    uvec4 c = add128(uvec4(out_[0], out_[1], out_[2], out_[3]), uint(ADV_LO), uint(ADV_HI));
    out_[0] = c.x; out_[1] = c.y; out_[2] = c.z; out_[3] = c.w;
#elif MODE == 3
    uint row = gid * uint(C);
    float mx = -3.4028234663852886e38;
    for (uint i = 0u; i < uint(C); ++i) {
        float l = logits[row + i];
        if (!isinf(l) && !isnan(l)) mx = max(mx, l);
    }
    vec2 cum = vec2(0.0);
    for (uint i = 0u; i < uint(C); ++i) {
        float l = logits[row + i];
        if (!isinf(l) && !isnan(l)) cum = ff_add(cum, ff_exp(ff_two_sum(l, -mx)));
        out_[2u * (row + i)] = floatBitsToUint(cum.x);
        out_[2u * (row + i) + 1u] = floatBitsToUint(cum.y);
    }
#elif MODE == 4
    uvec4 w = block(gid >> 1u);
    uint x0 = w[2u * (gid & 1u)], x1 = w[2u * (gid & 1u) + 1u];
    vec2 u = ff_add(vec2(float(x0 & 0xFFFFFu) * exp2(-20.0), 0.0), vec2(float(x1 >> 8u) * exp2(-44.0), 0.0));
    u = ff_add(u, vec2(float(x1 & 0xFFu) * exp2(-52.0), 0.0));
    uint row = gid / uint(NS) * uint(C);
    vec2 total = vec2(uintBitsToFloat(cdf[2u * (row + uint(C) - 1u)]), uintBitsToFloat(cdf[2u * (row + uint(C) - 1u) + 1u]));
    vec2 want = ff_mul(u, total);
    uint lo = 0u, hi = uint(C);                 // upper bound: the first entry > want
    while (lo < hi) {
        uint mid = (lo + hi) >> 1u;
        vec2 v = vec2(uintBitsToFloat(cdf[2u * (row + mid)]), uintBitsToFloat(cdf[2u * (row + mid) + 1u]));
        if (ff_gt(v, want)) hi = mid; else lo = mid + 1u;
    }
#if I64
    out_[2u * gid] = lo;
    out_[2u * gid + 1u] = 0u;
#else
    out_[gid] = int(lo);
#endif
#endif
}
