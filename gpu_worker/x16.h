/* x16.h: a matrix product's input row as 16-bit integers in two bytes, the
 * layout the decode kernels of regrouped q4_0 weights read (shaders/x16.glsl
 * describes it; the engine's rmsnorm writes it on the GPU). This is its
 * reference: the tests quantize rows here and compare. */
#ifndef UNICORN_GPU_WORKER_X16_H
#define UNICORN_GPU_WORKER_X16_H

#include <stdint.h>

#define X16_GROUP 128u       /* elements per group (four 32-element blocks) */
#define X16_GROUP_WORDS 84u  /* 32-bit words per group */
#define X16_QMAX 32512.0f    /* 127 * 256: the largest |q| */
#define X16_MAGIC 0x4B400000u

/* Bytes of a row of n elements (n a multiple of X16_GROUP). */
static inline uint64_t x16_row_bytes(uint64_t n) { return n / X16_GROUP * X16_GROUP_WORDS * 4; }

/* x[0..n) into out[0..x16_row_bytes(n) / 4) (n a multiple of X16_GROUP). */
void x16_quantize(const float *x, uint32_t n, uint32_t *out);

/* q of element i of a row quantized by x16_quantize, and its block's d
 * (the element is d * q, exact in double). */
int32_t x16_q(const uint32_t *row, uint32_t i, float *d);

#endif
