// Weight prefetch (compiler/ops/weight_prefetch.py): reads 16-byte words [BEGIN, BEGIN + WORDS) of a
// weight tensor w so that they sit in the GPU's L2 cache when a later dispatch streams them.  It runs
// beside an earlier, latency-bound dispatch (its only arena bytes are its own sink, a persistent 16-byte
// variable, so the runtime puts no barrier before or after it) and fills the memory bandwidth that
// dispatch leaves idle.  Every invocation issues U independent loads per step (grid-stride) and xors
// them; an invocation whose xor has a 64-bit pattern stores it to the sink (about never, and harmless):
// the store keeps the loads, which a compiler may otherwise drop as unused.
// Defines: BEGIN WORDS U FLOATW (1: w is float32, read through its bits).
#extension GL_EXT_control_flow_attributes : enable
#ifndef FLOATW
#define FLOATW 0
#endif
#if FLOATW
#define WORD(i) floatBitsToUint(w[i])
#else
#define WORD(i) uvec4(w[i])
#endif
void main() {
    uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    uint tid = gl_GlobalInvocationID.x;
    uvec4 acc = uvec4(0u);
    for (uint j = tid; j < uint(WORDS); j += stride * uint(U)) {
        uvec4 a[U];
        [[unroll]] for (int u = 0; u < U; ++u) {
            uint i = j + uint(u) * stride;
            a[u] = i < uint(WORDS) ? WORD(uint(BEGIN) + i) : uvec4(0u);
        }
        [[unroll]] for (int u = 0; u < U; ++u) acc ^= a[u];
    }
    if (acc.x == 0x9e3779b9u && acc.y == 0x7f4a7c15u) out_[0] = acc;
}
