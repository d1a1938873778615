/* The client's two settings from its environment (docs/protocol.md, "The
   client"): the socket it connects to (SEALED_PROBE_SOCKET) and its overall
   deadline (SEALED_PROBE_TIMEOUT).  One set of rules for the client, which
   answers ERROR when a value breaks them, and for `doctor`, which says which
   rule it broke.  Pure: the caller reads the environment and passes the
   value, NULL when unset.  */
#ifndef SP_BASE_CLIENT_ENV_H
#define SP_BASE_CLIENT_ENV_H

#include "base/error.h"

/* The longest socket path: sun_path's 108 bytes less the NUL (the client
   holds the two equal at build time).  */
#define SP_CLIENT_SOCKET_MAX_BYTES 107

/* What is wrong with a socket path, as a value: the return of
   sp_client_socket_check.  */
enum sp_client_socket_problem
{
  SP_CLIENT_SOCKET_OK = 0,
  SP_CLIENT_SOCKET_EMPTY = -2,    /* set but empty */
  SP_CLIENT_SOCKET_RELATIVE = -3, /* not absolute: the working directory would decide */
  SP_CLIENT_SOCKET_TOO_LONG = -4, /* above SP_CLIENT_SOCKET_MAX_BYTES */
};

/* The path the client connects to: value, or default_path when value is
   NULL (unset).  */
const char *sp_client_socket_path (const char *value, const char *default_path);

/* Checks a socket path: non-empty, absolute, at most
   SP_CLIENT_SOCKET_MAX_BYTES.  Returns SP_CLIENT_SOCKET_OK, or one of the
   negative problems after filling *err (which names the rule, never the
   path).  */
int sp_client_socket_check (const char *path, sp_error_t *err);

/* The deadline in seconds from value: decimal digits only,
   1..SP_CLIENT_TIMEOUT_MAX_SECONDS; NULL (unset) gives
   SP_CLIENT_TIMEOUT_DEFAULT_SECONDS.  Set but invalid is an error, never the
   default, so that a typo never means a ten-minute wait.  Returns 0, or -1
   after filling *err (which states the valid range, never the value).  */
int sp_client_timeout_parse (const char *value, int *seconds, sp_error_t *err);

#endif
