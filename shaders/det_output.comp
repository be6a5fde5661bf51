// TFLite_Detection_PostProcess's four outputs from the kept anchors (sel of nms_greedy.comp: per
// segment [count, anchors...], M + 1 ints), as LiteRT writes them: boxes [MAXDET * KK, 4] (ymin, xmin,
// ymax, xmax), classes and scores [MAXDET * KK] (float), num [1]; every slot not written is 0.
// REGULAR=0 (fast NMS, one segment): invocation b is detection b: its box repeated for its NCAT best
// classes, ordered as LiteRT's std::partial_sort orders them (libstdc++'s heap select then heap
// sort, ties included; NCAT = 1: the first maximum), at slots b * KK + col; num = count.
// REGULAR=1 (one segment per class, each in descending score order, ties by lower anchor): every
// kept (class, anchor) goes to its rank in the order (score descending, class, anchor), found by a
// binary search in each class's list; ranks >= MAXDET are dropped; num = min(total, MAXDET).
// Invocations: REGULAR=0 max(MAXDET, 1); REGULAR=1 SEGS * M (entries) + max(MAXDET * KK, 1) (padding, num).
// ITEMS batch items: the invocations above per item, item i reading its NA boxes and score rows, its
// segments' sel, and writing its own output slots and out_num[i].  SEGS counts one item's segments.
// Defines: REGULAR SEGS M MAXDET KK NCAT NCLS CB OFF ITEMS NA
uint item, box0, sel0, slot0;      // this invocation's item, its first box, sel entry and output slot

void set_item(uint i) {
    item = i;
    box0 = i * uint(NA);
    sel0 = i * uint(SEGS) * uint(M + 1);
    slot0 = i * uint(MAXDET * KK);
}

vec4 box_of(uint a) { a += box0; return vec4(boxes[4 * a], boxes[4 * a + 1], boxes[4 * a + 2], boxes[4 * a + 3]); }

void put(uint slot, vec4 b, float cls, float score) {
    slot += slot0;
    out_boxes[4 * slot] = b.x;
    out_boxes[4 * slot + 1] = b.y;
    out_boxes[4 * slot + 2] = b.z;
    out_boxes[4 * slot + 3] = b.w;
    out_classes[slot] = cls;
    out_scores[slot] = score;
}

float score_of(uint a, uint c) { return scores[(box0 + a) * uint(CB) + uint(OFF) + c]; }

#if REGULAR == 0
#if NCAT > 1
int ord[NCLS];
uint row;
bool comp(int x, int y) { return score_of(row, uint(x)) > score_of(row, uint(y)); }

// libstdc++'s __adjust_heap(first, hole, len, value) (then __push_heap) on ord
void adjust(int hole, int len, int value) {
    int top = hole, second = hole;
    while (second < (len - 1) / 2) {
        second = 2 * (second + 1);
        if (comp(ord[second], ord[second - 1])) second--;
        ord[hole] = ord[second];
        hole = second;
    }
    if ((len & 1) == 0 && second == (len - 2) / 2) {
        second = 2 * (second + 1);
        ord[hole] = ord[second - 1];
        hole = second - 1;
    }
    int parent = (hole - 1) / 2;
    while (hole > top && comp(ord[parent], value)) {
        ord[hole] = ord[parent];
        hole = parent;
        parent = (hole - 1) / 2;
    }
    ord[hole] = value;
}

// std::partial_sort(ord, ord + NCAT, ord + NCLS, comp): heap select, then heap sort
void partial_sort() {
    for (int c = 0; c < NCLS; ++c) ord[c] = c;
    for (int p = (NCAT - 2) / 2; p >= 0; --p) adjust(p, NCAT, ord[p]);
    for (int i = NCAT; i < NCLS; ++i)
        if (comp(ord[i], ord[0])) {
            int v = ord[i];
            ord[i] = ord[0];
            adjust(0, NCAT, v);
        }
    for (int last = NCAT - 1; last > 0; --last) {
        int v = ord[last];
        ord[last] = ord[0];
        adjust(0, last, v);
    }
}
#endif

void main() {
    uint g = gpuc_gid(), per = uint(max(MAXDET, 1)), b = g % per;
    if (g / per >= uint(ITEMS)) return;
    set_item(g / per);
    uint count = uint(sel[sel0]);
    if (b == 0u) out_num[item] = float(count);
    if (b >= uint(MAXDET)) return;
    uint col = 0u;
    if (b < count) {
        uint a = uint(sel[sel0 + 1u + b]);
        vec4 box = box_of(a);
#if NCAT > 1
        row = a;
        partial_sort();
        for (; col < uint(NCAT); ++col) put(b * uint(KK) + col, box, float(ord[col]), score_of(a, uint(ord[col])));
#else
        uint best = 0u;
        float m = score_of(a, 0u);
        for (uint c = 1u; c < uint(NCLS); ++c) {
            float v = score_of(a, c);
            if (v > m) { m = v; best = c; }
        }
        put(b * uint(KK), box, float(best), m);
        col = 1u;
#endif
    }
    for (; col < uint(KK); ++col) put(b * uint(KK) + col, vec4(0.0), 0.0, 0.0);
}
#else
uint count_of(uint s) { return uint(sel[sel0 + s * uint(M + 1)]); }
float entry_score(uint s, uint q) { return score_of(uint(sel[sel0 + s * uint(M + 1) + 1u + q]), s); }

// how many entries of class s come before score v: those with a score >= v (ge) or > v (!ge)
uint before(uint s, float v, bool ge) {
    uint lo = 0u, hi = count_of(s);
    while (lo < hi) {
        uint mid = (lo + hi) / 2u;
        float x = entry_score(s, mid);
        if (ge ? x >= v : x > v) lo = mid + 1u; else hi = mid;
    }
    return lo;
}

void main() {
    uint entries = uint(SEGS) * uint(M), per = entries + uint(max(MAXDET * KK, 1)), g = gpuc_gid(), t = g % per;
    if (g / per >= uint(ITEMS)) return;
    set_item(g / per);
    if (t < entries) {
        uint s = t / uint(M), q = t % uint(M);
        if (q >= count_of(s)) return;
        uint a = uint(sel[sel0 + s * uint(M + 1) + 1u + q]);
        float v = score_of(a, s);
        uint rank = q;
        for (uint o = 0u; o < uint(SEGS) && rank < uint(MAXDET); ++o)
            if (o != s) rank += before(o, v, o < s);
        if (rank < uint(MAXDET)) put(rank, box_of(a), float(s), v);
        return;
    }
    uint r = t - entries;
    uint total = 0u;
    for (uint s = 0u; s < uint(SEGS); ++s) total += count_of(s);
    total = min(total, uint(MAXDET));
    if (r == 0u) out_num[item] = float(total);
    if (r >= total && r < uint(MAXDET * KK)) put(r, vec4(0.0), 0.0, 0.0);
}
#endif
