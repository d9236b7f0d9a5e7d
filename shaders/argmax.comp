#version 450
// argmax: res[0] = index of the largest of n logits (lowest index on ties),
// res[1] = its value bits. gl_NumWorkGroups.x workgroups per logits row
// (gl_WorkGroupID.y): row r reads logits from off + r * stride and writes
// res[128 r ..]. With G > 1 workgroups a row is cut into G slices (a
// multiple of 4 logits each, so vec4 reads stay aligned); each workgroup
// publishes its slice's best to part[], counts itself in the row's counter,
// and the one that brings the count to G merges the G bests in slice order
// (the rule of the tree below: lowest index on ties) and resets the counter.
// One workgroup over 262144 logits is a chain of dependent load rounds (22 us
// on the H100, 1.7% of a 1B token); G of them read in parallel.
#extension GL_EXT_control_flow_attributes : enable
#include "common.glsl"

layout(constant_id = 0) const uint WG = 256;
layout(local_size_x_id = 0) in;

layout(binding = 0) readonly buffer L { float logits[]; };
layout(binding = 0) readonly buffer L4 { vec4 logits4[]; };
layout(binding = 1) writeonly buffer R { uint res[]; };
// G > 1: per row a counter at part[row], then the slices' bests from
// part[AM_PART + 2 (row G + g)] (gpu_worker/engine.h ENGINE_AM_PART)
layout(binding = 2) coherent buffer Part { uint part[]; };
#define AM_PART 4096u

// Mirrors struct argmax_push in gpu_worker/engine.h.
layout(push_constant) uniform Push {
	uint n;
	uint off;
	uint stride;  // floats between the logits rows of a batch
	uint pad;
} p;

shared float sv[WG];
shared uint si[WG];
shared uint am_last;

// Take logit v at index i if it beats the best so far (the first one always):
// indices rise within a thread, so a strict > keeps the lowest on ties.
void take(float v, uint i, inout float bv, inout uint bi)
{
	if (v > bv || bi == 0xffffffffu) {
		bv = v;
		bi = i;
	}
}

// The best of sv/si[0..WG) into sv/si[0]: the larger value, on ties the
// lower index; empty slots (index ~0) lose.
void reduce_shared(uint tid)
{
	barrier();
	for (uint s = WG / 2u; s > 0u; s >>= 1) {
		if (tid < s) {
			float ov = sv[tid + s];
			uint oi = si[tid + s];
			if (oi != 0xffffffffu && (si[tid] == 0xffffffffu || ov > sv[tid] || (ov == sv[tid] && oi < si[tid]))) {
				sv[tid] = ov;
				si[tid] = oi;
			}
		}
		barrier();
	}
}

void main()
{
	uint tid = gl_LocalInvocationID.x;
	uint row = gl_WorkGroupID.y, G = gl_NumWorkGroups.x, g = gl_WorkGroupID.x;
	uint lo = p.off + row * p.stride, ro = row * 128u;
	// this workgroup's slice [first, last) of the row
	uint slice = ((p.n + G - 1u) / G + 3u) & ~3u;
	uint first = min(g * slice, p.n), last = min(first + slice, p.n);
	float bv = NEG_INF;
	uint bi = 0xffffffffu;
	// A workgroup's slice is a chain of dependent load rounds, so latency,
	// not bandwidth, is the limit: rows at a multiple of 4 floats are read as
	// vec4s, eight issued before any compare (one workgroup over 262144
	// logits: 8 rounds per thread, where four scalar loads a round took 64);
	// others four floats a round.
	if ((lo & 3u) == 0u) {
		// the slice's vec4s [first / 4, min(last, 4 n4) / 4): slices start
		// at multiples of 4, so only the row's last n % 4 logits are scalars
		uint n4 = p.n / 4u, b4 = lo / 4u, e4 = min(last / 4u, n4);
		for (uint j0 = first / 4u + tid; j0 < e4; j0 += 8u * WG) {
			vec4 v[8];
			[[unroll]] for (uint u = 0u; u < 8u; u++)
				v[u] = j0 + u * WG < e4 ? logits4[b4 + j0 + u * WG] : vec4(NEG_INF);
			[[unroll]] for (uint u = 0u; u < 8u; u++)
				[[unroll]] for (uint c = 0u; c < 4u; c++)
					if (j0 + u * WG < e4)
						take(v[u][c], 4u * (j0 + u * WG) + c, bv, bi);
		}
		// the last n % 4 logits, above every index a vec4 held
		uint i = 4u * n4 + tid;
		if (i < p.n && i >= first && i < last)
			take(logits[lo + i], i, bv, bi);
	} else {
		for (uint i0 = first + tid; i0 < last; i0 += 4u * WG) {
			float v[4];
			[[unroll]] for (uint u = 0u; u < 4u; u++)
				v[u] = i0 + u * WG < last ? logits[lo + i0 + u * WG] : NEG_INF;
			[[unroll]] for (uint u = 0u; u < 4u; u++)
				if (i0 + u * WG < last)
					take(v[u], i0 + u * WG, bv, bi);
		}
	}
	sv[tid] = bv;
	si[tid] = bi;
	reduce_shared(tid);
	if (G > 1u) {
		uint pi = AM_PART + 2u * (row * G + g);
		if (tid == 0u) {
			part[pi] = si[0];
			part[pi + 1u] = floatBitsToUint(sv[0]);
		}
		// publish, then count; the workgroup that brings the count to G sees
		// every slice's best (each wrote, fenced, then counted)
		memoryBarrierBuffer();
		barrier();
		if (tid == 0u)
			am_last = atomicAdd(part[row], 1u) == G - 1u ? 1u : 0u;
		barrier();
		if (am_last == 0u)
			return;
		memoryBarrierBuffer();
		// thread t loads slice t's best (G <= WG, as the host ensures)
		uint qi = AM_PART + 2u * (row * G + tid);
		si[tid] = tid < G ? part[qi] : 0xffffffffu;
		sv[tid] = tid < G ? uintBitsToFloat(part[qi + 1u]) : NEG_INF;
		reduce_shared(tid);
		if (tid == 0u)
			atomicExchange(part[row], 0u);
	}
	if (tid == 0u) {
		res[ro] = si[0];
		res[ro + 1u] = floatBitsToUint(sv[0]);
	}
}
