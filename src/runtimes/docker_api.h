/* The Docker Engine API over the daemon's Unix socket (docs/runtimes.md,
   "Docker"): libcurl with CURLOPT_UNIX_SOCKET_PATH, every versioned path
   under DOCKER_API_PREFIX, responses bounded, bodies parsed strictly by the
   caller (json.h).  No error names the socket's path: errors reach the
   audit log, and the socket goes nowhere but here.  Private to
   runtimes/.  */
#ifndef SP_RUNTIMES_DOCKER_API_H
#define SP_RUNTIMES_DOCKER_API_H

#include <stddef.h>

#include "base/error.h"
#include "text/json.h"

/* The oldest Engine API this backend speaks, and the prefix of every
   versioned call: the daemon answers in this version's shapes.  */
#define DOCKER_API_VERSION_MAJOR 1
#define DOCKER_API_VERSION_MINOR 41
#define DOCKER_API_PREFIX        "/v1.41"
/* What one response may hold.  */
#define DOCKER_API_RESPONSE_MAX (4u * 1024 * 1024)
/* What one call is given when its caller sets no other limit.  */
#define DOCKER_API_TIMEOUT_MS (30 * 1000)

struct docker_response
{
  long status;     /* the HTTP status */
  char *body;      /* NUL-terminated */
  size_t body_len; /* without the NUL */
};

void docker_response_release (struct docker_response *r);

/* One request to the daemon at socket_path: method, path (with its query),
   an optional body (JSON or, with upload_fd >= 0, a tar streamed from that
   fd), and a limit.  Returns 0 with the response filled, whatever its
   status; -1 when the daemon could not be reached or answered nothing
   (naming the call, never the socket).  */
int docker_api_call (const char *socket_path, const char *method, const char *path, const char *json_body,
                     int upload_fd, long timeout_ms, struct docker_response *r, sp_error_t *err);

/* docker_api_call, then the status must be one of the expected (a 0 ends
   the list) and a JSON body is parsed strictly into *json (NULL: not
   parsed).  An unexpected status is an error with the daemon's message
   (its "message" member, made printable and cut).  */
int docker_api_json (const char *socket_path, const char *method, const char *path, const char *json_body,
                     const long *expected, long timeout_ms, struct sp_json **json, long *status,
                     sp_error_t *err);

/* Attaches to the stdin of container id (created with OpenStdin and
   StdinOnce) over a connection of its own, hijacked by the daemon (POST
   /containers/{id}/attach with `Upgrade: tcp`, answered 101), and gives
   that connection's socket in *fd.  Whatever is written to it reaches the
   container's stdin; closing it closes that stdin: the container's process
   reads end of file.  libcurl has no generic HTTP upgrade, so this one
   request is written and its status line read here; nothing of the answer
   but its status is used.  timeout_ms bounds the handshake.  */
int docker_api_attach_stdin (const char *socket_path, const char *id, long timeout_ms, int *fd,
                             sp_error_t *err);

/* Percent-encodes s for a URL's query.  Allocated.  */
char *docker_api_escape (const char *s);

#endif
