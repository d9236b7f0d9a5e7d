/* selfcheck: see selfcheck.h. */
#include "gpu_worker/selfcheck.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/digest.h"
#include "common/err.h"
#include "ipc/kvlayout.h"
#include "ipc/rundir.h"

int selfcheck_run(struct engine *e, uint32_t n_vocab, uint64_t *digest)
{
	*digest = 0;
	if (n_vocab == 0)
		return err_set(ERR_INVAL, "self-check: no vocabulary");
	static const uint32_t fixed[SELFCHECK_N] = { 2, 818, 5279, 529, 7117 };
	uint32_t tok[SELFCHECK_N];
	for (int i = 0; i < SELFCHECK_N; i++)
		tok[i] = fixed[i] % n_vocab;
	const struct kv_layout *kv = engine_kv_layout(e);
	uint32_t len = kv_table_len(kv);
	uint32_t *tab = calloc(len ? len : 1, sizeof *tab); /* block 0 of each pool: SELFCHECK_N positions fit */
	float *logits = malloc((size_t)n_vocab * sizeof *logits);
	int rc = 0;
	if (!tab || !logits)
		rc = err_set(ERR_NOMEM, "self-check: out of memory");
	if (!rc)
		rc = engine_seq_select(e, 0);
	if (!rc)
		rc = engine_seq_blocks(e, 0, tab, len);
	if (!rc)
		rc = engine_forward(e, tok, SELFCHECK_N, 0, logits, false);
	int rc2 = engine_seq_reset(e, 0);
	if (!rc)
		rc = rc2;
	if (!rc)
		*digest = digest64(0x5e1fc4ecull, logits, (size_t)n_vocab * sizeof *logits);
	free(tab);
	free(logits);
	return rc ? err_prefix(rc, "self-check") : 0;
}

int selfcheck_run_layers(struct engine *e, enum engine_stage stage, uint32_t l0, uint32_t l1, uint32_t n_embd,
			 uint64_t *digest)
{
	*digest = 0;
	if (l1 <= l0 || n_embd == 0)
		return err_set(ERR_INVAL, "self-check: layers [%u, %u) of rows of %u", l0, l1, n_embd);
	const struct kv_layout *kv = engine_kv_layout(e);
	uint32_t len = kv_table_len(kv);
	uint32_t *tab = calloc(len ? len : 1, sizeof *tab); /* block 0 of each pool: SELFCHECK_N positions fit */
	float *rows = malloc((size_t)SELFCHECK_N * n_embd * sizeof *rows);
	int rc = 0;
	if (!tab || !rows)
		rc = err_set(ERR_NOMEM, "self-check: out of memory");
	/* rows of the size an embedding gives (Gemma scales them by sqrt(n_embd)),
	 * different in every element */
	for (size_t i = 0; !rc && i < (size_t)SELFCHECK_N * n_embd; i++)
		rows[i] = (float)((int)((i * 2654435761u) >> 22 & 1023) - 512) / 64.0f;
	if (!rc)
		rc = engine_seq_select(e, 0);
	if (!rc)
		rc = engine_seq_blocks(e, 0, tab, len);
	if (!rc)
		rc = engine_stage_io(e, l0, l1 - l0, stage, SELFCHECK_N, 0, rows, rows);
	int rc2 = engine_seq_reset(e, 0);
	if (!rc)
		rc = rc2;
	if (!rc)
		*digest = digest64(0x5e1fc4ecull ^ ((uint64_t)l0 << 32 | l1) ^ ((uint64_t)stage << 48), rows, (size_t)SELFCHECK_N * n_embd * sizeof *rows);
	free(tab);
	free(rows);
	return rc ? err_prefix(rc, "self-check") : 0;
}

static int read_record(const char *path, uint64_t *out)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return err_set(errno == ENOENT ? ERR_NOTFOUND : ERR_IO, "self-check: %s: %s", path, strerror(errno));
	char buf[64];
	ssize_t n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n < 0)
		return err_set(ERR_IO, "self-check: %s: %s", path, strerror(errno));
	buf[n] = 0;
	unsigned long long v;
	char tail;
	if (sscanf(buf, "unicorn-selfcheck 1 %16llx%c", &v, &tail) != 2 || tail != '\n')
		return err_set(ERR_INVAL, "self-check: %s: not a self-check record", path);
	*out = v;
	return 0;
}

int selfcheck_verify(const char *rundir, const char *role, uint64_t digest, bool *first)
{
	*first = false;
	char name[32], path[RUNDIR_PATH_MAX], tmp[RUNDIR_PATH_MAX];
	snprintf(name, sizeof name, SELFCHECK_FILE "%s", role);
	int rc = rundir_path(rundir, name, path, sizeof path);
	if (rc)
		return rc;
	uint64_t rec;
	rc = read_record(path, &rec);
	if (rc == ERR_NOTFOUND) {
		/* the first start of this role: record ours (one writer wins) */
		int n = snprintf(tmp, sizeof tmp, "%s.%d", path, (int)getpid());
		if (n < 0 || (size_t)n >= sizeof tmp)
			return err_set(ERR_RANGE, "self-check: path too long");
		int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		if (fd < 0)
			return err_set(ERR_IO, "self-check: %s: %s", tmp, strerror(errno));
		char line[64];
		int len = snprintf(line, sizeof line, "unicorn-selfcheck 1 %016" PRIx64 "\n", digest);
		bool ok = write(fd, line, (size_t)len) == len;
		close(fd);
		int lr = ok ? link(tmp, path) : -1;
		int le = errno;
		unlink(tmp);
		if (!ok)
			return err_set(ERR_IO, "self-check: cannot write %s", tmp);
		if (lr == 0) {
			*first = true;
			return 0;
		}
		if (le != EEXIST)
			return err_set(ERR_IO, "self-check: %s: %s", path, strerror(le));
		rc = read_record(path, &rec); /* another start won: compare with it */
	}
	if (rc)
		return rc;
	if (rec != digest)
		return err_set(ERR_STATE, "self-check: the logits of %d fixed tokens digest to %016" PRIx64 ", the "
			       "cluster's first %s worker got %016" PRIx64 ": these weights or this device do not "
			       "compute what they did; refusing to serve", SELFCHECK_N, digest, role, rec);
	return 0;
}
