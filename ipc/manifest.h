/* manifest: the model's configuration and tensor table in a shared region,
 * and the planner that lays tensors out in weight regions.
 *
 * Flow: the loader calls manifest_plan (tensor -> region, offset), creates the
 * weight regions (ipc/shm.h) of plan.region_size[], copies tensor bytes in
 * (manifest_fill), writes the manifest (manifest_write) into region 0 and hands
 * out the fds. A worker imports the regions and calls manifest_load to get a
 * struct model whose tensor data point into its own mappings; model_close()
 * frees it (the regions stay the caller's).
 *
 * Layout (little-endian; docs/protocol.md "Manifest"):
 *   header   32 bytes: magic "UMAN", version, n_regions, n_tensors, format, 3 x 0
 *   config  320 bytes: 10 x u32, 6 x f32, layer_global[256] u8
 *   regions  n_regions x u64 size
 *   tensors  n_tensors x 168 bytes: name[96], type, n_dims, ne[4] u64, region,
 *            0, offset u64, nbytes u64, norm_offset f32, 0
 * manifest_load validates every field (counts capped, names NUL-terminated
 * and unique, type supported, nbytes == quant_row_bytes of the dims, region
 * index in range, offset aligned and offset+nbytes within the region's real
 * size, required tensors present with the shapes the config implies). */
#ifndef UNICORN_MANIFEST_H
#define UNICORN_MANIFEST_H

#include <stddef.h>
#include <stdint.h>

#include "formats/model.h"

#define MANIFEST_MAGIC 0x4E414D55u    /* "UMAN" little-endian */
#define MANIFEST_VERSION 1
#define MANIFEST_HDR_SIZE 32
#define MANIFEST_CFG_SIZE 320
#define MANIFEST_TENSOR_SIZE 168
#define MANIFEST_MAX_TENSORS 8192
#define MANIFEST_MAX_REGIONS 256
#define MANIFEST_ALIGN 256            /* tensor offsets within a region */

/* A mapped weight region as the loader sees it: addr/size are the real mapping
 * (size from fstat). */
struct manifest_region {
	const void *addr;
	uint64_t size;
};

struct manifest_plan {
	uint32_t n_regions;
	uint64_t region_size[MANIFEST_MAX_REGIONS]; /* page multiples, <= SHM_MAX_REGION */
	size_t n_tensors;
	uint32_t *region;      /* [n_tensors] region of model.tensors[i] */
	uint64_t *offset;      /* [n_tensors] offset in that region (MANIFEST_ALIGN) */
};

/* Assign every tensor of m (in order) to a region and offset: regions hold at
 * most max_region_bytes (0: SHM_DEFAULT_REGION), no tensor is split, a tensor
 * larger than that gets a region of its own (ERR_RANGE beyond SHM_MAX_REGION).
 * Free with manifest_plan_free. */
int manifest_plan(const struct model *m, uint64_t max_region_bytes, struct manifest_plan *plan);
void manifest_plan_free(struct manifest_plan *plan);

/* Copy each tensor's bytes to its planned place. dst[i] must be writable and
 * at least plan->region_size[i] bytes (checked against dst[i].size). */
int manifest_fill(const struct model *m, const struct manifest_plan *plan,
		  const struct manifest_region *dst, uint32_t n_dst);

/* Bytes of a manifest with these counts. */
int manifest_size(size_t n_tensors, uint32_t n_regions, size_t *size);
/* Serialise m's config and tensor table under plan into buf[cap]; *len = size. */
int manifest_write(const struct model *m, const struct manifest_plan *plan, void *buf, size_t cap,
		   size_t *len);

/* Parse and validate a manifest of len bytes against the mapped weight
 * regions[n_regions] and build a model whose tensor data point into them.
 * name labels errors (e.g. "manifest"). Free with model_close(). */
int manifest_load(const void *buf, size_t len, const struct manifest_region *regions,
		  uint32_t n_regions, const char *name, struct model **out);

#endif
