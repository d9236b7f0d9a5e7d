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
// p.x16 = 1: the row's result also as x16 (x16.glsl), for the decode kernels
// that read it so (modes 0 and 3; n a multiple of X16_GROUP)
layout(binding = 5) writeonly buffer XQBuf { uint xq[]; };

// Mirrors struct norm_push in gpu_worker/engine.h.
layout(push_constant) uniform Push {
	uint n;
	uint mode;
	float eps;
	uint x16;
} p;

#include "x16.glsl"
// the row's result, kept for its x16 copy (each block's scale needs all of it)
shared float kept[WG * PER];
#define NORM_KEEP(i, v) kept[i] = (v)

#define NORM_WG WG
#define NORM_PER PER
#define NORM_X(i) x[i]
#define NORM_W(i) w[i]
#define NORM_H(i) h[i]
#define NORM_H_SET(i, v) h[i] = (v)
#define NORM_W2(i) w2[i]
#define NORM_OUT2_SET(i, v) out2[i] = (v)
#include "norm_row.glsl"

// Row o's x16 copy from kept[]: one thread per lane of a block (eight
// elements), which reads the whole block for its scale. x * (32512 / amax)
// rounds to nearest even (gpu_worker/x16.c does the same).
void x16_write(uint o, uint n)
{
	uint base = o / X16_GROUP * X16_GROUP_WORDS;
	for (uint t = gl_LocalInvocationID.x; t < n / 8u; t += WG) {
		uint g = t >> 4, b = (t >> 2) & 3u, k = t & 3u, e0 = g * X16_GROUP + 32u * b;
		float amax = 0.0;
		for (uint j = 0u; j < 32u; j++)
			amax = max(amax, abs(kept[e0 + j]));
		float id = amax > 0.0 ? X16_QMAX / amax : 0.0;
		int sum = 0;
		uint gw = base + g * X16_GROUP_WORDS;
		for (uint h = 0u; h < 2u; h++) {
			uint hw = 0u, lw = 0u;
			for (uint j = 0u; j < 4u; j++) {
				float v = clamp(roundEven(kept[e0 + 16u * h + 4u * k + j] * id), -X16_QMAX, X16_QMAX);
				int q = int(v), hi = (q + 128) >> 8, lo = q - 256 * hi;
				sum += q;
				hw |= (uint(hi) & 255u) << (8u * j);
				lw |= (uint(lo) & 255u) << (8u * j);
			}
			xq[gw + 8u * k + 2u * b + h] = hw;
			xq[gw + 32u + 8u * k + 2u * b + h] = lw;
		}
		xq[gw + 64u + 4u * k + b] = X16_MAGIC - uint(8 * sum);
		if (k == 0u)
			xq[gw + 80u + b] = floatBitsToUint(amax / X16_QMAX);
	}
}

void main()
{
	uint o = gl_WorkGroupID.x * p.n;
	norm_row(o, p.n, p.mode, p.eps);
	if (p.x16 == 0u || p.mode == 1u)
		return;
	barrier();
	x16_write(o, p.n);
}
