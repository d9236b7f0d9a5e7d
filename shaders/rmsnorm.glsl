// rmsnorm.glsl (rmsnorm.comp, rmsnorm_sg.comp): per token row of n floats, one
// workgroup per row; the modes and the arithmetic are norm_row.glsl's.
#ifdef SG
// SG: reductions with subgroupAdd (one barrier instead of log2(WG)); the host
// uses this variant where subgroup arithmetic is supported and no matvec runs
// the norm in its tail (engine.c: the tail reduces with the tree).
#extension GL_KHR_shader_subgroup_basic : enable
#extension GL_KHR_shader_subgroup_arithmetic : enable
#define NORM_SG 1
#endif
#extension GL_EXT_control_flow_attributes : enable
#include "common.glsl"

layout(constant_id = 0) const uint WG = 64;
layout(local_size_x_id = 0) in;
// elements per thread: the host passes PER >= n / WG
layout(constant_id = 1) const uint PER = 16;

layout(binding = 0) readonly buffer XBuf { float x[]; };
layout(binding = 1) readonly buffer WBuf { float w[]; };
layout(binding = 2) buffer HBuf { float h[]; };
layout(binding = 3) readonly buffer W2Buf { float w2[]; };
layout(binding = 4) writeonly buffer O2Buf { float out2[]; };

// Mirrors struct norm_push in gpu_worker/engine.h.
layout(push_constant) uniform Push {
	uint n;
	uint mode;
	float eps;
	uint pad;
} p;

#define NORM_WG WG
#define NORM_PER PER
#define NORM_X(i) x[i]
#define NORM_W(i) w[i]
#define NORM_H(i) h[i]
#define NORM_H_SET(i, v) h[i] = (v)
#define NORM_W2(i) w2[i]
#define NORM_OUT2_SET(i, v) out2[i] = (v)
#include "norm_row.glsl"

void main() { norm_row(gl_WorkGroupID.x * p.n, p.n, p.mode, p.eps); }
