/* unicorn inspect: what a model file holds, as the engine sees it (after
 * validation): format, hyperparameters, local/global layers, tensor table and
 * byte totals. --json prints the same as one JSON object for scripts. */
#include "cli/cli.h"

#include <inttypes.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "common/err.h"
#include "formats/gguf.h"
#include "formats/model.h"
#include "formats/mmproj.h"
#include "formats/quant.h"

#define MAX_TYPE_ID 64

static void usage(FILE *f)
{
	fprintf(f,
		"usage: unicorn inspect MODEL [--json] [--mmproj FILE]\n"
		"\n"
		"Open and validate a model and print its format, architecture, hyperparameters,\n"
		"local/global layer layout, every tensor (name, type, shape in GGUF order, bytes)\n"
		"and totals. A vision projector (mmproj-*.gguf beside the model, or --mmproj)\n"
		"is validated against the model and its tower shown too; an mmproj file given\n"
		"as MODEL is shown alone.\n"
		"\n"
		"  MODEL    GGUF file, Hugging Face model directory, or a .safetensors file in one\n"
		"  --json   print one JSON object instead of text\n"
		"  --mmproj FILE  the vision projector to show (default: found beside MODEL)\n"
		"  --help   show this help\n");
}

static void print_vision(const struct mmproj *p)
{
	const struct vision_config *v = &p->cfg;
	uint64_t bytes = 0;
	for (size_t i = 0; i < p->n_tensors; i++)
		bytes += p->tensors[i].nbytes;
	printf("vision:       %s (projector gemma3)\n", p->path);
	printf("  image_size             %u\n", v->image_size);
	printf("  patch_size             %u\n", v->patch_size);
	printf("  patches                %u x %u\n", v->patches_per_side, v->patches_per_side);
	printf("  n_embd                 %u\n", v->n_embd);
	printf("  n_ff                   %u\n", v->n_ff);
	printf("  n_layer                %u\n", v->n_layer);
	printf("  n_head                 %u\n", v->n_head);
	printf("  layer_norm_eps         %g\n", (double)v->eps);
	printf("  pooling                %u x %u\n", v->merge, v->merge);
	printf("  tokens_per_image       %u\n", v->n_tokens);
	printf("  projection_dim         %u\n", v->proj_dim);
	printf("  image_mean             %g %g %g\n", (double)v->image_mean[0], (double)v->image_mean[1],
	       (double)v->image_mean[2]);
	printf("  image_std              %g %g %g\n", (double)v->image_std[0], (double)v->image_std[1],
	       (double)v->image_std[2]);
	printf("  tensors                %zu (%.2f MiB)\n", p->n_tensors, (double)bytes / (1024.0 * 1024.0));
}

static json_t *vision_json(const struct mmproj *p)
{
	const struct vision_config *v = &p->cfg;
	uint64_t bytes = 0;
	for (size_t i = 0; i < p->n_tensors; i++)
		bytes += p->tensors[i].nbytes;
	json_t *o = json_object();
	json_object_set_new(o, "path", json_string(p->path));
	json_object_set_new(o, "projector", json_string("gemma3"));
	json_object_set_new(o, "image_size", json_integer(v->image_size));
	json_object_set_new(o, "patch_size", json_integer(v->patch_size));
	json_object_set_new(o, "n_embd", json_integer(v->n_embd));
	json_object_set_new(o, "n_ff", json_integer(v->n_ff));
	json_object_set_new(o, "n_layer", json_integer(v->n_layer));
	json_object_set_new(o, "n_head", json_integer(v->n_head));
	json_object_set_new(o, "layer_norm_eps", json_real(v->eps));
	json_object_set_new(o, "pooling", json_integer(v->merge));
	json_object_set_new(o, "tokens_per_image", json_integer(v->n_tokens));
	json_object_set_new(o, "projection_dim", json_integer(v->proj_dim));
	json_object_set_new(o, "tensors", json_integer((json_int_t)p->n_tensors));
	json_object_set_new(o, "bytes", json_integer((json_int_t)bytes));
	return o;
}

static const char *type_name(uint32_t type)
{
	const struct quant_type_info *qi = quant_type_info(type);
	return qi ? qi->name : "unknown";
}

static const char *format_name(enum model_format f)
{
	return f == MODEL_GGUF ? "gguf" : f == MODEL_HF ? "hf-safetensors" : "unknown";
}

/* llama.h's llama_ftype ids, named as llama.cpp prints them ("Q4_K - Medium"):
 * general.file_type names the preset a file was made with, which per-tensor
 * types alone do not (Q4_K_M mixes Q4_K, Q6_K and Q5_0). */
static const char *const ftype_names[] = {
	[0] = "all F32",          [1] = "F16",              [2] = "Q4_0",            [3] = "Q4_1",
	[7] = "Q8_0",             [8] = "Q5_0",             [9] = "Q5_1",            [10] = "Q2_K - Medium",
	[11] = "Q3_K - Small",    [12] = "Q3_K - Medium",   [13] = "Q3_K - Large",   [14] = "Q4_K - Small",
	[15] = "Q4_K - Medium",   [16] = "Q5_K - Small",    [17] = "Q5_K - Medium",  [18] = "Q6_K",
	[19] = "IQ2_XXS - 2.0625 bpw", [20] = "IQ2_XS - 2.3125 bpw", [21] = "Q2_K - Small",
	[22] = "IQ3_XS - 3.3 bpw", [23] = "IQ3_XXS - 3.0625 bpw", [24] = "IQ1_S - 1.5625 bpw",
	[25] = "IQ4_NL - 4.5 bpw", [26] = "IQ3_S - 3.4375 bpw", [27] = "IQ3_S mix - 3.66 bpw",
	[28] = "IQ2_S - 2.5 bpw", [29] = "IQ2_M - 2.7 bpw",  [30] = "IQ4_XS - 4.25 bpw", [31] = "IQ1_M - 1.75 bpw",
	[32] = "BF16",            [36] = "TQ1_0 - 1.69 bpw", [37] = "TQ2_0 - 2.06 bpw", [38] = "MXFP4 MoE",
};

/* The file type of a GGUF model as text into buf, or "" when the file has none
 * (safetensors, or a GGUF written without general.file_type). */
static void file_type(const struct model *m, char *buf, size_t n)
{
	buf[0] = 0;
	if (m->format != MODEL_GGUF)
		return;
	struct gguf *g;
	if (gguf_open(m->path, &g) < 0)
		return; /* model_open just read it; nothing to add if it vanished */
	uint64_t ft;
	if (gguf_get_u64(g, "general.file_type", &ft) == 0) {
		/* bit 10 is llama.cpp's "guessed" flag (LLAMA_FTYPE_GUESSED) */
		uint64_t base = ft & ~(uint64_t)1024;
		const char *nm = base < sizeof ftype_names / sizeof ftype_names[0] ? ftype_names[base] : NULL;
		if (nm)
			snprintf(buf, n, "%s%s (%" PRIu64 ")", nm, ft != base ? " (guessed)" : "", ft);
		else
			snprintf(buf, n, "unknown (%" PRIu64 ")", ft);
	}
	gguf_close(g);
}

struct totals {
	uint64_t bytes;
	uint64_t by_type[MAX_TYPE_ID + 1]; /* last slot: ids we have no name for */
	uint64_t count_by_type[MAX_TYPE_ID + 1];
};

static void sum(const struct model *m, struct totals *t)
{
	memset(t, 0, sizeof *t);
	for (size_t i = 0; i < m->n_tensors; i++) {
		const struct model_tensor *x = &m->tensors[i];
		uint32_t k = x->type < MAX_TYPE_ID ? x->type : MAX_TYPE_ID;
		t->bytes += x->nbytes;
		t->by_type[k] += x->nbytes;
		t->count_by_type[k]++;
	}
}

/* "0-4, 6-10" style list of the layers whose layer_global equals want. */
static void print_layers(const struct gemma3_config *c, bool want)
{
	int first = 1;
	for (uint32_t i = 0; i < c->n_layer; i++) {
		if (c->layer_global[i] != want)
			continue;
		uint32_t j = i;
		while (j + 1 < c->n_layer && c->layer_global[j + 1] == want)
			j++;
		printf("%s%u", first ? "" : ", ", i);
		if (j > i)
			printf("-%u", j);
		first = 0;
		i = j;
	}
	printf("%s\n", first ? "(none)" : "");
}

static void print_text(const struct model *m)
{
	const struct gemma3_config *c = &m->cfg;
	printf("model:        %s\n", m->path);
	printf("format:       %s\n", format_name(m->format));
	char ft[64];
	file_type(m, ft, sizeof ft);
	if (ft[0])
		printf("file type:    %s\n", ft);
	printf("architecture: gemma3\n\n");
	printf("hyperparameters:\n");
	printf("  n_embd                 %u\n", c->n_embd);
	printf("  n_ff                   %u\n", c->n_ff);
	printf("  n_layer                %u\n", c->n_layer);
	printf("  n_head                 %u\n", c->n_head);
	printf("  n_head_kv              %u\n", c->n_head_kv);
	printf("  head_dim               %u\n", c->head_dim);
	printf("  sliding_window         %u\n", c->sliding_window);
	printf("  n_vocab                %u\n", c->n_vocab);
	printf("  n_vocab_text           %u\n", c->n_vocab_text);
	printf("  n_ctx                  %u\n", c->n_ctx);
	printf("  rms_eps                %g\n", c->eps);
	printf("  rope_base_global       %g\n", c->rope_base_global);
	printf("  rope_base_local        %g\n", c->rope_base_local);
	printf("  rope_scale_global      %g\n", c->rope_scale_global);
	printf("  query_pre_attn_scalar  %g\n", c->query_pre_attn_scalar);
	printf("  final_softcap          %g%s\n", c->final_softcap, c->final_softcap == 0 ? " (none)" : "");
	printf("  global layers          ");
	print_layers(c, true);
	printf("  local layers           ");
	print_layers(c, false);

	printf("\ntensors:\n");
	printf("  %-40s %-6s %-24s %14s\n", "name", "type", "shape", "bytes");
	for (size_t i = 0; i < m->n_tensors; i++) {
		const struct model_tensor *t = &m->tensors[i];
		char shape[96];
		int n = snprintf(shape, sizeof shape, "[");
		uint32_t nd = t->n_dims ? t->n_dims : 1;
		for (uint32_t d = 0; d < nd && d < 4; d++)
			n += snprintf(shape + n, sizeof shape - (size_t)n, "%s%" PRIu64, d ? ", " : "",
				      t->ne[d]);
		snprintf(shape + n, sizeof shape - (size_t)n, "]");
		printf("  %-40s %-6s %-24s %14" PRIu64 "%s\n", t->name, type_name(t->type), shape,
		       t->nbytes, t->norm_offset != 0 ? "  (+1 on load)" : "");
	}

	struct totals tot;
	sum(m, &tot);
	printf("\ntotals:\n");
	printf("  tensors  %zu\n", m->n_tensors);
	printf("  bytes    %" PRIu64 " (%.2f MiB)\n", tot.bytes, (double)tot.bytes / (1024.0 * 1024.0));
	for (uint32_t k = 0; k <= MAX_TYPE_ID; k++)
		if (tot.count_by_type[k])
			printf("  %-8s %" PRIu64 " bytes in %" PRIu64 " tensors\n",
			       k < MAX_TYPE_ID ? type_name(k) : "other", tot.by_type[k],
			       tot.count_by_type[k]);
}

/* jansson returns NULL on allocation failure; json_object_set_new and
 * json_array_append_new accept NULL and fail, which we check once at the end
 * by the return of json_dumpf. */
static json_t *to_json(const struct model *m)
{
	const struct gemma3_config *c = &m->cfg;
	json_t *root = json_object();
	if (!root)
		return NULL;
	json_object_set_new(root, "path", json_string(m->path));
	json_object_set_new(root, "format", json_string(format_name(m->format)));
	json_object_set_new(root, "architecture", json_string("gemma3"));
	char ft[64];
	file_type(m, ft, sizeof ft);
	if (ft[0])
		json_object_set_new(root, "file_type", json_string(ft));

	json_t *cfg = json_object();
	json_object_set_new(cfg, "n_embd", json_integer(c->n_embd));
	json_object_set_new(cfg, "n_ff", json_integer(c->n_ff));
	json_object_set_new(cfg, "n_layer", json_integer(c->n_layer));
	json_object_set_new(cfg, "n_head", json_integer(c->n_head));
	json_object_set_new(cfg, "n_head_kv", json_integer(c->n_head_kv));
	json_object_set_new(cfg, "head_dim", json_integer(c->head_dim));
	json_object_set_new(cfg, "sliding_window", json_integer(c->sliding_window));
	json_object_set_new(cfg, "n_vocab", json_integer(c->n_vocab));
	json_object_set_new(cfg, "n_vocab_text", json_integer(c->n_vocab_text));
	json_object_set_new(cfg, "n_ctx", json_integer(c->n_ctx));
	json_object_set_new(cfg, "rms_eps", json_real(c->eps));
	json_object_set_new(cfg, "rope_base_global", json_real(c->rope_base_global));
	json_object_set_new(cfg, "rope_base_local", json_real(c->rope_base_local));
	json_object_set_new(cfg, "rope_scale_global", json_real(c->rope_scale_global));
	json_object_set_new(cfg, "query_pre_attn_scalar", json_real(c->query_pre_attn_scalar));
	json_object_set_new(cfg, "final_softcap", json_real(c->final_softcap));
	json_t *glob = json_array(), *loc = json_array();
	for (uint32_t i = 0; i < c->n_layer; i++)
		json_array_append_new(c->layer_global[i] ? glob : loc, json_integer(i));
	json_object_set_new(cfg, "global_layers", glob);
	json_object_set_new(cfg, "local_layers", loc);
	json_object_set_new(root, "config", cfg);

	json_t *tensors = json_array();
	for (size_t i = 0; i < m->n_tensors; i++) {
		const struct model_tensor *t = &m->tensors[i];
		json_t *o = json_object(), *shape = json_array();
		uint32_t nd = t->n_dims ? t->n_dims : 1;
		for (uint32_t d = 0; d < nd && d < 4; d++)
			json_array_append_new(shape, json_integer((json_int_t)t->ne[d]));
		json_object_set_new(o, "name", json_string(t->name));
		json_object_set_new(o, "type", json_string(type_name(t->type)));
		json_object_set_new(o, "shape", shape);
		json_object_set_new(o, "bytes", json_integer((json_int_t)t->nbytes));
		json_object_set_new(o, "norm_offset", json_real(t->norm_offset));
		json_array_append_new(tensors, o);
	}
	json_object_set_new(root, "tensors", tensors);

	struct totals tot;
	sum(m, &tot);
	json_t *totals = json_object(), *by_type = json_object();
	json_object_set_new(totals, "tensors", json_integer((json_int_t)m->n_tensors));
	json_object_set_new(totals, "bytes", json_integer((json_int_t)tot.bytes));
	for (uint32_t k = 0; k <= MAX_TYPE_ID; k++)
		if (tot.count_by_type[k])
			json_object_set_new(by_type, k < MAX_TYPE_ID ? type_name(k) : "other",
					    json_integer((json_int_t)tot.by_type[k]));
	json_object_set_new(totals, "bytes_by_type", by_type);
	json_t *count_by_type = json_object();
	for (uint32_t k = 0; k <= MAX_TYPE_ID; k++)
		if (tot.count_by_type[k])
			json_object_set_new(count_by_type, k < MAX_TYPE_ID ? type_name(k) : "other",
					    json_integer((json_int_t)tot.count_by_type[k]));
	json_object_set_new(totals, "tensors_by_type", count_by_type);
	json_object_set_new(root, "totals", totals);
	return root;
}

int cli_inspect(int argc, char **argv)
{
	const char *path = NULL, *mmproj_path = NULL;
	int as_json = 0;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			usage(stdout);
			return 0;
		} else if (!strcmp(argv[i], "--json")) {
			as_json = 1;
		} else if (!strcmp(argv[i], "--mmproj") && i + 1 < argc) {
			mmproj_path = argv[++i];
		} else if (argv[i][0] == '-' && argv[i][1]) {
			fprintf(stderr, "unicorn inspect: unknown option '%s'\n", argv[i]);
			usage(stderr);
			return 2;
		} else if (path) {
			fprintf(stderr, "unicorn inspect: more than one MODEL given\n");
			usage(stderr);
			return 2;
		} else {
			path = argv[i];
		}
	}
	if (!path) {
		usage(stderr);
		return 2;
	}

	struct mmproj *vp = NULL;
	if (!mmproj_path && mmproj_is_clip(path)) {
		/* An mmproj file on its own. */
		if (mmproj_open(path, &vp) < 0) {
			fprintf(stderr, "unicorn inspect: %s\n", err_msg());
			return 1;
		}
		if (as_json) {
			json_t *j = json_object();
			json_object_set_new(j, "vision", vision_json(vp));
			json_dumpf(j, stdout, JSON_INDENT(1));
			fputc('\n', stdout);
			json_decref(j);
		} else {
			print_vision(vp);
		}
		mmproj_close(vp);
		return fflush(stdout) ? 1 : 0;
	}
	struct model *m;
	if (model_open(path, &m) < 0) {
		fprintf(stderr, "unicorn inspect: %s\n", err_msg());
		return 1;
	}
	char *found = mmproj_path ? NULL : mmproj_find_beside(path);
	const char *vpath = mmproj_path ? mmproj_path : found;
	if (vpath && (mmproj_open(vpath, &vp) < 0 || mmproj_check_text(vp, &m->cfg) < 0)) {
		fprintf(stderr, "unicorn inspect: %s\n", err_msg());
		mmproj_close(vp);
		model_close(m);
		free(found);
		return 1;
	}
	free(found);
	int status = 0;
	if (as_json) {
		json_t *j = to_json(m);
		if (j && vp)
			json_object_set_new(j, "vision", vision_json(vp));
		if (!j || json_dumpf(j, stdout, JSON_INDENT(1)) < 0) {
			fprintf(stderr, "unicorn inspect: out of memory writing JSON\n");
			status = 1;
		} else {
			fputc('\n', stdout);
		}
		json_decref(j);
	} else {
		print_text(m);
		if (vp) {
			printf("\n");
			print_vision(vp);
		}
	}
	mmproj_close(vp);
	model_close(m);
	if (fflush(stdout) != 0) {
		fprintf(stderr, "unicorn inspect: writing output failed\n");
		status = 1;
	}
	return status;
}
