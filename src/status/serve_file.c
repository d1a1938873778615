/* See src/status/serve_file.h.  */
#define _GNU_SOURCE
#include "status/serve_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "os/fileio.h"
#include "serve/serve.h"
#include "text/json.h"

static const char *
string_member (const struct sp_json *obj, const char *key, size_t max)
{
  const struct sp_json *v = sp_json_object_get (obj, key);

  if (v == NULL || v->type != SP_JSON_STRING || strlen (v->u.string.data) != v->u.string.len
      || v->u.string.len >= max)
    return NULL;
  return v->u.string.data;
}

static int
u64_member (const struct sp_json *obj, const char *key, bool nullable, uint64_t *out)
{
  const struct sp_json *v = sp_json_object_get (obj, key);
  int64_t n;

  if (nullable && v != NULL && v->type == SP_JSON_NULL)
    {
      *out = 0;
      return 0;
    }
  if (sp_json_integer (v, 0, INT64_MAX, &n) < 0)
    return -1;
  *out = (uint64_t)n;
  return 0;
}

static int
parse (const char *text, size_t len, struct sp_serve_file *f, sp_error_t *err)
{
  cleanup_json struct sp_json *doc = NULL;
  const struct sp_json *repos;
  const char *run, *started, *backend, *release, *snapshot, *socket;
  uint64_t version, pid;

  if (sp_json_parse (text, len, 4, &doc, err) < 0)
    return sp_error_wrap (err, "%s", SP_SERVE_REPORT_FILE);
  run = string_member (doc, "run", sizeof (f->run));
  started = string_member (doc, "started", sizeof (f->started));
  backend = string_member (doc, "backend", sizeof (f->backend));
  release = string_member (doc, "release", sizeof (f->release));
  snapshot = string_member (doc, "snapshot", sizeof (f->snapshot));
  socket = string_member (doc, "socket", 4096);
  repos = sp_json_object_get (doc, "repositories");
  if (doc->type != SP_JSON_OBJECT || u64_member (doc, "version", false, &version) < 0
      || version != SP_SERVE_REPORT_VERSION || u64_member (doc, "pid", false, &pid) < 0 || pid == 0
      || pid > INT32_MAX || run == NULL || started == NULL || backend == NULL || release == NULL
      || snapshot == NULL || socket == NULL || u64_member (doc, "pool", false, &f->pool) < 0
      || u64_member (doc, "bit_budget", true, &f->bit_budget) < 0
      || u64_member (doc, "run_bit_budget", true, &f->run_bit_budget) < 0
      || u64_member (doc, "answered", false, &f->answered) < 0
      || u64_member (doc, "refused", false, &f->refused) < 0
      || u64_member (doc, "failed", false, &f->failed) < 0 || repos == NULL || repos->type != SP_JSON_ARRAY
      || repos->u.array.len > SP_CONFIG_MAX_REPOS)
    return sp_make_error (err, 0, "%s: not a version %d serve state (what serve writes)",
                          SP_SERVE_REPORT_FILE, SP_SERVE_REPORT_VERSION);
  f->pid = (pid_t)pid;
  strcpy (f->run, run);
  strcpy (f->started, started);
  strcpy (f->backend, backend);
  strcpy (f->release, release);
  strcpy (f->snapshot, snapshot);
  if ((f->socket = strdup (socket)) == NULL
      || (f->repos = calloc (repos->u.array.len + 1, sizeof (*f->repos))) == NULL)
    return sp_make_error (err, ENOMEM, "%s", SP_SERVE_REPORT_FILE);
  for (size_t i = 0; i < repos->u.array.len; i++)
    {
      const struct sp_json *item = repos->u.array.items[i];
      const char *repo = string_member (item, "repo", SP_REPO_MAX_BYTES + 1);

      if (repo == NULL || u64_member (item, "waiting", false, &f->repos[i].waiting) < 0)
        return sp_make_error (err, 0,
                              "%s: repositories[%zu]: must name a repository and its waiting sandboxes",
                              SP_SERVE_REPORT_FILE, i);
      if ((f->repos[i].repo = strdup (repo)) == NULL)
        return sp_make_error (err, ENOMEM, "%s", SP_SERVE_REPORT_FILE);
      f->n_repos = i + 1;
    }
  return 0;
}

int
sp_serve_file_read (int state_dirfd, struct sp_serve_file *out, bool *present, sp_error_t *err)
{
  cleanup_close int fd = -1;
  cleanup_free char *text = NULL;
  struct stat st;
  size_t len;

  memset (out, 0, sizeof (*out));
  *present = false;
  fd = openat (state_dirfd, SP_SERVE_REPORT_FILE, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0)
    return errno == ENOENT ? 0 : sp_make_error (err, errno, "%s", SP_SERVE_REPORT_FILE);
  if (fstat (fd, &st) < 0)
    return sp_make_error (err, errno, "%s", SP_SERVE_REPORT_FILE);
  if (!S_ISREG (st.st_mode) || st.st_uid != 0 || (st.st_mode & 077) != 0)
    return sp_make_error (err, 0, "%s: must be a regular file of root's that only root may read",
                          SP_SERVE_REPORT_FILE);
  if (sp_read_fd_capped (fd, SP_SERVE_FILE_MAX_BYTES, &text, &len, err) < 0)
    return sp_error_wrap (err, "%s", SP_SERVE_REPORT_FILE);
  if (parse (text, len, out, err) < 0)
    {
      sp_serve_file_release (out);
      return -1;
    }
  *present = true;
  return 0;
}

bool
sp_serve_file_waiting (const struct sp_serve_file *f, const char *repo, uint64_t *waiting)
{
  for (size_t i = 0; i < f->n_repos; i++)
    if (strcmp (f->repos[i].repo, repo) == 0)
      {
        *waiting = f->repos[i].waiting;
        return true;
      }
  return false;
}

void
sp_serve_file_release (struct sp_serve_file *f)
{
  for (size_t i = 0; i < f->n_repos; i++)
    free (f->repos[i].repo);
  free (f->repos);
  free (f->socket);
  memset (f, 0, sizeof (*f));
}

int
sp_clone_head (const char *clone, char commit[SP_COMMIT_HEX_MAX + 1], sp_error_t *err)
{
  /* The operator's path is trusted, as stage trusts it; what is under it
     is not, and is read as stage reads it.  */
  cleanup_close int clone_fd = open (clone, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  cleanup_close int git_fd = -1;

  if (clone_fd < 0)
    return sp_make_error (err, errno, "the clone");
  git_fd = sp_git_dir_open (clone_fd, err);
  if (git_fd < 0)
    return -1;
  return sp_git_read_commit (git_fd, commit, err);
}
