/* worker_image: IMAGE messages through the vision tower (worker_image.h). */
#include "gpu_worker/worker_image.h"

#include <stdio.h>
#include <stdlib.h>

#include "common/err.h"
#include "formats/mmproj.h"
#include "gpu_worker/vision.h"
#include "ipc/imagefile.h"

struct worker_image {
	struct mmproj *p;
	struct vision_gpu *v;
	struct vision_config cfg;
	uint32_t slots;
	float *px, *rows; /* [3][S][S], [n_tokens][proj_dim] */
};

int worker_image_open(const char *mmproj, const struct gemma3_config *text, struct worker_image **out,
		      uint32_t *rows, uint32_t *slots)
{
	*out = NULL;
	struct worker_image *wi = calloc(1, sizeof *wi);
	if (!wi)
		return err_set(ERR_NOMEM, "worker: out of memory");
	int rc = mmproj_open(mmproj, &wi->p);
	if (!rc)
		rc = mmproj_check_text(wi->p, text);
	if (!rc) {
		wi->cfg = wi->p->cfg;
		if (wi->cfg.n_tokens < 1 || wi->cfg.n_tokens > MSG_MAX_TOKENS)
			rc = err_set(ERR_UNSUP, "worker: %s: %u tokens per image (at most %d)", mmproj, wi->cfg.n_tokens,
				     MSG_MAX_TOKENS);
	}
	if (!rc) {
		size_t s = wi->cfg.image_size;
		wi->px = malloc(3 * s * s * sizeof(float));
		wi->rows = malloc((size_t)wi->cfg.n_tokens * wi->cfg.proj_dim * sizeof(float));
		if (!wi->px || !wi->rows)
			rc = err_set(ERR_NOMEM, "worker: out of memory for an image");
	}
	if (rc) {
		worker_image_destroy(wi);
		return err_prefix(rc, "vision projector");
	}
	wi->slots = MSG_IMAGE_SLOTS(wi->cfg.n_tokens);
	*rows = wi->cfg.n_tokens;
	*slots = wi->slots;
	*out = wi;
	return 0;
}

int worker_image_attach(struct worker_image *wi, struct engine *e)
{
	int rc = vision_gpu_create(engine_vk(e), wi->p, &wi->v);
	/* the tower's weights are on the device now */
	mmproj_close(wi->p);
	wi->p = NULL;
	return rc ? err_prefix(rc, "vision tower") : 0;
}

void worker_image_destroy(struct worker_image *wi)
{
	if (!wi)
		return;
	vision_gpu_destroy(wi->v);
	mmproj_close(wi->p);
	free(wi->px);
	free(wi->rows);
	free(wi);
}

int worker_image_encode(struct worker_image *wi, struct engine *e, const char *rundir, const struct msg_image *m)
{
	if (!wi || !wi->v)
		return err_set(ERR_UNSUP, "worker: IMAGE: this model has no vision projector");
	if (m->slot >= wi->slots || m->rows != wi->cfg.n_tokens)
		return err_set(ERR_RANGE, "worker: IMAGE: slot %u of %u, %u rows (the projector gives %u)", m->slot,
			       wi->slots, m->rows, wi->cfg.n_tokens);
	size_t s = wi->cfg.image_size;
	int rc = imagefile_read(rundir, m->digest, wi->px, 3 * s * s);
	if (!rc)
		rc = vision_gpu_encode(wi->v, wi->px, wi->rows);
	if (!rc)
		rc = engine_image_set(e, m->slot, wi->rows);
	return rc ? err_prefix(rc, "worker: IMAGE") : 0;
}
