/* The client's settings from its environment: see client_env.h.  */
#include "base/client_env.h"

#include <string.h>

#include "base/bounds.h"

const char *
sp_client_socket_path (const char *value, const char *default_path)
{
  return value != NULL ? value : default_path;
}

int
sp_client_socket_check (const char *path, sp_error_t *err)
{
  size_t n = strlen (path);

  if (n == 0)
    {
      sp_make_error (err, 0, "the socket path is empty");
      return SP_CLIENT_SOCKET_EMPTY;
    }
  /* Absolute, so that the working directory cannot redirect it.  */
  if (path[0] != '/')
    {
      sp_make_error (err, 0, "the socket path is not absolute (it does not start with `/`)");
      return SP_CLIENT_SOCKET_RELATIVE;
    }
  if (n > SP_CLIENT_SOCKET_MAX_BYTES)
    {
      sp_make_error (err, 0, "the socket path is %zu bytes, above the %d a Unix socket address holds", n,
                     SP_CLIENT_SOCKET_MAX_BYTES);
      return SP_CLIENT_SOCKET_TOO_LONG;
    }
  return SP_CLIENT_SOCKET_OK;
}

int
sp_client_timeout_parse (const char *value, int *seconds, sp_error_t *err)
{
  int n = 0;

  if (value == NULL)
    {
      *seconds = SP_CLIENT_TIMEOUT_DEFAULT_SECONDS;
      return 0;
    }
  for (const char *s = value; *s != '\0'; s++)
    {
      if (*s < '0' || *s > '9')
        return sp_make_error (err, 0, "not whole seconds in decimal digits only");
      n = n * 10 + (*s - '0');
      if (n > SP_CLIENT_TIMEOUT_MAX_SECONDS)
        return sp_make_error (err, 0, "above %d seconds", SP_CLIENT_TIMEOUT_MAX_SECONDS);
    }
  if (value[0] == '\0')
    return sp_make_error (err, 0, "empty");
  if (n < 1)
    return sp_make_error (err, 0, "below 1 second");
  *seconds = n;
  return 0;
}
