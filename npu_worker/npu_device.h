/* npu_device: find the XDNA NPU and the attention kernel files, without XRT.
 *
 * This is plain C in libunicorn.a (linked into every binary), so it never
 * calls the XRT shim; it only checks what the npu worker needs before it
 * touches XRT and turns every miss into an error that says what to do. */
#ifndef UNICORN_NPU_DEVICE_H
#define UNICORN_NPU_DEVICE_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#define NPU_DEVICE_DEFAULT "/dev/accel/accel0"
#define NPU_KERNEL_DIR_DEFAULT "npu_kernels/build"
#define NPU_XCLBIN_NAME "attention.xclbin"
#define NPU_INSTS_NAME "insts.bin"
/* An instruction stream is a few KiB to a few MiB; refuse anything absurd. */
#define NPU_INSTS_MAX_BYTES (64u << 20)

struct npu_device_info {
	char path[PATH_MAX];
	char driver[64]; /* "amdxdna", or "unknown" when sysfs cannot tell */
	unsigned major, minor;
};

struct npu_kernel_files {
	char xclbin[PATH_MAX];
	char insts[PATH_MAX];
};

/* The device node to use: `path` if non-NULL, else $UNICORN_NPU_DEVICE, else
 * NPU_DEVICE_DEFAULT. */
const char *npu_device_path(const char *path);

/* Checks that the node exists, is a character device of the accel subsystem
 * bound to amdxdna (via /sys/dev/char/MAJ:MIN; $UNICORN_NPU_SYSFS replaces
 * "/sys" for tests) and can be opened read-write. Returns 0 or ERR_DEVICE with
 * a message that names the cause and points to --attn-backend vulkan. */
int npu_device_probe(const char *path, struct npu_device_info *out);

/* Resolves the kernel files: $UNICORN_NPU_XCLBIN / $UNICORN_NPU_INSTS if set,
 * else NPU_XCLBIN_NAME / NPU_INSTS_NAME in `dir` (NULL: $UNICORN_NPU_KERNEL_DIR
 * or NPU_KERNEL_DIR_DEFAULT). Both must be non-empty regular files; otherwise
 * ERR_NOTFOUND "... the NPU attention kernel is not built; see
 * npu_kernels/README.md". */
int npu_kernel_files_resolve(const char *dir, struct npu_kernel_files *out);

/* Reads an instruction stream (raw little-endian uint32 words, as aiecc's
 * --npu-insts-name writes). *words is malloc'ed; the caller frees it. */
int npu_insts_load(const char *path, uint32_t **words, size_t *n_words);

#endif
