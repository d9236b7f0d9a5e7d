// attn_x16.glsl: a head's attention output row as x16 (x16.glsl), for the wo
// product's integer dot-product kernel, by attn.glsl and attn_combine.comp,
// whichever writes the head's row. The includer declares WG, the shared
// array X16_HEAD_ROW (at least head_dim floats) and an outq[] binding, and
// defines X16_SG where it has subgroup shuffles (head_x16_run).
#ifndef ATTN_X16_GLSL
#define ATTN_X16_GLSL

#define X16_OUT(w, v) outq[(w)] = (v)
#include "x16.glsl"

// Every thread of the workgroup, after each wrote its elements of head h's
// row of token t to X16_HEAD_ROW (hd a multiple of X16_GROUP, so the head is
// whole groups of the token's row): the head's words of the row's copy. A
// thread takes a lane's two runs (x16.glsl) and the block's amax from the
// shared row: no shuffles, once per head.
#ifdef X16_SG
// The same words from registers, without a barrier: every thread of the
// workgroup (uniform control flow: the shuffles), d4 its slot of four dims
// (elements 4 d4.. of the head, v; d4 >= hd / 4: none) in the one-split
// output, where thread tid holds slot tid + di WG. Elements 4 d4..4 d4 + 3
// are a run (x16.glsl): the eight of a block lie in slots 8m..8m+7,
// neighbouring threads (three shuffles give the amax), and a lane's two runs
// (elements 4k and 16 + 4k of a block) in slots four apart (one shuffle
// gives their sum). Needs subgroups of at least 8.
void head_x16_run(uint t, uint h, uint hd, uint n_head, uint d4, vec4 v)
{
	uint w0 = t * (n_head * hd / X16_GROUP) * X16_GROUP_WORDS;
	x16_run_copy(w0, h * hd / 4u + x16_elem_run(4u * d4), v, d4 < hd / 4u, 4u);
}
#endif

void head_x16(uint t, uint h, uint hd, uint n_head)
{
	barrier();
	uint w0 = t * (n_head * hd / X16_GROUP) * X16_GROUP_WORDS;
	for (uint k = gl_LocalInvocationID.x; k < hd / 8u; k += WG) {
		// runs 2k, 2k + 1 of the head; the head starts at run h * hd / 4 (whole groups)
		uint e0 = x16_run_elem(2u * k), e1 = x16_run_elem(2u * k + 1u), b = e0 & ~31u;
		float amax = 0.0;
		for (uint j = 0u; j < 32u; j++)
			amax = max(amax, abs(X16_HEAD_ROW[b + j]));
		vec4 v0 = vec4(X16_HEAD_ROW[e0], X16_HEAD_ROW[e0 + 1u], X16_HEAD_ROW[e0 + 2u], X16_HEAD_ROW[e0 + 3u]);
		vec4 v1 = vec4(X16_HEAD_ROW[e1], X16_HEAD_ROW[e1 + 1u], X16_HEAD_ROW[e1 + 2u], X16_HEAD_ROW[e1 + 3u]);
		uint r = h * hd / 4u + 2u * k;
		int sum = x16_run_store(w0, r, v0, amax, true) + x16_run_store(w0, r + 1u, v1, amax, true);
		x16_lane_store(w0, r, sum, amax);
	}
}

#endif
