#version 450
// topk: the k (<= 64, from the step buffer) largest of n logits, descending,
// ties to the lower index: res[2i] = index, res[2i+1] = value bits (ranks
// past the row's finite logits: index ~0, value -inf). gl_NumWorkGroups.x = G
// workgroups per logits row (gl_WorkGroupID.y): row r reads off + r * stride
// and writes res[128 r ..].
//
// Each workgroup takes a slice of the row: each thread keeps a sorted list of
// its strided part of the slice in shared memory, then k rounds pick the best
// list head. With G > 1 each workgroup publishes its slice's top k to part[],
// counts itself in the row's counter, and the one that brings the count to G
// runs the same selection over the G k candidates and resets the counter (as
// argmax.comp does).
//
// The slices bound every invocation's loop iterations (the host keeps a slice
// near ENGINE_TK_SLICE logits, G <= 128): a thread of the 32-wide workgroup
// scans slice / 32 logits and the merging one G k / 32 candidates, each
// shifting at most k list entries, so at most (slice + G k) / 32 * (k + 1)
// plus 2 k * 6 for the selections: about 21,000 at k 64, G 32 (262,144
// logits), 34,000 at 2^20 logits, under 65,535 up to 2^21 logits even for
// ascending input. llvmpipe (lavapipe) silently ends a shader's loops after
// 65,535 iterations in all (gallivm's LP_MAX_TGSI_LOOP_ITERATIONS, shared by every loop of an
// invocation): one workgroup over a 262,144-token vocabulary passed it and
// left garbage ranks (issue 35).
//
// The same scan also gives the log-sum-exp of the row's n logits (the ids >=
// n are the masked ones, -inf, so they add nothing): each thread keeps an
// online (max, sum of exp(v - max)) of its part, thread 0 merges them (and
// the last workgroup the G slices') and writes the f32 bits to res[lse_off +
// r] (for OpenAI logprobs).
//
// logit_bias and the structured-output mask (STEP_K's bit 31, chunks steps
// only): head row r's descriptor bias[r] holds mask << 31 | count << 20 |
// first: bias[BIAS_HDR + 2 (first + j)] is a token id, the next word the
// f32 bits of what to add to its logit (ids distinct within a row; the step
// entry's last word is the image span's end, attn.glsl's); with the mask
// bit, a token i whose bit
// (mask[r words + i / 32] >> i % 32) is clear ranks as -inf. Each workgroup
// adds the biases of its own slice in place before it scans, so the top k
// and the log-sum-exp are of the biased, masked row (what the host's
// full-row path ranks).
#include "common.glsl"

#define KMAX 64u
#define BIAS_HDR 256u // ENGINE_BIAS_HDR (gpu_worker/engine.h): head rows' descriptors before the pairs
#define TK_PART 4096u // mirrors ENGINE_TK_PART in gpu_worker/engine.h
#define TK_REC 130u   // mirrors ENGINE_TK_REC: KMAX (id, value) pairs, then (max, sum)
layout(constant_id = 0) const uint WG = 32;
layout(local_size_x_id = 0) in;

layout(binding = 0) buffer L { float logits[]; };
layout(binding = 1) writeonly buffer R { uint res[]; };
layout(binding = 2) readonly buffer Step { uint step[]; };
// G > 1: per row a counter at part[row], then the slices' records from
// part[TK_PART + TK_REC (row G + g)]
layout(binding = 3) coherent buffer Part { uint part[]; };
layout(binding = 4) readonly buffer Bias { uint bias[]; };
layout(binding = 5) readonly buffer Mask { uint mask[]; }; // (stride + 31) / 32 words per row

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
shared uint tk_last;
// A masked slice's mask words, read once with coalesced loads: the mask is a
// host-visible buffer (engine.c maskb), and one read per logit (every thread
// the same word each iteration) crossed PCIe 256 times per workgroup; 16
// masked rows made ~130k such reads a step (H100: json_object at 16 streams
// 1.35x plain's ITL, logit_bias alone 1.06x). 8192 logits / 32 + 2 words
// cover ENGINE_TK_SLICE; a longer slice reads the buffer as before.
#define SMASK 258u
shared uint smask[SMASK];

bool better(float v, uint i, float w, uint j) { return v > w || (v == w && i < j); }

// Insert (v, i) into the thread's sorted list at b (c entries, at most k).
void insert(uint b, inout uint c, uint k, float v, uint i)
{
	if (c == k && (k == 0u || !better(v, i, lv[b + c - 1u], li[b + c - 1u])))
		return;
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

// Online log-sum-exp: -inf adds nothing (and exp(-inf - -inf) would be NaN);
// NaN is skipped too. (v, 1) adds one logit, (m, s) a partial sum.
void lse_add(inout float mx, inout float sum, float m, float s)
{
	if (!(m > NEG_INF))
		return;
	if (m > mx) {
		sum = sum * exp(mx - m) + s;
		mx = m;
	} else {
		sum += s * exp(m - mx);
	}
}

// The k best list heads in order: rank r to out[at + 2r] (id, value bits),
// ranks past every list's end as (~0, -inf). Every thread calls it.
void select_k(uint tid, uint k, uint at, bool to_part)
{
	head[tid] = 0u;
	barrier();
	for (uint r = 0u; r < k; r++) {
		uint hd = head[tid];
		bool has = hd < cnt[tid];
		bv[tid] = has ? lv[tid * KMAX + hd] : NEG_INF;
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
			uint id = w != 0xffffffffu ? li[w * KMAX + head[w]] : 0xffffffffu;
			uint vb = floatBitsToUint(w != 0xffffffffu ? lv[w * KMAX + head[w]] : NEG_INF);
			if (to_part) {
				part[at + 2u * r] = id;
				part[at + 2u * r + 1u] = vb;
			} else {
				res[at + 2u * r] = id;
				res[at + 2u * r + 1u] = vb;
			}
		}
		barrier();
		if (w != 0xffffffffu && tid == w)
			head[tid] = head[tid] + 1u;
		barrier();
	}
}

// thread 0: the merged (max, sum) of the threads' sm/ss
void merge_lse(out float m, out float s)
{
	m = NEG_INF;
	s = 0.0;
	for (uint t = 0u; t < WG; t++)
		lse_add(m, s, sm[t], ss[t]);
}

void main()
{
	uint tid = gl_LocalInvocationID.x;
	uint row = gl_WorkGroupID.y, G = gl_NumWorkGroups.x, g = gl_WorkGroupID.x;
	uint lo = p.off + row * p.stride, ro = row * 128u;
	uint kw = step[STEP_K];
	uint k = min(kw & 0xffffu, KMAX);
	uint slice = (p.n + G - 1u) / G;
	uint first = min(g * slice, p.n), last = min(first + slice, p.n);
	bool masked = false;
	uint mo = row * ((p.stride + 31u) / 32u);
	if ((kw >> 31) != 0u) {
		uint d = bias[row];
		uint nb = (d >> 20) & 0x7ffu, b0 = d & 0xfffffu;
		masked = (d >> 31) != 0u;
		for (uint j = tid; j < nb; j += WG) {
			uint id = bias[BIAS_HDR + 2u * (b0 + j)];
			if (id >= first && id < last)
				logits[lo + id] += uintBitsToFloat(bias[BIAS_HDR + 2u * (b0 + j) + 1u]);
		}
		memoryBarrierBuffer();
		barrier();
	}
	uint w0 = first >> 5, nw = last > first ? ((last - 1u) >> 5) + 1u - w0 : 0u;
	bool smasked = masked && nw <= SMASK; // the same for the whole workgroup
	if (smasked) {
		for (uint j = tid; j < nw; j += WG)
			smask[j] = mask[mo + w0 + j];
		barrier();
	}
	uint b = tid * KMAX;
	uint c = 0u;
	float mx = NEG_INF, sum = 0.0;
	for (uint i = first + tid; i < last; i += WG) {
		float v = logits[lo + i];
		uint mw = smasked ? smask[(i >> 5) - w0] : masked ? mask[mo + (i >> 5)] : ~0u;
		if (((mw >> (i & 31u)) & 1u) == 0u)
			v = NEG_INF;
		lse_add(mx, sum, v, 1.0);
		if (v == v) // NaN never ranks
			insert(b, c, k, v, i);
	}
	cnt[tid] = c;
	sm[tid] = mx;
	ss[tid] = sum;
	barrier();
	if (G == 1u) {
		if (tid == 0u) {
			float m, s;
			merge_lse(m, s);
			res[p.lse_off + row] = floatBitsToUint(m > NEG_INF ? m + log(s) : NEG_INF);
		}
		select_k(tid, k, ro, false);
		return;
	}
	uint rec = TK_PART + TK_REC * (row * G + g);
	if (tid == 0u) {
		float m, s;
		merge_lse(m, s);
		part[rec + 2u * KMAX] = floatBitsToUint(m);
		part[rec + 2u * KMAX + 1u] = floatBitsToUint(s);
	}
	select_k(tid, k, rec, true);
	// publish, then count; the workgroup that brings the count to G sees
	// every slice's record (each wrote, fenced, then counted)
	memoryBarrierBuffer();
	barrier();
	if (tid == 0u)
		tk_last = atomicAdd(part[row], 1u) == G - 1u ? 1u : 0u;
	barrier();
	if (tk_last == 0u)
		return;
	memoryBarrierBuffer();
	// the G k candidates: thread t takes candidates t, t + WG, ...
	c = 0u;
	for (uint j = tid; j < G * k; j += WG) {
		uint q = TK_PART + TK_REC * (row * G + j / k) + 2u * (j % k);
		uint id = part[q];
		if (id != 0xffffffffu)
			insert(b, c, k, uintBitsToFloat(part[q + 1u]), id);
	}
	mx = NEG_INF;
	sum = 0.0;
	for (uint q = tid; q < G; q += WG) {
		uint r2 = TK_PART + TK_REC * (row * G + q) + 2u * KMAX;
		lse_add(mx, sum, uintBitsToFloat(part[r2]), uintBitsToFloat(part[r2 + 1u]));
	}
	cnt[tid] = c;
	sm[tid] = mx;
	ss[tid] = sum;
	barrier();
	if (tid == 0u) {
		float m, s;
		merge_lse(m, s);
		res[p.lse_off + row] = floatBitsToUint(m > NEG_INF ? m + log(s) : NEG_INF);
		atomicExchange(part[row], 0u);
	}
	select_k(tid, k, ro, false);
}
