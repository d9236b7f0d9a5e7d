#version 450
// attn_combine: merge the per-split partial softmax results of attn.comp into
// out[t][h*head_dim + d].
#include "common.glsl"

layout(constant_id = 0) const uint WG = 64;
layout(local_size_x_id = 0) in;

layout(binding = 0) readonly buffer Part { float part[]; };
layout(binding = 1) writeonly buffer Out { float outv[]; };

// Mirrors struct combine_push in gpu_worker/engine.h.
layout(push_constant) uniform Push {
	uint head_dim;
	uint n_head;
	uint n_split;
	uint pad;
} p;

void main()
{
	uint h = gl_WorkGroupID.x, t = gl_WorkGroupID.y, hd = p.head_dim;
	uint base = (t * p.n_head + h) * p.n_split * (hd + 2u);
	float M = NEG_INF;
	for (uint s = 0u; s < p.n_split; s++)
		M = max(M, part[base + s * (hd + 2u)]);
	float L = 0.0;
	for (uint s = 0u; s < p.n_split; s++) {
		float ms = part[base + s * (hd + 2u)];
		if (ms != NEG_INF)
			L += part[base + s * (hd + 2u) + 1u] * exp(ms - M);
	}
	for (uint d = gl_LocalInvocationID.x; d < hd; d += WG) {
		float a = 0.0;
		for (uint s = 0u; s < p.n_split; s++) {
			float ms = part[base + s * (hd + 2u)];
			if (ms != NEG_INF)
				a += part[base + s * (hd + 2u) + 2u + d] * exp(ms - M);
		}
		outv[t * p.n_head * hd + h * hd + d] = a / L;
	}
}
