// Segmented bitonic sort of (key, index) pairs, ascending, index breaking ties (a stable order):
// SEGS segments of P (a power of two) pairs each, stored as uint words keys[2 * e] (key) and
// keys[2 * e + 1] (index), e = segment * P + position.  One sort is a sequence of dispatches:
//   MODE 0 (local, workgroup of BLOCK / 2): every block of BLOCK pairs sorted in shared memory, each
//          in the direction the stage k = BLOCK sets (the first dispatch; INIT makes the pairs);
//   MODE 1 (global): one compare-exchange step (stage K, distance J >= BLOCK), a pair per invocation;
//   MODE 2 (local): the remaining steps J = BLOCK / 2 .. 1 of stage K in shared memory.
// INIT (MODE 0): the keys of score-threshold selection (compiler/ops/sort.py score_keys): position p
// < N of segment s gets ~orderable(score) when score >= THR (NaN never), else 0xFFFFFFFF (after every
// kept score), index p; positions p >= N pad with 0xFFFFFFFF, p.  The score is scores[p * CB + OFF + s]
// (PER_SEGMENT=1), or the maximum of scores[p * CB + OFF + c] over c < NCLS (PER_SEGMENT=0).  -0.0
// keys like +0.0, so equal scores (as C++ compares them) tie and keep the lower index first.  ISEGS
// (default SEGS): segments per batch item; segment s reads item s / ISEGS's N score rows, as its s % ISEGS.
// Defines: MODE SEGS P BLOCK K J INIT N CB OFF NCLS PER_SEGMENT THR (ISEGS)
#ifndef ISEGS
#define ISEGS SEGS
#endif
#define INVALID_KEY 0xFFFFFFFFu

bool after(uint ka, uint ia, uint kb, uint ib) { return ka > kb || (ka == kb && ia > ib); }

#if MODE == 1
void main() {
    uint t = gpuc_gid();
    if (t >= TOTAL) return;
    uint seg = t / (P / 2), q = t % (P / 2);
    uint i = 2u * J * (q / J) + (q % J);
    uint a = seg * P + i, b = a + J;
    uint ka = keys[2 * a], ia = keys[2 * a + 1], kb = keys[2 * b], ib = keys[2 * b + 1];
    bool up = (i & uint(K)) == 0u;
    if (after(ka, ia, kb, ib) == up) {
        keys[2 * a] = kb; keys[2 * a + 1] = ib;
        keys[2 * b] = ka; keys[2 * b + 1] = ia;
    }
}
#else
shared uint sk[BLOCK];
shared uint si[BLOCK];

#if INIT
uint score_key(float v) {
    if (!(v >= THR)) return INVALID_KEY;
    uint u = floatBitsToUint(v == 0.0 ? 0.0 : v);
    uint o = (u & 0x80000000u) != 0u ? ~u : (u | 0x80000000u);    // unsigned order = float order
    return ~o;                                                      // descending scores
}

float elem_score(uint seg, uint p) {
    uint row = (seg / uint(ISEGS)) * uint(N) + p;
#if PER_SEGMENT
    return scores[row * CB + OFF + seg % uint(ISEGS)];
#else
    uint base = row * CB + OFF;
    float m = scores[base];
    for (uint c = 1u; c < uint(NCLS); ++c) {
        float v = scores[base + c];
        if (v > m) m = v;                    // the first maximum (a NaN first stays: never kept)
    }
    return m;
#endif
}
#endif

void main() {
    uint wg = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
    if (wg * uint(BLOCK) >= uint(SEGS) * uint(P)) return;      // whole workgroup leaves together
    uint l = gl_LocalInvocationID.x;
    uint base = wg * uint(BLOCK);
    uint seg = base / uint(P), p0 = base % uint(P);
    for (uint h = 0u; h < 2u; ++h) {
        uint e = l + h * uint(BLOCK / 2);
#if INIT
        uint p = p0 + e;
        sk[e] = p < uint(N) ? score_key(elem_score(seg, p)) : INVALID_KEY;
        si[e] = p;
#else
        sk[e] = keys[2 * (base + e)];
        si[e] = keys[2 * (base + e) + 1];
#endif
    }
    barrier();
#if MODE == 0
    for (uint k = 2u; k <= uint(BLOCK); k <<= 1) {
        uint j0 = k >> 1;
#else
    {
        uint k = uint(K), j0 = uint(BLOCK / 2);
#endif
        for (uint j = j0; j > 0u; j >>= 1) {
            uint i = 2u * j * (l / j) + (l % j), m = i + j;
            bool up = ((p0 + i) & k) == 0u;
            uint ka = sk[i], ia = si[i], kb = sk[m], ib = si[m];
            if (after(ka, ia, kb, ib) == up) {
                sk[i] = kb; si[i] = ib;
                sk[m] = ka; si[m] = ia;
            }
            barrier();
        }
    }
    for (uint h = 0u; h < 2u; ++h) {
        uint e = l + h * uint(BLOCK / 2);
        keys[2 * (base + e)] = sk[e];
        keys[2 * (base + e) + 1] = si[e];
    }
}
#endif
