/* sealed-probe-proxy unstage: unmounts and removes every staged seed and the
   record of them, for a clean slate.  See docs/staging.md.  */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>

#include <sealed-probe/cleanup.h>
#include <sealed-probe/seed_store.h>

#include "config.h"
#include "verbs.h"

#define USAGE "usage: sealed-probe-proxy unstage [--state DIR]"

int
sp_verb_unstage (int argc, char **argv)
{
  cleanup_error sp_error_t err = NULL;
  cleanup_close int state_fd = -1;
  const char *state = SP_DEFAULT_STATE;

  for (int i = 1; i < argc; i++)
    {
      if (strcmp (argv[i], "--help") == 0 || strcmp (argv[i], "-h") == 0)
        {
          printf ("%s\n", USAGE);
          return SP_EXIT_OK;
        }
      if (strcmp (argv[i], "--state") == 0 && i + 1 < argc && argv[i + 1][0] != '\0')
        state = argv[++i];
      else
        {
          sp_verb_report ("unstage", "unexpected argument `%s`", argv[i]);
          fputs (USAGE "\n", stderr);
          return SP_EXIT_USAGE;
        }
    }
  if (sp_state_open (state, 0, &state_fd, &err) < 0 || sp_seed_store_reset (state_fd, &err) < 0)
    {
      sp_verb_report ("unstage", "%s", sp_error_message (err));
      return SP_EXIT_FAIL;
    }
  printf ("unstaged every seed in %s\n", state);
  return SP_EXIT_OK;
}
