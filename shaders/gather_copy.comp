// @storage16
// One output written from several sources through piecewise strided index maps (GATHER_COPY: a folded
// chain of data-movement ops, passes/movement_fold.py, ops/gather_copy.py).  The output is cut into
// NREG regions, each a strided N-d copy out[DOFF + c.DST] = src[SOFF + c.SST] over c in SHAPE (as
// copy_nd.comp) from source binding SRC (s0 .. s<NSRC-1>: tensors, or whole-arena views whose SOFF
// are arena offsets), or a fill of the 32-bit pattern FILL (SRC = -1).  Invocation gid belongs to the
// region r with START[r] <= gid < START[r + 1] (a binary search).  Values are moved without
// arithmetic, so NaN payloads and -0.0 stay as they are.
// Defines: NSRC, NREG, RANK, IS_INT, ACT (an activation code, applied to every element), TABLE (0: constant arrays R_START[NREG + 1], R_SRC[], R_FILL
// (a uint[] initializer), R_SOFF[], R_DOFF[], R_SHAPE[NREG * RANK], R_SST[], R_DST[]; 1: the same
// fields in the int binding `tab`, REG_WORDS per region: start, src, fill, soff, doff, shape[RANK],
// sst[RANK], dst[RANK]).
// VEC > 0: wide words (ops/gather_copy.py): the bindings are 4-vectors of their storage type and the
// regions count words; invocation gid copies the VEC consecutive words at si, di (the innermost
// strides are VEC).  Words move as they are stored (converted only where a source's storage type
// differs from the output's: <binding>_F16, 1 for float16 storage, from the renderer); a fill is its
// pattern in every lane; ACT applies per component.
#ifndef VEC
#define VEC 0
#endif
#if TABLE
#define START(r) tab[(r) * REG_WORDS]
#define F(r, k) tab[(r) * REG_WORDS + (k)]
#define SRC(r) F(r, 1)
#define FILL(r) uint(F(r, 2))
#define SOFF(r) F(r, 3)
#define DOFF(r) F(r, 4)
#define SHAPE(r, d) F(r, 5 + (d))
#define SST(r, d) F(r, 5 + RANK + (d))
#define DST(r, d) F(r, 5 + 2 * RANK + (d))
#else
const uint R_FILL_A[NREG] = R_FILL;
#define START(r) R_START[r]
#define SRC(r) R_SRC[r]
#define FILL(r) R_FILL_A[r]
#define SOFF(r) R_SOFF[r]
#define DOFF(r) R_DOFF[r]
#define SHAPE(r, d) R_SHAPE[(r) * RANK + (d)]
#define SST(r, d) R_SST[(r) * RANK + (d)]
#define DST(r, d) R_DST[(r) * RANK + (d)]
#endif

#if VEC
// A word is stored as it is read where the source's storage type is the output's (<binding>_F16: float16
// storage, from the renderer): every bit kept, NaN payloads included.  Otherwise (float32 and float16
// storage mixed) it converts through the arithmetic type (vec4 for both), as the scalar path's LD / ST:
// no local of a float16 type (16-bit storage allows none, and glslang miscompiles an f16vec4(f16vec4)
// constructor).  ACT (or the test hook): through the arithmetic type, per component, as the scalar path.
#if ACT || defined(GPUC_TEST_BROKEN)
#define GC_ARITH 1
out__A gc_act(out__A a) {
#if ACT
    for (int c = 0; c < 4; ++c) a[c] = gpuc_apply(a[c], ACT);   // as the scalar path, per component
#endif
#ifdef GPUC_TEST_BROKEN
    a += out__A(1);                     // test hook only (GPUC_TEST_BREAK_OP)
#endif
    return a;
}
#define GC_PUT(e) out_[di + w] = out__S(gc_act(out__A(e)))
#else
#define GC_ARITH 0
#define GC_PUT(e) out_[di + w] = out__S(out__A(e))
#endif
#if !GC_ARITH && out__F16 == s0_F16
#define GC_PUT0(e) out_[di + w] = e
#else
#define GC_PUT0(e) GC_PUT(e)
#endif
#if NSRC > 1
#if !GC_ARITH && out__F16 == s1_F16
#define GC_PUT1(e) out_[di + w] = e
#else
#define GC_PUT1(e) GC_PUT(e)
#endif
#endif
#if NSRC > 2
#if !GC_ARITH && out__F16 == s2_F16
#define GC_PUT2(e) out_[di + w] = e
#else
#define GC_PUT2(e) GC_PUT(e)
#endif
#endif
#if NSRC > 3
#if !GC_ARITH && out__F16 == s3_F16
#define GC_PUT3(e) out_[di + w] = e
#else
#define GC_PUT3(e) GC_PUT(e)
#endif
#endif
#if NSRC > 4
#if !GC_ARITH && out__F16 == s4_F16
#define GC_PUT4(e) out_[di + w] = e
#else
#define GC_PUT4(e) GC_PUT(e)
#endif
#endif
#if NSRC > 5
#if !GC_ARITH && out__F16 == s5_F16
#define GC_PUT5(e) out_[di + w] = e
#else
#define GC_PUT5(e) GC_PUT(e)
#endif
#endif
#if NSRC > 6
#if !GC_ARITH && out__F16 == s6_F16
#define GC_PUT6(e) out_[di + w] = e
#else
#define GC_PUT6(e) GC_PUT(e)
#endif
#endif
#endif

void main() {
    uint gid = gpuc_gid();
    if (gid >= TOTAL) return;
    int lo = 0, hi = NREG - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) >> 1;
        if (int(gid) >= START(mid)) lo = mid; else hi = mid - 1;
    }
    int t = int(gid) - START(lo), si = SOFF(lo), di = DOFF(lo);
    for (int d = RANK - 1; d >= 0; --d) {
        int n = SHAPE(lo, d);
        int c = t % n;
        t /= n;
        si += c * SST(lo, d);
        di += c * DST(lo, d);
    }
    int s = SRC(lo);
#if VEC
    for (int w = 0; w < VEC; ++w) {
        if (s == 0) GC_PUT0(s0[si + w]);
#if NSRC > 1
        else if (s == 1) GC_PUT1(s1[si + w]);
#endif
#if NSRC > 2
        else if (s == 2) GC_PUT2(s2[si + w]);
#endif
#if NSRC > 3
        else if (s == 3) GC_PUT3(s3[si + w]);
#endif
#if NSRC > 4
        else if (s == 4) GC_PUT4(s4[si + w]);
#endif
#if NSRC > 5
        else if (s == 5) GC_PUT5(s5[si + w]);
#endif
#if NSRC > 6
        else if (s == 6) GC_PUT6(s6[si + w]);
#endif
#if IS_INT
        else GC_PUT(out__A(int(FILL(lo))));
#else
        else GC_PUT(out__A(uintBitsToFloat(FILL(lo))));
#endif
    }
#else
#if IS_INT
    out__A v = int(FILL(lo));
#else
    out__A v = uintBitsToFloat(FILL(lo));
#endif
    if (s == 0) v = LD(s0, si);
#if NSRC > 1
    else if (s == 1) v = LD(s1, si);
#endif
#if NSRC > 2
    else if (s == 2) v = LD(s2, si);
#endif
#if NSRC > 3
    else if (s == 3) v = LD(s3, si);
#endif
#if NSRC > 4
    else if (s == 4) v = LD(s4, si);
#endif
#if NSRC > 5
    else if (s == 5) v = LD(s5, si);
#endif
#if NSRC > 6
    else if (s == 6) v = LD(s6, si);
#endif
#if ACT
    v = gpuc_apply(v, ACT);             // a CONCATENATION's fused activation
#endif
#ifdef GPUC_TEST_BROKEN
    v += out__A(1);                     // test hook only (GPUC_TEST_BREAK_OP)
#endif
    ST(out_, di, v);
#endif
}
