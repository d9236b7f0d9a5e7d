// norm_row.glsl: one row's RMSNorm by a workgroup of NORM_WG threads, for
// rmsnorm.glsl (a dispatch per norm) and the norm tail of mul_mvs.glsl (the
// last workgroup of a decode matvec normalizes its output: no dispatch, no
// barrier). Both run this code with the same thread count and reduction, so a
// row normalized in the tail is bitwise the row rmsnorm gives.
//   mode 0: h = norm(x) * w
//   mode 1: h += norm(x) * w                     (post-norm + residual add)
//   mode 3: h += norm(x) * w; out2 = norm(h) * w2 (and the next pre-norm, fused)
// The includer defines NORM_WG and NORM_PER (elements per thread, at least
// n / NORM_WG: constants), the accessors NORM_X(i), NORM_W(i), NORM_H(i),
// NORM_H_SET(i, v), NORM_W2(i), NORM_OUT2_SET(i, v), and NORM_SG to reduce
// with subgroup operations (then it enables the subgroup extensions). It may
// define NORM_KEEP(i, v): called with element i of the row's result (h in
// mode 0, out2 in mode 3) by the thread that writes it.
#ifndef NORM_ROW_GLSL
#define NORM_ROW_GLSL

#ifndef NORM_KEEP
#define NORM_KEEP(i, v)
#endif

shared float nred[NORM_WG];

#ifdef NORM_SG
float norm_block_sum(float v)
{
	v = subgroupAdd(v);
	if (subgroupElect())
		nred[gl_SubgroupID] = v;
	barrier();
	float r = 0.0;
	for (uint i = 0u; i < gl_NumSubgroups; i++)
		r += nred[i];
	barrier();
	return r;
}
#else
float norm_block_sum(float v)
{
	uint tid = gl_LocalInvocationID.x;
	nred[tid] = v;
	barrier();
	for (uint s = NORM_WG / 2u; s > 0u; s >>= 1) {
		if (tid < s)
			nred[tid] += nred[tid + s];
		barrier();
	}
	float r = nred[0];
	barrier();
	return r;
}
#endif

// Each thread holds its elements of the row (element tid + k * NORM_WG) in
// registers and loads all of them, x, h, w and w2, before the first
// reduction, so the row waits for memory once. A loop over the row keeps one
// load in flight per thread: h is written between the reads, and the
// compiler cannot move a read of one binding above a write to another (they
// may alias), so every element cost a round trip (27B's 5376-wide rows: 15 us
// per dispatch, 124 dispatches per token). Elements past n add 0.0, which
// changes no sum. o: the row's first element in x, h and out2.
void norm_row(uint o, uint n, uint mode, float eps)
{
	uint tid = gl_LocalInvocationID.x;
	float xv[NORM_PER], hv[NORM_PER], wv[NORM_PER], w2v[NORM_PER];
	[[unroll]] for (uint k = 0u; k < NORM_PER; k++) {
		uint i = tid + k * NORM_WG;
		bool in_row = i < n;
		xv[k] = in_row ? NORM_X(o + i) : 0.0;
		hv[k] = in_row && mode != 0u ? NORM_H(o + i) : 0.0;
		wv[k] = in_row ? NORM_W(i) : 0.0;
		w2v[k] = in_row && mode == 3u ? NORM_W2(i) : 0.0;
	}
	// precise: no contraction into FMAs that could differ between the two
	// shaders that run this code
	precise float ss = 0.0;
	[[unroll]] for (uint k = 0u; k < NORM_PER; k++)
		ss += xv[k] * xv[k];
	precise float r = inversesqrt(norm_block_sum(ss) / float(n) + eps);
	if (mode == 0u) {
		[[unroll]] for (uint k = 0u; k < NORM_PER; k++) {
			uint i = tid + k * NORM_WG;
			precise float v = xv[k] * r * wv[k];
			if (i < n) {
				NORM_H_SET(o + i, v);
				NORM_KEEP(i, v);
			}
		}
		return;
	}
	precise float ss2 = 0.0;
	[[unroll]] for (uint k = 0u; k < NORM_PER; k++) {
		uint i = tid + k * NORM_WG;
		precise float v = hv[k] + xv[k] * r * wv[k];
		hv[k] = v;
		if (i < n) {
			NORM_H_SET(o + i, v);
			ss2 += v * v;
		}
	}
	if (mode != 3u)
		return;
	precise float r2 = inversesqrt(norm_block_sum(ss2) / float(n) + eps);
	[[unroll]] for (uint k = 0u; k < NORM_PER; k++) {
		uint i = tid + k * NORM_WG;
		precise float v = hv[k] * r2 * w2v[k];
		if (i < n) {
			NORM_OUT2_SET(o + i, v);
			NORM_KEEP(i, v);
		}
	}
}

#endif
