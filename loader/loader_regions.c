/* loader_regions: build the shared regions and hand them out (see .h). */
#include "loader/loader_regions.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ipc/attach.h"
#include "common/err.h"
#include "ipc/fdpass.h"
#include "ipc/manifest.h"
#include "common/progress.h"

void loader_regions_free(struct loader_regions *r)
{
	for (uint32_t i = 0; r->weights && i < r->n_weights; i++)
		shm_destroy(&r->weights[i]);
	free(r->weights);
	r->weights = NULL;
	free(r->sums);
	r->sums = NULL;
	r->n_weights = 0;
	shm_destroy(&r->manifest);
	shm_destroy(&r->act);
}

/* Copy tensor bytes one by one (rather than manifest_fill) so the progress
 * bar moves during a multi-GiB load; every destination is bounds-checked. */
static int copy_tensors(const struct model *m, const struct manifest_plan *plan, struct loader_regions *r,
			bool quiet)
{
	struct progress p;
	progress_init(&p, stderr, "loading weights", r->weights_bytes);
	progress_set_quiet(&p, quiet);
	for (size_t i = 0; i < m->n_tensors; i++) {
		const struct model_tensor *t = &m->tensors[i];
		if (plan->region[i] >= r->n_weights)
			return err_set(ERR_RANGE, "loader: tensor %s: region %u out of range", t->name, plan->region[i]);
		void *dst = shm_ptr(&r->weights[plan->region[i]], plan->offset[i], t->nbytes);
		if (!dst || (!t->data && t->nbytes))
			return err_set(ERR_RANGE, "loader: tensor %s: [%" PRIu64 ", +%" PRIu64 ") outside region %u",
				       t->name, plan->offset[i], t->nbytes, plan->region[i]);
		memcpy(dst, t->data, t->nbytes);
		progress_add(&p, t->nbytes);
	}
	progress_finish(&p);
	return 0;
}

int loader_regions_build(const struct model *m, bool quiet, struct loader_regions *r)
{
	memset(r, 0, sizeof *r);
	shm_init(&r->manifest);
	shm_init(&r->act);
	struct manifest_plan plan;
	memset(&plan, 0, sizeof plan);
	int rc = manifest_plan(m, 0, &plan);
	if (rc)
		return rc;
	r->weights = calloc(plan.n_regions, sizeof *r->weights);
	if (!r->weights) {
		rc = err_set(ERR_NOMEM, "loader: out of memory");
		goto out;
	}
	r->n_weights = plan.n_regions;
	for (uint32_t i = 0; i < r->n_weights; i++)
		shm_init(&r->weights[i]);
	for (size_t i = 0; i < m->n_tensors; i++)
		r->weights_bytes += m->tensors[i].nbytes;
	bool all_dma = true;
	for (uint32_t i = 0; i < r->n_weights && !rc; i++) {
		char name[32];
		snprintf(name, sizeof name, "weights-%u", i);
		rc = shm_create(name, plan.region_size[i], &r->weights[i]);
		all_dma = all_dma && r->weights[i].dmabuf_fd >= 0;
	}
	if (rc)
		goto out;
	rc = copy_tensors(m, &plan, r, quiet);
	if (rc)
		goto out;
	size_t man_len = 0, written = 0;
	rc = manifest_size(m->n_tensors, plan.n_regions, &man_len);
	if (!rc)
		rc = shm_create("manifest", man_len, &r->manifest);
	if (!rc)
		rc = manifest_write(m, &plan, r->manifest.addr, r->manifest.size, &written);
	if (rc)
		goto out;
	r->manifest_bytes = written;
	uint64_t stride, act_size;
	rc = attach_act_layout(m->cfg.n_embd, m->cfg.n_vocab, &stride, &act_size);
	if (!rc)
		rc = shm_create("activations", act_size, &r->act);
	if (rc)
		goto out;
	r->dmabuf = all_dma && r->manifest.dmabuf_fd >= 0 && r->act.dmabuf_fd >= 0;
	/* identity and checksums, once: what every import is checked against */
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	r->ident = ((uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec) | 1;
	r->sums = calloc(r->n_weights, sizeof *r->sums);
	if (!r->sums) {
		rc = err_set(ERR_NOMEM, "loader: out of memory");
		goto out;
	}
	r->manifest_sum = attach_manifest_sum(r->ident, r->manifest.addr, r->manifest_bytes);
	for (uint32_t i = 0; i < r->n_weights; i++)
		r->sums[i] = attach_region_sum(r->ident, i, r->weights[i].addr, r->weights[i].size);
out:
	manifest_plan_free(&plan);
	return rc;
}

int loader_regions_serve(const struct loader_regions *r, int cfd)
{
	uint32_t tag = 0;
	size_t len = 0, nfds = 0;
	int junk[4];
	uint8_t req[16];
	int rc = fdpass_recv(cfd, &tag, req, sizeof req, &len, junk, 4, &nfds);
	if (rc)
		return rc;
	for (size_t i = 0; i < nfds; i++)
		close(junk[i]);
	if (tag != ATTACH_TAG_REQ || len != 0 || nfds != 0)
		return err_set(ERR_INVAL, "loader: loader.sock: request tag %u with %zu bytes, %zu fds (want tag %d, empty)",
			       tag, len, nfds, ATTACH_TAG_REQ);
	struct attach_info info = {
		.n_regions = r->n_weights,
		.manifest_size = r->manifest_bytes,
		.act_size = r->act.size,
		.flags = r->dmabuf ? ATTACH_F_DMABUF : 0,
		.ident = r->ident,
		.manifest_sum = r->manifest_sum,
	};
	uint32_t n = r->n_weights;
	if (n == 0 || n > MANIFEST_MAX_REGIONS)
		return err_set(ERR_STATE, "loader: no regions to serve");
	int fds[MANIFEST_MAX_REGIONS + 2], dma[MANIFEST_MAX_REGIONS + 2];
	fds[0] = r->manifest.fd;
	dma[0] = r->manifest.dmabuf_fd;
	for (uint32_t i = 0; i < n; i++) {
		info.size[i] = r->weights[i].size;
		info.sum[i] = r->sums ? r->sums[i] : 0;
		fds[1 + i] = r->weights[i].fd;
		dma[1 + i] = r->weights[i].dmabuf_fd;
	}
	fds[n + 1] = r->act.fd;
	dma[n + 1] = r->act.dmabuf_fd;
	uint8_t data[ATTACH_INFO_MAX];
	rc = attach_info_encode(&info, data, sizeof data, &len);
	if (!rc)
		rc = fdpass_send(cfd, ATTACH_TAG_REGIONS, data, len, fds, n + 2);
	if (!rc && r->dmabuf)
		rc = fdpass_send(cfd, ATTACH_TAG_DMABUF, NULL, 0, dma, n + 2);
	return rc;
}
