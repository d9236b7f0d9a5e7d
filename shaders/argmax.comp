#version 450
// argmax: res[0] = index of the largest of n logits (lowest index on ties),
// res[1] = its value bits. One workgroup per logits row (gl_WorkGroupID.y):
// row r reads logits from off + r * stride and writes res[128 r ..].
#extension GL_EXT_control_flow_attributes : enable
#include "common.glsl"

layout(constant_id = 0) const uint WG = 256;
layout(local_size_x_id = 0) in;

layout(binding = 0) readonly buffer L { float logits[]; };
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

void main()
{
	uint tid = gl_LocalInvocationID.x;
	uint lo = p.off + gl_WorkGroupID.y * p.stride, ro = gl_WorkGroupID.y * 128u;
	float bv = NEG_INF;
	uint bi = 0xffffffffu;
	// four loads issued before any compare (one workgroup streams the whole
	// vocabulary: latency, not bandwidth, is the limit); indices rise within a
	// thread, so a strict > keeps the lowest index on ties
	for (uint i0 = tid; i0 < p.n; i0 += 4u * WG) {
		float v[4];
		[[unroll]] for (uint u = 0u; u < 4u; u++)
			v[u] = i0 + u * WG < p.n ? logits[lo + i0 + u * WG] : NEG_INF;
		[[unroll]] for (uint u = 0u; u < 4u; u++) {
			uint i = i0 + u * WG;
			if (i < p.n && (v[u] > bv || bi == 0xffffffffu)) {
				bv = v[u];
				bi = i;
			}
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
