/* Credentials out of the environment: see secret_env.h.  */
#define _GNU_SOURCE
#include "stage/secret_env.h"

#include <stdlib.h>
#include <string.h>

extern char **environ;

/* Overwrites the value of every NAME=... in environ.  The strings of the
   initial environment live in the memory /proc/PID/environ reads, so
   unsetenv alone would leave the value there.  */
static void
wipe (const char *name)
{
  size_t len = strlen (name);

  for (char **e = environ; e && *e; e++)
    if (strncmp (*e, name, len) == 0 && (*e)[len] == '=')
      explicit_bzero (*e + len + 1, strlen (*e + len + 1));
}

char *
sp_secret_env_take (const char *const *names, const char **which)
{
  char *secret = NULL;

  if (which)
    *which = NULL;
  for (const char *const *name = names; *name; name++)
    {
      const char *value = getenv (*name);

      if (secret == NULL && value != NULL && value[0] != '\0')
        {
          secret = strdup (value);
          if (secret && which)
            *which = *name;
        }
      wipe (*name);
      unsetenv (*name);
    }
  return secret;
}

void
sp_env_scrub_all (void)
{
  for (char **e = environ; e && *e; e++)
    explicit_bzero (*e, strlen (*e));
  clearenv ();
}

void
sp_secret_free (char *secret)
{
  if (secret)
    {
      explicit_bzero (secret, strlen (secret));
      free (secret);
    }
}
