/* worker: the message loop shared by unicorn-gpu-worker and
 * unicorn-npu-worker (--attn-backend vulkan).
 *
 * A worker attaches to the loader's regions (ipc/attach.h), creates the
 * Vulkan engine from the shared weights, listens pair1 on its link (gpu.ipc /
 * npu.ipc) and answers the coordinator:
 *   HELLO      -> WELCOME
 *   EMBED      -> DONE   (gpu: token rows into the slot's hidden state)
 *   STAGE      -> DONE   (npu: attn; gpu: ffn, or whole layers)
 *   HEAD       -> DONE   (gpu: final norm + logits of the last row; argmax or
 *                         top-k into the slot's head area, token = top-1)
 *   RUN        -> DONE   (gpu: fused step embed -> layers -> head)
 *   RESET_SEQ  -> DONE
 *   STATUS_REQ -> STATUS
 * Anything invalid for this worker (slot >= max_seqs, layer >= n_layer, a
 * token >= n_vocab, positions past the context, a stage this role does not
 * run, a sequence that is not in the slot at pos0 > 0) is answered by ERROR
 * naming the field, and the worker keeps serving. A malformed message that
 * the decoder drops is answered by ERROR with ref_seq 0.
 *
 * Slots: the coordinator binds a sequence to a slot by running it at pos0 0;
 * later steps of that slot must name the same seq_id and start at or before
 * the next position the slot has seen (rerunning a chunk is allowed: replays
 * after a restart). FFN/EMBED/HEAD are stateless and only check the slot.
 *
 * KV steps (STAGE attn/layers, RUN, RUN_BATCH) first load the slot's block
 * table from the activation region (ipc/attach.h kvtab, ipc/kvlayout.h); a
 * table that names a block outside the pools is refused with ERROR.
 *
 * Steps of more rows than the engine's max_batch are run in max_batch chunks
 * (attention is causal, so chunks see the KV of earlier chunks). */
#ifndef UNICORN_WORKER_H
#define UNICORN_WORKER_H

#include <stdbool.h>
#include <stdint.h>

#include "gpu_worker/engine.h"
#include "ipc/msg.h"

#define WORKER_ATTACH_TIMEOUT_MS 10000
/* An idle worker sleeps on its doorbell this long, then looks whether its
 * coordinator still exists. Everything else rings it: a step, SHUTDOWN
 * (worker_wake), a restarted coordinator (it retires the old data plane). */
#define WORKER_IDLE_WAIT_MS 10000
/* Without a data plane a worker waits on its link for a HELLO this long at
 * most (an nng wait cannot be rung). */
#define WORKER_LINK_WAIT_MS 1000

struct worker_opts {
	enum msg_role role;         /* MSG_ROLE_GPU_WORKER or MSG_ROLE_NPU_WORKER */
	const char *rundir;
	const char *vk_device;      /* NULL: engine default */
	uint32_t max_seqs;          /* slots served, 1..MSG_MAX_SLOTS; 0 = 1 */
	uint32_t max_batch;         /* engine rows per submission; 0 = engine default */
	int attach_timeout_ms;      /* 0 = WORKER_ATTACH_TIMEOUT_MS */
	const char *backend;        /* STATUS backend field; NULL = "vulkan" */
	enum engine_import weights_import; /* --import: in place or uploaded (AUTO by default) */
	uint64_t kv_budget;         /* --kv-budget: KV pool bytes (ipc/kvlayout.h); 0 = every slot at full length */
	uint32_t ctx;               /* --ctx: positions per sequence, at most the model's; 0 = the model's */
	uint32_t kv_type;           /* --kv-type: enum kv_type (f16 by default) */
	/* start-up progress (engine_opts.progress): the worker's heartbeat, so
	 * the watchdog never takes a slow start for a hung one; NULL = none */
	void (*progress)(void *arg);
	void *progress_arg;
	/* pipeline placement (ipc/stages.h): this process is stage `stage` of
	 * n_stages (0: not a pipeline stage) and runs the whole layers of its
	 * range, stage 0 on the gpu link, stage 1 on the npu link; layers: the
	 * --layers ranges, NULL = balanced by weight bytes */
	uint32_t stage, n_stages;
	const char *layers;
	uint64_t device_mem;        /* --device-mem: weights + KV + scratch on the device at most; 0 = no cap */
	const char *mmproj;         /* --mmproj: the vision projector (IMAGE messages); NULL = none */
	bool ffn_only;              /* --ffn-only: split placement's FFN worker (engine_opts.ffn_only) */
};

struct worker;

/* Attach, create the engine, listen on the role's link. ERR_DEVICE when
 * there is no usable Vulkan device (callers exit 2). */
int worker_create(const struct worker_opts *o, struct worker **out);
void worker_destroy(struct worker *w);

/* Handle one decoded message; fills *out with the answer (DONE, ERROR,
 * STATUS, WELCOME, PONG). Returns false when nothing should be sent. */
bool worker_handle(struct worker *w, const struct msg *in, struct msg *out);

/* Receive one message within timeout_ms, handle it, send the answer.
 * ERR_TIMEOUT when nothing came; other errors are logged-worthy but not fatal. */
int worker_serve(struct worker *w, int timeout_ms);
/* The serve loop's step: one message from the data-plane ring when a
 * coordinator's dataplane is mapped (waiting on its doorbell at most
 * timeout_ms; a dead coordinator sends it back to the link), else
 * worker_serve. */
int worker_serve_any(struct worker *w, int timeout_ms);

/* Wake the main loop from its doorbell (safe from another thread). */
void worker_wake(struct worker *w);
/* Fill a STATUS (safe to call from another thread, e.g. the ctl thread). */
void worker_status(struct worker *w, struct msg_status *st);

/* The whole process: parse --rundir DIR [--vk-device D] [--max-seqs N]
 * [--max-batch N] [--import auto|upload|zero-copy] [--kv-budget BYTES] [--ctx N] [--kv-type T] [--attn-backend B (npu role)]
 * [--stage K/N [--layers A-B,...]] [--device-mem BYTES] [--ffn-only], start the control link
 * (ipc/ctl.h), create the worker and serve until SHUTDOWN or SIGTERM.
 * Returns the exit code: 0 ok, 1 restartable failure, 2 fatal (no Vulkan
 * device, bad arguments). */
int worker_main(int argc, char **argv, enum msg_role role);

#endif
