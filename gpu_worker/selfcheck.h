/* selfcheck: a worker's start-time check that it computes what the cluster's
 * first start of its role computed (issue 37: a restart never changes an
 * answer).
 *
 * selfcheck_run() runs SELFCHECK_N fixed tokens through the whole model on
 * slot 0 (block 0 of each KV pool, then forgets the sequence) and digests the
 * last row's logits (common/digest.h). selfcheck_verify() compares it with
 * DIR/selfcheck-ROLE: the first start of the role writes the file (tmp file,
 * then link(2): exactly one writer wins), every later start must match it.
 * unicorn-up removes the file when the cluster stops. A mismatch is ERR_STATE
 * naming both digests: the worker then refuses to serve. */
#ifndef UNICORN_SELFCHECK_H
#define UNICORN_SELFCHECK_H

#include <stdbool.h>
#include <stdint.h>

#include "gpu_worker/engine.h"
#include "ipc/rundir.h"

#define SELFCHECK_N 5
#define SELFCHECK_FILE RUNDIR_SELFCHECK /* + "gpu" or "npu" */

int selfcheck_run(struct engine *e, uint32_t n_vocab, uint64_t *digest);
/* The check of a worker that holds part of the model (a pipeline stage:
 * layers [l0, l1), stage BOTH; split's attention worker: every layer, stage
 * ATTN): fixed hidden rows of n_embd through those stages of those layers,
 * the output rows digested (the record file is the role's). */
int selfcheck_run_layers(struct engine *e, enum engine_stage stage, uint32_t l0, uint32_t l1, uint32_t n_embd,
			 uint64_t *digest);
/* *first: this start recorded the digest (no earlier one to compare with). */
int selfcheck_verify(const char *rundir, const char *role, uint64_t digest, bool *first);

#endif
