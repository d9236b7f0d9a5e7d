/* tensor_out: output file, tensor list and data-phase state machine shared
 * by the model writers (see tensor_out.h). */
#include "formats/tensor_out.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/err.h"

int tensor_out_tmp_open(const char *path, char **tmp_out, FILE **f_out)
{
	size_t n = strlen(path);
	char *tmp = malloc(n + 16);
	if (!tmp)
		return err_set(ERR_NOMEM, "%s: out of memory", path);
	snprintf(tmp, n + 16, "%s.tmp.XXXXXX", path);
	int fd = mkstemp(tmp);
	if (fd < 0) {
		int e = errno;
		free(tmp);
		return err_set(ERR_IO, "%s: cannot create temporary file: %s", path, strerror(e));
	}
	mode_t um = umask(0);
	umask(um);
	(void)fchmod(fd, 0666 & ~um); /* mkstemp makes 0600; a model file is ordinary data */
	FILE *f = fdopen(fd, "wb");
	if (!f) {
		close(fd);
		unlink(tmp);
		free(tmp);
		return err_set(ERR_IO, "%s: fdopen failed", path);
	}
	setvbuf(f, NULL, _IOFBF, 1 << 22);
	*tmp_out = tmp;
	*f_out = f;
	return 0;
}

int tensor_out_tmp_commit(FILE *f, const char *tmp, const char *path)
{
	/* fflush and fclose both report a failed write (a full disk shows up
	 * here, not in fwrite, because of the large buffer). */
	int bad = fflush(f) != 0;
	int e = errno;
	if (fclose(f) != 0 && !bad) {
		bad = 1;
		e = errno;
	}
	if (bad) {
		unlink(tmp);
		return err_set(ERR_IO, "%s: write failed: %s", tmp, strerror(e));
	}
	if (rename(tmp, path) != 0) {
		e = errno;
		unlink(tmp);
		return err_set(ERR_IO, "%s: rename from %s failed: %s", path, tmp, strerror(e));
	}
	return 0;
}

int tensor_out_open(struct tensor_out *o, const char *path, uint64_t align, uint64_t max_end)
{
	if (!align)
		align = 1;
	/* Keeps every aligned end below max_end representable. */
	if (max_end > UINT64_MAX - (align - 1))
		max_end = UINT64_MAX - (align - 1);
	*o = (struct tensor_out){ .state = TENSOR_OUT_META, .align = align, .max_end = max_end };
	o->path = strdup(path);
	if (!o->path)
		return err_set(ERR_NOMEM, "%s: out of memory", path);
	return tensor_out_tmp_open(path, &o->tmp_path, &o->f);
}

void tensor_out_cleanup(struct tensor_out *o)
{
	if (o->f)
		fclose(o->f);
	if (o->state != TENSOR_OUT_DONE && o->tmp_path)
		unlink(o->tmp_path);
	free(o->t);
	free(o->path);
	free(o->tmp_path);
	*o = (struct tensor_out){ 0 };
}

static uint64_t out_align(const struct tensor_out *o, uint64_t x)
{
	return (x + o->align - 1) / o->align * o->align;
}

int tensor_out_check_meta(const struct tensor_out *o, const char *kind, const char *name)
{
	if (o->state != TENSOR_OUT_META)
		return err_set(ERR_STATE, "%s: %s %s: added after tensor data started", o->path, kind,
			       name ? name : "?");
	return 0;
}

uint64_t tensor_out_data_size(const struct tensor_out *o)
{
	return o->n_t ? out_align(o, o->t[o->n_t - 1].offset + o->t[o->n_t - 1].nbytes) : 0;
}

int tensor_out_add(struct tensor_out *o, const char *name, uint32_t type, uint32_t n_dims,
		   const uint64_t *dims, uint64_t nbytes)
{
	int rc = tensor_out_check_meta(o, "tensor", name);
	if (rc)
		return rc;
	size_t len = strlen(name);
	if (!len || len >= TENSOR_OUT_MAX_NAME)
		return err_set(ERR_INVAL, "%s: tensor '%s': name must be 1..%d bytes", o->path, name,
			       TENSOR_OUT_MAX_NAME - 1);
	if (n_dims > TENSOR_OUT_MAX_DIMS)
		return err_set(ERR_INVAL, "%s: tensor %s: %u dims (max %d)", o->path, name, n_dims,
			       TENSOR_OUT_MAX_DIMS);
	for (uint64_t i = 0; i < o->n_t; i++)
		if (!strcmp(o->t[i].name, name))
			return err_set(ERR_INVAL, "%s: tensor %s: duplicate name", o->path, name);
	uint64_t off = tensor_out_data_size(o);
	if (nbytes > o->max_end || off > o->max_end - nbytes)
		return err_set(ERR_RANGE, "%s: tensor %s: data offset overflows", o->path, name);
	if (o->n_t == o->t_cap) {
		uint64_t cap = o->t_cap ? o->t_cap * 2 : 256;
		if (cap > SIZE_MAX / sizeof *o->t)
			return err_set(ERR_RANGE, "%s: tensor %s: too many tensors", o->path, name);
		struct tensor_out_tensor *p = realloc(o->t, (size_t)cap * sizeof *p);
		if (!p)
			return err_set(ERR_NOMEM, "%s: out of memory", o->path);
		o->t = p;
		o->t_cap = cap;
	}
	struct tensor_out_tensor *t = &o->t[o->n_t++];
	*t = (struct tensor_out_tensor){ .type = type, .n_dims = n_dims, .offset = off, .nbytes = nbytes };
	memcpy(t->name, name, len + 1);
	for (uint32_t d = 0; d < n_dims; d++)
		t->dims[d] = dims[d];
	return 0;
}

static int out_fwrite(struct tensor_out *o, const void *p, size_t n)
{
	if (n && fwrite(p, 1, n, o->f) != n) {
		o->state = TENSOR_OUT_FAILED;
		return err_set(ERR_IO, "%s: write failed: %s", o->tmp_path, strerror(errno));
	}
	return 0;
}

/* Zeros from end up to the next multiple of the alignment. */
static int out_pad(struct tensor_out *o, uint64_t end)
{
	static const uint8_t zeros[64];
	for (uint64_t pad = out_align(o, end) - end; pad;) {
		size_t k = pad < sizeof zeros ? (size_t)pad : sizeof zeros;
		int rc = out_fwrite(o, zeros, k);
		if (rc)
			return rc;
		pad -= k;
	}
	return 0;
}

/* Move past tensors without bytes so 'cur' always names one that needs some. */
static void out_skip_empty(struct tensor_out *o)
{
	while (o->cur < o->n_t && o->t[o->cur].nbytes == 0)
		o->cur++;
}

int tensor_out_begin_data(struct tensor_out *o, const void *header, size_t len)
{
	if (o->state != TENSOR_OUT_META)
		return err_set(ERR_STATE, "%s: begin_data called twice", o->path);
	int rc = out_fwrite(o, header, len);
	if (rc)
		return rc;
	o->state = TENSOR_OUT_DATA;
	o->cur = 0;
	o->cur_done = 0;
	out_skip_empty(o);
	return 0;
}

int tensor_out_write(struct tensor_out *o, const void *data, size_t n)
{
	if (o->state != TENSOR_OUT_DATA)
		return err_set(ERR_STATE, "%s: tensor data written outside the data phase", o->path);
	if (!n)
		return 0;
	if (o->cur >= o->n_t) {
		o->state = TENSOR_OUT_FAILED;
		return err_set(ERR_RANGE, "%s: %zu bytes written past the last tensor", o->path, n);
	}
	const struct tensor_out_tensor *t = &o->t[o->cur];
	uint64_t left = t->nbytes - o->cur_done;
	if (n > left) {
		o->state = TENSOR_OUT_FAILED;
		return err_set(ERR_RANGE, "%s: tensor %s: %zu bytes written but only %llu remain", o->path,
			       t->name, n, (unsigned long long)left);
	}
	int rc = out_fwrite(o, data, n);
	if (rc)
		return rc;
	o->cur_done += n;
	if (o->cur_done == t->nbytes) {
		rc = out_pad(o, t->offset + t->nbytes);
		if (rc)
			return rc;
		o->cur++;
		o->cur_done = 0;
		out_skip_empty(o);
	}
	return 0;
}

int tensor_out_current(const struct tensor_out *o, uint64_t *index, uint64_t *remaining)
{
	if (o->state != TENSOR_OUT_DATA || o->cur >= o->n_t)
		return err_set(ERR_STATE, "%s: no tensor is being written", o->path);
	*index = o->cur;
	*remaining = o->t[o->cur].nbytes - o->cur_done;
	return 0;
}

int tensor_out_finish(struct tensor_out *o)
{
	if (o->state != TENSOR_OUT_DATA)
		return err_set(ERR_STATE, "%s: writer is not in a state to finish (earlier error)", o->path);
	if (o->cur != o->n_t)
		return err_set(ERR_STATE, "%s: tensor %s: data incomplete (%llu of %llu bytes)", o->path,
			       o->t[o->cur].name, (unsigned long long)o->cur_done,
			       (unsigned long long)o->t[o->cur].nbytes);
	FILE *f = o->f;
	o->f = NULL;
	int rc = tensor_out_tmp_commit(f, o->tmp_path, o->path);
	if (rc) {
		/* commit removed the temporary file already */
		o->state = TENSOR_OUT_FAILED;
		free(o->tmp_path);
		o->tmp_path = NULL;
		return rc;
	}
	o->state = TENSOR_OUT_DONE;
	return 0;
}
