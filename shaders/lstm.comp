// UNIDIRECTIONAL_SEQUENCE_LSTM (float), LiteRT's reference math.  One workgroup per batch element
// walks the T time steps; invocations stride over the C cell units, then over the O outputs, with
// barriers between phases.  The recurrent state lives in shared memory during the sequence and is
// read from / written back to the variable tensors h_state [B,O] and c_state [B,C] (read-write),
// so it persists across runs.
// Bindings: out_ [B,T,O] (or [T,B,O] when TIME_MAJOR), x [B,T,I] (or [T,B,I]), w (packed constants:
// WX [4][C][I] gates i,f,g,o; WH [4][C][O]; BIAS [4][C]; PEEP [3][C] (i,f,o); PW [O][C]; PB [O]),
// h_state, c_state [, steps (CHUNKED)].
// Defines: NB T I C O, OFF_WX OFF_WH OFF_B OFF_P OFF_PW OFF_PB, CELL_ACT (1 relu 3 relu6 4 tanh; 0 none),
// CELL_CLIP PROJ_CLIP (used when CCLIP / PCLIP), switches TIME_MAJOR CIFG PEEPHOLE PROJ CCLIP PCLIP.
// One direction of BIDIRECTIONAL_SEQUENCE_LSTM (compiler/ops/lstm_bidirectional.py) also sets REVERSE (steps
// last to first), OUT_STEP / OUT_OFF (output row stride and first column: merged outputs) and AUX (an aux
// input ax [rows][AUX_I] with its weights wa [4][C][AUX_I] added to the gates).
#ifndef REVERSE
#define REVERSE 0
#endif
#ifndef OUT_STEP
#define OUT_STEP O
#endif
#ifndef OUT_OFF
#define OUT_OFF 0
#endif
#ifndef AUX
#define AUX 0
#endif
// CHUNKED (compiler/ops/step_chunks.py: a long sequence, one dispatch a chunk of steps): the steps
// [steps[0], steps[0] + steps[1]) of the T (a constant binding `steps`), the state carried between the dispatches
// in h_state / c_state.
#ifndef CHUNKED
#define CHUNKED 0
#endif
shared float h_s[O];
shared float c_s[C];
shared float m_s[C];

float lstm_sig(float v) { return 1.0 / (1.0 + exp(-v)); }
// LiteRT's cell / projection clipping (CwiseClipping: max(min(clip, v), -clip)) turns NaN into +clip
float lstm_clip(float v, float clip) { return isnan(v) ? clip : clamp(v, -clip, clip); }

float lstm_act(float v) {
#if CELL_ACT == 1
    return gpuc_clamp(v, 0.0, 3.40282347e38);     // LiteRT's LSTM relu: [0, FLT_MAX], NaN kept
#elif CELL_ACT == 3
    return gpuc_clamp(v, 0.0, 6.0);
#elif CELL_ACT == 4
    return tanh(gpuc_clamp(v, -15.0, 15.0));
#else
    return v;
#endif
}

void main() {
    uint b = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
    if (b >= uint(NB)) return;                      // whole workgroup leaves together
    int l = int(gl_LocalInvocationID.x), n = int(gl_WorkGroupSize.x);
    for (int j = l; j < C; j += n) c_s[j] = c_state[int(b) * C + j];
    for (int k = l; k < O; k += n) h_s[k] = h_state[int(b) * O + k];
    barrier();
#if CHUNKED
    int step0 = steps[0], step1 = steps[0] + steps[1];
#else
    int step0 = 0, step1 = T;
#endif
    for (int step = step0; step < step1; ++step) {
#if REVERSE
        int t = T - 1 - step;
#else
        int t = step;
#endif
#if TIME_MAJOR
        int row = t * NB + int(b);
#else
        int row = int(b) * T + t;
#endif
        int xb = row * I;
        for (int j = l; j < C; j += n) {
            float acc[4];
            for (int g = 0; g < 4; ++g) {
#if CIFG
                if (g == 0) { acc[0] = 0.0; continue; }
#endif
                float s = w[OFF_B + g * C + j];
                int wx = OFF_WX + (g * C + j) * I;
                for (int k = 0; k < I; ++k) s += w[wx + k] * x[xb + k];
#if AUX
                for (int k = 0; k < AUX_I; ++k) s += wa[(g * C + j) * AUX_I + k] * ax[row * AUX_I + k];
#endif
                int wh = OFF_WH + (g * C + j) * O;
                for (int k = 0; k < O; ++k) s += w[wh + k] * h_s[k];
                acc[g] = s;
            }
            float c_prev = c_s[j];
#if PEEPHOLE
            float pi = w[OFF_P + j], pf = w[OFF_P + C + j], po = w[OFF_P + 2 * C + j];
#else
            float pi = 0.0, pf = 0.0, po = 0.0;
#endif
            float fg = lstm_sig(acc[1] + pf * c_prev);
#if CIFG
            float ig = 1.0 - fg;
#else
            float ig = lstm_sig(acc[0] + pi * c_prev);
#endif
            float gg = lstm_act(acc[2]);
            float c = fg * c_prev + ig * gg;
#if CCLIP
            c = lstm_clip(c, float(CELL_CLIP));
#endif
            float og = lstm_sig(acc[3] + po * c);
            c_s[j] = c;                              // only this invocation touches unit j
            m_s[j] = og * lstm_act(c);
        }
        barrier();
        for (int k = l; k < O; k += n) {
#if PROJ
            float s = w[OFF_PB + k];
            for (int j = 0; j < C; ++j) s += w[OFF_PW + k * C + j] * m_s[j];
#if PCLIP
            s = lstm_clip(s, float(PROJ_CLIP));
#endif
#else
            float s = m_s[k];
#endif
            h_s[k] = s;
            out_[row * OUT_STEP + OUT_OFF + k] = s;
        }
        barrier();
    }
    for (int j = l; j < C; j += n) c_state[int(b) * C + j] = c_s[j];
    for (int k = l; k < O; k += n) h_state[int(b) * O + k] = h_s[k];
}
