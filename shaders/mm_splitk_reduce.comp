#version 450
// mm_splitk_reduce: the end of a split-K mat-mat product (shaders/
// mul_mm_cm.glsl SPLITK): y[t][row] = the sum of the splits' partial sums, in
// split order (so a column's numbers never depend on which workgroup finished
// first), rows past nrows_valid -inf. Same bindings and push constants as the
// product (p.tail: the split length), so its descriptor set serves; one
// thread per output row, workgroup row y = token.
#include "common.glsl"

layout(local_size_x = 256) in;

#include "mv_io.glsl"

layout(binding = 10) readonly buffer PartBuf { float part[]; };

void main()
{
	uint row = gl_WorkGroupID.x * 256u + gl_LocalInvocationID.x, t = gl_WorkGroupID.y;
	if (row >= p.nrows || t >= p.n_tok)
		return;
	uint n_split = (p.ncols + p.tail - 1u) / p.tail;
	float s = 0.0;
	for (uint z = 0u; z < n_split; z++)
		s += part[(z * p.n_tok + t) * p.nrows + row];
	y[t * p.y_stride + p.y_off + row] = row < p.nrows_valid ? s : NEG_INF;
}
