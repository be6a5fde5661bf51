// FAKE_QUANT, as LiteRT's reference kernel (its nudged range and scale computed by the compiler in
// float32 as LiteRT computes them): out = round(clamp(x, NMIN, NMAX) - NMIN) * INV) * SCALE + NMIN,
// rounding half away from zero; NaN clamps to NMIN (std::max(NMIN, NaN) is NMIN).  `precise`: no
// fused multiply-add, each step rounded as LiteRT's.
// Defines: NMIN NMAX SCALE INV
void main() {
    uint gid = gpuc_gid();
    if (gid >= TOTAL) return;
    float v = x[gid];
    float c = isnan(v) ? NMIN : min(NMAX, max(NMIN, v));
    precise float q = (c - NMIN) * INV;
    q = sign(q) * floor(abs(q) + 0.5);
    precise float r = q * SCALE + NMIN;
    out_[gid] = r;
}
