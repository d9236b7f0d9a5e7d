#version 450
// topk: the k (<= 64, from the step buffer) largest of n logits, descending,
// ties to the lower index: res[2i] = index, res[2i+1] = value bits. One
// workgroup: each thread keeps a sorted list of its strided slice in shared
// memory, then k rounds pick the best list head. One workgroup per logits row
// (gl_WorkGroupID.y): row r reads off + r * stride and writes res[128 r ..].
// The same scan also gives the log-sum-exp of the row's n logits (the ids >=
// n are the masked ones, -inf, so they add nothing): each thread keeps an
// online (max, sum of exp(v - max)) of its slice, thread 0 merges them and
// writes the f32 bits to res[lse_off + r] (for OpenAI logprobs).
#include "common.glsl"

#define KMAX 64u
layout(constant_id = 0) const uint WG = 32;
layout(local_size_x_id = 0) in;

layout(binding = 0) readonly buffer L { float logits[]; };
layout(binding = 1) writeonly buffer R { uint res[]; };
layout(binding = 2) readonly buffer Step { uint step[]; };

// Mirrors struct argmax_push in gpu_worker/engine.h.
layout(push_constant) uniform Push {
	uint n;
	uint off;
	uint stride;  // floats between the logits rows of a batch
	uint lse_off; // uint index of row 0's log-sum-exp in res
} p;

shared float lv[WG * KMAX];
shared uint li[WG * KMAX];
shared uint head[WG];
shared uint cnt[WG];
shared float bv[WG];
shared uint bt[WG];
shared float sm[WG];
shared float ss[WG];

bool better(float v, uint i, float w, uint j) { return v > w || (v == w && i < j); }

void main()
{
	uint tid = gl_LocalInvocationID.x;
	uint lo = p.off + gl_WorkGroupID.y * p.stride, ro = gl_WorkGroupID.y * 128u;
	uint k = min(step[STEP_K], KMAX);
	uint b = tid * KMAX;
	uint c = 0u;
	float mx = NEG_INF, sum = 0.0;
	for (uint i = tid; i < p.n; i += WG) {
		float v = logits[lo + i];
		// -inf adds nothing (and exp(-inf - -inf) would be NaN); NaN is skipped too
		if (v > mx) {
			sum = sum * exp(mx - v) + 1.0;
			mx = v;
		} else if (v > NEG_INF) {
			sum += exp(v - mx);
		}
		if (c == k && (k == 0u || !better(v, i, lv[b + c - 1u], li[b + c - 1u])))
			continue;
		uint at = c < k ? c : k - 1u;
		// insertion: shift worse entries down one place
		while (at > 0u && better(v, i, lv[b + at - 1u], li[b + at - 1u])) {
			if (at < k) {
				lv[b + at] = lv[b + at - 1u];
				li[b + at] = li[b + at - 1u];
			}
			at--;
		}
		lv[b + at] = v;
		li[b + at] = i;
		if (c < k)
			c++;
	}
	head[tid] = 0u;
	cnt[tid] = c;
	sm[tid] = mx;
	ss[tid] = sum;
	barrier();
	if (tid == 0u) {
		float m = NEG_INF;
		for (uint t = 0u; t < WG; t++)
			m = max(m, sm[t]);
		float s = 0.0;
		if (m > NEG_INF)
			for (uint t = 0u; t < WG; t++)
				if (sm[t] > NEG_INF)
					s += ss[t] * exp(sm[t] - m);
		res[p.lse_off + gl_WorkGroupID.y] = floatBitsToUint(m > NEG_INF ? m + log(s) : NEG_INF);
	}
	for (uint r = 0u; r < k; r++) {
		uint hd = head[tid];
		bool has = hd < cnt[tid];
		bv[tid] = has ? lv[b + hd] : NEG_INF;
		bt[tid] = has ? tid : 0xffffffffu;
		barrier();
		for (uint s = WG / 2u; s > 0u; s >>= 1) {
			if (tid < s) {
				uint ot = bt[tid + s];
				if (ot != 0xffffffffu) {
					uint mt = bt[tid];
					if (mt == 0xffffffffu ||
					    better(bv[tid + s], li[ot * KMAX + head[ot]], bv[tid], li[mt * KMAX + head[mt]])) {
						bv[tid] = bv[tid + s];
						bt[tid] = ot;
					}
				}
			}
			barrier();
		}
		uint w = bt[0];
		if (tid == 0u) {
			if (w != 0xffffffffu) {
				res[ro + 2u * r] = li[w * KMAX + head[w]];
				res[ro + 2u * r + 1u] = floatBitsToUint(lv[w * KMAX + head[w]]);
			} else {
				res[ro + 2u * r] = 0xffffffffu;
				res[ro + 2u * r + 1u] = floatBitsToUint(NEG_INF);
			}
		}
		barrier();
		if (w != 0xffffffffu && tid == w)
			head[tid] = head[tid] + 1u;
		barrier();
	}
}
