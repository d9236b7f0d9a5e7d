#version 450
// vis_bias: the vision tower's element-wise steps after a matrix product,
// y[r][i] for i < n:
//   mode 0: x + b[i] + extra[r][i]   (patch embedding: bias and position)
//   mode 1: y + x + b[i]             (residual: attention out, MLP down)
//   mode 2: gelu_tanh(x + b[i])      (MLP up; may run in place)
//   mode 3: x + b[i]                 (q, k, v; may run in place)
#include "common.glsl"

layout(local_size_x = 256) in;

layout(binding = 0) buffer X { float x[]; };
layout(binding = 1) readonly buffer B { float b[]; };
layout(binding = 2) readonly buffer E { float extra[]; };
layout(binding = 3) buffer Y { float y[]; };

// Mirrors struct vis_bias_push in gpu_worker/vision.c.
layout(push_constant) uniform Push {
	uint n, x_stride, y_stride, mode;
} p;

void main()
{
	uint i = gl_GlobalInvocationID.x, r = gl_WorkGroupID.y;
	if (i >= p.n)
		return;
	float v = x[r * p.x_stride + i] + b[i];
	uint yo = r * p.y_stride + i;
	if (p.mode == 0u)
		y[yo] = v + extra[r * p.n + i];
	else if (p.mode == 1u)
		y[yo] = y[yo] + v;
	else if (p.mode == 2u)
		y[yo] = gelu_tanh(v);
	else
		y[yo] = v;
}
