// Shared by every template (pasted after the generated defines and bindings).
#ifndef ACT
#define ACT 0
#endif

// Linear invocation index over a (possibly 2-D) grid of 1-D workgroups.
uint gpuc_gid() {
    return gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * gl_WorkGroupSize.x;
}

// TFLite fused activations: 0 NONE, 1 RELU, 2 RELU_N1_TO_1, 3 RELU6, 4 TANH.
float gpuc_act(float v) {
#if ACT == 1
    return max(v, 0.0);
#elif ACT == 2
    return clamp(v, -1.0, 1.0);
#elif ACT == 3
    return clamp(v, 0.0, 6.0);
#elif ACT == 4
    return tanh(clamp(v, -10.0, 10.0));
#else
    return v;
#endif
}
