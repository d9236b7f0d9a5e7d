// mul_mm_cm.glsl: Y = W X for many token columns (prefill) on matrix cores
// (VK_KHR_cooperative_matrix, 16x16x16 f16 x f16 -> f32, subgroup scope).
// Same bindings and push constants as mul_mm.glsl; the host picks this kernel
// where the device offers such a configuration (docs/vulkan.md).
//
// A workgroup of four subgroups computes a tile of BM weight rows x BN tokens.
// Per K step of BK it dequantizes the BM x BK weight tile to f16 in shared
// memory (one 32-element block per thread and pass, shaders/quant.glsl) and
// converts the BN x BK slice of X to f16 next to it; each subgroup then owns a
// WM x WN corner of the tile as (WM/16) x (WN/16) f32 accumulators. At the end
// every accumulator goes through a per-subgroup 16x16 staging area in shared
// memory to Y with bounds checks (rows past nrows_valid get -inf, as mul_mm).
//
// glslang 2023 does not know GL_KHR_cooperative_matrix, so the types and
// instructions are spelled with GL_EXT_spirv_intrinsics; tools/spv_coopmat.c
// rewrites the literal operands glslang gives OpTypeCooperativeMatrixKHR into
// the <id>s SPIR-V requires. The includer defines TYPE.
#extension GL_EXT_control_flow_attributes : enable
#extension GL_EXT_spirv_intrinsics : enable
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : enable
#extension GL_KHR_shader_subgroup_basic : enable
#include "common.glsl"

#define BM 64u
#define BN 64u
#define BK 64u
#define SA (BK + 8u) // shared row stride in halfs: 16-byte aligned rows, skewed banks
#define WM 32u       // rows per subgroup
#define WN 32u       // tokens per subgroup
#define TM (WM / 16u)
#define TN (WN / 16u)
#define NSG 4u       // subgroups per workgroup: (BM / WM) x (BN / WN)

// The workgroup is NSG subgroups: the host passes 4 x subgroupSize.
layout(constant_id = 0) const uint WG = 128;
layout(local_size_x_id = 0) in;

layout(binding = 0) readonly buffer WBuf { uint wdata[]; };
layout(binding = 1) readonly buffer XBuf { vec4 x4[]; };
layout(binding = 2) writeonly buffer YBuf { float y[]; };

// Mirrors struct mv_push in gpu_worker/engine.h.
layout(push_constant) uniform Push {
	uint ncols, nrows, row_bytes, x_stride, x_off, y_stride, y_off, n_tok, nrows_valid, tpr;
} p;

#include "quant.glsl"

// SPV_KHR_cooperative_matrix: capability CooperativeMatrixKHR 6022,
// OpTypeCooperativeMatrixKHR 4456 (component type, scope Subgroup 3, rows,
// columns, use MatrixA 0 / MatrixB 1 / MatrixAccumulator 2), Load 4457,
// Store 4458, MulAdd 4459; memory layout RowMajor 0 / ColumnMajor 1.
#define CM_REQ extensions = ["SPV_KHR_cooperative_matrix"], capabilities = [6022]
#define CMA spirv_type(CM_REQ, id = 4456, 16, 3, 16, 16, 0)
#define CMB spirv_type(CM_REQ, id = 4456, 16, 3, 16, 16, 1)
#define CMC spirv_type(CM_REQ, id = 4456, 32, 3, 16, 16, 2)
#define CM_ROW_MAJOR 0u
#define CM_COL_MAJOR 1u
spirv_instruction(CM_REQ, id = 4457) CMA cm_load_a(spirv_by_reference float16_t ptr, uint lay, uint stride);
spirv_instruction(CM_REQ, id = 4457) CMB cm_load_b(spirv_by_reference float16_t ptr, uint lay, uint stride);
spirv_instruction(CM_REQ, id = 4459) CMC cm_muladd(CMA a, CMB b, CMC c);
spirv_instruction(CM_REQ, id = 4458) void cm_store_c(spirv_by_reference float ptr, CMC v, uint lay, uint stride);
// OpCompositeConstruct (80) of one scalar: every element of the matrix
spirv_instruction(CM_REQ, id = 80) CMC cm_fill_c(float v);

shared float16_t As[BM * SA]; // [row][k]
shared float16_t Bs[BN * SA]; // [token][k]
shared float Cs[NSG * 256u];  // per subgroup: one 16x16 accumulator, column-major

void main()
{
	uint tid = gl_LocalInvocationID.x;
	uint sg = gl_SubgroupID, lane = gl_SubgroupInvocationID;
	uint row0 = gl_WorkGroupID.x * BM, t0 = gl_WorkGroupID.y * BN;
	uint wm = (sg % (BM / WM)) * WM, wn = (sg / (BM / WM)) * WN;
	uint nb = p.ncols / 32u;
	CMC acc[TM * TN];
	[[unroll]] for (uint i = 0u; i < TM * TN; i++)
		acc[i] = cm_fill_c(0.0);
	for (uint k0 = 0u; k0 < p.ncols; k0 += BK) {
		// weights: block i is 32 elements of row i / (BK/32); neighbours share a row
		for (uint i = tid; i < BM * (BK / 32u); i += WG) {
			uint r = i / (BK / 32u), ch = i % (BK / 32u);
			uint c = k0 / 32u + ch;
			float wv[32];
			if (row0 + r < p.nrows && c < nb) {
				dequant32((row0 + r) * p.row_bytes, c, wv);
			} else {
				[[unroll]] for (uint k = 0u; k < 32u; k++)
					wv[k] = 0.0;
			}
			[[unroll]] for (uint k = 0u; k < 32u; k++)
				As[r * SA + ch * 32u + k] = float16_t(wv[k]);
		}
		// activations: neighbours read neighbouring vec4s of one token
		for (uint i = tid; i < BN * (BK / 4u); i += WG) {
			uint tok = i / (BK / 4u), k4 = i % (BK / 4u);
			uint kk = k0 + 4u * k4;
			vec4 v = vec4(0.0);
			if (t0 + tok < p.n_tok && kk < p.ncols)
				v = x4[(p.x_off + (t0 + tok) * p.x_stride + kk) >> 2];
			uint o = tok * SA + 4u * k4;
			Bs[o] = float16_t(v.x);
			Bs[o + 1u] = float16_t(v.y);
			Bs[o + 2u] = float16_t(v.z);
			Bs[o + 3u] = float16_t(v.w);
		}
		barrier();
		[[unroll]] for (uint kk = 0u; kk < BK; kk += 16u) {
			CMA a[TM];
			CMB b[TN];
			[[unroll]] for (uint i = 0u; i < TM; i++)
				a[i] = cm_load_a(As[(wm + 16u * i) * SA + kk], CM_ROW_MAJOR, SA);
			[[unroll]] for (uint j = 0u; j < TN; j++)
				b[j] = cm_load_b(Bs[(wn + 16u * j) * SA + kk], CM_COL_MAJOR, SA);
			[[unroll]] for (uint i = 0u; i < TM; i++)
				[[unroll]] for (uint j = 0u; j < TN; j++)
					acc[i * TN + j] = cm_muladd(a[i], b[j], acc[i * TN + j]);
		}
		barrier();
	}
	// out: C[m][n] is row row0 + wm + 16i + m of token t0 + wn + 16j + n
	[[unroll]] for (uint i = 0u; i < TM; i++) {
		[[unroll]] for (uint j = 0u; j < TN; j++) {
			cm_store_c(Cs[sg * 256u], acc[i * TN + j], CM_COL_MAJOR, 16u);
			subgroupMemoryBarrierShared();
			subgroupBarrier();
			for (uint e = lane; e < 256u; e += gl_SubgroupSize) {
				uint m = e % 16u, n = e / 16u;
				uint row = row0 + wm + 16u * i + m, t = t0 + wn + 16u * j + n;
				if (row < p.nrows && t < p.n_tok)
					y[t * p.y_stride + p.y_off + row] = row < p.nrows_valid ? Cs[sg * 256u + e] : NEG_INF;
			}
			subgroupBarrier();
		}
	}
}
