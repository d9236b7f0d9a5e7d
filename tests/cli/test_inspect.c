/* `unicorn inspect` through the built binary ($UNICORN_BIN): JSON output of the
 * golden model, text output, and exit codes for bad input and bad usage. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/golden.h"

/* Run `unicorn inspect ARGS`, capture stdout (and stderr when merge), return the exit status. */
static int run_inspect(const char *args, int merge, char **out)
{
	const char *bin = getenv("UNICORN_BIN");
	if (!bin)
		cr_skip_test("UNICORN_BIN not set (run through make test)");
	char cmd[8192];
	snprintf(cmd, sizeof cmd, "'%s/unicorn' inspect %s %s", bin, args, merge ? "2>&1" : "2>/dev/null");
	FILE *p = popen(cmd, "r");
	cr_assert(p);
	size_t cap = 1 << 16, len = 0;
	char *buf = malloc(cap);
	cr_assert(buf);
	size_t n;
	while ((n = fread(buf + len, 1, cap - len - 1, p)) > 0) {
		len += n;
		if (cap - len < 4096) {
			cap *= 2;
			buf = realloc(buf, cap);
			cr_assert(buf);
		}
	}
	buf[len] = 0;
	int st = pclose(p);
	*out = buf;
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

Test(inspect, json_gguf)
{
	char args[4400], *out;
	snprintf(args, sizeof args, "'%s/golden/gemma3-tiny-q8_0.gguf' --json", golden_shared_dir());
	cr_assert_eq(run_inspect(args, 0, &out), 0);
	json_error_t e;
	json_t *j = json_loads(out, 0, &e);
	cr_assert(j, "not JSON (%s): %.200s", e.text, out);
	cr_expect_str_eq(json_string_value(json_object_get(j, "format")), "gguf");
	cr_expect_str_eq(json_string_value(json_object_get(j, "architecture")), "gemma3");
	json_t *c = json_object_get(j, "config");
	cr_expect_eq(json_integer_value(json_object_get(c, "n_embd")), 128);
	cr_expect_eq(json_integer_value(json_object_get(c, "n_layer")), 6);
	cr_expect_eq(json_integer_value(json_object_get(c, "n_vocab")), 32000);
	json_t *glob = json_object_get(c, "global_layers");
	cr_assert_eq(json_array_size(glob), 1);
	cr_expect_eq(json_integer_value(json_array_get(glob, 0)), 5);
	cr_expect_eq(json_array_size(json_object_get(c, "local_layers")), 5);

	json_t *tensors = json_object_get(j, "tensors");
	cr_assert_eq(json_array_size(tensors), 80);
	uint64_t sum = 0;
	int found = 0;
	for (size_t i = 0; i < json_array_size(tensors); i++) {
		json_t *t = json_array_get(tensors, i);
		sum += (uint64_t)json_integer_value(json_object_get(t, "bytes"));
		if (!strcmp(json_string_value(json_object_get(t, "name")), "blk.0.ffn_down.weight")) {
			found = 1;
			cr_expect_str_eq(json_string_value(json_object_get(t, "type")), "q8_0");
			json_t *shape = json_object_get(t, "shape");
			cr_expect_eq(json_integer_value(json_array_get(shape, 0)), 384);
			cr_expect_eq(json_integer_value(json_array_get(shape, 1)), 128);
			/* 384/32 blocks of 34 bytes per row, 128 rows */
			cr_expect_eq(json_integer_value(json_object_get(t, "bytes")), 384 / 32 * 34 * 128);
		}
	}
	cr_expect(found);
	json_t *tot = json_object_get(j, "totals");
	cr_expect_eq(json_integer_value(json_object_get(tot, "tensors")), 80);
	cr_expect_eq((uint64_t)json_integer_value(json_object_get(tot, "bytes")), sum);
	json_t *by = json_object_get(tot, "bytes_by_type");
	cr_expect_eq((uint64_t)json_integer_value(json_object_get(by, "q8_0")) +
		     (uint64_t)json_integer_value(json_object_get(by, "f32")), sum);
	json_decref(j);
	free(out);
}

Test(inspect, text_hf)
{
	char args[4400], *out;
	snprintf(args, sizeof args, "'%s/golden/gemma3-tiny-hf'", golden_shared_dir());
	cr_assert_eq(run_inspect(args, 0, &out), 0);
	cr_expect(strstr(out, "hf-safetensors"), "%.300s", out);
	cr_expect(strstr(out, "global layers          5\n"), "%.2000s", out);
	cr_expect(strstr(out, "local layers           0-4\n"));
	cr_expect(strstr(out, "blk.3.attn_q_norm.weight"));
	cr_expect(strstr(out, "tensors  80\n"));
	free(out);
}

Test(inspect, errors_and_usage)
{
	char *out;
	cr_expect_eq(run_inspect("/nonexistent/model.gguf", 1, &out), 1);
	cr_expect(strstr(out, "/nonexistent/model.gguf"), "%s", out);
	free(out);
	cr_expect_eq(run_inspect("", 1, &out), 2);
	cr_expect(strstr(out, "usage"), "%s", out);
	free(out);
	cr_expect_eq(run_inspect("a b", 1, &out), 2);
	free(out);
	cr_expect_eq(run_inspect("--bogus x", 1, &out), 2);
	free(out);
	cr_expect_eq(run_inspect("--help", 1, &out), 0);
	cr_expect(strstr(out, "--json"));
	free(out);
}

/* Write a model with `unicorn-mkmodel MK_ARGS` to a new temporary file (its
 * name into path[64]) and run `unicorn inspect` on it (text) into *out. */
static void mkmodel_inspect(const char *mk_args, char *path, char **out)
{
	const char *bin = getenv("UNICORN_BIN");
	if (!bin)
		cr_skip_test("UNICORN_BIN not set (run through make test)");
	char cmd[8192], args[200];
	snprintf(path, 64, "/tmp/unicorn-inspect-mk-XXXXXX");
	int fd = mkstemp(path);
	cr_assert(fd >= 0);
	close(fd);
	snprintf(cmd, sizeof cmd, "'%s/unicorn-mkmodel' %s -o '%s' >/dev/null 2>&1", bin, mk_args, path);
	cr_assert_eq(system(cmd), 0, "%s", cmd);
	snprintf(args, sizeof args, "'%s'", path);
	cr_assert_eq(run_inspect(args, 0, out), 0);
}

Test(inspect, file_type_and_counts)
{
	/* mkmodel writes general.file_type (2 = Q4_0); the golden files have none. */
	char path[64], args[4400], *out;
	mkmodel_inspect("--type q4_0", path, &out);
	cr_expect(strstr(out, "file type:    Q4_0 (2)\n"), "%.300s", out);
	cr_expect(strstr(out, "q4_0     2967552 bytes in 43 tensors\n"), "%s", out);
	free(out);
	snprintf(args, sizeof args, "'%s' --json", path);
	cr_assert_eq(run_inspect(args, 0, &out), 0);
	json_t *j = json_loads(out, 0, NULL);
	cr_assert(j);
	cr_expect_str_eq(json_string_value(json_object_get(j, "file_type")), "Q4_0 (2)");
	json_t *cnt = json_object_get(json_object_get(j, "totals"), "tensors_by_type");
	cr_expect_eq(json_integer_value(json_object_get(cnt, "q4_0")), 43);
	cr_expect_eq(json_integer_value(json_object_get(cnt, "f32")), 37);
	json_decref(j);
	free(out);
	unlink(path);
}

/* The line of the totals for type name ("  q4_K     N bytes in M tensors"). */
static const char *totals_line(const char *out, const char *name)
{
	char key[32];
	snprintf(key, sizeof key, "\n  %-8s ", name);
	const char *tot = strstr(out, "\ntotals:");
	return tot ? strstr(tot, key) : NULL;
}

Test(inspect, preset_file_type_and_counts)
{
	/* A q4_k_m tiny256 model: llama.cpp's name for file type 15 and the
	 * preset's mix (6 layers: attn_v and ffn_down Q6_K in layers 2 and 5,
	 * token_embd Q6_K, attn_output's 128-wide rows Q5_0, the rest Q4_K). */
	char path[64], *out;
	mkmodel_inspect("--shape tiny256 --type q4_k_m", path, &out);
	cr_expect(strstr(out, "file type:    Q4_K - Medium (15)\n"), "%.300s", out);
	static const struct {
		const char *type;
		const char *count;
	} want[] = { { "q4_K", " in 32 tensors\n" }, { "q6_K", " in 5 tensors\n" }, { "q5_0", " in 6 tensors\n" },
		     { "f32", " in 37 tensors\n" } };
	for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
		const char *l = totals_line(out, want[i].type);
		cr_assert(l, "no %s line: %s", want[i].type, out);
		const char *end = strchr(l + 1, '\n');
		cr_expect(end && !strncmp(end - strlen(want[i].count) + 1, want[i].count, strlen(want[i].count)),
			  "%s: %.60s", want[i].type, l + 1);
	}
	free(out);
	unlink(path);
}

Test(inspect, vision_projector)
{
	const char *bin = getenv("UNICORN_BIN");
	if (!bin)
		cr_skip_test("UNICORN_BIN not set (run through make test)");
	char dir[64], cmd[8192], args[512], *out;
	snprintf(dir, sizeof dir, "/tmp/unicorn-inspect-vis-XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
	snprintf(cmd, sizeof cmd, "'%s/unicorn-mkmodel' --vision --layers 1 -q -o '%s/m.gguf' >/dev/null 2>&1", bin, dir);
	cr_assert_eq(system(cmd), 0, "%s", cmd);
	/* found beside the model */
	snprintf(args, sizeof args, "'%s/m.gguf'", dir);
	cr_assert_eq(run_inspect(args, 1, &out), 0, "%s", out);
	cr_expect(strstr(out, "mmproj-m.gguf (projector gemma3)"), "%s", out);
	cr_expect(strstr(out, "tokens_per_image       16"), "%s", out);
	free(out);
	snprintf(args, sizeof args, "'%s/m.gguf' --json", dir);
	cr_assert_eq(run_inspect(args, 0, &out), 0);
	cr_expect(strstr(out, "\"tokens_per_image\": 16"), "%s", out);
	free(out);
	/* the projector alone */
	snprintf(args, sizeof args, "'%s/mmproj-m.gguf'", dir);
	cr_assert_eq(run_inspect(args, 1, &out), 0, "%s", out);
	cr_expect(strstr(out, "image_size             112"), "%s", out);
	free(out);
	/* a projector for another width: refused with the reason */
	snprintf(cmd, sizeof cmd, "'%s/unicorn-mkmodel' --shape tiny256 --vision --layers 1 -q -o '%s/w.gguf' >/dev/null 2>&1",
		 bin, dir);
	cr_assert_eq(system(cmd), 0, "%s", cmd);
	snprintf(args, sizeof args, "'%s/m.gguf' --mmproj '%s/mmproj-w.gguf'", dir, dir);
	cr_assert_eq(run_inspect(args, 1, &out), 1, "%s", out);
	cr_expect(strstr(out, "256-wide embeddings but the text model is 128 wide"), "%s", out);
	free(out);
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	cr_expect_eq(system(cmd), 0);
}
