// @storage16
// Fused attention for long key sequences and heads up to 256 wide (LLM prefill; ops/attention.py picks
// it, passes/attention.py makes the op): the same inputs, views, steps and results as attention.comp,
// with wider register blocks and fewer barriers.  128 invocations per workgroup of BQ = 32 query rows
// of one batch, as 8 row groups x 16 key / value column groups: invocation (ty, tx) keeps the scores
// of rows 4 ty .. 4 ty + 3 against keys tx + 16 t (t < 4) of a 64-key tile and the output of those
// rows at columns 4 (tx + 16 vc) + u (vc < VCH, u < 4), in registers.  D is taken in DCH chunks of 64
// channels: with one chunk Q is staged once; with more, each tile stages Q's chunk with K's (Q of the
// block re-read from L2: the portable 32 KiB of shared memory do not hold all of Q and a K tile).  Per
// tile K, then V, share one buffer of 1024 vec4: K rows of 16 vec4 (one chunk), V in 64 / VKP passes of
// VKP keys x 16 VCH vec4; vec4 c4 of row r sits at c4 ^ (r % 8) (a swizzle: the global loads run along
// channels, coalesced, and the vec4 reads of 8 invocations hit 8 bank groups).  Online softmax in fp32 with the softmax's
// (x - max) * BETA form: a tile's row max is reduced through shared memory, every invocation keeps
// the running max of its rows and its own partial sum (rescaled as the max moves), summed at the end.
// Masked key tiles are skipped as in attention.comp (SKIP_BIAS, same conditions and caveats).
// Global loads go through registers, every value of a stage (a K / Q chunk, a V pass) issued at once;
// PF = 1 prefetches: V's first pass with K's first chunk at the tile's start (its latency hidden by the
// scores), each next chunk / pass while the current one is used (a workgroup runs one tile after another
// with few warps per SM at prefill sizes: load latency, not arithmetic, bounded it).
// Defines: those of attention.comp but RQ CK BK CV DC QCHUNKS VK SKV_SIZE PARTS; DCH = ceil(D / 64),
// VCH = ceil(DV / 64), VKP = 64 / (VCH rounded up to a power of 2), PF.
#extension GL_EXT_control_flow_attributes : enable
// @include ew_math.glsl
#define MASKED 1.0e30
#define NT 128
#define BQ 32
#define BK 64
#define NBIASX (NBIAS > 0 ? NBIAS : 1)
#define VW (16 * VCH)                   // vec4 per staged V row
#define KPT (BK * 64 / NT)              // K values an invocation stages per chunk (keys r0 + 2 u, channel cl)
#define QPT (BQ * 64 / NT)              // Q values per chunk (rows r0 + 2 u, channel cl)
#define VPT (VKP * 64 * VCH / NT)       // V values per pass (e = tid + NT u: key e / (64 VCH), column e % (64 VCH))
#define NVP (BK / VKP)                  // V passes per tile

shared vec4 sQ[BQ * 16];            // [row][channel / 4] (one chunk of 64 channels)
shared vec4 sKV[BK * 16];           // K: [key][channel / 4] (one chunk), then V: [key][column / 4], swizzled
shared vec4 sP[BK * (BQ / 4)];      // probabilities [key][row / 4]; the row max / sum partials [row][16]
#if SKIP_BIAS >= 0
// Tile t's live flag: sP's last vec4, component t % 2 (no shared memory past the 32 KiB above).  A live
// invocation writes the tile's tag there before the check's barrier; the tile runs where the slot then holds
// it.  No earlier value of the slot equals that tag: 0 at the start, probabilities (>= 0 or NaN; the row
// partials stay in sP's first 128 vec4), the tags of earlier tiles of that slot (-1 - t / 2: negative and
// exact in fp32, one each).  The tile's own writes to sP come after barriers that every invocation reaches
// only once it has read the flag, the next tile's flag is written after the tile's last barrier, and an
// invocation that skipped tile t writes tile t + 1's slot while another may still read t's (it writes t's
// slot again only past tile t + 1's barrier, when every invocation has read it).
#define LIVE_AT(t) sP[BK * (BQ / 4) - 1][(t) & 1]
#define LIVE_TAG(t) (-1.0 - float((t) >> 1))
#endif

// @include view_off.glsl

// Stage loads into registers (every value at once) and register stores into shared memory; tid, r0 = tid / 64,
// cl = tid % 64, j0, the view offsets and the register arrays kr / qr / vr in scope.
#define LOAD_K(ch) \
    [[unroll]] for (int u = 0; u < KPT; ++u) { \
        int j = j0 + r0 + 2 * u, c = 64 * (ch) + cl; \
        kr[u] = j < M && c < D ? LD(k, koff + j * K_SJ + c * K_SC) : 0.0; \
    }
#define STORE_K(ch) \
    [[unroll]] for (int u = 0; u < KPT; ++u) { \
        int jj = r0 + 2 * u; \
        float x = kr[u]; \
        if (j0 + jj < M && 64 * (ch) + cl < D) { \
            K_STEPS \
        } \
        sKV[jj * 16 + ((cl / 4) ^ (jj & 7))][cl % 4] = x; \
    }
#define LOAD_Q(ch) \
    [[unroll]] for (int u = 0; u < QPT; ++u) { \
        int i = i0 + r0 + 2 * u, c = 64 * (ch) + cl; \
        qr[u] = i < N && c < D ? LD(q, qoff + i * Q_SR + c * Q_SC) : 0.0; \
    }
#define STORE_Q(ch) \
    [[unroll]] for (int u = 0; u < QPT; ++u) { \
        float x = qr[u]; \
        if (i0 + r0 + 2 * u < N && 64 * (ch) + cl < D) { \
            Q_STEPS \
        } \
        sQ[(r0 + 2 * u) * 16 + cl / 4][cl % 4] = x; \
    }
#define LOAD_V(p) \
    [[unroll]] for (int u = 0; u < VPT; ++u) { \
        int e = tid + NT * u, cc = e % (64 * VCH), j = j0 + (p) * VKP + e / (64 * VCH); \
        vr[u] = j < M && cc < DV ? LD(v, voff + j * V_SJ + cc * V_SC) : 0.0; \
    }
#define STORE_V \
    [[unroll]] for (int u = 0; u < VPT; ++u) { \
        int e = tid + NT * u, cc = e % (64 * VCH), jj = e / (64 * VCH); \
        sKV[jj * VW + ((cc / 4) ^ (jj & 7))][cc % 4] = vr[u]; \
    }

void main() {
    int wg = int(gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x);
    if (wg >= NWG) return;                       // whole workgroup: uniform
    int qb = QBLOCKS - 1 - wg / NBATCH, b = wg % NBATCH;  // the last rows first: under a causal mask
                                                 // they have the most live tiles (longest first)
    int i0 = qb * BQ;
    int qoff, koff, voff, ooff;
    VIEW_OFF(qoff, Q_T, Q_NT, b)
    VIEW_OFF(koff, K_T, K_NT, b)
    VIEW_OFF(voff, V_T, V_NT, b)
    VIEW_OFF(ooff, O_T, O_NT, b)
    qoff += Q_OFF;
    koff += K_OFF;
    voff += V_OFF;
    int tid = int(gl_LocalInvocationIndex);
    int tx = tid % 16, ty = tid / 16, r0 = tid / 64, cl = tid % 64;
    float kr[KPT], vr[VPT];
#if DCH > 1
    float qr[QPT];
#endif
    int bo[NBIASX][4];                           // bias offsets of this invocation's rows
    for (int h = 0; h < NBIAS; ++h)
        for (int a = 0; a < 4; ++a)
            BIAS_OFF(bo[h][a], h, b * N + i0 + 4 * ty + a)
#if DCH == 1
    {
        float qr[QPT];
        LOAD_Q(0)
        STORE_Q(0)
    }
#endif
    float acc[4][4 * VCH], m_run[4], l_run[4];
    for (int a = 0; a < 4; ++a) {
        m_run[a] = -EW_INF;
        l_run[a] = 0.0;
        for (int u = 0; u < 4 * VCH; ++u) acc[a][u] = 0.0;
    }
#if SKIP_BIAS >= 0
    if (tid < 2) LIVE_AT(tid) = 0.0;
#endif
    barrier();
    for (int j0 = 0; j0 < M; j0 += BK) {
#if SKIP_BIAS >= 0
        {                                        // flag tile t (LIVE_AT) where some (row, key) is not masked
            int tile = j0 / BK;
            bool live = false;
            for (int a = 0; a < 4 && !live; ++a) {
                if (i0 + 4 * ty + a >= N) continue;
                if (!(m_run[a] > -0.1 * MASKED)) live = true;
                for (int t = 0; t < 4; ++t) {
                    int j = j0 + tx + 16 * t;
                    if (j < M && !(float(SKIP_SIGN) * SKIP_LD <= -MASKED)) live = true;
                }
            }
            if (live) LIVE_AT(tile) = LIVE_TAG(tile);
            barrier();
            if (LIVE_AT(tile) != LIVE_TAG(tile)) continue;    // uniform: every invocation read the same flag
        }
#endif
        float s[4][4];
        for (int a = 0; a < 4; ++a)
            for (int t = 0; t < 4; ++t) s[a][t] = 0.0;
#if PF
        LOAD_K(0)
#if DCH > 1
        LOAD_Q(0)
#endif
        LOAD_V(0)
#endif
        for (int ch = 0; ch < DCH; ++ch) {
            int c0 = 64 * ch;
            if (ch > 0) barrier();               // the previous chunk read
#if !PF
            LOAD_K(ch)
#if DCH > 1
            LOAD_Q(ch)
#endif
#endif
            STORE_K(ch)
#if DCH > 1
            STORE_Q(ch)
#endif
#if PF
            if (ch + 1 < DCH) {
                LOAD_K(ch + 1)
#if DCH > 1
                LOAD_Q(ch + 1)
#endif
            }
#endif
            barrier();
            int n4 = min(16, (D - c0 + 3) / 4);
            for (int c4 = 0; c4 < n4; ++c4) {
                vec4 qv[4], kv[4];
                for (int a = 0; a < 4; ++a) qv[a] = sQ[(4 * ty + a) * 16 + c4];
                for (int t = 0; t < 4; ++t) kv[t] = sKV[(tx + 16 * t) * 16 + (c4 ^ (tx & 7))];
                for (int a = 0; a < 4; ++a)
                    for (int t = 0; t < 4; ++t) s[a][t] += dot(qv[a], kv[t]);
            }
        }
        float mt[4];
        for (int a = 0; a < 4; ++a) {
            mt[a] = -EW_INF;
            for (int t = 0; t < 4; ++t) {
                int j = j0 + tx + 16 * t;
                float x = s[a][t];
                if (j < M) {
                    if (i0 + 4 * ty + a < N) {
                        SCORE_STEPS
                    }
                    mt[a] = max(mt[a], x);
                } else {
                    x = -EW_INF;                 // past the keys: weight 0
                }
                s[a][t] = x;
            }
        }
        for (int a = 0; a < 4; ++a) sP[(4 * ty + a) * 4 + tx / 4][tx % 4] = mt[a];
        barrier();                               // K read by all; the partial maxima written
        for (int a = 0; a < 4; ++a) {
            int o = (4 * ty + a) * 4;
            vec4 p0 = sP[o], p1 = sP[o + 1], p2 = sP[o + 2], p3 = sP[o + 3];
            float x = mt[a];
            for (int w = 0; w < 4; ++w) x = max(x, max(max(p0[w], p1[w]), max(p2[w], p3[w])));
            mt[a] = x;
        }
        barrier();                               // the partials read before P overwrites them
        for (int a = 0; a < 4; ++a) {
            float mn = max(m_run[a], mt[a]), al = 1.0, ls = 0.0;
            if (mn == -EW_INF) {                 // nothing but -inf so far: weights 0, nothing to rescale
                for (int t = 0; t < 4; ++t) s[a][t] = 0.0;
            } else {
                al = exp((m_run[a] - mn) * BETA);
                for (int t = 0; t < 4; ++t) {
                    float p = exp((s[a][t] - mn) * BETA);
                    s[a][t] = p;
                    ls += p;
                }
                m_run[a] = mn;
            }
            l_run[a] = l_run[a] * al + ls;
            for (int u = 0; u < 4 * VCH; ++u) acc[a][u] *= al;
        }
        for (int t = 0; t < 4; ++t) sP[(tx + 16 * t) * (BQ / 4) + ty] = vec4(s[0][t], s[1][t], s[2][t], s[3][t]);
        for (int pv_ = 0; pv_ < NVP; ++pv_) {   // V: VKP keys a pass, lanes along columns
            int k0 = pv_ * VKP;
            if (pv_ > 0) barrier();              // the previous pass read
#if !PF
            LOAD_V(pv_)
#endif
            STORE_V
#if PF
            if (pv_ + 1 < NVP) {
                LOAD_V(pv_ + 1)
            }
#endif
            barrier();                           // P and V staged
            for (int jj = 0; jj < VKP; ++jj) {
                vec4 pv = sP[(k0 + jj) * (BQ / 4) + ty];
                for (int vc = 0; vc < VCH; ++vc) {
                    vec4 vv = sKV[jj * VW + ((tx + 16 * vc) ^ (jj & 7))];
                    for (int a = 0; a < 4; ++a)
                        for (int u = 0; u < 4; ++u) acc[a][4 * vc + u] += pv[a] * vv[u];
                }
            }
        }
        barrier();                               // V and P read before the next tile's writes
    }
    for (int a = 0; a < 4; ++a) sP[(4 * ty + a) * 4 + tx / 4][tx % 4] = l_run[a];
    barrier();
    for (int a = 0; a < 4; ++a) {
        int i = i0 + 4 * ty + a;
        if (i >= N) continue;
        int o = (4 * ty + a) * 4;
        vec4 l4 = sP[o] + sP[o + 1] + sP[o + 2] + sP[o + 3];
        float l = (l4.x + l4.y) + (l4.z + l4.w);
        float inv = l > 0.0 ? 1.0 / l : EW_NAN;      // NaN sum, or a row of -inf only
        for (int vc = 0; vc < VCH; ++vc)
            for (int u = 0; u < 4; ++u) {
                int c = 4 * (tx + 16 * vc) + u;
                if (c < DV) ST(out_, ooff + i * O_SR + c * O_SC, acc[a][4 * vc + u] * inv);
            }
    }
}
