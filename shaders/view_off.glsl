// The offset of batch item x in an operand read through a strided view (the attention kernels'
// Q_T / K_T / V_T / O_T terms): sum over the NTERMS terms t of ((x / T[3t]) % T[3t + 1]) * T[3t + 2].
#define VIEW_OFF(res, T, NTERMS, x) { res = 0; for (int t_ = 0; t_ < NTERMS; ++t_) res += ((x) / T[3 * t_] % T[3 * t_ + 1]) * T[3 * t_ + 2]; }
// The offset of flat row r (b * N + i) in bias / mask operand h: the same sum over that operand's terms, B_T's
// terms B_FIRST[h] .. B_FIRST[h] + B_NT[h] - 1 (the ATTENTION kernels' B_T / B_FIRST / B_NT defines).
#define BIAS_OFF(res, h, r) { res = 0; for (int t_ = 0; t_ < B_NT[h]; ++t_) { int f_ = 3 * (B_FIRST[h] + t_); res += ((r) / B_T[f_] % B_T[f_ + 1]) * B_T[f_ + 2]; } }
