// EMBEDDING_LOOKUP_SPARSE (LiteRT's embedding_lookup_sparse.cc).  Lookup i adds value[ids[i]] *
// weights[i] into output row bucket(i) (indices[i][0 .. R-2] in dense_shape's row-major order).  LiteRT
// walks the lookups in order and finalizes a bucket (MEAN: / the run's total weight, SQRTN: / sqrt of
// its squared weights) when the bucket changes: a bucket met in several separate runs is divided once
// per run, each time over everything it holds.  Output element (bucket b, k) replays that walk.
// MODE 0: compute (CHECK: invocation 0 reports an id outside [0, NROWS)); MODE 1: invocation 0
// only checks indices[i][0 .. R-2] against dense_shape (LiteRT 2.3 writes out of bounds there).
// Defines: N R E NROWS COMB (0 sum, 1 mean, 2 sqrtn) MODE; array DS (dense_shape, R values);
// CHECK CHECK_WORD STATUS_ROW ITEMS ITEM_OUT (compiler/status.py)
#ifndef CHECK
#define CHECK 0
#endif

#if CHECK
void gpuc_report(int v, int pos) {
    uint w = uint(CHECK_WORD);
    if (atomicAdd(status[w], 1u) == 0u) {
        status[w + 1u] = uint(v);
        status[w + 2u] = uint(v < 0 ? -1 : 0);
        status[w + 3u] = uint(pos);
    }
}
#endif

int bucket(int i) {            // -1: an index outside dense_shape
    int b = 0;
    for (int k = 0; k < R - 1; ++k) {
        int v = ind[i * R + k];
        if (v < 0 || v >= DS[k]) return -1;
        b = b * DS[k] + v;
    }
    return b;
}

#if MODE == 1
void main() {
    if (gpuc_gid() != 0u) return;
    out_[0] = 0;
#if CHECK
    for (int i = 0; i < N; ++i) {
        for (int k = 0; k < R - 1; ++k) {
            int v = ind[i * R + k];
            if (v < 0 || v >= DS[k]) { gpuc_report(v, k); return; }
        }
    }
#endif
}
#else
precise float finish(precise float acc, int n, precise float tw, precise float sw) {
    if (COMB == 0 || n == 0) return acc;
    return acc / (COMB == 1 ? tw : sqrt(sw));
}

void main() {
    uint gid = gpuc_gid();
#if CHECK
    if (gid == 0u) {
        for (int i = 0; i < N; ++i) {
            if (ids[i] < 0 || ids[i] >= NROWS) { gpuc_report(ids[i], 0); break; }
        }
    }
#endif
    if (gid >= TOTAL) return;
    int b = int(gid) / E, k = int(gid) % E;
    precise float acc = 0.0, tw = 0.0, sw = 0.0;
    int n = 0, prev = -2;
    for (int i = 0; i < N; ++i) {
        int cur = bucket(i);
        if (cur != prev) {
            if (prev == b) acc = finish(acc, n, tw, sw);
            n = 0;
            tw = 0.0;
            sw = 0.0;
        }
        prev = cur;
        if (cur != b || ids[i] < 0 || ids[i] >= NROWS) continue;
        precise float w = wts[i];
        n++;
        sw += w * w;
        tw += w;
        acc += val[ids[i] * E + k] * w;
    }
    if (prev == b) acc = finish(acc, n, tw, sw);
    out_[gid] = acc;
}
#endif
