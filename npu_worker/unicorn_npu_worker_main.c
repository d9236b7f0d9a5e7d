/* unicorn-npu-worker: the attention stage of the split placement on npu.ipc.
 * --attn-backend vulkan runs it with the Vulkan engine (gpu_worker/worker.h);
 * --attn-backend xrt needs the XDNA NPU and its kernels: without them this
 * exits 2 with a message saying what is missing and to use vulkan. */
#include <stdio.h>
#include <string.h>

#include "gpu_worker/worker.h"
#include "common/err.h"
#include "npu_worker/npu_device.h"

/* The backend named on the command line (NULL if absent). */
static const char *attn_backend(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--attn-backend") && i + 1 < argc)
			return argv[i + 1];
		if (!strncmp(argv[i], "--attn-backend=", 15))
			return argv[i] + 15;
	}
	return NULL;
}

int main(int argc, char **argv)
{
	const char *b = attn_backend(argc, argv);
	if (!b || (strcmp(b, "xrt") && strcmp(b, "vulkan"))) {
		fprintf(stderr, "unicorn-npu-worker: --attn-backend vulkan|xrt is required\n");
		return 2;
	}
	if (!strcmp(b, "xrt")) {
		struct npu_device_info dev;
		if (npu_device_probe(NULL, &dev)) {
			fprintf(stderr, "unicorn-npu-worker: %s\n", err_msg());
			return 2;
		}
		struct npu_kernel_files k;
		if (npu_kernel_files_resolve(NULL, &k)) {
			fprintf(stderr, "unicorn-npu-worker: NPU %s found, but: %s\n", dev.path, err_msg());
			return 2;
		}
		/* the XRT attention stage is not wired into the worker loop yet */
		fprintf(stderr, "unicorn-npu-worker: NPU %s and kernels %s found, but the XRT attention stage is "
			"not implemented in this build; run with --attn-backend vulkan\n", dev.path, k.xclbin);
		return 2;
	}
	return worker_main(argc, argv, MSG_ROLE_NPU_WORKER);
}
