// Basic RNN cells (RNN, UNIDIRECTIONAL_SEQUENCE_RNN, one direction of BIDIRECTIONAL_SEQUENCE_RNN),
// LiteRT's RnnBatchStep per time step: h = act(bias + W x (+ WA aux) + R h), the output row = h.
// One workgroup per batch element walks the T steps (last to first when REVERSE); invocations stride
// over the U units, with barriers between phases.  The state lives in shared memory during the
// sequence and is read from / written back to the variable tensor h_state [NB,U] (read-write), so it
// persists across runs.
// Bindings: out_, x, w (packed constants: W [U][I] at OFF_W, R [U][U] at OFF_R, BIAS [U] at OFF_B,
// WA [U][A] at OFF_A), h_state, ax (the aux input, when AUX), steps (CHUNKED: compiler/ops/step_chunks.py, a long
// sequence as one dispatch a chunk of steps, [first, count] of the T; the state carried in h_state).
// Defines: NB T I U A; element strides X_TS X_BS (x per step / per batch element), A_TS A_BS (ax),
// O_TS O_BS and O_OFF (out_: per step, per batch element, first column); RNN_ACT (TFLite's fused
// activation: 0 none, 1 relu, 2 relu_n1_to_1, 3 relu6, 4 tanh, 5 sign_bit); switches REVERSE, AUX, CHUNKED.
#ifndef CHUNKED
#define CHUNKED 0
#endif
shared float h_s[U];
shared float n_s[U];

float rnn_act(float v) {
#if RNN_ACT == 1
    return max(v, 0.0);
#elif RNN_ACT == 2
    return clamp(v, -1.0, 1.0);
#elif RNN_ACT == 3
    return clamp(v, 0.0, 6.0);
#elif RNN_ACT == 4
    return tanh(clamp(v, -15.0, 15.0));           // (tanh(+-15) is +-1 in float; no exp overflow)
#elif RNN_ACT == 5
    return float(floatBitsToUint(v) >> 31);       // std::signbit: 1 for a set sign bit (-0.0 too)
#else
    return v;
#endif
}

void main() {
    uint b = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
    if (b >= uint(NB)) return;                      // whole workgroup leaves together
    int l = int(gl_LocalInvocationID.x), n = int(gl_WorkGroupSize.x);
    for (int j = l; j < U; j += n) h_s[j] = h_state[int(b) * U + j];
    barrier();
#if CHUNKED
    int step0 = steps[0], step1 = steps[0] + steps[1];    // (compiler/ops/step_chunks.py: this chunk's steps)
#else
    int step0 = 0, step1 = T;
#endif
    for (int step = step0; step < step1; ++step) {
#if REVERSE
        int t = T - 1 - step;
#else
        int t = step;
#endif
        int xb = t * X_TS + int(b) * X_BS;
        for (int j = l; j < U; j += n) {
            float dx = 0.0;                          // each product sum added on its own, as LiteRT does
            for (int k = 0; k < I; ++k) dx += w[OFF_W + j * I + k] * x[xb + k];
            float s = w[OFF_B + j] + dx;
#if AUX
            int ab = t * A_TS + int(b) * A_BS;
            float da = 0.0;
            for (int k = 0; k < A; ++k) da += w[OFF_A + j * A + k] * ax[ab + k];
            s += da;
#endif
            float dh = 0.0;
            for (int k = 0; k < U; ++k) dh += w[OFF_R + j * U + k] * h_s[k];
            n_s[j] = rnn_act(s + dh);
        }
        barrier();
        int ob = t * O_TS + int(b) * O_BS + O_OFF;
        for (int j = l; j < U; j += n) {
            h_s[j] = n_s[j];
            out_[ob + j] = n_s[j];
        }
        barrier();
    }
    for (int j = l; j < U; j += n) h_state[int(b) * U + j] = h_s[j];
}
