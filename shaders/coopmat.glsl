// coopmat.glsl (mul_mm_cm.glsl, flash_attn_cm.glsl): VK_KHR_cooperative_matrix
// 16x16x16 f16 x f16 -> f32 at subgroup scope. glslang 2023 does not know
// GL_KHR_cooperative_matrix, so the types and instructions are spelled with
// GL_EXT_spirv_intrinsics (the includer enables it), and its optimizer cannot
// run on the module (it rejects the capability; the Makefile builds these
// shaders without -O): keep every matrix variable indexed by a constant (no
// loops over arrays of matrices). tools/spv_coopmat.c rewrites the literal
// operands glslang gives OpTypeCooperativeMatrixKHR into the <id>s SPIR-V
// requires. Strides and offsets count elements of the array passed by
// reference (an f16vec2 array: pairs).
#ifndef COOPMAT_GLSL
#define COOPMAT_GLSL
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
spirv_instruction(CM_REQ, id = 4457) CMA cm_load_a(spirv_by_reference f16vec2 ptr, uint lay, uint stride);
spirv_instruction(CM_REQ, id = 4457) CMB cm_load_b(spirv_by_reference f16vec2 ptr, uint lay, uint stride);
spirv_instruction(CM_REQ, id = 4459) CMC cm_muladd(CMA a, CMB b, CMC c);
spirv_instruction(CM_REQ, id = 4458) void cm_store_c(spirv_by_reference float ptr, CMC v, uint lay, uint stride);
// OpCompositeConstruct (80) of one scalar: every element of the matrix
spirv_instruction(CM_REQ, id = 80) CMC cm_fill_c(float v);
#endif
