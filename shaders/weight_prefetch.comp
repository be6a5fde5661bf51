// Weight prefetch (compiler/ops/weight_prefetch.py): reads 16-byte words [BEGIN, BEGIN + WORDS) of a
// weight tensor w so that they sit in the GPU's L2 cache when a later dispatch streams them.  It runs
// beside an earlier, latency-bound dispatch (it touches no arena bytes, so the runtime puts no barrier
// before or after it) and fills the memory bandwidth that dispatch leaves idle.  Every invocation issues
// U independent loads per step (grid-stride).  w is declared volatile (readonly): the compiler keeps
// the loads though nothing uses their values, and the shader writes nothing.
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
    for (uint j = tid; j < uint(WORDS); j += stride * uint(U)) {
        uvec4 a[U];
        [[unroll]] for (int u = 0; u < U; ++u) {
            uint i = j + uint(u) * stride;
            a[u] = i < uint(WORDS) ? WORD(uint(BEGIN) + i) : uvec4(0u);
        }
    }
}
