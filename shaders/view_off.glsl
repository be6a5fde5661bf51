// The offset of batch item x in an operand read through a strided view (the attention kernels'
// Q_T / K_T / V_T / O_T terms): sum over the NTERMS terms t of ((x / T[3t]) % T[3t + 1]) * T[3t + 2].
#define VIEW_OFF(res, T, NTERMS, x) { res = 0; for (int t_ = 0; t_ < NTERMS; ++t_) res += ((x) / T[3 * t_] % T[3 * t_ + 1]) * T[3 * t_ + 2]; }
