#version 450
// gelu_mul: out[t][i] = gelu_tanh(gu[t][i]) * gu[t][n_ff + i] (used when the
// gate and up matrices have different types and cannot share one GLU matvec).
#include "common.glsl"

layout(constant_id = 0) const uint WG = 64;
layout(local_size_x_id = 0) in;

layout(binding = 0) readonly buffer GU { float gu[]; };
layout(binding = 1) writeonly buffer Out { float outv[]; };

// Mirrors struct gelu_push in gpu_worker/engine.h.
layout(push_constant) uniform Push {
	uint n_ff;
	uint n_tok;
} p;

void main()
{
	uint i = gl_GlobalInvocationID.x;
	if (i >= p.n_ff * p.n_tok)
		return;
	uint t = i / p.n_ff, c = i % p.n_ff;
	outv[i] = gelu_tanh(gu[t * 2u * p.n_ff + c]) * gu[t * 2u * p.n_ff + p.n_ff + c];
}
