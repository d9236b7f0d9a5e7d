/* safetensors_write: streaming model.safetensors writer and Gemma 3
 * config.json (see safetensors_write.h). */
#include "formats/safetensors_write.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/err.h"
#include "formats/quant.h"
#include "formats/tensor_out.h"

_Static_assert(SAFETENSORS_MAX_DIMS <= TENSOR_OUT_MAX_DIMS, "tensor_out must hold any shape");

struct safetensors_writer {
	struct tensor_out out; /* file, tensors (dims = shape), data phase */
};

const char *safetensors_dtype_name(uint32_t type)
{
	switch (type) {
	case TENSOR_F32: return "F32";
	case TENSOR_F16: return "F16";
	case TENSOR_BF16: return "BF16";
	default: return NULL;
	}
}

static size_t sw_elem_size(uint32_t type)
{
	return type == TENSOR_F32 ? 4 : 2;
}

int safetensors_writer_create(const char *path, struct safetensors_writer **out)
{
	*out = NULL;
	struct safetensors_writer *w = calloc(1, sizeof *w);
	if (!w)
		return err_set(ERR_NOMEM, "%s: out of memory", path);
	/* Unaligned, back to back; offsets are JSON integers, signed 64-bit in jansson. */
	int rc = tensor_out_open(&w->out, path, 1, INT64_MAX);
	if (rc) {
		safetensors_writer_destroy(w);
		return rc;
	}
	*out = w;
	return 0;
}

void safetensors_writer_destroy(struct safetensors_writer *w)
{
	if (!w)
		return;
	tensor_out_cleanup(&w->out);
	free(w);
}

int safetensors_writer_add_tensor(struct safetensors_writer *w, const char *name, uint32_t type,
				  uint32_t n_dims, const uint64_t *shape)
{
	const char *path = w->out.path;
	int rc = tensor_out_check_meta(&w->out, "tensor", name);
	if (rc)
		return rc;
	if (!safetensors_dtype_name(type))
		return err_set(ERR_UNSUP, "%s: tensor %s: type %u cannot be stored in safetensors (f32, f16, bf16 only)",
			       path, name, type);
	size_t len = strlen(name);
	if (!len || len >= TENSOR_OUT_MAX_NAME || !strcmp(name, "__metadata__"))
		return err_set(ERR_INVAL, "%s: tensor '%s': bad name", path, name);
	if (n_dims > SAFETENSORS_MAX_DIMS)
		return err_set(ERR_INVAL, "%s: tensor %s: %u dims (max %d)", path, name, n_dims, SAFETENSORS_MAX_DIMS);
	uint64_t bytes = sw_elem_size(type);
	for (uint32_t d = 0; d < n_dims; d++) {
		/* JSON integers are signed 64-bit in jansson. */
		if (shape[d] > (uint64_t)INT64_MAX || (shape[d] && bytes > (uint64_t)INT64_MAX / shape[d]))
			return err_set(ERR_RANGE, "%s: tensor %s: size overflows", path, name);
		bytes *= shape[d];
	}
	return tensor_out_add(&w->out, name, type, n_dims, shape, bytes);
}

static json_t *sw_header_json(const struct safetensors_writer *w)
{
	json_t *root = json_object();
	json_t *meta = json_object();
	if (!root || !meta || json_object_set_new(meta, "format", json_string("pt")) ||
	    json_object_set_new(root, "__metadata__", meta)) {
		json_decref(root);
		return NULL;
	}
	for (uint64_t i = 0; i < w->out.n_t; i++) {
		const struct tensor_out_tensor *t = &w->out.t[i];
		json_t *o = json_object(), *shape = json_array(), *offs = json_array();
		int bad = !o || !shape || !offs;
		for (uint32_t d = 0; !bad && d < t->n_dims; d++)
			bad = json_array_append_new(shape, json_integer((json_int_t)t->dims[d]));
		if (!bad)
			bad = json_array_append_new(offs, json_integer((json_int_t)t->offset)) ||
			      json_array_append_new(offs, json_integer((json_int_t)(t->offset + t->nbytes)));
		if (!bad)
			bad = json_object_set_new(o, "dtype", json_string(safetensors_dtype_name(t->type))) ||
			      json_object_set(o, "shape", shape) || json_object_set(o, "data_offsets", offs);
		json_decref(shape);
		json_decref(offs);
		if (bad || json_object_set_new(root, t->name, o)) {
			if (bad)
				json_decref(o);
			json_decref(root);
			return NULL;
		}
	}
	return root;
}

int safetensors_writer_begin_data(struct safetensors_writer *w)
{
	json_t *root = sw_header_json(w);
	char *s = root ? json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
	json_decref(root);
	if (!s)
		return err_set(ERR_NOMEM, "%s: cannot build the JSON header", w->out.path);
	/* 8-byte little-endian length, then the JSON padded with spaces so the
	 * data starts 8-aligned. */
	uint64_t len = strlen(s);
	uint64_t padded = (len + 7) / 8 * 8;
	uint8_t *h = malloc(8 + padded);
	if (!h) {
		free(s);
		return err_set(ERR_NOMEM, "%s: out of memory", w->out.path);
	}
	memcpy(h, &padded, 8);
	memcpy(h + 8, s, len);
	memset(h + 8 + len, ' ', padded - len);
	free(s);
	int rc = tensor_out_begin_data(&w->out, h, 8 + padded);
	free(h);
	return rc;
}

int safetensors_writer_write(struct safetensors_writer *w, const void *data, size_t n)
{
	return tensor_out_write(&w->out, data, n);
}

int safetensors_writer_finish(struct safetensors_writer *w)
{
	if (w->out.state == TENSOR_OUT_META) {
		int rc = safetensors_writer_begin_data(w);
		if (rc)
			return rc;
	}
	return tensor_out_finish(&w->out);
}

/* A float as the short decimal a person would write (1e-06, not
 * 9.99999997e-07): round-trip through %.7g so jansson prints it cleanly. */
static json_t *sw_real(float f)
{
	char buf[32];
	snprintf(buf, sizeof buf, "%.7g", (double)f);
	return json_real(strtod(buf, NULL));
}

int safetensors_write_gemma3_config(const char *path, const struct gemma3_config *cfg, uint32_t type,
				    uint32_t bos_id, uint32_t eos_id, uint32_t pad_id)
{
	const char *dt = type == TENSOR_F16 ? "float16" : type == TENSOR_BF16 ? "bfloat16" : "float32";
	if (cfg->n_layer > MODEL_MAX_LAYERS)
		return err_set(ERR_RANGE, "%s: num_hidden_layers %u exceeds %d", path, cfg->n_layer, MODEL_MAX_LAYERS);
	json_t *o = json_object();
	json_t *arch = json_array(), *lt = json_array();
	if (!o || !arch || !lt) {
		json_decref(o);
		json_decref(arch);
		json_decref(lt);
		return err_set(ERR_NOMEM, "%s: out of memory", path);
	}
	json_array_append_new(arch, json_string("Gemma3ForCausalLM"));
	for (uint32_t i = 0; i < cfg->n_layer; i++)
		json_array_append_new(lt, json_string(cfg->layer_global[i] ? "full_attention" : "sliding_attention"));
	json_t *scaling = json_null();
	if (cfg->rope_scale_global != 1.0f && cfg->rope_scale_global > 0) {
		scaling = json_object();
		json_object_set_new(scaling, "rope_type", json_string("linear"));
		json_object_set_new(scaling, "factor", sw_real(cfg->rope_scale_global));
	}
	json_object_set_new(o, "architectures", arch);
	json_object_set_new(o, "model_type", json_string("gemma3_text"));
	json_object_set_new(o, "hidden_size", json_integer(cfg->n_embd));
	json_object_set_new(o, "intermediate_size", json_integer(cfg->n_ff));
	json_object_set_new(o, "num_hidden_layers", json_integer(cfg->n_layer));
	json_object_set_new(o, "num_attention_heads", json_integer(cfg->n_head));
	json_object_set_new(o, "num_key_value_heads", json_integer(cfg->n_head_kv));
	json_object_set_new(o, "head_dim", json_integer(cfg->head_dim));
	json_object_set_new(o, "vocab_size", json_integer(cfg->n_vocab));
	json_object_set_new(o, "rms_norm_eps", sw_real(cfg->eps));
	json_object_set_new(o, "rope_theta", sw_real(cfg->rope_base_global));
	json_object_set_new(o, "rope_local_base_freq", sw_real(cfg->rope_base_local));
	json_object_set_new(o, "sliding_window", json_integer(cfg->sliding_window));
	json_object_set_new(o, "sliding_window_pattern", json_integer(6));
	json_object_set_new(o, "layer_types", lt);
	/* transformers types it as an int (strict config validation) */
	float qp = cfg->query_pre_attn_scalar;
	json_object_set_new(o, "query_pre_attn_scalar", qp == (float)(json_int_t)qp && qp > 0
			    ? json_integer((json_int_t)qp) : sw_real(qp));
	json_object_set_new(o, "max_position_embeddings", json_integer(cfg->n_ctx));
	json_object_set_new(o, "hidden_activation", json_string("gelu_pytorch_tanh"));
	json_object_set_new(o, "tie_word_embeddings", json_true());
	json_object_set_new(o, "torch_dtype", json_string(dt));
	json_object_set_new(o, "attn_logit_softcapping", json_null());
	json_object_set_new(o, "final_logit_softcapping",
			    cfg->final_softcap > 0 ? sw_real(cfg->final_softcap) : json_null());
	json_object_set_new(o, "rope_scaling", scaling);
	json_object_set_new(o, "bos_token_id", json_integer(bos_id));
	json_object_set_new(o, "eos_token_id", json_integer(eos_id));
	json_object_set_new(o, "pad_token_id", json_integer(pad_id));
	char *s = json_dumps(o, JSON_INDENT(1) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(9));
	json_decref(o);
	if (!s)
		return err_set(ERR_NOMEM, "%s: cannot format config", path);
	char *tmp;
	FILE *f;
	int rc = tensor_out_tmp_open(path, &tmp, &f);
	if (rc) {
		free(s);
		return rc;
	}
	size_t len = strlen(s);
	if (fwrite(s, 1, len, f) != len || fputc('\n', f) == EOF) {
		rc = err_set(ERR_IO, "%s: write failed: %s", tmp, strerror(errno));
		fclose(f);
		unlink(tmp);
	} else {
		rc = tensor_out_tmp_commit(f, tmp, path);
	}
	free(tmp);
	free(s);
	return rc;
}
