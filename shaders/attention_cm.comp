// @storage16
// Fused attention on cooperative matrices: the `coopmat` variant of an ATTENTION dispatch of an fp16
// bundle (ops/attention_cm.py), the same results as attention.comp within
// fp16 rounding.  A workgroup takes BQ = 16 * NSG query rows of one batch, a subgroup 16 of them: Q once
// into NSG x (D / 16) fp16 A tiles (after Q_STEPS); per tile of BK keys, K and V are staged in shared
// memory as fp16 (K after K_STEPS; each tile's global loads are issued into registers while the one
// before is computed), S = Q K^T comes from 16 x 16 x 16 products with fp32 sums, goes to
// shared memory, where two invocations per row apply SCORE_STEPS and the online softmax (fp32, the
// softmax's (x - max) * BETA form) and write the probabilities as fp16; the output accumulators (DV / 16
// fp32 tiles a subgroup) get P V added; on the rare tiles where a row's running max moves they are rescaled
// through shared memory (which row an accumulator element holds is the implementation's).  At the end each
// accumulator is staged through shared memory, scaled by its row's 1 / sum and written through the output
// view (O_T, O_SR, O_SC) in out_'s storage type.  Operand views as attention.comp's; Q4 / K4 / V4: that
// operand's loads move 4 channels.  A subgroup whose rows all lie past N computes nothing.
// Unlike attention.comp a NaN / Inf input is not given the unfused ops' exact NaN pattern.
// Bias / mask operands (NBIAS > 0: SCORE_STEPS adds or subtracts bias h at its row offset bo[h][0] and key
// stride B_SJ[h], the row offsets from attention.comp's view terms B_T / B_FIRST / B_NT): every key tile is
// computed (attention.comp's skipping of fully masked tiles is its own; their weights are 0 here too).
// CM_EMULATE=1 (tests, CompileOptions.coopmat_emulate: lavapipe has no cooperative matrices): the same
// staging and softmax with each product computed per invocation from shared memory (SG invocations stand
// for a subgroup, invocation lane owning elements lane + q * SG of a tile).
// KSPLIT > 1 (attention.comp's split form, ops/attention.py key_split): workgroup (block, batch) * KSPLIT + part
// takes part `part` of the 16-key tiles and writes its rows' unnormalised [m, l, acc[DV]] (m the lazy running
// max its sums are relative to) to out_ as attention.comp's parts do, for shaders/attention_merge.comp.
// Defines: N M D DV NBATCH QBLOCKS NWG BETA NSG BK KSPLIT Q_T[] Q_NT Q_SR Q_SC Q_OFF K_T[] K_NT K_SJ K_SC K_OFF
//          V_T[] V_NT V_SJ V_SC V_OFF O_T[] O_NT O_SR O_SC SC[] Q_STEPS K_STEPS SCORE_STEPS CM_EMULATE
//          NBIAS B_T[] B_FIRST[] B_NT[] B_SJ[] Q4 K4 V4
// @include ew_math.glsl
#extension GL_EXT_control_flow_attributes : enable
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#ifndef CM_EMULATE
#define CM_EMULATE 0
#endif
#if !CM_EMULATE
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#extension GL_KHR_shader_subgroup_vote : require
#endif
// @include attention_part.glsl
#define SG 32
#define NT (SG * NSG)
#define BQ (16 * NSG)
#define DP (D + 8)
#define DVP (DV + 8)
#define SSP (BK + 4)
#define SPP (BK + 8)
#define ND (D / 16)
#define NDV (DV / 16)
#define NKT (BK / 16)
#define NE (256 / SG)

shared float16_t sQ[BQ * DP];
shared float16_t sK[BK * DP];
shared float16_t sV[BK * DVP];
shared float sS[NSG * 16 * SSP];     // a subgroup's scores, and its staged output tiles
shared float16_t sP[NSG * 16 * SPP];
shared float sRed[NT];
shared float sRow[BQ];               // per row: the tile's rescale factor, at the end 1 / sum

// @include view_off.glsl

// The softmax's steps touch only the subgroup's own rows: on the device a subgroup barrier orders them and
// the two invocations of a row trade their partial max and sum by a shuffle (emulated: workgroup barriers
// and shared memory, as every invocation of the workgroup stands in a subgroup there).
#define LAZY 8.0
#if CM_EMULATE
#define ANY_ROW(b) true
#define SG_SYNC() barrier();
#define PAIR_MAX(x) { sRed[tid] = x; barrier(); x = max(x, sRed[tid ^ 1]); barrier(); }
#define PAIR_SUM(x) { sRed[tid] = x; barrier(); x = x + sRed[tid ^ 1]; barrier(); }
#else
#define ANY_ROW(b) subgroupAny(b)
#define SG_SYNC() { subgroupMemoryBarrierShared(); subgroupBarrier(); }
#define PAIR_MAX(x) { x = max(x, subgroupShuffleXor(x, 1)); }
#define PAIR_SUM(x) { x = x + subgroupShuffleXor(x, 1); }
#endif
#if CM_EMULATE
#define ACC float[NE]
#define ACC_FILL(m, x) for (int q_ = 0; q_ < NE; ++q_) m[q_] = (x);
#define ACC_STORE(m, arr, base, stride) for (int q_ = 0; q_ < NE; ++q_) { int e_ = lane + q_ * SG; arr[(base) + (e_ / 16) * (stride) + e_ % 16] = m[q_]; }
#else
#define ACC coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>
#define ACC_FILL(m, x) m = ACC(x);
#define ACC_STORE(m, arr, base, stride) coopMatStore(m, arr, base, stride, gl_CooperativeMatrixLayoutRowMajor);
#endif

// K4 / V4 / Q4 = 1 (ops/attention_cm.py vector_reads): that operand's channels are contiguous and every row
// starts at a multiple of 4 elements, and its binding is declared as 4-vectors: a load moves 4 channels.
#ifndef K4
#define K4 0
#endif
#ifndef V4
#define V4 0
#endif
#ifndef Q4
#define Q4 0
#endif
#define KW_ (K4 != 0 ? 4 : 1)                // elements per load
#define VW_ (V4 != 0 ? 4 : 1)
#define KPT ((BK * D / KW_ + NT - 1) / NT)   // K / V loads an invocation makes a tile
#define VPT ((BK * DV / VW_ + NT - 1) / NT)
#if K4
f16vec4 kr[KPT];
#else
float16_t kr[KPT];
#endif
#if V4
f16vec4 vr[VPT];
#else
float16_t vr[VPT];
#endif

void fetch(int j0, int koff, int voff, int tid) {
    // (an element past the keys or the tile reads key 0, channel 0 and is then zeroed: every load address
    // stays inside the operand, whether or not the compiler issues the load before the test)
    [[unroll]] for (int u = 0; u < KPT; ++u) {
        int e = tid + u * NT, j = j0 + e / (D / KW_);
        bool ok = e < BK * D / KW_ && j < M;
#if K4
        vec4 x4 = LD(k, (koff + (ok ? j * K_SJ + (e % (D / 4)) * 4 : 0)) >> 2);
        [[unroll]] for (int c_ = 0; c_ < 4; ++c_) {
            float x = x4[c_];
            K_STEPS
            x4[c_] = x;
        }
        kr[u] = f16vec4(ok ? x4 : vec4(0.0));
#else
        float x = LD(k, koff + (ok ? j * K_SJ + (e % D) * K_SC : 0));
        K_STEPS
        kr[u] = float16_t(ok ? x : 0.0);
#endif
    }
    [[unroll]] for (int u = 0; u < VPT; ++u) {
        int e = tid + u * NT, j = j0 + e / (DV / VW_);
        bool ok = e < BK * DV / VW_ && j < M;
#if V4
        vr[u] = f16vec4(ok ? LD(v, (voff + (ok ? j * V_SJ + (e % (DV / 4)) * 4 : 0)) >> 2) : vec4(0.0));
#else
        float x = LD(v, voff + (ok ? j * V_SJ + (e % DV) * V_SC : 0));
        vr[u] = float16_t(ok ? x : 0.0);
#endif
    }
}

// Store the fetched tile into sK / sV.
void stage(int tid) {
    [[unroll]] for (int u = 0; u < KPT; ++u) {
        int e = tid + u * NT;
#if K4
        if (e < BK * D / 4)
            [[unroll]] for (int c_ = 0; c_ < 4; ++c_) sK[(e / (D / 4)) * DP + (e % (D / 4)) * 4 + c_] = kr[u][c_];
#else
        if (e < BK * D) sK[(e / D) * DP + e % D] = kr[u];
#endif
    }
    [[unroll]] for (int u = 0; u < VPT; ++u) {
        int e = tid + u * NT;
#if V4
        if (e < BK * DV / 4)
            [[unroll]] for (int c_ = 0; c_ < 4; ++c_) sV[(e / (DV / 4)) * DVP + (e % (DV / 4)) * 4 + c_] = vr[u][c_];
#else
        if (e < BK * DV) sV[(e / DV) * DVP + e % DV] = vr[u];
#endif
    }
}

void main() {
    int wg = int(gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x);
    if (wg >= NWG) return;                       // whole workgroup: uniform
    int ks = wg % KSPLIT;                        // this workgroup's part of the key tiles
    wg /= KSPLIT;
    int qb = wg % QBLOCKS, b = wg / QBLOCKS;
    int j_begin = PART_BEGIN(ks), j_end = PART_END(ks);
    int i0 = qb * BQ;
    int qoff, koff, voff, ooff;
    VIEW_OFF(qoff, Q_T, Q_NT, b)
    VIEW_OFF(koff, K_T, K_NT, b)
    VIEW_OFF(voff, V_T, V_NT, b)
    VIEW_OFF(ooff, O_T, O_NT, b)
    qoff += Q_OFF;
    koff += K_OFF;
    voff += V_OFF;
#if CM_EMULATE
    int tid = int(gl_LocalInvocationIndex), sub = tid / SG, lane = tid % SG;
#else
    int tid = int(gl_LocalInvocationIndex), sub = int(gl_SubgroupID), lane = int(gl_SubgroupInvocationID);
#endif
    int sbase = sub * 16 * SSP, pbase = sub * 16 * SPP;
    fetch(j_begin, koff, voff, tid);             // the first tile's loads, in flight with Q's
#if Q4
    [[unroll]] for (int e = tid; e < BQ * D / 4; e += NT) {     // Q, after its steps, as fp16, 4 channels a load
        int r = e / (D / 4), c = (e % (D / 4)) * 4, i = i0 + r;
        vec4 x4 = LD(q, (qoff + (i < N ? i * Q_SR + c : 0)) >> 2);
        [[unroll]] for (int c_ = 0; c_ < 4; ++c_) {
            float x = x4[c_];
            Q_STEPS
            sQ[r * DP + c + c_] = float16_t(i < N ? x : 0.0);
        }
    }
#else
    [[unroll]] for (int e = tid; e < BQ * D; e += NT) {     // Q, after its steps, as fp16
        int r = e / D, c = e % D, i = i0 + r;
        float x = LD(q, qoff + (i < N ? i * Q_SR + c * Q_SC : 0));
        Q_STEPS
        sQ[r * DP + c] = float16_t(i < N ? x : 0.0);
    }
#endif
    ACC o[NDV];
    for (int t = 0; t < NDV; ++t) ACC_FILL(o[t], 0.0)
    // A subgroup whose 16 query rows all lie past N (the last block of a row count not a multiple of BQ) skips
    // the products and the softmax; it still takes the workgroup's barriers (emulated: every subgroup works,
    // as its steps share the workgroup's barriers).
#if CM_EMULATE
    const bool live = true;
#else
    bool live = i0 + sub * 16 < N;
#endif
    barrier();
#if !CM_EMULATE
    coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA> qa[ND];
    for (int t = 0; t < ND; ++t)
        coopMatLoad(qa[t], sQ, sub * 16 * DP + t * 16, DP, gl_CooperativeMatrixLayoutRowMajor);
#endif
    int row = lane >> 1, half_ = lane & 1;       // the softmax: two invocations a row, BK / 2 keys each
#if NBIAS > 0
    const int a = 0;                             // (SCORE_STEPS reads bias h at bo[h][a] + j * B_SJ[h])
    int bo[NBIAS][1];                            // ... this invocation's row's offsets (a padded row: the last's)
    for (int h = 0; h < NBIAS; ++h)
        BIAS_OFF(bo[h][0], h, b * N + min(i0 + sub * 16 + row, N - 1))
#endif
    float m_run = -EW_INF, l_run = 0.0;
    for (int j0 = j_begin; j0 < j_end; j0 += BK) {
        stage(tid);                              // the tile fetched during the previous one
        barrier();
        fetch(j0 + BK, koff, voff, tid);         // the next tile's loads in flight meanwhile
        if (live) {
        for (int ct = 0; ct < NKT; ++ct) {       // S = Q K^T, 16 keys at a time
            ACC s;
            ACC_FILL(s, 0.0)
#if CM_EMULATE
            for (int q_ = 0; q_ < NE; ++q_) {
                int e_ = lane + q_ * SG, r_ = e_ / 16, c_ = e_ % 16;
                float a_ = 0.0;
                for (int c = 0; c < D; ++c)
                    a_ += float(sQ[(sub * 16 + r_) * DP + c]) * float(sK[(ct * 16 + c_) * DP + c]);
                s[q_] = a_;
            }
#else
            for (int t = 0; t < ND; ++t) {
                coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseB> kb;
                coopMatLoad(kb, sK, ct * 16 * DP + t * 16, DP, gl_CooperativeMatrixLayoutColumnMajor);
                s = coopMatMulAdd(qa[t], kb, s);
            }
#endif
            ACC_STORE(s, sS, sbase + ct * 16, SSP)
        }
        SG_SYNC()
        float mt = -EW_INF, x_[BK / 2];
        int i = i0 + sub * 16 + row;
        [[unroll]] for (int c = 0; c < BK / 2; ++c) {
            int col = half_ * (BK / 2) + c, j = j0 + col;
            float x = sS[sbase + row * SSP + col];
            if (j < j_end) {
                SCORE_STEPS
            } else {
                x = -EW_INF;
            }
            x_[c] = x;
            mt = max(mt, x);
        }
        PAIR_MAX(mt)
        // Lazy rescaling: the running max moves only when a tile's max exceeds it by more than LAZY / BETA
        // (probabilities then stay below e^LAZY, fine in fp16 and in the fp32 sums), so the output
        // accumulators are rescaled on few tiles; the first live tile sets it (nothing to rescale then).
        bool grow = m_run == -EW_INF ? mt != -EW_INF : (mt - m_run) * BETA > LAZY;
        float mn = grow ? max(m_run, mt) : m_run, al = 1.0, ls = 0.0;
        [[unroll]] for (int c = 0; c < BK / 2; ++c) {
            float p = mn == -EW_INF ? 0.0 : exp((x_[c] - mn) * BETA);
            sP[pbase + row * SPP + half_ * (BK / 2) + c] = float16_t(p);
            ls += p;
        }
        bool rescale = grow && m_run != -EW_INF;
        if (grow) {
            al = m_run == -EW_INF ? 0.0 : exp((m_run - mn) * BETA);
            m_run = mn;
        }
        PAIR_SUM(ls)
        if (half_ == 0) sRow[sub * 16 + row] = al;
        SG_SYNC()
        l_run = l_run * al + ls;
        if (ANY_ROW(rescale))                    // rescale (rows whose max moved), then O += P V
            for (int t = 0; t < NDV; ++t) {
#if CM_EMULATE
                for (int q_ = 0; q_ < NE; ++q_) o[t][q_] *= sRow[sub * 16 + (lane + q_ * SG) / 16];
#else
                // (the rows of an accumulator's elements are the implementation's: through shared memory)
                coopMatStore(o[t], sS, sbase, SSP, gl_CooperativeMatrixLayoutRowMajor);
                SG_SYNC()
                for (int e = lane; e < 256; e += SG) sS[sbase + (e / 16) * SSP + e % 16] *= sRow[sub * 16 + e / 16];
                SG_SYNC()
                coopMatLoad(o[t], sS, sbase, SSP, gl_CooperativeMatrixLayoutRowMajor);
                SG_SYNC()
#endif
            }
#if CM_EMULATE
        for (int t = 0; t < NDV; ++t)
            for (int q_ = 0; q_ < NE; ++q_) {
                int e_ = lane + q_ * SG, r_ = e_ / 16, c_ = e_ % 16;
                float a_ = 0.0;
                for (int jj = 0; jj < BK; ++jj)
                    a_ += float(sP[pbase + r_ * SPP + jj]) * float(sV[jj * DVP + t * 16 + c_]);
                o[t][q_] += a_;
            }
#else
        for (int kt = 0; kt < NKT; ++kt) {
            coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA> pa;
            coopMatLoad(pa, sP, pbase + kt * 16, SPP, gl_CooperativeMatrixLayoutRowMajor);
            for (int t = 0; t < NDV; ++t) {
                coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseB> vb;
                coopMatLoad(vb, sV, kt * 16 * DVP + t * 16, DVP, gl_CooperativeMatrixLayoutRowMajor);
                o[t] = coopMatMulAdd(pa, vb, o[t]);
            }
        }
#endif
        }                                        // (live)
        barrier();
    }
#if KSPLIT > 1
    int prow = i0 + sub * 16 + row;              // this part's statistics of the row, unnormalised sums below
    if (half_ == 0 && prow < N) {
        int base = PART_ROW(b * N + prow, ks);
        ST(out_, base, m_run);
        ST(out_, base + 1, l_run);
    }
    if (half_ == 0) sRow[sub * 16 + row] = 1.0;
#else
    if (half_ == 0) sRow[sub * 16 + row] = l_run > 0.0 ? 1.0 / l_run : EW_NAN;
#endif
    SG_SYNC()
    for (int t = 0; t < NDV; ++t) {
        ACC_STORE(o[t], sS, sbase, SSP)          // (each row then scaled by its sRow on the way out)
        SG_SYNC()
        for (int e = lane; e < 256; e += SG) {
            int r = e / 16, c = t * 16 + e % 16, i = i0 + sub * 16 + r;
            float y = sS[sbase + r * SSP + e % 16] * sRow[sub * 16 + r];
#if KSPLIT > 1
            if (i < N && c < DV) ST(out_, PART_ROW(b * N + i, ks) + 2 + c, y);
#else
            if (i < N && c < DV) ST(out_, ooff + i * O_SR + c * O_SC, y);
#endif
        }
        SG_SYNC()
    }
}
