/* unicorn: the user's command line. Dispatches to cli/cli_*.c. */
#include "cli/cli.h"

#include <stdio.h>
#include <string.h>

struct subcommand {
	const char *name;
	int (*run)(int argc, char **argv);
	const char *summary;
};

static const struct subcommand subcommands[] = {
	{ "pull", cli_pull, "download a model from Hugging Face into the model store" },
	{ "list", cli_list, "list the models in the store" },
	{ "rm", cli_rm, "remove a model from the store" },
	{ "run", cli_run, "run MODEL (starting a cluster for it) or a prompt on a running cluster" },
	{ "chat", cli_chat, "interactive chat with the Gemma 3 chat template" },
	{ "status", cli_status, "show the processes of a running cluster" },
	{ "down", cli_down, "stop a running cluster" },
	{ "ps", cli_ps, "list the running clusters: name, model, URL, uptime, memory" },
	{ "logs", cli_logs, "print a detached cluster's log (--follow)" },
	{ "top", cli_top, "live dashboard of a running cluster's workers" },
	{ "trace", cli_trace, "record a Chrome/Perfetto trace of per-layer spans" },
	{ "inspect", cli_inspect, "show a model's architecture, hyperparameters and tensors" },
	{ "tokenize", cli_tokenize, "turn text into token ids and pieces" },
	{ "logits", cli_logits, "write the logits of a teacher-forced token sequence" },
	{ "quantize", cli_quantize, "convert a GGUF or Hugging Face checkpoint to a quantized GGUF (q4_k_m, q8_0, ...)" },
	{ "devices", cli_devices, "list Vulkan devices" },
	{ "bench", cli_bench, "measure prompt processing and generation speed (llama-bench style)" },
};

static void usage(FILE *f)
{
	fprintf(f, "usage: unicorn COMMAND [OPTIONS]\n\ncommands:\n");
	for (size_t i = 0; i < sizeof subcommands / sizeof subcommands[0]; i++)
		fprintf(f, "  %-10s %s\n", subcommands[i].name, subcommands[i].summary);
	fprintf(f, "\n'unicorn COMMAND --help' (or 'unicorn help COMMAND') describes each command;\n"
		"'unicorn --version' prints the version.\n");
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "-V")) {
		printf("unicorn %s\n", UNICORN_VERSION);
		return 0;
	}
	if (!strcmp(argv[1], "help") && argc > 2) {
		/* unicorn help CMD = unicorn CMD --help */
		for (size_t i = 0; i < sizeof subcommands / sizeof subcommands[0]; i++)
			if (!strcmp(argv[2], subcommands[i].name)) {
				char *av[] = { argv[2], "--help", NULL };
				return subcommands[i].run(2, av);
			}
		fprintf(stderr, "unicorn: unknown command '%s'\n", argv[2]);
		usage(stderr);
		return 2;
	}
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
		usage(stdout);
		return 0;
	}
	for (size_t i = 0; i < sizeof subcommands / sizeof subcommands[0]; i++)
		if (!strcmp(argv[1], subcommands[i].name))
			return subcommands[i].run(argc - 1, argv + 1);
	fprintf(stderr, "unicorn: unknown command '%s'\n", argv[1]);
	usage(stderr);
	return 2;
}
