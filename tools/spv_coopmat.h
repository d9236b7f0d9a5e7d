/* spv_coopmat: a build-time SPIR-V fix for cooperative-matrix shaders.
 *
 * glslang 2023 (Debian 12's glslc) can spell SPV_KHR_cooperative_matrix only
 * through GL_EXT_spirv_intrinsics, and then emits OpTypeCooperativeMatrixKHR
 * (opcode 4456) with its five operands as literal words:
 *     %r = OpTypeCooperativeMatrixKHR 16 3 16 16 0
 * where SPIR-V requires <id>s: Component Type = an OpTypeFloat of that width,
 * Scope / Rows / Columns / Use = 32-bit integer constants. spv_coopmat_patch
 * rewrites every such instruction: the component literal becomes the id of
 * the OpTypeFloat of that width (moved ahead of the matrix type if the module
 * declares it later, declared if absent), the four others ids of
 * `OpConstant %uint VALUE` instructions placed just before the type (reusing
 * an earlier equal constant; `OpTypeInt 32 0` moved or declared likewise).
 * New ids come after the header's Bound, which grows to match.
 *
 * Both functions reject malformed input with a message in err (never abort):
 * a module from a file is untrusted. tools/spv_coopmat.c compiled with
 * -DSPV_COOPMAT_MAIN is the host tool the Makefile runs (IN.spv OUT.spv). */
#ifndef UNICORN_SPV_COOPMAT_H
#define UNICORN_SPV_COOPMAT_H

#include <stddef.h>
#include <stdint.h>

#define SPV_OP_TYPE_COOPMAT 4456u
#define SPV_MAX_WORDS (4u << 20) /* 16 MiB: far above any shader */

/* Patch n words at in; *out (malloc'ed, caller frees) gets *out_n words.
 * Returns 0, or -1 with a message in err (errlen bytes). */
int spv_coopmat_patch(const uint32_t *in, size_t n, uint32_t **out, size_t *out_n, char *err, size_t errlen);

/* Structural check of a patched module: header, instruction sizes, and every
 * OpTypeCooperativeMatrixKHR's operands name ids defined earlier, below the
 * Bound, of the right kind (OpTypeFloat 16/32/64; OpConstant of a 32-bit
 * OpTypeInt with a valid scope / size / use). Returns the number of matrix
 * types found (>= 0), or -1 with a message. */
int spv_coopmat_verify(const uint32_t *m, size_t n, char *err, size_t errlen);

#endif
