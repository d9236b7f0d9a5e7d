#version 450
// vis_pool: Gemma 3's projector front: average-pool merge x merge patches
// into one token (row-major patch order, as the reference's AvgPool2d over
// the patch grid), then RMSNorm times the soft-embedding weight (stored as
// 1+w). One workgroup per token.
layout(local_size_x = 256) in;

layout(binding = 0) readonly buffer H { float h[]; };
layout(binding = 1) readonly buffer W { float w[]; };
layout(binding = 2) buffer O { float o[]; };

// Mirrors struct vis_pool_push in gpu_worker/vision.c.
layout(push_constant) uniform Push {
	uint n, pps, tps, merge;
	float eps;
} p;

shared float red[256];

void main()
{
	uint tok = gl_WorkGroupID.x, t = gl_LocalInvocationID.x;
	uint ty = tok / p.tps, tx = tok % p.tps;
	float inv_area = 1.0 / float(p.merge * p.merge);
	float ss = 0.0;
	for (uint i = t; i < p.n; i += 256u) {
		float s = 0.0;
		for (uint dy = 0u; dy < p.merge; dy++)
			for (uint dx = 0u; dx < p.merge; dx++)
				s += h[((ty * p.merge + dy) * p.pps + tx * p.merge + dx) * p.n + i];
		s *= inv_area;
		o[tok * p.n + i] = s;
		ss += s * s;
	}
	red[t] = ss;
	barrier();
	for (uint s = 128u; s > 0u; s >>= 1) {
		if (t < s)
			red[t] += red[t + s];
		barrier();
	}
	float inv = inversesqrt(red[0] / float(p.n) + p.eps);
	for (uint i = t; i < p.n; i += 256u)
		o[tok * p.n + i] = o[tok * p.n + i] * inv * w[i];
}
