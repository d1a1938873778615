/* The GitHub tarball source: see src/seed/github_fetch.h and
   docs/staging.md, "The GitHub tarball source".  */
#define _GNU_SOURCE
#include "seed/github_fetch.h"

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "base/bounds.h"
#include "base/cleanup.h"
#include "base/repo_name.h"
#include "build_config.h"
#include "os/curl_util.h"
#include "os/progress.h"

#include "seed/tarball.h"

#define USER_AGENT  "sealed-probe/" PACKAGE_VERSION
#define API_VERSION "X-GitHub-Api-Version: 2022-11-28"
#define AUTH_PREFIX "Authorization: Bearer "
/* A host named in a message: printable ASCII, at most this many bytes.  */
#define HOST_SHOWN_MAX 100

static void
sp_curl_urlp (CURLU **u)
{
  if (*u != NULL)
    curl_url_cleanup (*u);
  *u = NULL;
}
#define cleanup_curl_url __attribute__ ((cleanup (sp_curl_urlp)))

static void
sp_curl_freep (char **p)
{
  if (*p != NULL)
    curl_free (*p);
  *p = NULL;
}
#define cleanup_curl_free __attribute__ ((cleanup (sp_curl_freep)))

static void
sp_secret_freep (char **p)
{
  if (*p != NULL)
    {
      explicit_bzero (*p, strlen (*p));
      free (*p);
    }
  *p = NULL;
}
#define cleanup_secret __attribute__ ((cleanup (sp_secret_freep)))

static void
sp_curl_globalp (bool *initialized)
{
  if (*initialized)
    curl_global_cleanup ();
  *initialized = false;
}

/* Where a response body goes.  Only a 200's body counts; any other status's
   body is read and dropped, up to SP_GITHUB_DISCARD_BODY_MAX.  */
struct sink
{
  CURL *curl;
  int fd;    /* the tarball's file, or -1: into buf */
  char *buf; /* limit + 1 bytes when fd is -1 */
  uint64_t limit;
  uint64_t kept;
  uint64_t dropped;
  bool over_limit;
  int write_errno;
  struct sp_progress *progress;   /* the tarball's bytes so far, of Content-Length when sent */
  const struct sp_progress *stop; /* whether a signal asked the transfer to stop (progress.h) */
};

static size_t
on_body (char *data, size_t size, size_t nmemb, void *cookie)
{
  struct sink *s = cookie;
  size_t n = size * nmemb;
  long status = 0;

  /* 0 makes libcurl give up: an interrupted stage stops within one block.  */
  if (sp_progress_stopped (s->stop))
    return 0;
  if (curl_easy_getinfo (s->curl, CURLINFO_RESPONSE_CODE, &status) != CURLE_OK || status != 200)
    {
      s->dropped += n;
      return s->dropped > SP_GITHUB_DISCARD_BODY_MAX ? 0 : n;
    }
  if (n > s->limit - s->kept)
    {
      s->over_limit = true;
      return 0;
    }
  if (s->fd < 0)
    memcpy (s->buf + s->kept, data, n);
  else
    for (size_t done = 0; done < n;)
      {
        ssize_t w = TEMP_FAILURE_RETRY (write (s->fd, data + done, n - done));

        if (w <= 0)
          {
            s->write_errno = w < 0 ? errno : EIO;
            return 0;
          }
        done += (size_t)w;
      }
  s->kept += n;
  if (s->progress != NULL)
    {
      curl_off_t total = -1;

      if (curl_easy_getinfo (s->curl, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &total) != CURLE_OK || total < 0)
        total = 0;
      sp_progress_set (s->progress, 0, s->kept, (uint64_t)total);
    }
  return n;
}

/* libcurl calls this about once a second even while no byte arrives
   (connecting, a stalled server), so that a stop is seen without data, and
   the line shows the download waiting rather than the step before it.  */
static int
on_transfer (void *cookie, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal, curl_off_t ulnow)
{
  struct sink *s = cookie;

  (void)dltotal, (void)dlnow, (void)ultotal, (void)ulnow;
  sp_progress_tick (s->progress);
  return sp_progress_stopped (s->stop) ? 1 : 0;
}

/* Everything every request gets: https only, verified TLS, no redirects
   followed, no proxy, netrc or cookies from anywhere, bounded time and size.  */
static int
setup_request (CURL *curl, const struct sp_github_source *source, const char *url, struct curl_slist *headers,
               struct sink *sink, char errbuf[CURL_ERROR_SIZE], sp_error_t *err)
{
  curl_off_t max_size
      = (curl_off_t)(sink->limit > SP_GITHUB_DISCARD_BODY_MAX ? sink->limit : SP_GITHUB_DISCARD_BODY_MAX);

  SP_CURL_SETOPT (curl, CURLOPT_ERRORBUFFER, errbuf, err);
  SP_CURL_SETOPT (curl, CURLOPT_VERBOSE, 0L, err);
  SP_CURL_SETOPT (curl, CURLOPT_NOSIGNAL, 1L, err);
  SP_CURL_SETOPT (curl, CURLOPT_URL, url, err);
  SP_CURL_SETOPT (curl, CURLOPT_PROTOCOLS_STR, "https", err);
  SP_CURL_SETOPT (curl, CURLOPT_REDIR_PROTOCOLS_STR, "https", err);
  SP_CURL_SETOPT (curl, CURLOPT_FOLLOWLOCATION, 0L, err);
  SP_CURL_SETOPT (curl, CURLOPT_MAXREDIRS, 0L, err);
  SP_CURL_SETOPT (curl, CURLOPT_SSL_VERIFYPEER, 1L, err);
  SP_CURL_SETOPT (curl, CURLOPT_SSL_VERIFYHOST, 2L, err);
  SP_CURL_SETOPT (curl, CURLOPT_SSLVERSION, (long)CURL_SSLVERSION_TLSv1_2, err);
  if (source->ca_file != NULL)
    SP_CURL_SETOPT (curl, CURLOPT_CAINFO, source->ca_file, err);
  SP_CURL_SETOPT (curl, CURLOPT_PROXY, "", err);
  SP_CURL_SETOPT (curl, CURLOPT_NOPROXY, "*", err);
  SP_CURL_SETOPT (curl, CURLOPT_NETRC, (long)CURL_NETRC_IGNORED, err);
  SP_CURL_SETOPT (curl, CURLOPT_COOKIEFILE, NULL, err);
  SP_CURL_SETOPT (curl, CURLOPT_CONNECTTIMEOUT, (long)SP_GITHUB_CONNECT_TIMEOUT_SECONDS, err);
  SP_CURL_SETOPT (curl, CURLOPT_LOW_SPEED_LIMIT, (long)SP_GITHUB_LOW_SPEED_BYTES, err);
  SP_CURL_SETOPT (curl, CURLOPT_LOW_SPEED_TIME, (long)SP_GITHUB_LOW_SPEED_SECONDS, err);
  SP_CURL_SETOPT (curl, CURLOPT_TIMEOUT, (long)SP_GITHUB_TIMEOUT_SECONDS, err);
  SP_CURL_SETOPT (curl, CURLOPT_MAXFILESIZE_LARGE, max_size, err);
  SP_CURL_SETOPT (curl, CURLOPT_USERAGENT, USER_AGENT, err);
  SP_CURL_SETOPT (curl, CURLOPT_HTTPHEADER, headers, err);
  SP_CURL_SETOPT (curl, CURLOPT_WRITEFUNCTION, on_body, err);
  SP_CURL_SETOPT (curl, CURLOPT_WRITEDATA, sink, err);
  SP_CURL_SETOPT (curl, CURLOPT_XFERINFOFUNCTION, on_transfer, err);
  SP_CURL_SETOPT (curl, CURLOPT_XFERINFODATA, sink, err);
  SP_CURL_SETOPT (curl, CURLOPT_NOPROGRESS, 0L, err);
  return 0;
}

/* One GET.  *status is the HTTP status; for a 3xx, *location is the raw
   Location header (malloc'd, NULL when there is none).  */
static int
http_get (const struct sp_github_source *source, const char *url, const char *auth, const char *accept,
          struct sink *sink, long *status, char **location, sp_error_t *err)
{
  cleanup_curl CURL *curl = curl_easy_init ();
  cleanup_curl_slist struct curl_slist *headers = NULL;
  char errbuf[CURL_ERROR_SIZE] = "";
  const char *lines[] = { accept, API_VERSION, auth };
  CURLcode rc;

  *status = 0;
  *location = NULL;
  if (curl == NULL)
    return sp_make_error (err, ENOMEM, "set up libcurl");
  for (size_t i = 0; i < sizeof (lines) / sizeof (lines[0]); i++)
    {
      struct curl_slist *more;

      if (lines[i] == NULL)
        continue;
      more = curl_slist_append (headers, lines[i]);
      if (more == NULL)
        return sp_make_error (err, ENOMEM, "build the request headers");
      headers = more;
    }
  sink->curl = curl;
  if (setup_request (curl, source, url, headers, sink, errbuf, err) < 0)
    return -1;

  rc = curl_easy_perform (curl);
  curl_easy_getinfo (curl, CURLINFO_RESPONSE_CODE, status);
  if (sp_progress_check (sink->stop, err) < 0)
    return -1;
  if (sink->over_limit || rc == CURLE_FILESIZE_EXCEEDED)
    return sp_make_error (err, 0, "the response is bigger than %llu bytes", (unsigned long long)sink->limit);
  if (sink->write_errno != 0)
    return sp_make_error (err, sink->write_errno, "write the response");
  /* A non-200 whose body was cut short is still reported by its status.  */
  if (rc != CURLE_OK && !(rc == CURLE_WRITE_ERROR && *status != 200 && *status != 0))
    return sp_make_error (err, 0, "%s%s%s", curl_easy_strerror (rc), errbuf[0] ? ": " : "", errbuf);

  if (*status >= 300 && *status < 400)
    {
      struct curl_header *h = NULL;
      CURLHcode hc = curl_easy_header (curl, "Location", 0, CURLH_HEADER, -1, &h);

      if (hc == CURLHE_OK && h != NULL && h->value != NULL)
        {
          if (strlen (h->value) > SP_GITHUB_URL_MAX)
            return sp_make_error (err, 0, "HTTP %ld with a Location longer than %d bytes", *status,
                                  SP_GITHUB_URL_MAX);
          *location = strdup (h->value);
          if (*location == NULL)
            return sp_make_error (err, errno, "copy the Location header");
        }
      else if (hc == CURLHE_NOT_BUILT_IN)
        return sp_make_error (err, 0, "this libcurl lacks the header API (curl_easy_header)");
    }
  return 0;
}

static int
status_error (long status, sp_error_t *err)
{
  switch (status)
    {
    case 401:
    case 403:
      return sp_make_error (err, 0, "HTTP %ld: check the token's access", status);
    case 404:
      return sp_make_error (err, 0, "HTTP 404: no such repository or ref, or the token can't see it");
    case 422:
      return sp_make_error (err, 0, "HTTP 422: the ref names no commit");
    case 301:
    case 302:
    case 307:
    case 308:
      return sp_make_error (err, 0, "HTTP %ld: the API redirected (a renamed repository?); not followed",
                            status);
    default:
      return sp_make_error (err, 0, "HTTP %ld", status);
    }
}

static const char *
shown_host (const char *host, char buf[HOST_SHOWN_MAX + 4])
{
  size_t i;

  for (i = 0; host[i] != '\0' && i < HOST_SHOWN_MAX; i++)
    buf[i] = (unsigned char)host[i] > 0x20 && (unsigned char)host[i] < 0x7f ? host[i] : '?';
  if (host[i] != '\0')
    {
      memcpy (buf + i, "...", 3);
      i += 3;
    }
  buf[i] = '\0';
  return buf;
}

/* The redirect rule: Location, resolved against the request's URL, must be
   https, carry no credentials, and name exactly codeload_host (host, or
   host:port when it has a port).  The URL is never shown: a codeload URL for
   a private repository carries a short-lived token of its own.  */
static int
check_redirect (const char *from, const char *location, const char *codeload_host, char **url,
                sp_error_t *err)
{
  cleanup_curl_url CURLU *u = curl_url ();
  cleanup_curl_free char *scheme = NULL;
  cleanup_curl_free char *host = NULL;
  cleanup_curl_free char *port = NULL;
  cleanup_curl_free char *user = NULL;
  cleanup_curl_free char *password = NULL;
  cleanup_curl_free char *full = NULL;
  cleanup_free char *authority = NULL;
  char buf[HOST_SHOWN_MAX + 4];
  CURLUcode rc;

  if (u == NULL)
    return sp_make_error (err, ENOMEM, "set up libcurl's URL parser");
  if (curl_url_set (u, CURLUPART_URL, from, 0) != CURLUE_OK
      || curl_url_set (u, CURLUPART_URL, location, CURLU_NON_SUPPORT_SCHEME) != CURLUE_OK)
    return sp_make_error (err, 0, "the redirect's Location is not a valid URL");
  if (curl_url_get (u, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK || strcmp (scheme, "https") != 0)
    return sp_make_error (err, 0, "the redirect is not to an https URL");
  if (curl_url_get (u, CURLUPART_USER, &user, 0) == CURLUE_OK
      || curl_url_get (u, CURLUPART_PASSWORD, &password, 0) == CURLUE_OK)
    return sp_make_error (err, 0, "the redirect's URL carries credentials");
  if (curl_url_get (u, CURLUPART_HOST, &host, 0) != CURLUE_OK)
    return sp_make_error (err, 0, "the redirect names no host");
  rc = curl_url_get (u, CURLUPART_PORT, &port, 0);
  if (rc != CURLUE_OK && rc != CURLUE_NO_PORT)
    return sp_make_error (err, 0, "the redirect's port is not valid");
  if (asprintf (&authority, "%s%s%s", host, port != NULL ? ":" : "", port != NULL ? port : "") < 0)
    {
      authority = NULL;
      return sp_make_error (err, ENOMEM, "compare the redirect's host");
    }
  if (strcmp (authority, codeload_host) != 0)
    return sp_make_error (err, 0, "the redirect goes to `%s`, not to the codeload host `%s`",
                          shown_host (authority, buf), codeload_host);
  if (curl_url_get (u, CURLUPART_URL, &full, 0) != CURLUE_OK)
    return sp_make_error (err, 0, "the redirect's Location is not a valid URL");
  *url = strdup (full);
  if (*url == NULL)
    return sp_make_error (err, errno, "copy the redirect's URL");
  return 0;
}

/* api_base: an https URL with a host, no credentials, query or fragment.  */
static int
check_api_base (const char *api_base, char **base, sp_error_t *err)
{
  cleanup_curl_url CURLU *u = curl_url ();
  cleanup_curl_free char *part = NULL;
  size_t len;

  if (u == NULL)
    return sp_make_error (err, ENOMEM, "set up libcurl's URL parser");
  if (api_base == NULL || api_base[0] == '\0' || strlen (api_base) > SP_GITHUB_URL_MAX)
    return sp_make_error (err, 0, "api_base: missing or longer than %d bytes", SP_GITHUB_URL_MAX);
  if (curl_url_set (u, CURLUPART_URL, api_base, 0) != CURLUE_OK)
    return sp_make_error (err, 0, "api_base: not a valid URL");
  if (curl_url_get (u, CURLUPART_SCHEME, &part, 0) != CURLUE_OK || strcmp (part, "https") != 0
      || strncmp (api_base, "https://", 8) != 0)
    return sp_make_error (err, 0, "api_base: must be an https:// URL");
  sp_curl_freep (&part);
  if (curl_url_get (u, CURLUPART_USER, &part, 0) == CURLUE_OK
      || curl_url_get (u, CURLUPART_PASSWORD, &part, 0) == CURLUE_OK)
    return sp_make_error (err, 0, "api_base: must not carry credentials");
  if (curl_url_get (u, CURLUPART_QUERY, &part, 0) == CURLUE_OK
      || curl_url_get (u, CURLUPART_FRAGMENT, &part, 0) == CURLUE_OK)
    return sp_make_error (err, 0, "api_base: must not carry a query or fragment");
  len = strlen (api_base);
  while (len > 8 && api_base[len - 1] == '/')
    len--;
  *base = strndup (api_base, len);
  if (*base == NULL)
    return sp_make_error (err, errno, "copy api_base");
  return 0;
}

/* A ref goes into a URL path: only the characters branch and tag names
   commonly use, and nothing that would change the path's meaning.  */
static int
check_ref (const char *ref, sp_error_t *err)
{
  size_t len = ref != NULL ? strlen (ref) : 0;

  if (len == 0 || len > SP_GITHUB_REF_MAX)
    return sp_make_error (err, 0, "ref: empty or longer than %d bytes", SP_GITHUB_REF_MAX);
  for (size_t i = 0; i < len; i++)
    {
      char c = ref[i];

      if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_'
            || c == '-' || c == '/' || c == '+'))
        return sp_make_error (err, 0, "ref: only letters, digits and `._-/+` are accepted");
    }
  if (ref[0] == '/' || ref[0] == '-' || ref[len - 1] == '/' || ref[len - 1] == '.'
      || strstr (ref, "//") != NULL || strstr (ref, "..") != NULL || strstr (ref, "/.") != NULL
      || ref[0] == '.')
    return sp_make_error (err, 0, "ref: not a valid branch, tag or commit name");
  return 0;
}

/* The whole body must be one commit id: 40 or 64 lowercase hex digits.  */
static int
parse_commit (const char *body, size_t len, char commit[SP_COMMIT_HEX_MAX + 1], sp_error_t *err)
{
  if (len != 40 && len != 64)
    return sp_make_error (err, 0, "the API's answer is not a commit id (%zu bytes)", len);
  for (size_t i = 0; i < len; i++)
    if (!((body[i] >= '0' && body[i] <= '9') || (body[i] >= 'a' && body[i] <= 'f')))
      return sp_make_error (err, 0, "the API's answer is not a commit id (not lowercase hex)");
  memcpy (commit, body, len);
  commit[len] = '\0';
  return 0;
}

static int
check_token (const char *token, sp_error_t *err)
{
  size_t len = strlen (token);

  /* Never echoed: the message says what is wrong, not what it is.  */
  if (len == 0 || len > SP_GITHUB_TOKEN_MAX)
    return sp_make_error (err, 0, "the token is empty or longer than %d bytes", SP_GITHUB_TOKEN_MAX);
  for (size_t i = 0; i < len; i++)
    if ((unsigned char)token[i] <= 0x20 || (unsigned char)token[i] >= 0x7f)
      return sp_make_error (err, 0, "the token holds a space, control or non-ASCII byte");
  return 0;
}

/* An anonymous file for the tarball: O_TMPFILE beside the destination (the
   same filesystem the seed lands on), or a memfd where that has none.  */
static int
open_scratch (int dst_dirfd, sp_error_t *err)
{
  cleanup_close int parent = openat (dst_dirfd, "..", O_PATH | O_DIRECTORY | O_CLOEXEC);
  int fd = -1;

  if (parent >= 0)
    fd = openat (parent, ".", O_TMPFILE | O_RDWR | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0)
    fd = memfd_create ("sealed-probe-tarball", MFD_CLOEXEC);
  if (fd < 0)
    return sp_make_error (err, errno, "create a scratch file for the tarball");
  return fd;
}

static int
resolve_commit (const struct sp_github_source *source, const char *base, const char *repo, const char *auth,
                char commit[SP_COMMIT_HEX_MAX + 1], sp_error_t *err)
{
  char body[SP_GITHUB_COMMIT_BODY_MAX + 1];
  struct sink sink = { .fd = -1, .buf = body, .limit = SP_GITHUB_COMMIT_BODY_MAX, .stop = source->progress };
  cleanup_free char *url = NULL;
  cleanup_free char *location = NULL;
  long status;

  if (asprintf (&url, "%s/repos/%s/commits/%s", base, repo, source->ref) < 0)
    {
      url = NULL;
      return sp_make_error (err, ENOMEM, "build the URL");
    }
  if (http_get (source, url, auth, "Accept: application/vnd.github.sha", &sink, &status, &location, err) < 0)
    return -1;
  if (status != 200)
    return status_error (status, err);
  return parse_commit (body, (size_t)sink.kept, commit, err);
}

static int
download_tarball (const struct sp_github_source *source, const char *base, const char *repo, const char *auth,
                  const char *commit, int fd, sp_error_t *err)
{
  struct sink sink = {
    .fd = fd, .limit = source->max_tarball_bytes, .progress = source->progress, .stop = source->progress
  };
  cleanup_free char *url = NULL;
  cleanup_free char *location = NULL;
  cleanup_free char *next = NULL;
  long status;

  if (asprintf (&url, "%s/repos/%s/tarball/%s", base, repo, commit) < 0)
    {
      url = NULL;
      return sp_make_error (err, ENOMEM, "build the URL");
    }
  if (http_get (source, url, auth, "Accept: application/vnd.github+json", &sink, &status, &location, err) < 0)
    return -1;
  if (status == 200)
    return 0;
  if (status != 302 && status != 301 && status != 303 && status != 307 && status != 308)
    return status_error (status, err);
  if (location == NULL)
    return sp_make_error (err, 0, "HTTP %ld without a Location", status);
  if (check_redirect (url, location, source->codeload_host, &next, err) < 0)
    return -1;

  /* The codeload host never sees the token: no Authorization header.  */
  sink = (struct sink){
    .fd = fd, .limit = source->max_tarball_bytes, .progress = source->progress, .stop = source->progress
  };
  free (location);
  location = NULL;
  if (http_get (source, next, NULL, NULL, &sink, &status, &location, err) < 0)
    return sp_error_wrap (err, "from the codeload host");
  if (status >= 300 && status < 400)
    return sp_make_error (err, 0, "from the codeload host: HTTP %ld: more than %d redirect", status,
                          SP_GITHUB_MAX_REDIRECTS);
  if (status != 200)
    return sp_make_error (err, 0, "from the codeload host: HTTP %ld", status);
  return 0;
}

static int
check_source (const struct sp_github_source *source, const char *repo, sp_error_t *err)
{
  if (source == NULL || repo == NULL)
    return sp_make_error (err, EINVAL, "no source or repository");
  if (sp_repo_name_check (repo, strlen (repo), err) < 0)
    return sp_error_wrap (err, "repository");
  if (source->codeload_host == NULL || source->codeload_host[0] == '\0'
      || strlen (source->codeload_host) > HOST_SHOWN_MAX
      || strpbrk (source->codeload_host, "/@?#\\ ") != NULL)
    return sp_make_error (err, 0, "codeload_host: must be a host or host:port");
  if (check_ref (source->ref, err) < 0)
    return -1;
  if (source->token != NULL && check_token (source->token, err) < 0)
    return -1;
  if (source->max_tarball_bytes == 0 || source->max_entries == 0 || source->max_tree_bytes == 0)
    return sp_make_error (err, 0, "the tarball, entry and tree limits must be positive");
  return 0;
}

int
sp_github_fetch (const struct sp_github_source *source, const char *repo, int dst_dirfd,
                 char commit[SP_COMMIT_HEX_MAX + 1], sp_error_t *err)
{
  __attribute__ ((cleanup (sp_curl_globalp))) bool curl_ready = false;
  cleanup_secret char *auth = NULL;
  cleanup_free char *base = NULL;
  cleanup_close int scratch = -1;
  char resolved[SP_COMMIT_HEX_MAX + 1];
  struct sp_tarball_limits limits;

  commit[0] = '\0';
  /* The repository is quoted only once it is known to be a plain name.  */
  if (check_source (source, repo, err) < 0)
    return sp_error_wrap (err, "github source");
  if (check_api_base (source->api_base, &base, err) < 0)
    return sp_error_wrap (err, "github `%s`", repo);
  limits = (struct sp_tarball_limits){ .max_entries = source->max_entries,
                                       .max_tree_bytes = source->max_tree_bytes,
                                       .progress = source->progress };

  if (curl_global_init (CURL_GLOBAL_DEFAULT) != CURLE_OK)
    return sp_make_error (err, 0, "github `%s`: initialize libcurl", repo);
  curl_ready = true;

  if (source->token != NULL)
    {
      size_t len = strlen (AUTH_PREFIX) + strlen (source->token) + 1;

      auth = malloc (len);
      if (auth == NULL)
        return sp_make_error (err, errno, "github `%s`: build the Authorization header", repo);
      snprintf (auth, len, "%s%s", AUTH_PREFIX, source->token);
    }

  sp_progress_phase (source->progress, "resolve the ref", SP_PROGRESS_STEP, 0);
  if (resolve_commit (source, base, repo, auth, resolved, err) < 0)
    return sp_error_wrap (err, "github `%s`: resolve ref `%s`", repo, source->ref);

  scratch = open_scratch (dst_dirfd, err);
  if (scratch < 0)
    return sp_error_wrap (err, "github `%s`", repo);
  sp_progress_phase (source->progress, "download", SP_PROGRESS_DOWNLOAD, 0);
  if (download_tarball (source, base, repo, auth, resolved, scratch, err) < 0)
    return sp_error_wrap (err, "github `%s`: download the tarball of %s", repo, resolved);
  sp_secret_freep (&auth);

  if (sp_tarball_extract (scratch, dst_dirfd, &limits, err) < 0)
    return sp_error_wrap (err, "github `%s`: extract the tarball of %s", repo, resolved);
  memcpy (commit, resolved, strlen (resolved) + 1);
  return 0;
}
