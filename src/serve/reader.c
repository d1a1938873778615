/* The request frame (or hello) of one connection, read off the slots: loop.c polls
   every connection still sending and calls this when bytes are there, so
   that a silent or slow client holds an fd and a few bytes, never a sandbox
   slot.  */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "base/bounds.h"
#include "base/cleanup.h"
#include "base/protocol.h"

#include "serve/serve.h"

void
sp_serve_arrival_init (struct sp_serve_arrival *a, int fd, uint64_t received_ns, uint64_t accepted_ns)
{
  struct ucred cred;
  socklen_t len = sizeof (cred);

  memset (a, 0, sizeof (*a));
  a->received_ns = received_ns;
  a->accepted_ns = accepted_ns;
  /* A Unix stream socket always has them; the record says null otherwise.  */
  if (getsockopt (fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0 && len == sizeof (cred))
    a->peer = (struct sp_audit_peer){
      .known = true, .uid = cred.uid, .gid = cred.gid, .pid = (uint32_t)cred.pid
    };
}

void
sp_serve_conn_init (struct sp_serve_conn *c, int fd, const struct sp_serve_arrival *arrival)
{
  memset (c, 0, sizeof (*c));
  c->fd = fd;
  c->arrival = *arrival;
  c->deadline_ns = arrival->accepted_ns + (uint64_t)SP_SERVE_REQUEST_READ_SECONDS * 1000000000ULL;
}

void
sp_serve_conn_release (struct sp_serve_conn *c)
{
  sp_closep (&c->fd);
  free (c->frame);
  c->frame = NULL;
}

/* Reads into buf[*got..want) what the socket holds now.  Returns 1 when
   buf is full, 0 when the socket has nothing more for now, -1 on EOF or an
   error.  */
static int
read_some (int fd, uint8_t *buf, size_t *got, size_t want, sp_error_t *err)
{
  while (*got < want)
    {
      ssize_t n = recv (fd, buf + *got, want - *got, MSG_DONTWAIT);

      if (n == 0)
        return sp_make_error (err, 0, "the client closed after %zu of %zu bytes", *got, want);
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
        return 0;
      if (n < 0)
        return sp_make_error (err, errno, "read the request");
      *got += (size_t)n;
    }
  return 1;
}

int
sp_serve_conn_read (struct sp_serve_conn *c, sp_error_t *err)
{
  uint8_t extra;
  int ret;

  /* The header first: it bounds the body before anything is allocated.  */
  if (c->frame == NULL)
    {
      size_t body_len;

      ret = read_some (c->fd, c->hdr, &c->got, sizeof (c->hdr), err);
      if (ret <= 0)
        return ret;
      /* A hello is read as a frame like any other, with its own bound (an
         empty body); every other kind is refused as a request would be.  A
         request's bound is its version's (v1's, or v2's with a schema), so
         nothing above SP_REQUEST_ANY_BODY_MAX_BYTES is ever allocated.  */
      if (sp_frame_header_decode (c->hdr, sp_frame_client_kind (c->hdr), &body_len, err) < 0)
        return -1;
      c->len = sizeof (c->hdr) + body_len;
      c->frame = malloc (c->len);
      if (c->frame == NULL)
        return sp_make_error (err, errno, "allocate the request");
      memcpy (c->frame, c->hdr, sizeof (c->hdr));
    }
  ret = read_some (c->fd, c->frame, &c->got, c->len, err);
  if (ret <= 0)
    return ret;
  if (recv (c->fd, &extra, 1, MSG_DONTWAIT | MSG_PEEK) > 0)
    return sp_make_error (err, 0, "bytes follow the request frame");
  return 1;
}
