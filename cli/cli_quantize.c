/* cli_quantize: `unicorn quantize IN OUT --type T` with T a tensor type or a
 * llama.cpp preset such as q4_k_m (tools/quantize.c does the work). */
#include "cli/cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "tools/quantize.h"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: unicorn quantize IN OUT --type T [options]\n"
		"\n"
		"Converts a Gemma 3 checkpoint (GGUF file or Hugging Face directory) into a\n"
		"GGUF file that llama.cpp loads: matrices and the embedding in type T (or the\n"
		"mix of a preset), norms in f32 (1+w), Gemma 3 metadata with general.file_type,\n"
		"the tokenizer copied from the input (GGUF) or from tokenizer.json beside it (HF).\n"
		"\n"
		"  --type T          a type: every weight matrix and the embedding take it:\n"
		"                      q8_0, q4_0, q4_1, q5_0, q5_1, q2_k, q3_k, q4_k, q5_k,\n"
		"                      q6_k, iq4_nl (also f32, f16, bf16)\n"
		"                    or a llama.cpp preset (mixed types, as llama-quantize):\n"
		"                      q4_k_m  q4_K; q6_K for attn_v and ffn_down in the\n"
		"                              first/last eighth and every third layer, and\n"
		"                              for token_embd (the tied output)\n"
		"                      q5_k_m  the same with q5_K\n"
		"                      q3_k_m  q3_K; attn_v q5_K in layers 0-1 then q4_K,\n"
		"                              ffn_down q5_K in the first 1/16 then q4_K,\n"
		"                              attn_output q4_K, token_embd q6_K\n"
		"                      iq4_xs  iq4_xs (llama-quantize's IQ4_XS, no imatrix);\n"
		"                              attn_v q5_K when n_head >= 4 n_head_kv,\n"
		"                              ffn_down q5_K in the first eighth of the\n"
		"                              layers, token_embd q6_K\n"
		"                    Rows that are not a multiple of 256 (Gemma 3 1B's 1152)\n"
		"                    cannot hold a K or IQ4_XS block and take llama.cpp's\n"
		"                    fall-back: q4_K->q5_0, q5_K->q5_1, q6_K->q8_0,\n"
		"                    q2_K/q3_K->q4_0, iq4_xs->iq4_nl; a preset's token_embd\n"
		"                    takes q8_0 then.\n"
		"  --vocab F         take the tokenizer from this GGUF file\n"
		"  --tokenizer F     take the tokenizer from this tokenizer.json\n"
		"  --name NAME       general.name (default: the input's, or its file name)\n"
		"  --threads N       worker threads (default: all CPUs, max 8)\n"
		"  -q, --quiet       no progress output\n");
}

int cli_quantize(int argc, char **argv)
{
	struct quantize_opts o = { 0 };
	int have_type = 0;
	const char *pos[2] = { NULL, NULL };
	int n_pos = 0;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			usage(stdout);
			return 0;
		}
		if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) {
			o.quiet = true;
			continue;
		}
		if (a[0] == '-' && a[1]) {
			const char *v = i + 1 < argc ? argv[++i] : NULL;
			if (!v) {
				fprintf(stderr, "unicorn quantize: %s: missing value\n", a);
				return 2;
			}
			if (!strcmp(a, "--type")) {
				if (quant_preset_parse(v, &o.type, &o.preset)) {
					fprintf(stderr, "unicorn quantize: --%s\n", err_msg());
					return 2;
				}
				have_type = 1;
			} else if (!strcmp(a, "--vocab")) {
				o.vocab = v;
			} else if (!strcmp(a, "--tokenizer")) {
				o.tokenizer = v;
			} else if (!strcmp(a, "--name")) {
				o.name = v;
			} else if (!strcmp(a, "--threads")) {
				char *end;
				errno = 0;
				long n = strtol(v, &end, 10);
				if (errno || *end || n < 1 || n > 64) {
					fprintf(stderr, "unicorn quantize: --threads %s: expected 1..64\n", v);
					return 2;
				}
				o.threads = (int)n;
			} else {
				fprintf(stderr, "unicorn quantize: unknown option %s\n", a);
				usage(stderr);
				return 2;
			}
			continue;
		}
		if (n_pos == 2) {
			fprintf(stderr, "unicorn quantize: unexpected argument %s\n", a);
			usage(stderr);
			return 2;
		}
		pos[n_pos++] = a;
	}
	if (n_pos != 2 || !have_type) {
		fprintf(stderr, "unicorn quantize: need IN, OUT and --type\n");
		usage(stderr);
		return 2;
	}
	o.in = pos[0];
	o.out = pos[1];
	int rc = quantize_run(&o);
	if (rc) {
		fprintf(stderr, "unicorn quantize: %s\n", err_msg());
		return 1;
	}
	return 0;
}
