/* The options serve and check share: the same preflight needs the same
   paths.  */
#ifndef SP_PROXY_SERVE_OPTIONS_H
#define SP_PROXY_SERVE_OPTIONS_H

#include <stdbool.h>

#include "serve/serve.h"

/* Parses argv into opt, defaults applied.  with_serving adds the options only
   serve has (socket, readiness, concurrency, queue).  Returns 0, -1 after
   --help, or SP_EXIT_USAGE after reporting.  */
int sp_serve_options_parse (const char *verb, const char *usage, int argc, char **argv, bool with_serving,
                            struct sp_serve_options *opt);

#endif
