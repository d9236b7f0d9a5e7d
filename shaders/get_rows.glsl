// get_rows.glsl: embedding gather h[t] = E[token[t]] * scale for the tokens in
// the step buffer. One workgroup per token. Includer defines TYPE.
#include "common.glsl"

layout(constant_id = 0) const uint WG = 64;
layout(local_size_x_id = 0) in;

layout(binding = 0) readonly buffer WBuf { uint wdata[]; };
layout(binding = 1) readonly buffer Step { uint step[]; };
layout(binding = 2) writeonly buffer Out { float h[]; };

// Mirrors struct rows_push in gpu_worker/engine.h.
layout(push_constant) uniform Push {
	uint ncols;
	uint nrows;
	uint row_bytes;
	float scale;
} p;

#include "quant.glsl"

void main()
{
	uint t = gl_WorkGroupID.x;
	uint tok = step[STEP_TOK(t)];
	uint o = t * p.ncols;
	if (tok >= p.nrows) {
		// the host validates ids; a bad one yields zeros, never an out-of-bounds read
		for (uint i = gl_LocalInvocationID.x; i < p.ncols; i += WG)
			h[o + i] = 0.0;
		return;
	}
	uint roff = tok * p.row_bytes;
	uint nch = p.ncols / 32u;
	float w[32];
	for (uint c = gl_LocalInvocationID.x; c < nch; c += WG) {
		dequant32(roff, c, w);
		for (uint k = 0u; k < 32u; k++)
			h[o + c * 32u + k] = w[k] * p.scale;
	}
	for (uint i = nch * 32u + gl_LocalInvocationID.x; i < p.ncols; i += WG)
		h[o + i] = dequant1(roff, i) * p.scale;
}
