// ONE_HOT: out_[(o * DEPTH + d) * INNER + i] = idx[o * INNER + i] == d ? on[0] : off[0] (LiteRT's
// one_hot.cc loop: an index outside [0, DEPTH) selects `off` all along the axis).  Invocation g
// writes output element g.  Defines: DEPTH (the new axis' size) INNER (elements of `idx` after the axis)
void main() {
    uint gid = gpuc_gid();
    if (gid >= TOTAL) return;
    int g = int(gid);
    int i = g % INNER;
    int rest = g / INNER;
    int d = rest % DEPTH;
    int o = rest / DEPTH;
    ST(out_, g, idx[o * INNER + i] == d ? LD(on, 0) : LD(off, 0));
}
