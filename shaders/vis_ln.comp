#version 450
// vis_ln: the vision tower's LayerNorm with bias, one workgroup per row:
// y[r] = (x[r] - mean) / sqrt(var + eps) * w + b (two passes over the row,
// the variance of the centred values, as the reference computes it).
layout(local_size_x = 256) in;

layout(binding = 0) readonly buffer X { float x[]; };
layout(binding = 1) readonly buffer W { float w[]; };
layout(binding = 2) readonly buffer B { float b[]; };
layout(binding = 3) writeonly buffer Y { float y[]; };

// Mirrors struct vis_ln_push in gpu_worker/vision.c.
layout(push_constant) uniform Push {
	uint n, x_stride, y_stride;
	float eps;
} p;

shared float red[256];

float reduce_sum(float v)
{
	uint t = gl_LocalInvocationID.x;
	red[t] = v;
	barrier();
	for (uint s = 128u; s > 0u; s >>= 1) {
		if (t < s)
			red[t] += red[t + s];
		barrier();
	}
	float r = red[0];
	barrier();
	return r;
}

void main()
{
	uint r = gl_WorkGroupID.x, t = gl_LocalInvocationID.x;
	uint xo = r * p.x_stride;
	float s = 0.0;
	for (uint i = t; i < p.n; i += 256u)
		s += x[xo + i];
	float mean = reduce_sum(s) / float(p.n);
	float v = 0.0;
	for (uint i = t; i < p.n; i += 256u) {
		float d = x[xo + i] - mean;
		v += d * d;
	}
	float inv = inversesqrt(reduce_sum(v) / float(p.n) + p.eps);
	for (uint i = t; i < p.n; i += 256u)
		y[r * p.y_stride + i] = (x[xo + i] - mean) * inv * w[i] + b[i];
}
