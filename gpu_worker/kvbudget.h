/* kvbudget: `--kv-budget auto` (the default), the KV cache sized from the
 * device (docs/cluster.md "KV cache"): the device-local memory free now
 * (VK_EXT_memory_budget where present, else the heaps' sizes), less the
 * weights, the engine's scratch and a headroom. A worker writes the bytes it
 * chose to RUNDIR/kv-<role>.budget with the loader's identity, reuses them
 * when it is restarted under the same loader (so the pools never change under
 * the coordinator's block tables), and the coordinator plans with the least of
 * the files (ipc/kvlayout.h kv_budget_file_*). */
#ifndef UNICORN_KVBUDGET_H
#define UNICORN_KVBUDGET_H

#include <stdint.h>

#include "formats/model.h"
#include "ipc/kvlayout.h"

struct kvb_plan {
	uint64_t free;      /* device-local bytes free (UNICORN_KV_DEVICE_FREE overrides, for tests) */
	uint64_t weights;   /* model bytes the device holds */
	uint64_t scratch;   /* activations and results, estimated from the engine's buffers */
	uint64_t headroom;  /* max(free / 20, 256 MiB) */
	uint64_t budget;    /* what is left for the KV cache (0: nothing) */
	uint64_t max_pool;  /* one layer's pool: VK_MAX_BUFFER_BYTES, at most maxStorageBufferRange */
	char device[256];
};

/* Plan for model m on the device `device` (vk_create's select) with rows
 * activation rows per submission and batch logits rows. */
int kvb_auto(const char *device, const struct model *m, uint32_t rows, uint32_t batch, struct kvb_plan *out);

/* The engine's scratch (activations and results) for rows activation rows
 * per submission and batch logits rows, estimated from its buffer list. */
uint64_t kvb_scratch(const struct gemma3_config *c, uint32_t rows, uint32_t batch);

/* Lower l's budget (replanned with kv_layout_plan) until one layer's pool of
 * either kind fits max_pool bytes; ERR_RANGE when not even one sequence's does.
 * *budget: the budget l was planned with, then the one it is planned with. */
int kvb_fit_pools(const struct gemma3_config *c, uint64_t max_pool, uint32_t max_seqs, uint64_t *budget,
		  struct kv_layout *l);

#endif
