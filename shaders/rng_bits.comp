// STABLEHLO_RNG_BIT_GENERATOR (LiteRT's stablehlo_rng_bit_generator.cc, rng_util.cc): a pure function of
// the uint64 state (read as 32-bit words): key = words 0, 1; counter = words 2, 3 (Philox: then words 4, 5
// of a 3-word state, else words 0, 1).  Block b (counter + b, a 64-bit add on the first two counter
// words) gives 4 (Philox4x32-10) or 2 (Threefry2x32-20) output words, in order.
// MODE 0: one invocation per output word; MODE 1: one invocation writes the new state (the old one with
// key and the advanced counter words in words 0..3).
// Defines: NW (output words) ALG (0 Philox, 1 Threefry) MODE S (state length in uint64)
#if ALG == 0
#define K 4
#else
#define K 2
#endif

uvec4 philox(uint k0, uint k1, uvec4 c) {
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

uint rotl(uint v, int r) { return (v << r) | (v >> (32 - r)); }

uvec2 threefry_round(uvec2 c, ivec4 rot, uint ks0, uint ks1, uint b) {
    for (int i = 0; i < 4; ++i) {
        c.x += c.y;
        c.y = rotl(c.y, rot[i]);
        c.y ^= c.x;
    }
    c.x += ks0;
    c.y += ks1 + b;
    return c;
}

uvec2 threefry(uint k0, uint k1, uvec2 c) {
    ivec4 r0 = ivec4(13, 15, 26, 6), r1 = ivec4(17, 29, 16, 24);
    uint k2 = k0 ^ k1 ^ 0x1BD11BDAu;
    c += uvec2(k0, k1);
    c = threefry_round(c, r0, k1, k2, 1u);
    c = threefry_round(c, r1, k2, k0, 2u);
    c = threefry_round(c, r0, k0, k1, 3u);
    c = threefry_round(c, r1, k1, k2, 4u);
    c = threefry_round(c, r0, k2, k0, 5u);
    return c;
}

uvec2 counter(uint b) {            // words 2, 3 advanced by b blocks
    uint lo = uint(st[2]) + b;
    return uvec2(lo, uint(st[3]) + (lo < uint(st[2]) ? 1u : 0u));
}

void main() {
    uint gid = gpuc_gid();
    if (gid >= TOTAL) return;
    uint k0 = uint(st[0]), k1 = uint(st[1]);
#if MODE == 0
    uint b = gid / uint(K);
    uvec2 c = counter(b);
#if ALG == 0
    uvec4 v = philox(k0, k1, uvec4(c, S == 3 ? uint(st[4]) : k0, S == 3 ? uint(st[5]) : k1));
    ST(out_, gid, v[gid % 4u]);
#else
    uvec2 v = threefry(k0, k1, c);
    ST(out_, gid, v[gid % 2u]);
#endif
#else
    uvec2 c = counter(uint((NW + K - 1) / K));
    for (int w = 0; w < 2 * S; ++w) out_[w] = st[w];
    out_[0] = k0;
    out_[1] = k1;
    out_[2] = c.x;
    out_[3] = c.y;
#endif
}
