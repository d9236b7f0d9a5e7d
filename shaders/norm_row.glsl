// norm_row.glsl: one row's RMSNorm by a workgroup of NORM_WG threads, for
// rmsnorm.glsl (a dispatch per norm) and the norm tail of mul_mvs.glsl (the
// last workgroup of a decode matvec normalizes its output: no dispatch, no
// barrier). Both run this code with the same thread count and reduction, so a
// row normalized in the tail is bitwise the row rmsnorm gives.
//   mode 0: h = norm(x) * w
//   mode 1: h += norm(x) * w                     (post-norm + residual add)
//   mode 3: h += norm(x) * w; out2 = norm(h) * w2 (and the next pre-norm, fused)
// The includer defines NORM_WG (a multiple of 8) and NORM_PER (elements per
// thread, at least n / NORM_WG: constants), the accessors NORM_X(i),
// NORM_W(i), NORM_H(i), NORM_H_SET(i, v), NORM_W2(i), NORM_OUT2_SET(i, v) and
// their vec4 forms NORM_X4(i) ... NORM_OUT24_SET(i, v) (elements 4i..4i+3),
// and NORM_SG to reduce with subgroup operations (then it enables the
// subgroup extensions). For the result's x16 copy it defines X16_OUT(w, v)
// (x16.glsl) and either X16_SG (shuffles: subgroups of at least 8
// invocations, mapped linearly from the local id) or NORM_X16_ON (a constant:
// 0 shrinks the shared arrays the copy uses without shuffles to one element,
// and norm_row may not be asked for a copy).
#ifndef NORM_ROW_GLSL
#define NORM_ROW_GLSL

#include "x16.glsl"

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

// The row in runs of four elements, the x16 copy's (x16.glsl: run r is
// elements x16_run_elem(r) + 0..3): thread tid holds runs tid + m * NORM_WG
// (NORM_RUNS of them, ceil(NORM_PER / 4): 27B at 512 threads, 12 elements
// per array), so it quantizes its own runs for the copy from its registers.
// The copy's block of eight runs lies in eight neighbouring threads
// (NORM_WG is a multiple of 8), which share its amax by shuffles, and the
// two runs of one lane's correction word in a pair. Before, the result went
// through shared memory (kept[]) to a second pass over its tasks: a barrier
// and a read-back, 1.6 of the 8.3 us of a 27B norm (5376 elements, 512
// threads) on the H100. Whole x16 tasks per thread (two runs: two shuffles
// and no pair sum, but 16 elements per array on 27B) measured slower on 1B,
// 4B and 27B (BENCHMARKS.md). Elements past n are 0.0, which changes no sum.
#define NORM_RUNS ((NORM_PER + 3u) / 4u)

// the run in a thread's slot s
uint norm_run(uint s) { return gl_LocalInvocationID.x + s * NORM_WG; }

// name(o, n, e, v, v4): element e..e+3 of h or out2 (row offset o), those
// below n, by the includer's SET (one float) or SET4 (v4: one vec4)
#define NORM_SET_RUN(name, SET4, SET)                          \
	void name(uint o, uint n, uint e, vec4 v, bool v4)      \
	{                                                       \
		if (v4) {                                       \
			if (e < n)                              \
				SET4((o + e) >> 2, v);          \
			return;                                 \
		}                                               \
		[[unroll]] for (uint j = 0u; j < 4u; j++)       \
			if (e + j < n)                          \
				SET(o + e + j, v[j]);           \
	}
NORM_SET_RUN(norm_set_h, NORM_H4_SET, NORM_H_SET)
NORM_SET_RUN(norm_set_out2, NORM_OUT24_SET, NORM_OUT2_SET)

#if defined(X16_OUT) && !defined(X16_SG)
// the copy's block maxima and lane sums between threads, without shuffles
shared float nxam[NORM_X16_ON != 0u ? NORM_WG * NORM_RUNS : 1u];
shared int nxsum[NORM_X16_ON != 0u ? NORM_WG * NORM_RUNS : 1u];
#endif

// Each thread loads all of its elements, x, h, w and w2, before the first
// reduction, so the row waits for memory once. A loop over the row keeps one
// load in flight per thread: h is written between the reads, and the
// compiler cannot move a read of one binding above a write to another (they
// may alias), so every element cost a round trip (27B's 5376-wide rows: 15 us
// per dispatch, 124 dispatches per token). o: the row's first element in x,
// h and out2. xq: also write the result's x16 copy (X16_OUT; modes 0 and 3,
// n a multiple of X16_GROUP, else none), whose first word is
// o / X16_GROUP * X16_GROUP_WORDS.
void norm_row(uint o, uint n, uint mode, float eps, bool xq)
{
	vec4 xv[NORM_RUNS], hv[NORM_RUNS], wv[NORM_RUNS], w2v[NORM_RUNS];
	// a run is whole in the row or wholly past it, and 4-aligned in every
	// buffer: one load of four (w's runs start at multiples of 4 anyway)
	bool v4 = ((o | n) & 3u) == 0u;
	if (v4) {
		[[unroll]] for (uint s = 0u; s < NORM_RUNS; s++) {
			uint e = x16_run_elem(norm_run(s)), i = (o + e) >> 2;
			bool in_row = e < n;
			xv[s] = in_row ? NORM_X4(i) : vec4(0.0);
			hv[s] = in_row && mode != 0u ? NORM_H4(i) : vec4(0.0);
			wv[s] = in_row ? NORM_W4(e >> 2) : vec4(0.0);
			w2v[s] = in_row && mode == 3u ? NORM_W24(e >> 2) : vec4(0.0);
		}
	} else {
		[[unroll]] for (uint s = 0u; s < NORM_RUNS; s++) {
			uint e = x16_run_elem(norm_run(s));
			[[unroll]] for (uint j = 0u; j < 4u; j++) {
				bool in_row = e + j < n;
				xv[s][j] = in_row ? NORM_X(o + e + j) : 0.0;
				hv[s][j] = in_row && mode != 0u ? NORM_H(o + e + j) : 0.0;
				wv[s][j] = in_row ? NORM_W(e + j) : 0.0;
				w2v[s][j] = in_row && mode == 3u ? NORM_W2(e + j) : 0.0;
			}
		}
	}
	// precise: no contraction into FMAs that could differ between the two
	// shaders that run this code
	precise float ss = 0.0;
	[[unroll]] for (uint s = 0u; s < NORM_RUNS; s++)
		[[unroll]] for (uint j = 0u; j < 4u; j++)
			ss += xv[s][j] * xv[s][j];
	precise float r = inversesqrt(norm_block_sum(ss) / float(n) + eps);
	// hv becomes the result: h in mode 0, out2 in mode 3
	if (mode == 0u) {
		[[unroll]] for (uint s = 0u; s < NORM_RUNS; s++) {
			precise vec4 v = xv[s] * r * wv[s];
			hv[s] = v;
			norm_set_h(o, n, x16_run_elem(norm_run(s)), v, v4);
		}
	} else {
		precise float ss2 = 0.0;
		[[unroll]] for (uint s = 0u; s < NORM_RUNS; s++) {
			precise vec4 v = hv[s] + xv[s] * r * wv[s];
			hv[s] = v;
			norm_set_h(o, n, x16_run_elem(norm_run(s)), v, v4);
			[[unroll]] for (uint j = 0u; j < 4u; j++)
				ss2 += v[j] * v[j];
		}
		if (mode != 3u)
			return;
		precise float r2 = inversesqrt(norm_block_sum(ss2) / float(n) + eps);
		[[unroll]] for (uint s = 0u; s < NORM_RUNS; s++) {
			precise vec4 v = hv[s] * r2 * w2v[s];
			hv[s] = v;
			norm_set_out2(o, n, x16_run_elem(norm_run(s)), v, v4);
		}
	}
#ifdef X16_OUT
	// the x16 copy of the result, each thread its own runs (uniform control
	// flow: every thread of the workgroup takes the shuffles)
	if (!xq || n % X16_GROUP != 0u)
		return;
	uint tid = gl_LocalInvocationID.x, w0 = o / X16_GROUP * X16_GROUP_WORDS;
	float am[NORM_RUNS];
	[[unroll]] for (uint m = 0u; m < NORM_RUNS; m++) {
		vec4 v = abs(hv[m]);
		am[m] = max(max(v.x, v.y), max(v.z, v.w));
	}
	// the block's amax from its 8 threads (a max is exact in any order)
#ifdef X16_SG
	[[unroll]] for (uint m = 0u; m < NORM_RUNS; m++)
		am[m] = x16_block_amax(am[m]);
#else
	[[unroll]] for (uint m = 0u; m < NORM_RUNS; m++)
		nxam[m * NORM_WG + tid] = am[m];
	barrier();
	[[unroll]] for (uint m = 0u; m < NORM_RUNS; m++) {
		uint first = m * NORM_WG + (tid & ~7u);
		float a = 0.0;
		for (uint i = 0u; i < 8u; i++)
			a = max(a, nxam[first + i]);
		am[m] = a;
	}
#endif
	// whole blocks: a run is in the row or the block past it is
	int qs[NORM_RUNS];
	[[unroll]] for (uint m = 0u; m < NORM_RUNS; m++)
		qs[m] = x16_run_store(w0, norm_run(m), hv[m], am[m], norm_run(m) < n / 4u);
	// the lane's other run is the neighbour's
#ifdef X16_SG
	[[unroll]] for (uint m = 0u; m < NORM_RUNS; m++)
		qs[m] += subgroupShuffleXor(qs[m], 1u);
#else
	[[unroll]] for (uint m = 0u; m < NORM_RUNS; m++)
		nxsum[m * NORM_WG + tid] = qs[m];
	barrier();
	[[unroll]] for (uint m = 0u; m < NORM_RUNS; m++)
		qs[m] += nxsum[m * NORM_WG + (tid ^ 1u)];
#endif
	[[unroll]] for (uint m = 0u; m < NORM_RUNS; m++) {
		uint r0 = norm_run(m);
		if (r0 < n / 4u && (r0 & 1u) == 0u)
			x16_lane_store(w0, r0, qs[m], am[m]);
	}
#endif
}

#endif
