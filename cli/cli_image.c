/* cli_image: the CLI's images (cli_image.h). */
#include "cli/cli_image.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "common/readfile.h"
#include "coordinator/image_input.h"
#include "formats/image.h"
#include "ipc/imagefile.h"
#include "ipc/rundir.h"

/* The first line of RUNDIR/name into out. */
static int first_line(const char *rundir, const char *name, char *out, size_t cap)
{
	char p[RUNDIR_PATH_MAX];
	int rc = rundir_path(rundir, name, p, sizeof p);
	if (rc)
		return rc;
	FILE *f = fopen(p, "r");
	if (!f)
		return ERR_NOTFOUND;
	bool ok = fgets(out, (int)cap, f) != NULL;
	fclose(f);
	out[strcspn(out, "\n")] = 0;
	return ok && *out ? 0 : ERR_NOTFOUND;
}

int cli_images_open(const char *rundir, struct cli_images *ci)
{
	memset(ci, 0, sizeof *ci);
	char model[4096], mp[4096];
	if (first_line(rundir, "ready", model, sizeof model))
		return err_set(ERR_STATE, "the cluster is not ready");
	if (first_line(rundir, "mmproj", mp, sizeof mp))
		return err_set(ERR_UNSUP, "this model has no vision projector (unicorn-up finds mmproj-*.gguf beside "
			       "the model, or takes --mmproj FILE; fused placement)");
	struct mmproj *p = NULL;
	int rc = mmproj_open(mp, &p);
	if (rc)
		return err_prefix(rc, "%s", mp);
	ci->vc = p->cfg;
	mmproj_close(p);
	rc = tok_load(model, &ci->tok);
	return rc ? err_prefix(rc, "tokenizer of %s", model) : 0;
}

void cli_images_close(struct cli_images *ci)
{
	tok_free(ci->tok);
	memset(ci, 0, sizeof *ci);
}

int cli_images_add(struct cli_images *ci, const char *rundir, const char *path)
{
	if (ci->n >= MSG_MAX_IMAGES)
		return err_set(ERR_RANGE, "at most %d images", MSG_MAX_IMAGES);
	char *bytes = NULL;
	size_t n = 0;
	int rc = readfile(path, IMAGE_MAX_BYTES, &bytes, &n); /* its errors name the file */
	if (rc)
		return rc;
	rc = image_input_bytes(rundir, &ci->vc, (const uint8_t *)bytes, n, ci->digest[ci->n]);
	free(bytes);
	if (rc)
		return err_prefix(rc, "%s", path);
	ci->n++;
	return 0;
}

int cli_images_encode(const struct cli_images *ci, const struct chat_msg *msgs, size_t n, uint32_t **ids,
		      uint32_t *n_ids)
{
	uint32_t R = ci->vc.n_tokens;
	uint32_t *rows = malloc(((size_t)ci->n * R + 1) * sizeof *rows);
	if (!rows)
		return err_set(ERR_NOMEM, "out of memory");
	for (uint32_t k = 0; k < ci->n; k++)
		for (uint32_t j = 0; j < R; j++)
			rows[(size_t)k * R + j] = imagefile_row_id(ci->digest[k], j);
	struct tok_ids t = { 0 };
	int rc = chat_encode_images(ci->tok, msgs, n, true, rows, ci->n, R, &t);
	free(rows);
	if (!rc && (t.n == 0 || t.n > MSG_MAX_PROMPT_ALL / 4))
		rc = err_set(ERR_RANGE, "prompt: %zu tokens (at most %u)", t.n, MSG_MAX_PROMPT_ALL / 4);
	if (!rc && !(*ids = malloc(t.n * sizeof **ids)))
		rc = err_set(ERR_NOMEM, "out of memory");
	for (size_t i = 0; !rc && i < t.n; i++)
		memcpy(&(*ids)[i], &t.ids[i], sizeof **ids);
	if (!rc)
		*n_ids = (uint32_t)t.n;
	tok_ids_free(&t);
	return rc;
}
