/* Picks the backend the config names: see src/runtimes/runtime.h.
   A backend this build lacks is an error, never a fallback to another.  */
#include "runtimes/runtime.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtimes/backends.h"

int
sp_orphans_note (struct sp_orphans_removed *removed, const char *run, unsigned containers, unsigned cgroups,
                 bool state_dir)
{
  struct sp_orphan_run *r = NULL;

  if (removed == NULL)
    return 0;
  for (size_t i = 0; i < removed->n && r == NULL; i++)
    if (strcmp (removed->runs[i].run, run) == 0)
      r = &removed->runs[i];
  if (r == NULL)
    {
      struct sp_orphan_run *grown = realloc (removed->runs, (removed->n + 1) * sizeof (*grown));

      if (grown == NULL)
        return -1;
      removed->runs = grown;
      r = &removed->runs[removed->n++];
      *r = (struct sp_orphan_run){ 0 };
      snprintf (r->run, sizeof (r->run), "%s", run);
    }
  r->containers += containers;
  r->cgroups += cgroups;
  r->state_dir = r->state_dir || state_dir;
  return 0;
}

void
sp_orphans_removed_release (struct sp_orphans_removed *removed)
{
  if (removed == NULL)
    return;
  free (removed->runs);
  removed->runs = NULL;
  removed->n = 0;
}

const char *
sp_runtime_binary_name (enum sp_runtime kind)
{
  switch (kind)
    {
    case SP_RUNTIME_RUNC:
      return "runc";
    case SP_RUNTIME_GVISOR:
      return "runsc";
    case SP_RUNTIME_DOCKER:
      return ""; /* driven over a socket: no binary of its own here */
    case SP_RUNTIME_SBX:
      return ""; /* serve's --sbx names it; serve verifies it, not stage */
    default:
      return NULL;
    }
}

void
sp_runtime_accepts (enum sp_runtime kind, char *out, size_t size)
{
  switch (kind)
    {
    case SP_RUNTIME_RUNC:
      sp_runc_accepts (out, size);
      break;
    case SP_RUNTIME_GVISOR:
      sp_runsc_accepts (out, size);
      break;
    case SP_RUNTIME_DOCKER:
      sp_docker_accepts (out, size);
      break;
    case SP_RUNTIME_SBX:
      sp_sbx_accepts (out, size);
      break;
    default:
      snprintf (out, size, "nothing");
    }
}

int
sp_runtime_open (enum sp_runtime kind, const struct sp_runtime_settings *settings,
                 struct sp_runtime_backend **out, sp_error_t *err)
{
  *out = NULL;
  switch (kind)
    {
    case SP_RUNTIME_RUNC:
      return sp_runc_open (settings, out, err);
    case SP_RUNTIME_GVISOR:
      return sp_runsc_open (settings, out, err);
    case SP_RUNTIME_DOCKER:
      return sp_docker_open (settings, out, err);
    case SP_RUNTIME_SBX:
      return sp_sbx_open (settings, out, err);
    default:
      return sp_make_error (err, 0, "unknown runtime %d", (int)kind);
    }
}
