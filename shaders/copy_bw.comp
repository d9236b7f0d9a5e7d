#version 450
// copy_bw: dst = src in 16-byte words, grid-stride; timed by vk_copy_bw
// (gpu_worker/vk_bw.c) to measure the device's copy bandwidth, the yardstick
// of `unicorn bench --profile`'s per-kernel weight bandwidth.
layout(constant_id = 0) const uint WG = 256;
layout(local_size_x_id = 0) in;

layout(binding = 0) readonly buffer Src { uvec4 src[]; };
layout(binding = 1) writeonly buffer Dst { uvec4 dst[]; };
layout(push_constant) uniform Push { uint n; } p;

void main()
{
	uint stride = gl_NumWorkGroups.x * WG;
	for (uint i = gl_GlobalInvocationID.x; i < p.n; i += stride)
		dst[i] = src[i];
}
