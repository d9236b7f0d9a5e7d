/* unicorn-gpu-worker: embeddings, FFN stages (or whole layers when fused) and
 * the head, on Vulkan, for the coordinator on gpu.ipc (gpu_worker/worker.h).
 * Exit 0 on SHUTDOWN/SIGTERM, 1 on a restartable failure, 2 without a device. */
#include "gpu_worker/worker.h"

int main(int argc, char **argv)
{
	return worker_main(argc, argv, MSG_ROLE_GPU_WORKER);
}
