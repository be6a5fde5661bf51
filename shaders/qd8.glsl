// The per-row int8 quantization of LiteRT's dynamic-range (qd8) FC kernels, as XNNPACK computes it, from
// the row's rmin = min(0, min x) and rmax = max(0, max x) (the caller's reduction): scale s = 255 / (rmax -
// rmin) (1 when equal), zero point zp = round_even(clamp(-128 - rmin*s or 127 - rmax*s, whichever the
// rounding errors favour, -128, 127)), q = clamp(round_even(x * s) + zp, -128, 127).  Used by gemm_q8.comp
// (and its gemm_q8_tiled.glsl) and gemm_qb.comp.
float qd8_scale(float rmin, float rmax) { return rmin == rmax ? 1.0 : 255.0 / (rmax - rmin); }

int qd8_zero_point(float rmin, float rmax, float s) {
    float a = rmin * s, b = rmax * s;
    float zf = (-128.0 + a) + (127.0 + b) > 0.0 ? -128.0 - a : 127.0 - b;
    return int(roundEven(clamp(zf, -128.0, 127.0)));
}

int qd8(float v, float s, int zp) { return clamp(int(roundEven(v * s)) + zp, -128, 127); }
