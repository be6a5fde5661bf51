// HASHTABLE_LOOKUP (LiteRT's hashtable_lookup.cc): row i of the output is value[k] where glibc's
// bsearch finds lookup[i] among the NK keys, else zeros; hits[i] is 1 or 0.  The keys are searched as
// bsearch does, step for step, so unsorted keys give LiteRT's answers too.  (LiteRT's comparator
// subtracts, but the compiled kernel orders -2^31 below 7 as a plain comparison does: measured.)
// MODE 0: one invocation per output word (RW words per row; value and output bound as the same
// words); MODE 1: one invocation per word of the uint8 hits (4 lookups each, word view).
// Defines: N NK RW MODE
int find(int q) {
    int l = 0, u = NK;
    while (l < u) {
        int idx = (l + u) / 2;
        if (q < keys[idx]) u = idx;
        else if (q > keys[idx]) l = idx + 1;
        else return idx;
    }
    return -1;
}

void main() {
    uint gid = gpuc_gid();
    if (gid >= TOTAL) return;
#if MODE == 0
    int i = int(gid) / RW, j = int(gid) % RW;
    int k = find(look[i]);
    if (k >= 0) out_[gid] = val[k * RW + j];
    else ST(out_, gid, 0);
#else
    uint word = 0u;
    for (int b = 0; b < 4; ++b) {
        int i = int(gid) * 4 + b;
        if (i < N && find(look[i]) >= 0) word |= 1u << (8 * b);
    }
    out_[gid] = word;
#endif
}
