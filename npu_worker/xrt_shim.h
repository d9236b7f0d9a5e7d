/* xrt_shim: the C face of XRT's C++ API for the XDNA NPU.
 *
 * amdxdna needs xrt::hw_context, which XRT exposes only in C++, so this header
 * is plain C and xrt_shim.cpp (the only C++ file and the only XRT include) does
 * the work. Every function catches all C++ exceptions and returns 0 or a
 * negative ERR_* code from common/err.h with a message (err_msg()).
 *
 * Linking: the shim objects and -lxrt_coreutil are linked only into binaries
 * whose main file lives in npu_worker/, so nothing in libunicorn.a may call
 * these functions; only the npu worker main does.
 *
 * Status: compiled against Debian 12's XRT 2.13 (legacy path); never run on an
 * NPU (none available). See docs/npu.md. */
#ifndef UNICORN_XRT_SHIM_H
#define UNICORN_XRT_SHIM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The mlir-aie "dpu" kernel signature: opcode, instr BO, instr word count,
 * then at most 5 data BOs (kernel args 3..7). */
#define XRT_SHIM_MAX_DATA_BOS 5
#define XRT_SHIM_OPCODE 3u

struct xrt_shim_device;
struct xrt_shim_kernel;
struct xrt_shim_bo;

enum xrt_shim_sync {
	XRT_SHIM_TO_DEVICE = 0,
	XRT_SHIM_FROM_DEVICE = 1,
};

struct xrt_shim_timing {
	double submit_us; /* set args + start */
	double wait_us;   /* start returned -> completion seen */
	double total_us;
};

/* "hw_context" (xrt::hw_context + kernel(ctx, name): what amdxdna needs) or
 * "legacy" (device.load_xclbin + kernel(device, uuid, name): XRT < 2.14,
 * which amdxdna does not support). Decided at compile time. */
const char *xrt_shim_api_name(void);
/* XRT version the shim was compiled against, e.g. "2.13.0". */
const char *xrt_shim_xrt_version(void);

/* Opens XRT device `index` (0 for the only NPU). */
int xrt_shim_device_open(unsigned index, struct xrt_shim_device **out);
void xrt_shim_device_close(struct xrt_shim_device *dev);

/* Loads the xclbin at `xclbin_path`, creates the hardware context (or loads
 * the xclbin on the legacy path) and opens kernel `kernel_name`; NULL picks the
 * first kernel whose name starts with "MLIR_AIE" (what aiecc emits). */
int xrt_shim_kernel_open(struct xrt_shim_device *dev, const char *xclbin_path,
			 const char *kernel_name, struct xrt_shim_kernel **out);
void xrt_shim_kernel_close(struct xrt_shim_kernel *k);

/* Instruction BO (cacheable, kernel arg 1's memory group). */
int xrt_shim_bo_alloc_instr(struct xrt_shim_kernel *k, size_t bytes, struct xrt_shim_bo **out);
/* Host-only data BO for data slot 0..4 (kernel arg 3 + slot's group). */
int xrt_shim_bo_alloc_data(struct xrt_shim_kernel *k, unsigned slot, size_t bytes,
			   struct xrt_shim_bo **out);
/* Imports a dma-buf fd (e.g. a udmabuf shared region) as a BO. The fd is not
 * consumed. Needs a driver with PRIME import (see docs/npu.md); returns
 * ERR_UNSUP when the XRT headers have no import constructor. */
int xrt_shim_bo_import(struct xrt_shim_device *dev, int dmabuf_fd, struct xrt_shim_bo **out);
int xrt_shim_bo_map(struct xrt_shim_bo *bo, void **out);
size_t xrt_shim_bo_size(const struct xrt_shim_bo *bo);
/* Syncs [offset, offset+bytes) of the BO; bytes 0 means "to the end". */
int xrt_shim_bo_sync(struct xrt_shim_bo *bo, enum xrt_shim_sync dir, size_t offset, size_t bytes);
void xrt_shim_bo_free(struct xrt_shim_bo *bo);

/* Runs the kernel once: opcode 3, instr (n_instr_words uint32 words), then
 * n_data (1..5) data BOs in order, and waits. timeout_ms 0 waits forever; on
 * timeout the run is aborted and ERR_TIMEOUT returned. `timing` may be NULL. */
int xrt_shim_run(struct xrt_shim_kernel *k, struct xrt_shim_bo *instr, uint32_t n_instr_words,
		 struct xrt_shim_bo *const *data, unsigned n_data, unsigned timeout_ms,
		 struct xrt_shim_timing *timing);

#ifdef __cplusplus
}
#endif

#endif
