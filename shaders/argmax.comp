#version 450
// argmax: res[0] = index of the largest of n logits (lowest index on ties),
// res[1] = its value bits. One workgroup per logits row (gl_WorkGroupID.y):
// row r reads logits from off + r * stride and writes res[128 r ..].
#extension GL_EXT_control_flow_attributes : enable
#include "common.glsl"

layout(constant_id = 0) const uint WG = 256;
layout(local_size_x_id = 0) in;

layout(binding = 0) readonly buffer L { float logits[]; };
layout(binding = 0) readonly buffer L4 { vec4 logits4[]; };
layout(binding = 1) writeonly buffer R { uint res[]; };

// Mirrors struct argmax_push in gpu_worker/engine.h.
layout(push_constant) uniform Push {
	uint n;
	uint off;
	uint stride;  // floats between the logits rows of a batch
	uint pad;
} p;

shared float sv[WG];
shared uint si[WG];

// Take logit v at index i if it beats the best so far (the first one always):
// indices rise within a thread, so a strict > keeps the lowest on ties.
void take(float v, uint i, inout float bv, inout uint bi)
{
	if (v > bv || bi == 0xffffffffu) {
		bv = v;
		bi = i;
	}
}

void main()
{
	uint tid = gl_LocalInvocationID.x;
	uint lo = p.off + gl_WorkGroupID.y * p.stride, ro = gl_WorkGroupID.y * 128u;
	float bv = NEG_INF;
	uint bi = 0xffffffffu;
	// One workgroup streams the whole vocabulary, so latency, not bandwidth,
	// is the limit: rows at a multiple of 4 floats are read as vec4s, eight
	// issued before any compare (262144 logits: 8 rounds of loads per thread,
	// where four scalar loads a round took 64); others four floats a round.
	if ((lo & 3u) == 0u) {
		uint n4 = p.n / 4u, b4 = lo / 4u;
		for (uint j0 = tid; j0 < n4; j0 += 8u * WG) {
			vec4 v[8];
			[[unroll]] for (uint u = 0u; u < 8u; u++)
				v[u] = j0 + u * WG < n4 ? logits4[b4 + j0 + u * WG] : vec4(NEG_INF);
			[[unroll]] for (uint u = 0u; u < 8u; u++)
				[[unroll]] for (uint c = 0u; c < 4u; c++)
					if (j0 + u * WG < n4)
						take(v[u][c], 4u * (j0 + u * WG) + c, bv, bi);
		}
		// the last n % 4 logits, above every index a vec4 held
		uint i = 4u * n4 + tid;
		if (i < p.n)
			take(logits[lo + i], i, bv, bi);
	} else {
		for (uint i0 = tid; i0 < p.n; i0 += 4u * WG) {
			float v[4];
			[[unroll]] for (uint u = 0u; u < 4u; u++)
				v[u] = i0 + u * WG < p.n ? logits[lo + i0 + u * WG] : NEG_INF;
			[[unroll]] for (uint u = 0u; u < 4u; u++)
				if (i0 + u * WG < p.n)
					take(v[u], i0 + u * WG, bv, bi);
		}
	}
	sv[tid] = bv;
	si[tid] = bi;
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
	if (tid == 0u) {
		res[ro] = si[0];
		res[ro + 1u] = floatBitsToUint(sv[0]);
	}
}
