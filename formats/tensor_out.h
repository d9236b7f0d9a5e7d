/* tensor_out: the part of a streaming model writer that does not depend on
 * the file format, shared by gguf_write and safetensors_write.
 *
 * It owns the output file (written under a temporary name next to the target
 * and renamed into place only when every byte is there), the list of declared
 * tensors with their offsets in the data section, and the state machine that
 * takes each tensor's bytes in declaration order, pads each tensor with zeros
 * to the alignment and refuses bytes that do not fit. The writers keep what
 * differs: the checks on a tensor's type and shape, and the header they hand
 * to tensor_out_begin_data. */
#ifndef UNICORN_TENSOR_OUT_H
#define UNICORN_TENSOR_OUT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define TENSOR_OUT_MAX_NAME 256 /* bytes of a name, NUL included */
#define TENSOR_OUT_MAX_DIMS 4

struct tensor_out_tensor {
	char name[TENSOR_OUT_MAX_NAME];
	uint32_t type;
	uint32_t n_dims;
	uint64_t dims[TENSOR_OUT_MAX_DIMS]; /* in the format's own order; unused ones 0 */
	uint64_t offset;                    /* from the start of the data section */
	uint64_t nbytes;
};

enum tensor_out_state { TENSOR_OUT_META, TENSOR_OUT_DATA, TENSOR_OUT_DONE, TENSOR_OUT_FAILED };

/* Embedded in a writer; the fields are read by the writer that owns it (to
 * build its header) and changed only through the functions below. */
struct tensor_out {
	char *path;     /* final name */
	char *tmp_path; /* what we write; renamed to path by tensor_out_finish */
	FILE *f;
	enum tensor_out_state state;
	uint64_t align;   /* each tensor starts at a multiple of this from the data start */
	uint64_t max_end; /* the data section may not extend past this */
	struct tensor_out_tensor *t;
	uint64_t n_t, t_cap;
	uint64_t cur;      /* tensor the next bytes belong to */
	uint64_t cur_done; /* bytes of it written so far */
};

/* Create the temporary file for path. align >= 1. On failure o is left so
 * that tensor_out_cleanup is still safe. */
int tensor_out_open(struct tensor_out *o, const char *path, uint64_t align, uint64_t max_end);
/* Free everything; remove the temporary file unless tensor_out_finish succeeded. */
void tensor_out_cleanup(struct tensor_out *o);

/* ERR_STATE ("<path>: <kind> <name>: added after tensor data started") once
 * the data phase has begun, else 0. */
int tensor_out_check_meta(const struct tensor_out *o, const char *kind, const char *name);
/* Declare the next tensor (nbytes of data, at the next aligned offset). The
 * caller has checked type and dims for its format; this checks the state, the
 * name (non-empty, fits, unique) and that the data section stays in max_end. */
int tensor_out_add(struct tensor_out *o, const char *name, uint32_t type, uint32_t n_dims,
		   const uint64_t *dims, uint64_t nbytes);
/* Padded size of the data section the declared tensors make. */
uint64_t tensor_out_data_size(const struct tensor_out *o);

/* Write the header (everything before the data section, padding included)
 * and start the data phase. ERR_STATE if it already started. */
int tensor_out_begin_data(struct tensor_out *o, const void *header, size_t len);
/* Bytes of the current tensor; a chunk may not run past its end (ERR_RANGE).
 * A range or I/O error fails the writer for good. */
int tensor_out_write(struct tensor_out *o, const void *data, size_t n);
/* Index of the tensor the next bytes belong to and how many it still needs. */
int tensor_out_current(const struct tensor_out *o, uint64_t *index, uint64_t *remaining);
/* All tensors complete: flush, close and rename into place. */
int tensor_out_finish(struct tensor_out *o);

/* The temporary-file part alone, for a file written in one go (config.json):
 * create path.tmp.XXXXXX next to path (same filesystem, so the rename is
 * atomic), and later flush, close f and rename tmp to path, removing tmp on
 * any failure. */
int tensor_out_tmp_open(const char *path, char **tmp_out, FILE **f_out);
int tensor_out_tmp_commit(FILE *f, const char *tmp, const char *path);

#endif
