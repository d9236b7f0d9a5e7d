/* loader_regions: the loader's shared regions and the loader.sock exchange.
 *
 * loader_regions_build() plans the model's tensors into weight regions
 * (ipc/manifest.h), copies every tensor's bytes in (with a progress bar),
 * writes the manifest into its own region and creates the zeroed activation
 * region (layout in ipc/attach.h). Afterwards the model file is no longer
 * needed: restarted workers re-import the regions from the loader's memory.
 * loader_regions_serve() answers one client on loader.sock (tag 1 -> tag 2,
 * plus tag 3 when every region has a dma-buf). */
#ifndef UNICORN_LOADER_REGIONS_H
#define UNICORN_LOADER_REGIONS_H

#include <stdbool.h>
#include <stdint.h>

#include "ipc/shm.h"
#include "formats/model.h"

struct loader_regions {
	struct shm_region manifest;
	uint64_t manifest_bytes;       /* manifest length inside its region */
	uint32_t n_weights;
	struct shm_region *weights;    /* [n_weights] */
	struct shm_region act;
	uint64_t weights_bytes;        /* sum of tensor bytes */
	bool dmabuf;                   /* every region also has a dma-buf fd */
	uint64_t ident;                /* region identity (ipc/attach.h): build time, ns */
	uint64_t manifest_sum;         /* checksums computed once after the copy */
	uint64_t *sums;                /* [n_weights] */
};

/* quiet: no progress bar. r is fully initialised even on failure (free it). */
int loader_regions_build(const struct model *m, bool quiet, struct loader_regions *r);
void loader_regions_free(struct loader_regions *r);

/* Serve one accepted client: read its tag-1 request, send the fds.
 * The caller closes cfd. */
int loader_regions_serve(const struct loader_regions *r, int cfd);

#endif
