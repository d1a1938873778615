/* The Docker Engine API over a Unix socket: see docker_api.h.  */
#define _GNU_SOURCE
#include "runtimes/docker_api.h"

#include <curl/curl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "base/cause.h"
#include "base/cleanup.h"
#include "os/curl_util.h"
#include "text/json_text.h"

/* The host part of every URL: only the socket decides where a call goes.  */
#define URL_BASE "http://docker"

struct body
{
  char *buf;
  size_t len;
  bool overflow;
};

static size_t
on_body (char *data, size_t size, size_t nmemb, void *userp)
{
  struct body *b = userp;
  size_t n = size * nmemb;
  char *grown;

  if (b->len + n > DOCKER_API_RESPONSE_MAX)
    {
      b->overflow = true;
      return 0;
    }
  grown = realloc (b->buf, b->len + n + 1);
  if (grown == NULL)
    return 0;
  b->buf = grown;
  memcpy (b->buf + b->len, data, n);
  b->len += n;
  b->buf[b->len] = '\0';
  return n;
}

static size_t
on_upload (char *buf, size_t size, size_t nitems, void *userp)
{
  int fd = *(int *)userp;
  ssize_t n = TEMP_FAILURE_RETRY (read (fd, buf, size * nitems));

  return n < 0 ? CURL_READFUNC_ABORT : (size_t)n;
}

void
docker_response_release (struct docker_response *r)
{
  free (r->body);
  r->body = NULL;
  r->body_len = 0;
}

int
docker_api_call (const char *socket_path, const char *method, const char *path, const char *json_body,
                 int upload_fd, long timeout_ms, struct docker_response *r, sp_error_t *err)
{
  cleanup_curl CURL *curl = curl_easy_init ();
  cleanup_curl_slist struct curl_slist *headers = NULL;
  cleanup_free char *url = NULL;
  struct body b = { 0 };
  char errbuf[CURL_ERROR_SIZE] = "";
  CURLcode rc;

  memset (r, 0, sizeof (*r));
  if (curl == NULL || asprintf (&url, "%s%s", URL_BASE, path) < 0)
    {
      url = NULL;
      return sp_make_error (err, ENOMEM, "Docker API: allocate");
    }
  SP_CURL_SETOPT (curl, CURLOPT_ERRORBUFFER, errbuf, err);
  SP_CURL_SETOPT (curl, CURLOPT_NOSIGNAL, 1L, err);
  SP_CURL_SETOPT (curl, CURLOPT_UNIX_SOCKET_PATH, socket_path, err);
  SP_CURL_SETOPT (curl, CURLOPT_URL, url, err);
  SP_CURL_SETOPT (curl, CURLOPT_PROTOCOLS_STR, "http", err);
  SP_CURL_SETOPT (curl, CURLOPT_FOLLOWLOCATION, 0L, err);
  SP_CURL_SETOPT (curl, CURLOPT_PROXY, "", err);
  SP_CURL_SETOPT (curl, CURLOPT_NOPROXY, "*", err);
  SP_CURL_SETOPT (curl, CURLOPT_NETRC, (long)CURL_NETRC_IGNORED, err);
  SP_CURL_SETOPT (curl, CURLOPT_TIMEOUT_MS, timeout_ms > 0 ? timeout_ms : (long)DOCKER_API_TIMEOUT_MS, err);
  SP_CURL_SETOPT (curl, CURLOPT_CUSTOMREQUEST, method, err);
  SP_CURL_SETOPT (curl, CURLOPT_WRITEFUNCTION, on_body, err);
  SP_CURL_SETOPT (curl, CURLOPT_WRITEDATA, &b, err);
  if (upload_fd >= 0)
    {
      headers = curl_slist_append (headers, "Content-Type: application/x-tar");
      SP_CURL_SETOPT (curl, CURLOPT_UPLOAD, 1L, err);
      SP_CURL_SETOPT (curl, CURLOPT_READFUNCTION, on_upload, err);
      SP_CURL_SETOPT (curl, CURLOPT_READDATA, &upload_fd, err);
      /* UPLOAD means PUT to libcurl; the method above still wins.  */
    }
  else if (json_body != NULL)
    {
      headers = curl_slist_append (headers, "Content-Type: application/json");
      SP_CURL_SETOPT (curl, CURLOPT_POSTFIELDS, json_body, err);
      SP_CURL_SETOPT (curl, CURLOPT_POSTFIELDSIZE, (long)strlen (json_body), err);
    }
  else if (strcmp (method, "POST") == 0)
    {
      SP_CURL_SETOPT (curl, CURLOPT_POSTFIELDS, "", err);
      SP_CURL_SETOPT (curl, CURLOPT_POSTFIELDSIZE, 0L, err);
    }
  if (headers != NULL)
    SP_CURL_SETOPT (curl, CURLOPT_HTTPHEADER, headers, err);

  rc = curl_easy_perform (curl);
  if (rc != CURLE_OK)
    {
      free (b.buf);
      if (b.overflow)
        return sp_make_error (err, 0, "Docker API %s %.*s: the answer is over %u bytes", method,
                              (int)strcspn (path, "?"), path, DOCKER_API_RESPONSE_MAX);
      /* errbuf may name the socket's path: only libcurl's code is shown.  */
      sp_make_error (err, 0, "Docker API %s %.*s: the daemon could not be reached or did not answer (%s)",
                     method, (int)strcspn (path, "?"), path, curl_easy_strerror (rc));
      /* The call's own limit ran out (a wait's limit is the probe's
         timeout); nothing at all reached the daemon; or it broke off.  */
      return sp_error_set_cause (err, rc == CURLE_OPERATION_TIMEDOUT ? SP_CAUSE_TIMEOUT
                                      : rc == CURLE_COULDNT_CONNECT  ? SP_CAUSE_ENVIRONMENT
                                                                     : SP_CAUSE_RUNTIME);
    }
  curl_easy_getinfo (curl, CURLINFO_RESPONSE_CODE, &r->status);
  r->body = b.buf ? b.buf : strdup ("");
  r->body_len = b.len;
  if (r->body == NULL)
    return sp_make_error (err, ENOMEM, "Docker API: allocate");
  return 0;
}

int
docker_api_json (const char *socket_path, const char *method, const char *path, const char *json_body,
                 const long *expected, long timeout_ms, struct sp_json **json, long *status, sp_error_t *err)
{
  struct docker_response r;
  bool ok = false;
  sp_error_t why = NULL;

  if (json)
    *json = NULL;
  if (docker_api_call (socket_path, method, path, json_body, -1, timeout_ms, &r, err) < 0)
    return -1;
  if (status)
    *status = r.status;
  for (size_t i = 0; expected[i] != 0; i++)
    ok = ok || expected[i] == r.status;
  /* No byte of an answer reaches an error (a reason in the audit log,
     serve's stderr): not the daemon's own "message", not a key the JSON
     parser would name in a path or a duplicate.  The text check's words
     name positions only.  */
  if (!ok)
    {
      docker_response_release (&r);
      return sp_make_error (err, 0, "Docker API %s %.*s: status %ld", method, (int)strcspn (path, "?"), path,
                            r.status);
    }
  if (json != NULL && r.body_len > 0)
    {
      if (sp_json_text_check (r.body, r.body_len, 64, err) < 0)
        {
          docker_response_release (&r);
          return sp_error_wrap (err, "Docker API %s %.*s: its answer", method, (int)strcspn (path, "?"),
                                path);
        }
      if (sp_json_parse (r.body, r.body_len, 64, json, &why) < 0)
        {
          size_t len = r.body_len;

          sp_error_release (&why);
          docker_response_release (&r);
          return sp_make_error (err, 0,
                                "Docker API %s %.*s: its answer (%zu bytes) is invalid JSON (a grammar "
                                "error or a duplicate key)",
                                method, (int)strcspn (path, "?"), path, len);
        }
    }
  docker_response_release (&r);
  return 0;
}

char *
docker_api_escape (const char *s)
{
  char *out = malloc (strlen (s) * 3 + 1);
  size_t n = 0;

  if (out == NULL)
    return NULL;
  for (const unsigned char *p = (const unsigned char *)s; *p; p++)
    if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '-'
        || *p == '_' || *p == '.' || *p == '~')
      out[n++] = (char)*p;
    else
      n += (size_t)sprintf (out + n, "%%%02X", *p);
  out[n] = '\0';
  return out;
}

/* The handshake's answer: a status line and headers, then nothing, since
   the stream carries only what this side writes.  */
#define ATTACH_RESPONSE_MAX 4096

int
docker_api_attach_stdin (const char *socket_path, const char *id, long timeout_ms, int *fd_out,
                         sp_error_t *err)
{
  struct sockaddr_un addr = { .sun_family = AF_UNIX };
  struct timeval tv = { .tv_sec = timeout_ms / 1000, .tv_usec = (timeout_ms % 1000) * 1000 };
  cleanup_close int fd = -1;
  cleanup_free char *request = NULL;
  char response[ATTACH_RESPONSE_MAX + 1];
  size_t got = 0;
  int len;

  *fd_out = -1;
  if (strlen (socket_path) >= sizeof (addr.sun_path))
    return sp_make_error (err, 0, "attach: the daemon's socket path is too long");
  memcpy (addr.sun_path, socket_path, strlen (socket_path) + 1);
  len = asprintf (&request,
                  "POST " DOCKER_API_PREFIX "/containers/%s/attach?stream=1&stdin=1 HTTP/1.1\r\n"
                  "Host: docker\r\nConnection: Upgrade\r\nUpgrade: tcp\r\nContent-Length: 0\r\n\r\n",
                  id);
  if (len < 0)
    {
      request = NULL;
      return sp_make_error (err, ENOMEM, "allocate");
    }
  fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return sp_make_error (err, errno, "attach: socket");
  if (setsockopt (fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof (tv)) < 0
      || setsockopt (fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof (tv)) < 0)
    return sp_make_error (err, errno, "attach: socket timeouts");
  if (connect (fd, (struct sockaddr *)&addr, sizeof (addr)) < 0)
    {
      sp_make_error (err, errno, "attach: connect to the daemon");
      sp_error_set_cause (err, SP_CAUSE_ENVIRONMENT);
      return -1;
    }
  if (send (fd, request, (size_t)len, MSG_NOSIGNAL) != len)
    return sp_make_error (err, errno, "attach: send the request");
  /* Up to the blank line that ends the headers.  */
  while (got < ATTACH_RESPONSE_MAX)
    {
      ssize_t n = TEMP_FAILURE_RETRY (recv (fd, response + got, ATTACH_RESPONSE_MAX - got, 0));

      if (n < 0)
        {
          sp_make_error (err, errno, "attach: read the answer");
          if (errno == EAGAIN || errno == EWOULDBLOCK)
            sp_error_set_cause (err, SP_CAUSE_TIMEOUT);
          return -1;
        }
      if (n == 0)
        return sp_make_error (err, 0, "attach: the daemon closed the connection");
      got += (size_t)n;
      response[got] = '\0';
      if (strstr (response, "\r\n\r\n") != NULL)
        break;
    }
  if (strstr (response, "\r\n\r\n") == NULL)
    return sp_make_error (err, 0, "attach: the answer's headers are too long");
  /* 101: the connection is now the container's stdin.  Anything else
     (404, 409, a 200 without the upgrade) is refused.  */
  if (strncmp (response, "HTTP/1.1 101 ", 13) != 0)
    {
      size_t line = strcspn (response, "\r\n");

      /* Only its status line, cut and made printable: it goes to the audit.  */
      line = line > 80 ? 80 : line;
      for (size_t i = 0; i < line; i++)
        if (response[i] < 0x20 || response[i] > 0x7e)
          response[i] = '?';
      return sp_make_error (err, 0, "attach: the daemon answered `%.*s`", (int)line, response);
    }
  *fd_out = get_and_reset_fd (&fd);
  return 0;
}
