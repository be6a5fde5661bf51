// s8 x s8 -> s32 subgroup-scope cooperative matrices (VK_KHR_cooperative_matrix 16 x 16 x 32 entries, the
// `coopmat_int8` variants' requirement: compiler/ops/gemm_q8_coopmat.py REQUIRES, int8_conv.py's alike):
// the extensions and the fragment types, for gemm_q8_coopmat.glsl (int8_conv_tiled.comp spells the same
// out).  Operands are staged in shared uint arrays (4 int8 a word), so coopMatLoad offsets and strides
// count words.
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_EXT_shader_explicit_arithmetic_types_int8 : require
#define CM_A coopmat<int8_t, gl_ScopeSubgroup, 16, 32, gl_MatrixUseA>
#define CM_B coopmat<int8_t, gl_ScopeSubgroup, 32, 16, gl_MatrixUseB>
#define CM_C coopmat<int, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>
