// @storage16
// Weight-only int8 matmul: out[m, n] = epilogue(dot(x[m, :], W[n, :])) with int8 weights W (per-channel or
// per-tensor scale, zero point 0) and float activations x, computed as LiteRT's dynamic-range FULLY_CONNECTED
// on its default CPU path (XNNPACK qd8-f32-qc8w) computes it:
//   row m of x is quantized on the fly to int8, asymmetrically: rmin = min(0, min x), rmax = max(0, max x),
//   s = 255 / (rmax - rmin) (1 when equal), zp = round_even(clamp(-128 - rmin*s or 127 - rmax*s, whichever
//   the rounding errors favour, -128, 127)), q = clamp(round_even(x * s) + zp, -128, 127);
//   acc = sum_k q[k] * W[n, k] - zp * sum_k W[n, k]   (exact in int32)
//   v = float(acc) * (1 / s) * wscale[n] + bias[n], then the activation / residual / chain epilogue.
// The weights stay int8 in the bundle ([GN][KQ] uvec4 words: 16 int8 per word, K zero-padded to KQ * 16)
// and are unpacked in registers.
//
// One workgroup per RM rows x RN output channels (wg = tm * TILES_N + tn: row tiles slowest).  Phase 1
// reduces each of its rows' min / max and stores the quantized row in shared memory (packed, 4 int8 per
// uint); phase 2: invocation t takes 16-byte weight words t, t + NT, ... of each of its RN channels, reuses
// each across the RM rows, and the int32 partial sums meet in shared memory (subgroupAdd first under
// SUBGROUP; integer sums: the same result in any order; min / max too).  Decode (M = 1) reads the weights once.
// RMS (ops/q8_fusion.py: an RMS_NORM read only by int8 FCs, folded into them): x is the norm's input and
// row m is normalized first, in rms_norm.comp's order: r = rsqrt(sum(x * x) / GK + EPS), y = (x * r) * nw;
// y is what is quantized.  GLU (ops/q8_fusion.py: gate and up FCs of one input, silu(gate) * up): a second
// weight matrix wu (scales wus, sums wusum, bias ubias) over the same quantized rows, and
// v = (g * logistic(g)) * u before the activation / residual / chain epilogue.
// PF: the first PF weight words of each invocation are loaded before phase 1 (their latency hidden behind it).
// FLAT (one row, decode; ops/gemm_q8.py _flat_plan): each invocation reads its part of the row once into
// registers; TPR invocations per channel, batches of HB channels per slot, each batch loaded one ahead.
// Defines: GM GN GK KQ RM RN TILES_N HAS_BIAS ACT RESIDUAL ACT2 EPI_CHAIN SUBGROUP RMS EPS GLU HAS_UBIAS PF FLAT
//          TPR HB (FLAT)
//          DOT_EXT (the int_dot variants: dot4 is SPIR-V's OpSDot, exact as the plain int32 sum)
// Bindings: out_ x w (uvec4) ws (float [GN]) wsum (int [GN]) [bias] [res] [nw] [wu wus wusum [ubias]] [e1..]
#extension GL_EXT_control_flow_attributes : enable
#ifndef SUBGROUP
#define SUBGROUP 0
#endif
#if SUBGROUP
#extension GL_KHR_shader_subgroup_arithmetic : require
#extension GL_KHR_shader_subgroup_basic : require
#endif
#ifndef RMS
#define RMS 0
#endif
#ifndef GLU
#define GLU 0
#endif
#ifndef HAS_UBIAS
#define HAS_UBIAS 0
#endif
#ifndef EPI_CHAIN
#define EPI_CHAIN 0
#endif
#define NT gl_WorkGroupSize.x
#if RMS
#if !EPI_CHAIN
// @include ew_math.glsl
#endif
shared float red[NT];
// @include wg_reduce.glsl
#endif

#ifndef Q8_MODE
#define Q8_MODE 0
#endif
#if Q8_MODE == 0
shared uint xq[RM * KQ * 4];
shared float red_lo[NT];
shared float red_hi[NT];
shared int accs[RM * RN];
#if GLU
shared int accu[RM * RN];
#endif
shared float q_inv[RM];
shared int q_zp[RM];
#endif

#ifndef DOT_EXT
#define DOT_EXT 0
#endif
#if DOT_EXT
// the variant for devices with VK_KHR_shader_integer_dot_product: OpSDot on 4 x int8 packed words
#extension GL_EXT_spirv_intrinsics : require
spirv_instruction(extensions = ["SPV_KHR_integer_dot_product"], capabilities = [6019, 6018], id = 4450)
int q8_sdot(uint a, uint b, spirv_literal int fmt);
int dot4(uint a, uint b) { return q8_sdot(a, b, 0); }
#else
int dot4(uint a, uint b) {
    ivec4 ai = ivec4(bitfieldExtract(int(a), 0, 8), bitfieldExtract(int(a), 8, 8), bitfieldExtract(int(a), 16, 8),
                     bitfieldExtract(int(a), 24, 8));
    ivec4 bi = ivec4(bitfieldExtract(int(b), 0, 8), bitfieldExtract(int(b), 8, 8), bitfieldExtract(int(b), 16, 8),
                     bitfieldExtract(int(b), 24, 8));
    return ai.x * bi.x + ai.y * bi.y + ai.z * bi.z + ai.w * bi.w;
}
#endif

#ifndef PF
#define PF 0
#endif
#ifndef FLAT
#define FLAT 0
#endif
#ifndef XFIRST
#define XFIRST 0
#endif
#ifndef EPF
#define EPF 0
#endif
#if !FLAT && Q8_MODE == 0
// phase 2's int32 sums (per invocation), and one 16-byte word qd of each of its RN channels (wv; uv: up's)
// multiplied into them against the RM quantized rows
int acc[RM][RN];
#if GLU
int acu[RM][RN];
#endif
void mac(int qd, uvec4 wv[RN], uvec4 uv[RN]) {
    [[unroll]] for (int r = 0; r < RM; ++r) {
        int base = (r * KQ + qd) * 4;
        uvec4 xv = uvec4(xq[base], xq[base + 1], xq[base + 2], xq[base + 3]);
        [[unroll]] for (int n = 0; n < RN; ++n) {
            acc[r][n] += dot4(xv.x, wv[n].x) + dot4(xv.y, wv[n].y) + dot4(xv.z, wv[n].z) + dot4(xv.w, wv[n].w);
#if GLU
            acu[r][n] += dot4(xv.x, uv[n].x) + dot4(xv.y, uv[n].y) + dot4(xv.z, uv[n].z) + dot4(xv.w, uv[n].w);
#endif
        }
    }
}
#else
int dot16(uvec4 a, uvec4 b) { return dot4(a.x, b.x) + dot4(a.y, b.y) + dot4(a.z, b.z) + dot4(a.w, b.w); }
#endif

// @include qd8.glsl

#if Q8_MODE == 0
// the row's quantization scale and zero point from every invocation's min / max (uniform control flow:
// it has barriers)
void q_params(float lo, float hi, out float sc, out int zp) {
#if SUBGROUP
    lo = subgroupMin(lo);                        // (min / max: exact in any order)
    hi = subgroupMax(hi);
    if (subgroupElect()) {
        red_lo[gl_SubgroupID] = lo;
        red_hi[gl_SubgroupID] = hi;
    }
    barrier();
    float rmin = red_lo[0], rmax = red_hi[0];
    for (uint i = 1; i < gl_NumSubgroups; ++i) {
        rmin = min(rmin, red_lo[i]);
        rmax = max(rmax, red_hi[i]);
    }
#else
    uint tid = gl_LocalInvocationID.x;
    red_lo[tid] = lo;
    red_hi[tid] = hi;
    barrier();
    for (uint s = NT / 2; s > 0; s >>= 1) {
        if (tid < s) {
            red_lo[tid] = min(red_lo[tid], red_lo[tid + s]);
            red_hi[tid] = max(red_hi[tid], red_hi[tid + s]);
        }
        barrier();
    }
    float rmin = red_lo[0], rmax = red_hi[0];
#endif
    sc = qd8_scale(rmin, rmax);
    zp = qd8_zero_point(rmin, rmax, sc);
}
#endif

#if FLAT
// FLAT (one row, RM = 1): TPR invocations per channel, CPP = NT / TPR channel slots; slot sl takes the
// workgroup's channels sl, sl + CPP, ... (CH = RN / CPP of them) in batches of HB, each invocation words
// q0, q0 + TPR, ... (WPC of them) of the channel's row.  Batch b + 1 is loaded before batch b is
// multiplied (the first one before phase 1), so every invocation keeps a batch of loads in flight.
const int CPP = int(NT) / TPR, WPC = (KQ + TPR - 1) / TPR, CH = RN / CPP, BW = HB * WPC;
void fl_load(int n0, int b, int sl, int q0, out uvec4 bw[BW], out uvec4 bu[BW]) {
    [[unroll]] for (int h = 0; h < HB; ++h) [[unroll]] for (int j = 0; j < WPC; ++j) {
        int n = n0 + (b * HB + h) * CPP + sl, qd = q0 + j * TPR;
        bool ok = n < GN && qd < KQ;
        bw[h * WPC + j] = ok ? w[n * KQ + qd] : uvec4(0u);
#if GLU
        bu[h * WPC + j] = ok ? wu[n * KQ + qd] : uvec4(0u);
#else
        bu[h * WPC + j] = uvec4(0u);
#endif
    }
}
// batch b's int32 sums into accs (accu), through a subgroup sum where a subgroup lies in one channel
void fl_mac(int b, int sl, int q0, uvec4 bw[BW], uvec4 bu[BW]) {
    [[unroll]] for (int h = 0; h < HB; ++h) {
        int c = (b * HB + h) * CPP + sl, fa = 0, fb = 0;
        [[unroll]] for (int j = 0; j < WPC; ++j) {
            int qd = min(q0 + j * TPR, KQ - 1);  // (a word past the row was loaded as zeros)
            uvec4 xv = uvec4(xq[qd * 4], xq[qd * 4 + 1], xq[qd * 4 + 2], xq[qd * 4 + 3]);
            fa += dot16(xv, bw[h * WPC + j]);
#if GLU
            fb += dot16(xv, bu[h * WPC + j]);
#endif
        }
#if SUBGROUP
        if (TPR >= int(gl_SubgroupSize)) {       // (uniform) a subgroup within one channel
            fa = subgroupAdd(fa);
#if GLU
            fb = subgroupAdd(fb);
#endif
            if (subgroupElect()) {
                atomicAdd(accs[c], fa);
#if GLU
                atomicAdd(accu[c], fb);
#endif
            }
            continue;
        }
#endif
        atomicAdd(accs[c], fa);
#if GLU
        atomicAdd(accu[c], fb);
#endif
    }
}
#endif

// @include epi_chain.glsl

#if Q8_MODE != 0
// @include gemm_q8_tiled.glsl
#else
void main() {
    uint tid = gl_LocalInvocationID.x;
    int wg = int(gl_WorkGroupID.x + gl_NumWorkGroups.x * gl_WorkGroupID.y);
    int tn = wg % TILES_N, tm = wg / TILES_N;
    int m0 = tm * RM, n0 = tn * RN;
    if (m0 >= GM) return;                        // (whole workgroup: uniform)
#if FLAT
#if SUBGROUP
    int pos = int(gl_SubgroupID * gl_SubgroupSize + gl_SubgroupInvocationID);    // (a subgroup: consecutive)
#else
    int pos = int(tid);
#endif
    int sl = pos / TPR, q0 = pos % TPR;
    uvec4 fw[BW], fu[BW];
#if !XFIRST
    fl_load(n0, 0, sl, q0, fw, fu);
#endif
    // phase 1's input (one row: each invocation reads its XW words' floats once, into registers)
    const int XW = (KQ * 4 + int(NT) - 1) / int(NT);
    float xr[XW * 4];
#if RMS
    float nr[XW * 4];                            // (the norm's weights, loaded with the row)
#endif
    [[unroll]] for (int i = 0; i < XW; ++i) [[unroll]] for (int j = 0; j < 4; ++j) {
        int k = (int(tid) + i * int(NT)) * 4 + j;
        xr[i * 4 + j] = k < GK ? LD(x, k) : 0.0;
#if RMS
        nr[i * 4 + j] = k < GK ? LD(nw, k) : 0.0;
#endif
    }
#if XFIRST
    fl_load(n0, 0, sl, q0, fw, fu);              // (the first batch, after the row: its loads ahead of them)
#endif
#if EPF
    // the epilogue's operands of this invocation's channels n0 + tid + e * NT, loaded now: their latency
    // hidden behind phase 1 instead of following the sums
    const int EI = (RN + int(NT) - 1) / int(NT);
    int e_sum[EI];
    float e_ws[EI];
#if HAS_BIAS
    float e_b[EI];
#endif
#if RESIDUAL
    float e_res[EI];
#endif
#if GLU
    int e_usum[EI];
    float e_us[EI];
#if HAS_UBIAS
    float e_ub[EI];
#endif
#endif
    [[unroll]] for (int e = 0; e < EI; ++e) {
        int n = min(n0 + int(tid) + e * int(NT), GN - 1);    // (past GN: a copy, never stored)
        if (int(tid) + e * int(NT) >= RN) n = n0;             // (no channel: a load that hits the cache)
        e_sum[e] = LD(wsum, n);
        e_ws[e] = LD(ws, n);
#if HAS_BIAS
        e_b[e] = LD(bias, n);
#endif
#if RESIDUAL
        e_res[e] = LD(res, n);
#endif
#if GLU
        e_usum[e] = LD(wusum, n);
        e_us[e] = LD(wus, n);
#if HAS_UBIAS
        e_ub[e] = LD(ubias, n);
#endif
#endif
    }
#endif
#elif PF
    // the first PF of this invocation's weight words, loaded before phase 1 so that their latency
    // overlaps the row quantization (decode: usually every word it reads)
    uvec4 pw[PF][RN], pu[PF][RN];
    [[unroll]] for (int it = 0; it < PF; ++it) {
        int qd = int(tid) + it * int(NT);
        [[unroll]] for (int n = 0; n < RN; ++n) {
            bool ok = qd < KQ && n0 + n < GN;
            pw[it][n] = ok ? w[(n0 + n) * KQ + qd] : uvec4(0u);
#if GLU
            pu[it][n] = ok ? wu[(n0 + n) * KQ + qd] : uvec4(0u);
#else
            pu[it][n] = uvec4(0u);
#endif
        }
    }
#endif
    for (int i = int(tid); i < RM * RN; i += int(NT)) {   // (phase 1's barriers order these before phase 2)
        accs[i] = 0;
#if GLU
        accu[i] = 0;
#endif
    }
    // phase 1: quantize this workgroup's rows into shared memory
#if FLAT
#if RMS
    float ss = 0.0;
    [[unroll]] for (int e = 0; e < XW * 4; ++e) ss += xr[e] * xr[e];
    float rr = ew_rsqrt(wg_reduce(ss, false) / float(GK) + EPS);
    [[unroll]] for (int e = 0; e < XW * 4; ++e) {
        int k = (int(tid) + (e / 4) * int(NT)) * 4 + e % 4;
        if (k < GK) xr[e] = (xr[e] * rr) * nr[e];
    }
#endif
    float lo = 0.0, hi = 0.0;
    [[unroll]] for (int e = 0; e < XW * 4; ++e) {
        lo = min(lo, xr[e]);
        hi = max(hi, xr[e]);
    }
    float sc;
    int zp;
    q_params(lo, hi, sc, zp);
    if (tid == 0) {
        q_inv[0] = 1.0 / sc;
        q_zp[0] = zp;
    }
    [[unroll]] for (int i = 0; i < XW; ++i) {
        int wd = int(tid) + i * int(NT);
        uint word = 0u;
        [[unroll]] for (int j = 0; j < 4; ++j) {
            int q = qd8(xr[i * 4 + j], sc, zp);
            word |= (uint(q) & 0xffu) << (8 * j);
        }
        if (wd < KQ * 4) xq[wd] = word;
    }
    barrier();
#else
    [[dont_unroll]] for (int r = 0; r < RM; ++r) {
        int m = min(m0 + r, GM - 1);             // (rows past GM: a copy of the last, never stored)
#if RMS
        float ss = 0.0;
        for (int k = int(tid); k < GK; k += int(NT)) { float v = LD(x, m * GK + k); ss += v * v; }
        float rr = ew_rsqrt(wg_reduce(ss, false) / float(GK) + EPS);
#define XV(k) ((LD(x, m * GK + (k)) * rr) * LD(nw, (k)))
#else
#define XV(k) LD(x, m * GK + (k))
#endif
        float lo = 0.0, hi = 0.0;
        for (int k = int(tid); k < GK; k += int(NT)) {
            float v = XV(k);
            lo = min(lo, v);
            hi = max(hi, v);
        }
        float sc;
        int zp;
        q_params(lo, hi, sc, zp);
        if (tid == 0) {
            q_inv[r] = 1.0 / sc;
            q_zp[r] = zp;
        }
        for (int wd = int(tid); wd < KQ * 4; wd += int(NT)) {
            uint word = 0u;
            [[unroll]] for (int j = 0; j < 4; ++j) {
                int k = wd * 4 + j;
                float v = k < GK ? XV(k) : 0.0;
                int q = qd8(v, sc, zp);
                word |= (uint(q) & 0xffu) << (8 * j);
            }
            xq[r * KQ * 4 + wd] = word;
        }
        barrier();
    }
#endif
    // phase 2: int8 x int8 dot products, exact in int32
#if FLAT
    [[dont_unroll]] for (int b = 0; b < CH / HB; ++b) {
        uvec4 gw[BW], gu[BW];
        if (b + 1 < CH / HB) fl_load(n0, b + 1, sl, q0, gw, gu);
        fl_mac(b, sl, q0, fw, fu);
        fw = gw;
        fu = gu;
    }
#else
    [[unroll]] for (int r = 0; r < RM; ++r) [[unroll]] for (int n = 0; n < RN; ++n) {
        acc[r][n] = 0;
#if GLU
        acu[r][n] = 0;
#endif
    }
#if PF
    [[unroll]] for (int it = 0; it < PF; ++it) {
        int qd = int(tid) + it * int(NT);
        if (qd < KQ) mac(qd, pw[it], pu[it]);
    }
#endif
    for (int qd = int(tid) + PF * int(NT); qd < KQ; qd += int(NT)) {
        uvec4 wv[RN], uv[RN];
        [[unroll]] for (int n = 0; n < RN; ++n) {
            wv[n] = n0 + n < GN ? w[(n0 + n) * KQ + qd] : uvec4(0u);
#if GLU
            uv[n] = n0 + n < GN ? wu[(n0 + n) * KQ + qd] : uvec4(0u);
#else
            uv[n] = uvec4(0u);
#endif
        }
        mac(qd, wv, uv);
    }
    [[unroll]] for (int r = 0; r < RM; ++r) [[unroll]] for (int n = 0; n < RN; ++n) {
#if SUBGROUP
        int s = subgroupAdd(acc[r][n]);
        if (subgroupElect()) atomicAdd(accs[r * RN + n], s);
#if GLU
        int su = subgroupAdd(acu[r][n]);
        if (subgroupElect()) atomicAdd(accu[r * RN + n], su);
#endif
#else
        atomicAdd(accs[r * RN + n], acc[r][n]);
#if GLU
        atomicAdd(accu[r * RN + n], acu[r][n]);
#endif
#endif
    }
#endif
    barrier();
    // epilogue: dequantize, bias, activation, residual, chain
#if FLAT && EPF
    [[unroll]] for (int e = 0; e < EI; ++e) {
        int i = int(tid) + e * int(NT);
        if (i >= RN) continue;
#define EP(b, name, idx) name[e]
#else
    for (int i = int(tid); i < RM * RN; i += int(NT)) {
#define EP(b, name, idx) LD(b, idx)
#endif
        int r = i / RN, n = n0 + i % RN, m = m0 + i / RN;
        if (m >= GM || n >= GN) continue;
        float v = float(accs[i] - q_zp[r] * EP(wsum, e_sum, n)) * q_inv[r];
#if HAS_BIAS
        v = v * EP(ws, e_ws, n) + EP(bias, e_b, n);
#else
        v = v * EP(ws, e_ws, n);
#endif
#if GLU
        float u = float(accu[i] - q_zp[r] * EP(wusum, e_usum, n)) * q_inv[r];
#if HAS_UBIAS
        u = u * EP(wus, e_us, n) + EP(ubias, e_ub, n);
#else
        u = u * EP(wus, e_us, n);
#endif
        v = (v * ew_logistic(v)) * u;
#endif
        v = gpuc_act(v);
        int o = m * GN + n;
#if RESIDUAL
        v = gpuc_apply(v + EP(res, e_res, o), ACT2);
#endif
#if EPI_CHAIN
        v = epi_chain(o, v);
#endif
        ST(out_, o, v);
    }
}
#endif
