/* PLACEHOLDER being written now; replaced by the real command. */
#include "coordinator/cli.h"
#include <stdio.h>
int cli_trace(int argc, char **argv)
{
	(void)argc; (void)argv;
	fprintf(stderr, "unicorn trace: not built yet\n");
	return 1;
}
