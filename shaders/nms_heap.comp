// NON_MAX_SUPPRESSION_V4 / V5 (float32) exactly as LiteRT's reference NonMaxSuppression runs it, one
// workgroup of WG invocations:
//   the candidates (score > score threshold, strictly) go into a max-heap of scores in index order and
//   come out in the order libstdc++'s std::priority_queue gives them (push_heap / pop_heap as
//   bits/stl_heap.h: equal scores do NOT come out by index), invocation 0 running the heap in the
//   scratch tensor `heap` (3 words an entry: score bits, box, suppress_begin_index);
//   a popped candidate is compared with the boxes selected since its suppress_begin_index, newest
//   first: IoU >= iou_threshold suppresses it (the comparisons run in parallel over the workgroup);
//   with soft-NMS (SOFT, sigma > 0) each IoU below it decays the score by exp(-0.5 * iou^2 / sigma)
//   (invocation 0, in order, stopping once the score is <= the threshold);
//   an unsuppressed candidate whose score did not change is selected; one whose score is still above
//   the threshold goes back into the heap (a selected one too: LiteRT re-pushes it, and a box of zero
//   area, whose IoU with itself is 0, is then selected again: kept, as LiteRT does).
// IoU as LiteRT: corners normalized (min / max of y1, y2 and x1, x2), 0 when an area is <= 0.
// Outputs: sel [MAXO] (selected boxes, then zeros), SOFT: sel_scores [MAXO] (scores, then zeros), valid
// [1]; the run's max_output_size (max_out[0]) is clamped to [0, MAXO] (the compiler sizes MAXO).
// The selected boxes stay in shared memory (MAXO <= MS_CAP).
// FAST (N <= FAST_CAP, NP = N rounded up to a power of 2): the workgroup first sorts the candidates by
// score in shared memory (bitonic).  When no two candidates have equal scores (and no soft-NMS decay
// runs), the heap's order is the sorted order and each selected box, pushed back with the top score, is
// popped again at once: it suppresses itself (IoU with itself >= iou_threshold: dropped) or is selected
// again and again until the output is full.  That path walks the sorted candidates: each selected box
// marks, in parallel, the later candidates it suppresses (IoU >= iou_threshold, computed as the heap
// path computes it) and the next unmarked one is the next pop.  Equal candidate scores take the heap path.
// STAGED (compiler/ops/nms.py, where one invocation's loops could pass llvmpipe's limit of 65,535): the same
// algorithm in dispatches that keep its state in `st` (uint [4]: heap size, selections, output size, done)
// and the selections in sel, each with steps = [first, count]: STAGE 0 the FAST sort and walk (done when it
// holds), else it pushes the candidates among boxes [0, count) into the heap; STAGE 1 pushes those of
// [first, first + count); STAGE 2 runs at most count pops (0: the last, until the end, then writes the zeros
// past the selections and valid).  A stage after a done one returns at once (the last writes the outputs).
// Defines: N MAXO SOFT WG FAST NP; STAGED STAGE
#ifndef STAGED
#define STAGED 0
#define STAGE 0
#endif
shared uint ssel[MAXO > 0 ? MAXO : 1];
shared float c_score;
shared float c_orig;
shared uint c_idx;
shared uint c_sb;
shared uint hsize;
shared uint nsel;
shared uint nout;
shared uint done;
shared uint stop;
shared uint hard;
#if FAST
shared uint skey[NP];          // sort key: the order-preserving bits of a candidate's score, 0 for the others
shared uint sidx[NP];          // box index; bit 31: suppressed
shared uint ncand;
shared uint snx[3];
shared uint sties;
#endif

float h_score(uint i) { return uintBitsToFloat(heap[3u * i]); }

void h_copy(uint dst, uint src) {
    heap[3u * dst] = heap[3u * src];
    heap[3u * dst + 1u] = heap[3u * src + 1u];
    heap[3u * dst + 2u] = heap[3u * src + 2u];
}

void h_set(uint i, float s, uint idx, uint sb) {
    heap[3u * i] = floatBitsToUint(s);
    heap[3u * i + 1u] = idx;
    heap[3u * i + 2u] = sb;
}

// std::__push_heap(first, hole, 0, value): move the hole up while its parent's score < the value's
void sift_up(uint hole, float s, uint idx, uint sb) {
    while (hole > 0u) {
        uint p = (hole - 1u) / 2u;
        if (!(h_score(p) < s)) break;
        h_copy(hole, p);
        hole = p;
    }
    h_set(hole, s, idx, sb);
}

void push(float s, uint idx, uint sb) {
    uint hole = hsize;
    hsize = hole + 1u;
    sift_up(hole, s, idx, sb);
}

// std::pop_heap then pop_back: the top goes to c_*, the last entry refills the hole (__adjust_heap)
void pop() {
    c_score = h_score(0u);
    c_idx = heap[1];
    c_sb = heap[2];
    int n = int(hsize) - 1;
    hsize = uint(n);
    if (n < 1) return;
    float vs = h_score(uint(n));
    uint vi = heap[3u * uint(n) + 1u], vb = heap[3u * uint(n) + 2u];
    int hole = 0, child = 0;
    while (child < (n - 1) / 2) {
        child = 2 * (child + 1);
        if (h_score(uint(child)) < h_score(uint(child - 1))) child--;
        h_copy(uint(hole), uint(child));
        hole = child;
    }
    if ((n & 1) == 0 && child == (n - 2) / 2) {
        child = 2 * (child + 1);
        h_copy(uint(hole), uint(child - 1));
        hole = child - 1;
    }
    sift_up(uint(hole), vs, vi, vb);
}

// a / b correctly rounded in the usual cases (one fma residual step: GLSL's division may be 2.5 ulp off)
float div_rn(float a, float b) {
    precise float q = a / b;
    precise float r = fma(-q, b, a);
    return fma(r, 1.0 / b, q);
}

// LiteRT's ComputeIou (float): corners normalized, 0 when an area is <= 0 or the union is 0
vec4 box(uint i) { return vec4(boxes[4u * i], boxes[4u * i + 1u], boxes[4u * i + 2u], boxes[4u * i + 3u]); }

float iou_boxes(vec4 a, vec4 b) {
    vec4 na = vec4(min(a.x, a.z), min(a.y, a.w), max(a.x, a.z), max(a.y, a.w));
    vec4 nb = vec4(min(b.x, b.z), min(b.y, b.w), max(b.x, b.z), max(b.y, b.w));
    precise float area_a = (na.z - na.x) * (na.w - na.y);
    precise float area_b = (nb.z - nb.x) * (nb.w - nb.y);
    if (area_a <= 0.0 || area_b <= 0.0) return 0.0;
    precise float ih = max(min(na.z, nb.z) - max(na.x, nb.x), 0.0);
    precise float iw = max(min(na.w, nb.w) - max(na.y, nb.y), 0.0);
    precise float inter = ih * iw;
    precise float uni = area_a + area_b - inter;
    if (uni == 0.0) return 0.0;
    return div_rn(inter, uni);
}

float iou(uint i, uint j) { return iou_boxes(box(i), box(j)); }

#if SOFT
// exp(x) for x <= 0: near 0 (where a decayed score may round back to the original) by its series,
// which rounds as a correctly rounded expf does there; else GLSL's exp
float exp_soft(float x) {
    if (abs(x) < 0.0009765625) {
        precise float t = x + 0.5 * x * x;
        precise float r = 1.0 + t;
        return r;
    }
    return exp(x);
}
#endif

// invocation 0 pushes the candidates among boxes [first, last) (index order)
void push_candidates(uint first, uint last, float thr) {
    for (uint i = first; i < last; ++i) {
        float s = scores[i];
        if (s > thr) push(s, i, 0u);
    }
}

// the heap's loop, at most `iters` pops; `done` = 1 once the loop has ended
void heap_loop(uint l, float iou_t, float thr, uint iters) {
#if SOFT
    float sigma = sigma_in[0];
    precise float scale = sigma > 0.0 ? -0.5 / sigma : 0.0;
#endif
    for (uint it = 0u;; ++it) {
        if (l == 0u) {
            done = (nsel < nout && hsize > 0u) ? 0u : 1u;
            stop = (done != 0u || it >= iters) ? 1u : 0u;
            if (stop == 0u) {
                pop();
                c_orig = c_score;
                hard = 0u;
            }
        }
        barrier();
        if (stop != 0u) break;                      // (read by all after a barrier: uniform)
#if SOFT
        if (sigma > 0.0) {
            if (l == 0u) {
                for (int j = int(nsel) - 1; j >= int(c_sb); --j) {
                    float v = iou(c_idx, ssel[j]);
                    if (v >= iou_t) { hard = 1u; break; }
                    precise float e = (scale * v) * v;
                    c_score = c_score * exp_soft(e);
                    if (c_score <= thr) break;
                }
            }
        } else
#endif
        {
            for (uint j = c_sb + l; j < nsel; j += uint(WG))
                if (iou(c_idx, ssel[j]) >= iou_t) hard = 1u;
        }
        barrier();
        if (l == 0u) {
            uint sb = nsel;
            if (hard == 0u) {
                if (c_score == c_orig) {
                    ssel[nsel] = c_idx;
                    sel[nsel] = int(c_idx);
#if SOFT
                    sel_scores[nsel] = c_score;
#endif
                    nsel = nsel + 1u;
                }
                if (c_score > thr) push(c_score, c_idx, sb);
            }
        }
        barrier();
    }
}

void heap_nms(uint l, float iou_t, float thr) {
    if (l == 0u) {
        hsize = 0u;
        push_candidates(0u, uint(N), thr);
        int m = clamp(max_out[0], 0, MAXO);
        nout = min(hsize, uint(m));
        nsel = 0u;
    }
    barrier();
    heap_loop(l, iou_t, thr, 0xFFFFFFFFu);
}

#if FAST
uint score_key(float s) {                   // larger score -> larger key (s is not NaN)
    uint u = floatBitsToUint(s);
    return (u & 0x80000000u) != 0u ? ~u : (u | 0x80000000u);
}

// sorts the candidates (descending); true when the sorted walk gives the heap's result
bool sort_candidates(uint l, float thr) {
    if (l == 0u) { ncand = 0u; sties = 0u; }
    barrier();
    for (uint i = l; i < uint(NP); i += uint(WG)) {
        float s = i < uint(N) ? scores[i] : 0.0;
        bool cand = i < uint(N) && s > thr;
        skey[i] = cand ? score_key(s) : 0u;
        sidx[i] = i;
        if (cand) atomicAdd(ncand, 1u);
    }
    barrier();
    for (uint k = 2u; k <= uint(NP); k <<= 1) {
        for (uint j = k >> 1; j > 0u; j >>= 1) {
            for (uint i = l; i < uint(NP); i += uint(WG)) {
                uint p = i ^ j;
                if (p > i) {
                    bool desc = (i & k) == 0u;
                    uint a = skey[i], b = skey[p];
                    if (desc ? a < b : a > b) {
                        skey[i] = b; skey[p] = a;
                        uint t = sidx[i]; sidx[i] = sidx[p]; sidx[p] = t;
                    }
                }
            }
            barrier();
        }
    }
    for (uint i = l; i + 1u < ncand; i += uint(WG))
        if (skey[i] == skey[i + 1u]) sties = 1u;
    barrier();
    return sties == 0u;
}

// One barrier a selection: every invocation counts the selections itself (the same decisions from the
// same shared values), and the next position is found in the next of three rotating words (one read this
// round, one collecting this round's minimum, one reset for the round after).
void sorted_nms(uint l, float iou_t, float thr) {
    uint nc = ncand;
    uint nout_l = min(nc, uint(clamp(max_out[0], 0, MAXO)));
    if (l == 0u) { snx[0] = 0u; snx[1] = nc; snx[2] = nc; }
    barrier();
    uint n = 0u;
    for (uint t = 0u;; ++t) {
        uint p = snx[t % 3u];
        if (n >= nout_l || p >= nc) break;          // (shared values after a barrier: uniform)
        uint c = sidx[p] & 0x7FFFFFFFu;
        vec4 bc = box(c);
        bool again = !(iou_boxes(bc, bc) >= iou_t);   // popped again at once and not suppressed by itself
        uint stop = again ? nout_l : n + 1u;
        if (l == 0u) {
            for (uint k = n; k < stop; ++k) {
                sel[k] = int(c);
#if SOFT
                sel_scores[k] = scores[c];
#endif
            }
            snx[(t + 2u) % 3u] = nc;
        }
        n = stop;
        if (again) break;
        for (uint q = p + 1u + l; q < nc; q += uint(WG)) {
            uint e = sidx[q];
            if ((e & 0x80000000u) != 0u) continue;
            if (iou_boxes(box(e), bc) >= iou_t) sidx[q] = e | 0x80000000u;
            else atomicMin(snx[(t + 1u) % 3u], q);
        }
        barrier();
    }
    if (l == 0u) nsel = n;
}
#endif

// the zeros past the selections, and valid
void finish(uint l) {
    for (uint i = nsel + l; i < uint(MAXO); i += uint(WG)) {
        sel[i] = 0;
#if SOFT
        sel_scores[i] = 0.0;
#endif
    }
    if (l == 0u) valid[0] = int(nsel);
}

#if STAGED == 0
void main() {
    uint l = gl_LocalInvocationID.x;
    float iou_t = iou_thr[0];
    float thr = score_thr[0];
#if FAST
#if SOFT
    bool fast = !(sigma_in[0] > 0.0);
#else
    bool fast = true;
#endif
    if (fast) fast = sort_candidates(l, thr);
    if (fast) sorted_nms(l, iou_t, thr);
    else heap_nms(l, iou_t, thr);
#else
    heap_nms(l, iou_t, thr);
#endif
    barrier();
    finish(l);
}
#else
// pushes boxes [first, last) into the heap kept in st (the first chunk starts it)
void push_stage(uint l, float thr, uint first, uint last) {
    if (l == 0u) {
        hsize = first == 0u ? 0u : st[0];
        push_candidates(first, last, thr);
        st[0] = hsize;
        if (first == 0u) st[3] = 0u;
        if (last == uint(N)) {
            st[1] = 0u;
            st[2] = min(hsize, uint(clamp(max_out[0], 0, MAXO)));
        }
    }
}

void main() {
    uint l = gl_LocalInvocationID.x;
    float iou_t = iou_thr[0];
    float thr = score_thr[0];
    uint first = uint(steps[0]), count = uint(steps[1]);
#if STAGE == 0
#if FAST
#if SOFT
    bool fast = !(sigma_in[0] > 0.0);
#else
    bool fast = true;
#endif
    if (fast) fast = sort_candidates(l, thr);
    if (fast) sorted_nms(l, iou_t, thr);
    barrier();
    if (fast) {
        if (l == 0u) {
            st[3] = 1u;
            st[1] = nsel;
        }
        return;
    }
#endif
    push_stage(l, thr, 0u, count);
#elif STAGE == 1
    if (st[3] != 0u) return;                         // (the sorted walk held; uniform)
    push_stage(l, thr, first, first + count);
#else
    bool last = count == 0u;                         // the last pop dispatch: to the end, then the outputs
    if (st[3] == 0u) {                               // (uniform)
        if (l == 0u) {
            hsize = st[0];
            nsel = st[1];
            nout = st[2];
        }
        barrier();
        for (uint j = l; j < nsel; j += uint(WG)) ssel[j] = uint(sel[j]);
        barrier();
        heap_loop(l, iou_t, thr, last ? 0xFFFFFFFFu : count);
        if (l == 0u) {
            st[0] = hsize;
            st[1] = nsel;
            st[3] = done;
        }
    } else if (!last) {
        return;
    }
    if (last) {
        if (l == 0u) nsel = st[1];
        barrier();
        finish(l);
    }
#endif
}
#endif
