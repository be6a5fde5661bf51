// TFLite_Detection_PostProcess's centre-size box decoding, one invocation per anchor: encodings
// enc[a * L + 0..3] = (y, x, h, w), anchors anc[a * 4 + 0..3] = (y, x, h, w) ->
// boxes[a * 4 + 0..3] = (ymin, xmin, ymax, xmax) with
//   ycenter = y / YS * anchor.h + anchor.y,  half_h = 0.5 * exp(h / HS) * anchor.h  (x, w alike).
// (LiteRT rounds each of these from double arithmetic; float here differs by an ulp or so.)
// ITEMS batch items (--max-batch): encodings and boxes of item i follow item i - 1's, the anchors are shared.
// Defines: N L YS XS HS WS ITEMS
void main() {
    uint a = gpuc_gid();
    if (a >= uint(N) * uint(ITEMS)) return;
    uint e = a * uint(L), r = a % uint(N);
    float y = enc[e], x = enc[e + 1], h = enc[e + 2], w = enc[e + 3];
    float ay = anc[4 * r], ax = anc[4 * r + 1], ah = anc[4 * r + 2], aw = anc[4 * r + 3];
    precise float yc = y / YS * ah + ay;
    precise float xc = x / XS * aw + ax;
    precise float hh = 0.5 * exp(h / HS) * ah;
    precise float hw = 0.5 * exp(w / WS) * aw;
    boxes[4 * a] = yc - hh;
    boxes[4 * a + 1] = xc - hw;
    boxes[4 * a + 2] = yc + hh;
    boxes[4 * a + 3] = xc + hw;
}
