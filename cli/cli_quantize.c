/* cli_quantize: `unicorn quantize IN OUT --type q8_0|q4_0` (tools/quantize.c
 * does the work). */
#include "cli/cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "formats/quant.h"
#include "tools/quantize.h"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: unicorn quantize IN OUT --type q8_0|q4_0 [options]\n"
		"\n"
		"Converts a Gemma 3 checkpoint (GGUF file or Hugging Face directory) into a\n"
		"GGUF file that llama.cpp loads: matrices and the embedding in TYPE, norms in\n"
		"f32 (1+w), Gemma 3 metadata, the tokenizer copied from the input (GGUF) or\n"
		"from tokenizer.json beside it (HF).\n"
		"\n"
		"  --type T          q8_0 or q4_0 (also f32, f16, bf16, q4_k, q6_k)\n"
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
				if (quant_type_parse(v, &o.type) || !quant_type_info(o.type)) {
					fprintf(stderr, "unicorn quantize: --type %s: unknown (q8_0, q4_0)\n", v);
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
