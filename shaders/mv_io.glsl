// mv_io.glsl: the matrix kernels' bindings and push constants (mul_mvs, mul_mm,
// mul_mm_cm): W as words, X as vec4 token rows, Y.
#ifndef MV_IO_GLSL
#define MV_IO_GLSL

layout(binding = 0) readonly buffer WBuf { uint wdata[]; };
layout(binding = 1) readonly buffer XBuf { vec4 x4[]; };
#ifdef NORM_TAIL
// mul_mvs's norm tail reads every workgroup's rows of y back (coherent: past L1)
layout(binding = 2) coherent buffer YBuf { float y[]; };
#else
layout(binding = 2) writeonly buffer YBuf { float y[]; };
#endif

// Mirrors struct mv_push in gpu_worker/engine.h.
layout(push_constant) uniform Push {
	uint ncols, nrows, row_bytes, x_stride, x_off, y_stride, y_off, n_tok, nrows_valid, tpr;
	uint tail;
} p;

#endif
