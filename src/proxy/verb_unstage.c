/* sealed-probe-proxy unstage: unmounts and removes every staged seed and the
   record of them, for a clean slate.  See docs/staging.md.  */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "os/progress.h"
#include "os/state_lock.h"
#include "stage/seed_store.h"

#include "build_config.h"
#include "proxy/options.h"
#include "proxy/verbs.h"

#define USAGE "usage: sealed-probe-proxy unstage [--state DIR]"

int
sp_verb_unstage (int argc, char **argv)
{
  cleanup_error sp_error_t err = NULL;
  cleanup_reset_report struct sp_reset_report left = { 0 };
  cleanup_close int state_fd = -1;
  int owner_lock_fd = -1;
  const char *state = NULL;
  const struct sp_option options[] = { { .name = "--state", .value = &state } };
  struct sp_progress progress;
  int ret = sp_options_parse ("unstage", USAGE, argc, argv, options, 1);

  if (ret != 0)
    return ret < 0 ? SP_EXIT_OK : ret;
  if (state == NULL)
    state = SP_DEFAULT_STATE;
  /* Never beside a serve that answers from these seeds, nor a stage.  */
  if (sp_state_open (state, 0, &state_fd, &err) < 0
      || sp_state_lock_take (state_fd, state, "unstage", &owner_lock_fd, &err) < 0)
    {
      /* Not "run stage first": there is nothing to undo.  */
      if (err->status == ENOENT)
        {
          sp_verb_report ("unstage", "state directory `%s`: %s: nothing is staged there: check --state",
                          state, strerror (ENOENT));
          return SP_EXIT_FAIL;
        }
      sp_verb_report ("unstage", "%s", sp_error_message (err));
      return SP_EXIT_FAIL;
    }
  /* As stage decides: a line on a terminal, nothing anywhere else.  */
  sp_progress_init (&progress, STDERR_FILENO);
  /* Whatever stays is reported, one line each; a second unstage, once the
     obstacle is gone, finishes the job.  */
  ret = sp_seed_store_reset (state_fd, &progress, &left, &err);
  sp_progress_clear (&progress);
  sp_state_lock_release (state_fd, &owner_lock_fd);
  if (ret < 0)
    {
      if (left.n == 0)
        sp_verb_report ("unstage", "%s", sp_error_message (err));
      for (size_t i = 0; i < left.n; i++)
        sp_verb_report ("unstage", "%s", sp_error_message (left.left[i]));
      sp_verb_report ("unstage",
                      "%zu thing(s) in %s could not be removed; remove the obstacle and run unstage again",
                      left.n ? left.n : 1, state);
      return SP_EXIT_FAIL;
    }
  printf ("unstaged every seed in %s\n", state);
  return SP_EXIT_OK;
}
