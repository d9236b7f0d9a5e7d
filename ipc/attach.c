/* attach: import the loader's regions and rebuild the model (see attach.h). */
#include "ipc/attach.h"
#include "ipc/kvlayout.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/digest.h"
#include "common/err.h"
#include "ipc/fdpass.h"
#include "ipc/rundir.h"

_Static_assert(ATTACH_KV_TABLE == 1 + KV_MAX_TABLE, "a slot holds the longest block table");

int attach_act_layout(uint32_t n_embd, uint32_t n_vocab, uint64_t *slot_stride, uint64_t *size)
{
	if (n_embd == 0 || n_embd > (1u << 20))
		return err_set(ERR_RANGE, "attach: activation layout: n_embd %u outside [1, 2^20]", n_embd);
	if (n_vocab == 0 || n_vocab > (1u << 20))
		return err_set(ERR_RANGE, "attach: activation layout: n_vocab %u outside [1, 2^20]", n_vocab);
	uint64_t s = (uint64_t)MSG_MAX_TOKENS * n_embd * 4 + ATTACH_HEAD_BYTES + ATTACH_KV_TABLE * 4;
	s = (s + ATTACH_SLOT_ALIGN - 1) / ATTACH_SLOT_ALIGN * ATTACH_SLOT_ALIGN;
	/* s < 2^31, n_vocab <= 2^20: no overflow */
	uint64_t total = s * MSG_MAX_SLOTS + (uint64_t)MSG_MAX_SLOTS * n_vocab * 4;
	if (total > SHM_MAX_REGION)
		return err_set(ERR_RANGE, "attach: activation region of %" PRIu64 " bytes exceeds %llu",
			       total, SHM_MAX_REGION);
	*slot_stride = s;
	*size = total;
	return 0;
}

uint64_t attach_manifest_sum(uint64_t ident, const void *manifest, uint64_t bytes)
{
	return digest64(ident, manifest, (size_t)bytes);
}

uint64_t attach_region_sum(uint64_t ident, uint32_t region, const void *base, uint64_t size)
{
	return digest_sampled(ident ^ ((uint64_t)region + 1), base, size);
}

static size_t info_bytes(uint32_t n_regions)
{
	return 4 + 8 + 8 * (size_t)n_regions + 8 + 4 + 8 + 8 + 8 * (size_t)n_regions;
}

int attach_info_encode(const struct attach_info *in, uint8_t *buf, size_t cap, size_t *len)
{
	if (in->n_regions == 0 || in->n_regions > MANIFEST_MAX_REGIONS)
		return err_set(ERR_RANGE, "attach: info: n_regions %u outside [1, %d]", in->n_regions,
			       MANIFEST_MAX_REGIONS);
	size_t need = info_bytes(in->n_regions);
	if (cap < need)
		return err_set(ERR_RANGE, "attach: info: %zu bytes needed, %zu given", need, cap);
	/* little-endian host (x86-64/aarch64 LE): memcpy writes LE fields */
	uint8_t *p = buf;
	memcpy(p, &in->n_regions, 4), p += 4;
	memcpy(p, &in->manifest_size, 8), p += 8;
	memcpy(p, in->size, 8 * (size_t)in->n_regions), p += 8 * (size_t)in->n_regions;
	memcpy(p, &in->act_size, 8), p += 8;
	memcpy(p, &in->flags, 4), p += 4;
	memcpy(p, &in->ident, 8), p += 8;
	memcpy(p, &in->manifest_sum, 8), p += 8;
	memcpy(p, in->sum, 8 * (size_t)in->n_regions);
	*len = need;
	return 0;
}

int attach_info_decode(const uint8_t *buf, size_t len, struct attach_info *out)
{
	memset(out, 0, sizeof *out);
	if (len < 4)
		return err_set(ERR_INVAL, "attach: loader answer: %zu bytes, too short", len);
	memcpy(&out->n_regions, buf, 4);
	if (out->n_regions == 0 || out->n_regions > MANIFEST_MAX_REGIONS)
		return err_set(ERR_RANGE, "attach: loader answer: n_regions %u outside [1, %d]",
			       out->n_regions, MANIFEST_MAX_REGIONS);
	size_t need = info_bytes(out->n_regions);
	if (len != need)
		return err_set(ERR_INVAL, "attach: loader answer: %zu bytes, expected %zu for %u regions",
			       len, need, out->n_regions);
	const uint8_t *p = buf + 4;
	memcpy(&out->manifest_size, p, 8), p += 8;
	memcpy(out->size, p, 8 * (size_t)out->n_regions), p += 8 * (size_t)out->n_regions;
	memcpy(&out->act_size, p, 8), p += 8;
	memcpy(&out->flags, p, 4), p += 4;
	memcpy(&out->ident, p, 8), p += 8;
	memcpy(&out->manifest_sum, p, 8), p += 8;
	memcpy(out->sum, p, 8 * (size_t)out->n_regions);
	if (out->ident == 0)
		return err_set(ERR_INVAL, "attach: loader answer: region identity 0");
	if (out->flags & ~ATTACH_F_DMABUF)
		return err_set(ERR_INVAL, "attach: loader answer: unknown flags 0x%x", out->flags);
	if (out->manifest_size == 0 || out->manifest_size > SHM_MAX_REGION || out->act_size == 0 ||
	    out->act_size > SHM_MAX_REGION)
		return err_set(ERR_RANGE, "attach: loader answer: manifest/activation size out of range");
	for (uint32_t i = 0; i < out->n_regions; i++)
		if (out->size[i] == 0 || out->size[i] > SHM_MAX_REGION)
			return err_set(ERR_RANGE, "attach: loader answer: region %u size %" PRIu64
				       " outside [1, %llu]", i, out->size[i], SHM_MAX_REGION);
	return 0;
}

static void sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
	nanosleep(&ts, NULL);
}

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void close_fds(int *fds, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (fds[i] >= 0)
			close(fds[i]);
}

void attach_close(struct attach *a)
{
	if (!a)
		return;
	model_close(a->model);
	for (uint32_t i = 0; a->weights && i < a->n_weights; i++)
		shm_destroy(&a->weights[i]);
	free(a->weights);
	shm_destroy(&a->manifest);
	shm_destroy(&a->act);
	free(a);
}

/* fds[] (n_regions + 2 of them) are consumed here, also on error. */
static int import_all(struct attach *a, const struct attach_info *info, int *fds, int *dma)
{
	long pg = sysconf(_SC_PAGESIZE);
	uint64_t page = pg > 0 ? (uint64_t)pg : 4096;
	uint32_t n = info->n_regions;
	int rc = 0;
	a->weights = calloc(n, sizeof *a->weights);
	if (!a->weights) {
		close_fds(fds, n + 2);
		close_fds(dma, dma ? n + 2 : 0);
		return err_set(ERR_NOMEM, "attach: out of memory");
	}
	a->n_weights = n;
	for (uint32_t i = 0; i < n; i++)
		shm_init(&a->weights[i]);
	uint64_t man_mem = (info->manifest_size + page - 1) / page * page;
	/* shm_import takes each fd, also on failure; keep going to consume the rest */
	int r = shm_import(fds[0], man_mem, false, &a->manifest);
	if (r && !rc)
		rc = err_prefix(r, "attach: manifest region");
	for (uint32_t i = 0; i < n; i++) {
		r = shm_import(fds[1 + i], info->size[i], false, &a->weights[i]);
		if (r && !rc)
			rc = err_prefix(r, "attach: weight region %u", i);
	}
	r = shm_import(fds[n + 1], info->act_size, true, &a->act);
	if (r && !rc)
		rc = err_prefix(r, "attach: activation region");
	if (dma) {
		/* dma-bufs are kept for a zero-copy import by the engine (not used yet) */
		if (!rc) {
			a->manifest.dmabuf_fd = dma[0];
			for (uint32_t i = 0; i < n; i++)
				a->weights[i].dmabuf_fd = dma[1 + i];
			a->act.dmabuf_fd = dma[n + 1];
			a->share_path = SHM_PATH_UDMABUF;
		} else {
			close_fds(dma, n + 2);
		}
	}
	if (rc)
		return rc;
	if (info->manifest_size > a->manifest.size)
		return err_set(ERR_RANGE, "attach: manifest of %" PRIu64 " bytes exceeds its region",
			       info->manifest_size);
	/* identity and checksums: the manifest in full (small), each weight
	 * region by its sampled pages; the loader computed both after its copy */
	uint64_t ms = attach_manifest_sum(info->ident, a->manifest.addr, info->manifest_size);
	if (ms != info->manifest_sum)
		return err_set(ERR_INVAL, "attach: manifest checksum %016" PRIx64 ", the loader's (identity %016"
			       PRIx64 ") is %016" PRIx64 ": refusing regions that are not what it published",
			       ms, info->ident, info->manifest_sum);
	for (uint32_t i = 0; i < n; i++) {
		uint64_t s = attach_region_sum(info->ident, i, a->weights[i].addr, info->size[i]);
		if (s != info->sum[i])
			return err_set(ERR_INVAL, "attach: weight region %u: sampled checksum %016" PRIx64
				       ", the loader's (identity %016" PRIx64 ") is %016" PRIx64
				       ": refusing regions that are not what it published", i, s, info->ident,
				       info->sum[i]);
	}
	a->ident = info->ident;
	struct manifest_region *mr = calloc(n, sizeof *mr);
	if (!mr)
		return err_set(ERR_NOMEM, "attach: out of memory");
	for (uint32_t i = 0; i < n; i++)
		mr[i] = (struct manifest_region){ a->weights[i].addr, a->weights[i].size };
	rc = manifest_load(a->manifest.addr, info->manifest_size, mr, n, "manifest", &a->model);
	free(mr);
	if (rc)
		return rc;
	a->manifest_bytes = info->manifest_size;
	a->n_embd = a->model->cfg.n_embd;
	a->n_vocab = a->model->cfg.n_vocab;
	uint64_t stride, total;
	rc = attach_act_layout(a->n_embd, a->n_vocab, &stride, &total);
	if (rc)
		return rc;
	if (a->act.size < total)
		return err_set(ERR_RANGE, "attach: activation region is %" PRIu64 " bytes, n_embd %u needs %"
			       PRIu64, a->act.size, a->n_embd, total);
	a->slot_stride = stride;
	return 0;
}

static int exchange(int sock, struct attach *a)
{
	int rc = fdpass_send(sock, ATTACH_TAG_REQ, NULL, 0, NULL, 0);
	if (rc)
		return rc;
	uint8_t data[ATTACH_INFO_MAX];
	size_t len = 0, nfds = 0;
	uint32_t tag = 0;
	int fds[MANIFEST_MAX_REGIONS + 2];
	rc = fdpass_recv(sock, &tag, data, sizeof data, &len, fds, MANIFEST_MAX_REGIONS + 2, &nfds);
	if (rc)
		return rc;
	struct attach_info info;
	if (tag != ATTACH_TAG_REGIONS)
		rc = err_set(ERR_INVAL, "attach: loader answered tag %u, expected %d", tag, ATTACH_TAG_REGIONS);
	if (!rc)
		rc = attach_info_decode(data, len, &info);
	if (!rc && nfds != (size_t)info.n_regions + 2)
		rc = err_set(ERR_INVAL, "attach: loader sent %zu fds for %u regions (want %u)", nfds,
			     info.n_regions, info.n_regions + 2);
	if (rc) {
		close_fds(fds, nfds);
		return rc;
	}
	int dma[MANIFEST_MAX_REGIONS + 2];
	int *dmap = NULL;
	if (info.flags & ATTACH_F_DMABUF) {
		size_t nd = 0;
		rc = fdpass_recv(sock, &tag, NULL, 0, &len, dma, MANIFEST_MAX_REGIONS + 2, &nd);
		if (!rc && (tag != ATTACH_TAG_DMABUF || nd != nfds)) {
			close_fds(dma, nd);
			rc = err_set(ERR_INVAL, "attach: dma-buf transfer: tag %u with %zu fds (want %d, %zu)",
				     tag, nd, ATTACH_TAG_DMABUF, nfds);
		}
		if (rc) {
			close_fds(fds, nfds);
			return rc;
		}
		dmap = dma;
	}
	return import_all(a, &info, fds, dmap);
}

int attach_open_path(const char *sock_path, int timeout_ms, struct attach **out)
{
	*out = NULL;
	double deadline = now_ms() + (timeout_ms > 0 ? timeout_ms : 0);
	int sock = -1, rc;
	for (;;) {
		rc = fdpass_connect(sock_path, &sock);
		/* the loader may not be listening yet (start-up, restart): retry */
		if (rc != ERR_NOTFOUND || now_ms() >= deadline)
			break;
		sleep_ms(ATTACH_RETRY_MS);
	}
	if (rc)
		return err_prefix(rc == ERR_NOTFOUND ? ERR_TIMEOUT : rc, "attach: no loader after %d ms",
				  timeout_ms);
	struct attach *a = calloc(1, sizeof *a);
	if (!a) {
		close(sock);
		return err_set(ERR_NOMEM, "attach: out of memory");
	}
	shm_init(&a->manifest);
	shm_init(&a->act);
	a->share_path = SHM_PATH_MEMFD;
	rc = exchange(sock, a);
	close(sock);
	if (rc) {
		attach_close(a);
		return rc;
	}
	*out = a;
	return 0;
}

int attach_open(const char *rundir, int timeout_ms, struct attach **out)
{
	*out = NULL;
	char path[RUNDIR_PATH_MAX];
	int rc = rundir_path(rundir, RUNDIR_LOADER_SOCK, path, sizeof path);
	if (rc)
		return rc;
	return attach_open_path(path, timeout_ms, out);
}

int attach_hidden(const struct attach *a, uint32_t slot, uint32_t row0, uint32_t n, float **out)
{
	*out = NULL;
	if (slot >= MSG_MAX_SLOTS || n == 0 || row0 > MSG_MAX_TOKENS || n > MSG_MAX_TOKENS - row0)
		return err_set(ERR_RANGE, "attach: hidden rows [%u, %u+%u) of slot %u outside %d slots x %d rows",
			       row0, row0, n, slot, MSG_MAX_SLOTS, MSG_MAX_TOKENS);
	uint64_t row = (uint64_t)a->n_embd * 4;
	uint64_t off = (uint64_t)slot * a->slot_stride + row0 * row;
	void *p = shm_ptr(&a->act, off, n * row);
	if (!p)
		return err_set(ERR_RANGE, "attach: hidden rows of slot %u outside the activation region", slot);
	*out = p;
	return 0;
}

int attach_head(const struct attach *a, uint32_t slot, uint32_t **ids, float **logits)
{
	*ids = NULL;
	*logits = NULL;
	if (slot >= MSG_MAX_SLOTS)
		return err_set(ERR_RANGE, "attach: head of slot %u (max %d)", slot, MSG_MAX_SLOTS);
	uint64_t off = (uint64_t)slot * a->slot_stride + (uint64_t)MSG_MAX_TOKENS * a->n_embd * 4;
	uint8_t *p = shm_ptr(&a->act, off, ATTACH_HEAD_BYTES);
	if (!p)
		return err_set(ERR_RANGE, "attach: head area of slot %u outside the activation region", slot);
	*ids = (uint32_t *)p;
	*logits = (float *)(p + MSG_MAX_TOPK * 4);
	return 0;
}

int attach_head_lse(const struct attach *a, uint32_t slot, float **lse)
{
	uint32_t *ids;
	float *logits;
	int rc = attach_head(a, slot, &ids, &logits);
	*lse = rc ? NULL : logits + MSG_MAX_TOPK;
	return rc;
}

int attach_logits(const struct attach *a, uint32_t slot, float **row)
{
	*row = NULL;
	if (slot >= MSG_MAX_SLOTS)
		return err_set(ERR_RANGE, "attach: logits row of slot %u (max %d)", slot, MSG_MAX_SLOTS);
	uint64_t bytes = (uint64_t)a->n_vocab * 4;
	uint64_t off = a->slot_stride * MSG_MAX_SLOTS + (uint64_t)slot * bytes;
	void *p = shm_ptr(&a->act, off, bytes);
	if (!p)
		return err_set(ERR_RANGE, "attach: logits row of slot %u outside the activation region", slot);
	*row = p;
	return 0;
}

int attach_kv_table(const struct attach *a, uint32_t slot, uint32_t **tab)
{
	*tab = NULL;
	if (slot >= MSG_MAX_SLOTS)
		return err_set(ERR_RANGE, "attach: KV table of slot %u (max %d)", slot, MSG_MAX_SLOTS);
	uint64_t off = (uint64_t)slot * a->slot_stride + (uint64_t)MSG_MAX_TOKENS * a->n_embd * 4 +
		       ATTACH_HEAD_BYTES;
	void *p = shm_ptr(&a->act, off, (uint64_t)ATTACH_KV_TABLE * 4);
	if (!p)
		return err_set(ERR_RANGE, "attach: KV table of slot %u outside the activation region", slot);
	*tab = p;
	return 0;
}
