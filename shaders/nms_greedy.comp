// Greedy IoU suppression over score-sorted candidates, one workgroup (CHUNK invocations) per segment
// (a class of regular NMS, or the single list of fast NMS), as LiteRT's NonMaxSuppressionSingleClass:
// walk the candidates in sorted order (keys of sort_bitonic.comp: pairs (key, anchor), kept ones
// first, 0xFFFFFFFF ends them), keep one unless a kept box overlaps it with IoU > IOU, stop after M.
// Per chunk of CHUNK candidates, in parallel: each candidate against every box kept so far, and the
// chunk's own suppression bitmask (bit u of row t: candidate u, earlier in the order, overlaps t);
// then invocation 0 resolves the chunk in order with the bitmask (torchvision's CUDA NMS scheme).
// Output sel: per segment M + 1 ints, [count, anchor of the 1st kept, 2nd, ...].
// Batch items: segment s reads item s / ISEGS's boxes (anchors a of item i are boxes[i * NA + a]).
// Defines: SEGS P M MS CHUNK IOU (MS = max(M, 1): the shared array size) ISEGS NA
#define INVALID_KEY 0xFFFFFFFFu
#define W (CHUNK / 32)

shared vec4 kept[MS];
shared vec4 cbox[CHUNK];
shared uint cidx[CHUNK];
shared uint cstate[CHUNK];        // 0 candidate, 1 suppressed by a box kept before, 2 no candidate
shared uint cmask[CHUNK * W];
shared uint nkept;
shared uint done;

uint box0;                        // the first box of this segment's item
vec4 box_of(uint a) { a += box0; return vec4(boxes[4 * a], boxes[4 * a + 1], boxes[4 * a + 2], boxes[4 * a + 3]); }

// LiteRT's ComputeIntersectionOverUnion(i, j) > IOU; boxes (ymin, xmin, ymax, xmax)
bool overlaps(vec4 i, vec4 j) {
    precise float area_i = (i.z - i.x) * (i.w - i.y);
    precise float area_j = (j.z - j.x) * (j.w - j.y);
    if (area_i <= 0.0 || area_j <= 0.0) return false;
    precise float ih = max(min(i.z, j.z) - max(i.x, j.x), 0.0);
    precise float iw = max(min(i.w, j.w) - max(i.y, j.y), 0.0);
    precise float inter = ih * iw;
    precise float iou = inter / (area_i + area_j - inter);
    return iou > IOU;
}

void main() {
    uint seg = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
    if (seg >= uint(SEGS)) return;
    box0 = (seg / uint(ISEGS)) * uint(NA);
    uint l = gl_LocalInvocationID.x;
    if (l == 0u) {
        nkept = 0u;
        done = M == 0 ? 1u : 0u;
    }
    barrier();
    for (uint base = 0u; base < uint(P); base += uint(CHUNK)) {
        if (done != 0u) break;                       // (read by all after a barrier: uniform)
        uint pos = base + l;
        uint e = seg * uint(P) + pos;
        bool valid = pos < uint(P) && keys[2 * e] != INVALID_KEY;
        uint a = valid ? keys[2 * e + 1] : 0u;
        vec4 b = valid ? box_of(a) : vec4(0.0);
        uint state = valid ? 0u : 2u;
        for (uint q = 0u; q < nkept && state == 0u; ++q)
            if (overlaps(kept[q], b)) state = 1u;
        cbox[l] = b;
        cidx[l] = a;
        cstate[l] = state;
        barrier();
        for (uint w = 0u; w < uint(W); ++w) {
            uint bits = 0u;
            if (state == 0u)
                for (uint u = w * 32u; u < min(l, w * 32u + 32u); ++u)
                    if (cstate[u] == 0u && overlaps(cbox[u], b)) bits |= 1u << (u & 31u);
            cmask[l * uint(W) + w] = bits;
        }
        barrier();
        if (l == 0u) {
            uint chosen[W];
            for (uint w = 0u; w < uint(W); ++w) chosen[w] = 0u;
            uint n = nkept;
            for (uint t = 0u; t < uint(CHUNK); ++t) {
                if (cstate[t] == 2u) { done = 1u; break; }
                if (cstate[t] == 1u) continue;
                bool hit = false;
                for (uint w = 0u; w < uint(W); ++w) hit = hit || (cmask[t * uint(W) + w] & chosen[w]) != 0u;
                if (hit) continue;
                chosen[t >> 5] |= 1u << (t & 31u);
                kept[n] = cbox[t];
                sel[seg * uint(M + 1) + 1u + n] = int(cidx[t]);
                n++;
                if (n == uint(M)) { done = 1u; break; }
            }
            nkept = n;
        }
        barrier();
    }
    if (l == 0u) sel[seg * uint(M + 1)] = int(nkept);
}
