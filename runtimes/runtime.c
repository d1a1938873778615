/* Picks the backend the config names: see include/sealed-probe/runtime.h.
   A backend this build lacks is an error, never a fallback to another.  */
#include <sealed-probe/runtime.h>

#include "backends.h"

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
