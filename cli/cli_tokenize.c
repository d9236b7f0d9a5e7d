/* unicorn tokenize: show how a tokenizer splits text, one `id<TAB>piece` line per token
 * (control characters in pieces escaped so the output stays one token a line), or one
 * JSON object with --json. */
#include "cli/cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tokenizer.h"
#include "common/err.h"

#define MAX_STDIN (256u << 20) /* refuse absurd stdin rather than exhausting memory */

static void usage(FILE *f)
{
	fprintf(f,
		"usage: unicorn tokenize --tokenizer PATH [--json] [--no-bos] TEXT|-\n"
		"\n"
		"Encode TEXT (or standard input with '-', taken byte for byte, trailing newline\n"
		"included) and print one 'id<TAB>piece' line per token. Special tokens written in\n"
		"the text (e.g. <start_of_turn>) become single tokens.\n"
		"\n"
		"  --tokenizer PATH  GGUF file, tokenizer.json, or Hugging Face model directory\n"
		"  --json            print {\"ids\": [...], \"pieces\": [...]} instead\n"
		"  --no-bos          do not put the BOS token first\n"
		"  --help            show this help\n");
}

/* Text form: backslash, tab, newline and other control bytes are escaped. */
static void put_piece_text(const char *p)
{
	for (; *p; p++) {
		unsigned char c = (unsigned char)*p;
		if (c == '\\')
			fputs("\\\\", stdout);
		else if (c == '\n')
			fputs("\\n", stdout);
		else if (c == '\t')
			fputs("\\t", stdout);
		else if (c == '\r')
			fputs("\\r", stdout);
		else if (c < 0x20 || c == 0x7f)
			printf("\\x%02x", c);
		else
			putchar(c);
	}
}

/* JSON string; bytes >= 0x80 pass through (vocab pieces are UTF-8). */
static void put_piece_json(const char *p)
{
	putchar('"');
	for (; *p; p++) {
		unsigned char c = (unsigned char)*p;
		if (c == '"' || c == '\\')
			printf("\\%c", c);
		else if (c == '\n')
			fputs("\\n", stdout);
		else if (c == '\t')
			fputs("\\t", stdout);
		else if (c < 0x20 || c == 0x7f)
			printf("\\u%04x", c);
		else
			putchar(c);
	}
	putchar('"');
}

static int read_stdin(char **out, size_t *len)
{
	size_t cap = 4096, n = 0;
	char *b = malloc(cap);
	if (!b)
		return err_set(ERR_NOMEM, "stdin: out of memory");
	for (;;) {
		if (n == cap) {
			if (cap >= MAX_STDIN) {
				free(b);
				return err_set(ERR_RANGE, "stdin: more than %u bytes", MAX_STDIN);
			}
			char *q = realloc(b, cap * 2);
			if (!q) {
				free(b);
				return err_set(ERR_NOMEM, "stdin: out of memory");
			}
			b = q;
			cap *= 2;
		}
		size_t r = fread(b + n, 1, cap - n, stdin);
		n += r;
		if (r == 0) {
			if (ferror(stdin)) {
				free(b);
				return err_set(ERR_IO, "stdin: read error");
			}
			break;
		}
	}
	*out = b;
	*len = n;
	return 0;
}

int cli_tokenize(int argc, char **argv)
{
	const char *path = NULL, *text = NULL;
	bool json = false, bos = true, have_text = false;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			usage(stdout);
			return 0;
		} else if (!strcmp(a, "--tokenizer")) {
			if (i + 1 >= argc) {
				fprintf(stderr, "unicorn tokenize: --tokenizer needs a PATH\n");
				return 2;
			}
			path = argv[++i];
		} else if (!strcmp(a, "--json")) {
			json = true;
		} else if (!strcmp(a, "--no-bos")) {
			bos = false;
		} else if (a[0] == '-' && a[1] && strcmp(a, "--") != 0) {
			fprintf(stderr, "unicorn tokenize: unknown option '%s'\n", a);
			usage(stderr);
			return 2;
		} else {
			if (!strcmp(a, "--")) {
				if (++i >= argc)
					break;
				a = argv[i];
			}
			if (have_text) {
				fprintf(stderr, "unicorn tokenize: one TEXT argument only (quote it)\n");
				return 2;
			}
			text = a;
			have_text = true;
		}
	}
	if (!path || !have_text) {
		fprintf(stderr, "unicorn tokenize: %s\n",
			!path ? "--tokenizer PATH is required" : "TEXT (or '-' for stdin) is required");
		usage(stderr);
		return 2;
	}
	char *buf = NULL;
	size_t len = 0;
	if (!strcmp(text, "-")) {
		if (read_stdin(&buf, &len)) {
			fprintf(stderr, "unicorn tokenize: %s\n", err_msg());
			return 1;
		}
		text = buf;
	} else {
		len = strlen(text);
	}
	struct tok *t;
	int rc = tok_load(path, &t);
	if (rc) {
		fprintf(stderr, "unicorn tokenize: %s\n", err_msg());
		free(buf);
		return 1;
	}
	struct tok_ids ids = {0};
	rc = tok_encode(t, text, len, bos && tok_add_bos(t), &ids);
	if (rc) {
		fprintf(stderr, "unicorn tokenize: %s\n", err_msg());
	} else if (json) {
		fputs("{\"ids\": [", stdout);
		for (size_t i = 0; i < ids.n; i++)
			printf("%s%d", i ? ", " : "", ids.ids[i]);
		fputs("], \"pieces\": [", stdout);
		for (size_t i = 0; i < ids.n; i++) {
			fputs(i ? ", " : "", stdout);
			put_piece_json(tok_piece(t, ids.ids[i]));
		}
		fputs("]}\n", stdout);
	} else {
		for (size_t i = 0; i < ids.n; i++) {
			printf("%d\t", ids.ids[i]);
			put_piece_text(tok_piece(t, ids.ids[i]));
			putchar('\n');
		}
	}
	tok_ids_free(&ids);
	tok_free(t);
	free(buf);
	return rc ? 1 : 0;
}
