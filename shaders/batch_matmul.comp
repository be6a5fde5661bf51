// @storage16
// BATCH_MATMUL: out[b, m, n] = sum_k A_b[m, k] * B_b[k, n] with broadcast batch dims, one workgroup
// per BM x BN output tile of one batch.  A and B are read through strides (adjoint = swapped strides):
// A_b[m, k] = a[A_off(b) + m * A_SM + k * A_SK], B_b[k, n] = b[B_off(b) + k * B_SK + n * B_SN]; the
// batch offsets come from the output batch index through A_BSTR / B_BSTR (0 on broadcast dims).
// A BK-deep chunk of both tiles is staged through shared memory, loaded along whichever of the two
// axes is contiguous in memory (A_KFAST: k, else m; B_NFAST: n, else k); each invocation accumulates a
// TM x TN register block (rows ty + i * BM/TM, columns tx + j * BN/TN).  Every edge is bounds-checked.
// IM2COL (CONV_3D as an implicit GEMM): A[m, k] is gathered from the NDHWC input `a` with
// m = (n, oz, oy, ox) and k = (kd, kh, kw, ci) (zero outside the input: padding), B is the filter
// [KD*KH*KW*CI][CO] as stored, and EPILOGUE adds bias[n] (HAS_BIAS) and the fused activation (range_act).
// EPI_CHAIN: a fused elementwise chain on each output element last (epi_chain.glsl: scaling, bias /
// mask / residual ADD, GELU ... with inputs e1..; passes/gemm_epilogue.py).
// Defines: M N K NB OUT_BATCH[] A_BSTR[] B_BSTR[] A_SM A_SK B_SK B_SN A_KFAST B_NFAST
//          BM BN BK TM TN TILES_M TILES_N NWG; IM2COL with D H W CI OD OH OW KH KW SD SH SW DD DH DW
//          PF PT PL; EPILOGUE HAS_BIAS ACT; EPI_CHAIN (epi_chain.glsl)
// CHUNKED (ops/batch_matmul.py in_k_chunks, a deep K for the tile's invocations): the dispatch sums K elements
// steps = [first, count] (a multiple of BK), starting from the partial sums the dispatch before left in ps
// (float32 [batch][M][N]); all but the last store their sums there, the last applies the epilogue.
#ifndef CHUNKED
#define CHUNKED 0
#endif
#define BMT (BM / TM)
#define BNT (BN / TN)
#define NT (BMT * BNT)
shared float sa[BK * (BM + 1)];
shared float sb[BK * (BN + 1)];

#if IM2COL
float load_a(int aoff, int m, int k) {
    int ci = k % CI;
    int t = k / CI;
    int kw = t % KW;
    t /= KW;
    int kh = t % KH;
    int kd = t / KH;
    int ox = m % OW;
    int u = m / OW;
    int oy = u % OH;
    u /= OH;
    int oz = u % OD;
    int n = u / OD;
    int iz = oz * SD - PF + kd * DD, iy = oy * SH - PT + kh * DH, ix = ox * SW - PL + kw * DW;
    if (iz < 0 || iz >= D || iy < 0 || iy >= H || ix < 0 || ix >= W) return 0.0;
    return LD(a, (((n * D + iz) * H + iy) * W + ix) * CI + ci);
}
#else
float load_a(int aoff, int m, int k) { return LD(a, aoff + m * A_SM + k * A_SK); }
#endif

#if EPILOGUE
// CONV_3D's fused activation as LiteRT's kernel applies it: a clamp to the activation's range
// (+-FLT_MAX for NONE and an ignored TANH / SIGN_BIT) whose NaN result is the upper bound.
float range_act(float v) {
    float lo = (ACT == 1 || ACT == 3) ? 0.0 : ACT == 2 ? -1.0 : -3.40282347e38;
    float hi = ACT == 2 ? 1.0 : ACT == 3 ? 6.0 : 3.40282347e38;
    return isnan(v) ? hi : clamp(v, lo, hi);
}
#endif

// @include epi_chain.glsl
float epilogue(int n, float v) {
#if EPILOGUE
#if HAS_BIAS
    v += LD(bias, n);
#endif
    v = gpuc_act(range_act(v));     // (gpuc_act: the same clamp again, and a fake quant where there is one)
#endif
    return v;
}

void main() {
    int wg = int(gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x);
    if (wg >= NWG) return;                       // whole workgroup: uniform
    int tn = wg % TILES_N;
    int t = wg / TILES_N;
    int tm = t % TILES_M;
    int bt = t / TILES_M;
    int m0 = tm * BM, n0 = tn * BN;
    int aoff = 0, boff = 0, r = bt;
    for (int d = NB - 1; d >= 0; --d) {
        int i = r % OUT_BATCH[d];
        r /= OUT_BATCH[d];
        aoff += i * A_BSTR[d];
        boff += i * B_BSTR[d];
    }
    int tid = int(gl_LocalInvocationIndex);
    int tx = tid % BNT, ty = tid / BNT;
    float acc[TM][TN];
    for (int i = 0; i < TM; ++i)
        for (int j = 0; j < TN; ++j) acc[i][j] = 0.0;
#if CHUNKED
    int kfirst = steps[0], klast = steps[0] + steps[1];
    if (kfirst > 0)
        for (int i = 0; i < TM; ++i)
            for (int j = 0; j < TN; ++j) {
                int m = m0 + ty + i * BMT, n = n0 + tx + j * BNT;
                if (m < M && n < N) acc[i][j] = float(LD(ps, (bt * M + m) * N + n));
            }
#else
    int kfirst = 0, klast = K;
#endif

    for (int k0 = kfirst; k0 < klast; k0 += BK) {
        for (int e = tid; e < BK * BM; e += NT) {
#if A_KFAST
            int kk = e % BK, mm = e / BK;
#else
            int mm = e % BM, kk = e / BM;
#endif
            int m = m0 + mm, k = k0 + kk;
            sa[kk * (BM + 1) + mm] = (m < M && k < klast) ? load_a(aoff, m, k) : 0.0;
        }
        for (int e = tid; e < BK * BN; e += NT) {
#if B_NFAST
            int nn = e % BN, kk = e / BN;
#else
            int kk = e % BK, nn = e / BK;
#endif
            int n = n0 + nn, k = k0 + kk;
            sb[kk * (BN + 1) + nn] = (n < N && k < klast) ? LD(b, boff + k * B_SK + n * B_SN) : 0.0;
        }
        barrier();
        for (int kk = 0; kk < BK; ++kk) {
            float av[TM], bv[TN];
            for (int i = 0; i < TM; ++i) av[i] = sa[kk * (BM + 1) + ty + i * BMT];
            for (int j = 0; j < TN; ++j) bv[j] = sb[kk * (BN + 1) + tx + j * BNT];
            for (int i = 0; i < TM; ++i)
                for (int j = 0; j < TN; ++j) acc[i][j] += av[i] * bv[j];
        }
        barrier();
    }
#if CHUNKED
    if (klast < K) {
        for (int i = 0; i < TM; ++i)
            for (int j = 0; j < TN; ++j) {
                int m = m0 + ty + i * BMT, n = n0 + tx + j * BNT;
                if (m < M && n < N) ST(ps, (bt * M + m) * N + n, acc[i][j]);
            }
        return;
    }
#endif
    for (int i = 0; i < TM; ++i) {
        int m = m0 + ty + i * BMT;
        for (int j = 0; j < TN; ++j) {
            int n = n0 + tx + j * BNT;
            if (m < M && n < N) {
                int o = (bt * M + m) * N + n;
                float v = epilogue(n, acc[i][j]);
#if EPI_CHAIN
                v = epi_chain(o, v);             // a fused elementwise chain (epi_chain.glsl)
#endif
                ST(out_, o, v);
            }
        }
    }
}
