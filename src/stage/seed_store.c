/* The staged seeds: see src/stage/seed_store.h.  */
#define _GNU_SOURCE
#include "stage/seed_store.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/quote.h"
#include "base/repo_name.h"
#include "bundle/bundle.h"
#include "os/dir_names.h"
#include "os/fileio.h"
#include "os/open_beneath.h"
#include "os/progress.h"
#include "text/json.h"
#include "text/yajl_util.h"
#include "tree/digest.h"
#include "tree/remove.h"

/* Version 3 records each local seed's clone; version 2 the submodules each
   seed omits; version 1, from before the submodule policy, and version 2
   are still read (docs/staging.md).  */
#define STAGED_VERSION    3
#define STAGED_VERSION_V2 2
#define STAGED_VERSION_V1 1

int
sp_state_open_error (sp_error_t *err, const char *path, int status)
{
  if (status == ENOENT)
    sp_make_error (err, 0,
                   "state directory `%s`: %s: nothing is staged there: run `sealed-probe-proxy stage` "
                   "first, or give --state the directory stage used",
                   path, strerror (status));
  else if (status == EACCES)
    sp_make_error (err, 0,
                   "state directory `%s`: %s: it is root's, mode 0700, and only root may read it: run "
                   "this as root (sudo sealed-probe-proxy ...)",
                   path, strerror (status));
  else
    return sp_make_error (err, status, "state directory `%s`", path);
  if (*err != NULL)
    (*err)->status = status;
  return -1;
}

int
sp_state_open (const char *path, int create, int *dirfd, sp_error_t *err)
{
  cleanup_close int fd = -1;
  struct stat st;

  if (create && mkdir (path, 0700) < 0 && errno != EEXIST)
    return sp_make_error (err, errno, "state directory `%s`: mkdir", path);
  fd = open (path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return sp_state_open_error (err, path, errno);
  if (fstat (fd, &st) < 0)
    return sp_make_error (err, errno, "state directory `%s`: stat", path);
  if (st.st_uid != 0 || (st.st_mode & 077) != 0)
    return sp_make_error (err, 0, "state directory `%s`: must be root's with mode 0700 (it is %u, %04o)",
                          path, (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777));
  *dirfd = get_and_reset_fd (&fd);
  return 0;
}

const char *
sp_seed_source_name (enum sp_seed_source source)
{
  return source == SP_SEED_GITHUB ? "github" : "local";
}

static unsigned
gen_str (yajl_gen g, const char *s)
{
  return yajl_gen_string (g, (const unsigned char *)s, strlen (s));
}

int
sp_staged_render (const struct sp_staged *staged, char **out, size_t *len, sp_error_t *err)
{
  cleanup_yajl_gen yajl_gen g = yajl_gen_alloc (NULL);
  const unsigned char *buf;
  size_t n;
  unsigned st = 0;

  if (g == NULL)
    return sp_make_error (err, ENOMEM, "%s", SP_STAGED_FILE);
  st |= yajl_gen_map_open (g);
  st |= gen_str (g, "version") | yajl_gen_integer (g, STAGED_VERSION);
  st |= gen_str (g, "run") | gen_str (g, staged->run);
  st |= gen_str (g, "seeds") | yajl_gen_array_open (g);
  for (size_t i = 0; i < staged->n; i++)
    {
      const struct sp_seed *s = &staged->seeds[i];

      st |= yajl_gen_map_open (g);
      st |= gen_str (g, "repo") | gen_str (g, s->repo);
      st |= gen_str (g, "index") | yajl_gen_integer (g, s->index);
      st |= gen_str (g, "source") | gen_str (g, sp_seed_source_name (s->source));
      st |= gen_str (g, "commit") | gen_str (g, s->commit);
      st |= gen_str (g, "digest") | gen_str (g, s->digest);
      st |= gen_str (g, "omitted_submodules");
      if (!s->omitted_known)
        st |= yajl_gen_null (g);
      else
        {
          st |= yajl_gen_array_open (g);
          for (size_t k = 0; k < s->n_omitted; k++)
            st |= gen_str (g, s->omitted[k]);
          st |= yajl_gen_array_close (g);
        }
      st |= gen_str (g, "clone") | (s->clone != NULL ? gen_str (g, s->clone) : yajl_gen_null (g));
      st |= yajl_gen_map_close (g);
    }
  st |= yajl_gen_array_close (g) | yajl_gen_map_close (g);
  if (st != yajl_gen_status_ok || yajl_gen_get_buf (g, &buf, &n) != yajl_gen_status_ok)
    return sp_make_error (err, 0, "%s: cannot render", SP_STAGED_FILE);
  if (n > SP_STAGED_MAX_BYTES)
    return sp_make_error (err, 0,
                          "%s: the record would be %zu bytes, more than the %d a reader takes (the paths of "
                          "omitted submodules count)",
                          SP_STAGED_FILE, n, SP_STAGED_MAX_BYTES);
  *out = malloc (n > 0 ? n : 1);
  if (*out == NULL)
    return sp_make_error (err, ENOMEM, "%s", SP_STAGED_FILE);
  memcpy (*out, buf, n);
  *len = n;
  return 0;
}

int
sp_staged_write (int state_dirfd, const struct sp_staged *staged, sp_error_t *err)
{
  cleanup_free char *buf = NULL;
  size_t len;

  if (sp_staged_render (staged, &buf, &len, err) < 0)
    return -1;
  return sp_write_file_atomic_at (state_dirfd, SP_STAGED_FILE, buf, len, 0600, err);
}

static int
is_hex (const char *s, size_t len)
{
  for (size_t i = 0; i < len; i++)
    if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
      return 0;
  return s[len] == '\0';
}

/* A string member of obj, or NULL.  */
static const char *
string_member (const struct sp_json *obj, const char *key)
{
  const struct sp_json *v = sp_json_object_get (obj, key);

  return v && v->type == SP_JSON_STRING ? v->u.string.data : NULL;
}

void
sp_seed_omitted_release (struct sp_seed *seed)
{
  for (size_t i = 0; i < seed->n_omitted; i++)
    free (seed->omitted[i]);
  free (seed->omitted);
  seed->omitted = NULL;
  seed->n_omitted = 0;
  seed->omitted_known = false;
}

/* `omitted_submodules`: null, or (a local seed's) an array of at most
   SP_SEED_SUBMODULES_MAX paths as sp_quote_name writes them: so that
   whatever reads them shows them as safely as stage would.  */
static int
load_omitted (const struct sp_json *v, size_t i, struct sp_seed *seed, sp_error_t *err)
{
  if (v == NULL)
    return sp_make_error (err, 0, "%s: seeds[%zu].omitted_submodules: is missing", SP_STAGED_FILE, i);
  if (v->type == SP_JSON_NULL)
    return 0;
  if (v->type != SP_JSON_ARRAY || v->u.array.len > SP_SEED_SUBMODULES_MAX || seed->source != SP_SEED_LOCAL)
    return sp_make_error (
        err, 0,
        "%s: seeds[%zu].omitted_submodules: must be null, or for a local seed an array of at "
        "most %d paths",
        SP_STAGED_FILE, i, SP_SEED_SUBMODULES_MAX);
  seed->omitted = calloc (v->u.array.len ? v->u.array.len : 1, sizeof (*seed->omitted));
  if (seed->omitted == NULL)
    return sp_make_error (err, ENOMEM, "%s", SP_STAGED_FILE);
  seed->omitted_known = true;
  for (size_t k = 0; k < v->u.array.len; k++)
    {
      const struct sp_json *path = v->u.array.items[k];

      if (path->type != SP_JSON_STRING || strlen (path->u.string.data) != path->u.string.len
          || !sp_quote_name_ok (path->u.string.data))
        return sp_make_error (err, 0,
                              "%s: seeds[%zu].omitted_submodules[%zu]: must be a path quoted as stage "
                              "quotes it",
                              SP_STAGED_FILE, i, k);
      seed->omitted[k] = strdup (path->u.string.data);
      if (seed->omitted[k] == NULL)
        return sp_make_error (err, ENOMEM, "%s", SP_STAGED_FILE);
      seed->n_omitted = k + 1;
    }
  return 0;
}

static int
load_seed (const struct sp_json *item, size_t i, int64_t version, struct sp_seed *seed, sp_error_t *err)
{
  const char *repo = string_member (item, "repo");
  const char *source = string_member (item, "source");
  const char *commit = string_member (item, "commit");
  const char *digest = string_member (item, "digest");
  cleanup_error sp_error_t name_err = NULL;
  size_t members = version == STAGED_VERSION_V1 ? 5 : version == STAGED_VERSION_V2 ? 6 : 7;
  const struct sp_json *clone = sp_json_object_get (item, "clone");
  int64_t index;

  if (item->type != SP_JSON_OBJECT || item->u.object.len != members)
    return sp_make_error (err, 0, "%s: seeds[%zu]: must be an object of exactly %s members", SP_STAGED_FILE,
                          i,
                          members == 5   ? "five"
                          : members == 6 ? "six"
                                         : "seven");
  if (repo == NULL || sp_repo_name_check (repo, strlen (repo), &name_err) < 0)
    return sp_make_error (err, 0, "%s: seeds[%zu].repo: must be a repository name", SP_STAGED_FILE, i);
  if (sp_json_integer (sp_json_object_get (item, "index"), 0, SP_CONFIG_MAX_REPOS - 1, &index) < 0)
    return sp_make_error (err, 0, "%s: seeds[%zu].index: must be an integer from 0 to %d", SP_STAGED_FILE, i,
                          SP_CONFIG_MAX_REPOS - 1);
  if (source == NULL || (strcmp (source, "local") != 0 && strcmp (source, "github") != 0))
    return sp_make_error (err, 0, "%s: seeds[%zu].source: must be \"local\" or \"github\"", SP_STAGED_FILE,
                          i);
  if (commit == NULL || (strlen (commit) != 40 && strlen (commit) != 64) || !is_hex (commit, strlen (commit)))
    return sp_make_error (err, 0, "%s: seeds[%zu].commit: must be 40 or 64 lowercase hex digits",
                          SP_STAGED_FILE, i);
  if (digest == NULL || strlen (digest) != SP_DIGEST_TEXT_SIZE - 1
      || strncmp (digest, SP_DIGEST_PREFIX, strlen (SP_DIGEST_PREFIX)) != 0
      || !is_hex (digest + strlen (SP_DIGEST_PREFIX), SP_SHA256_HEX))
    return sp_make_error (err, 0, "%s: seeds[%zu].digest: must be sha256:<64 hex digits>", SP_STAGED_FILE, i);

  seed->repo = strdup (repo);
  if (seed->repo == NULL)
    return sp_make_error (err, ENOMEM, "%s", SP_STAGED_FILE);
  seed->index = (unsigned)index;
  seed->source = strcmp (source, "github") == 0 ? SP_SEED_GITHUB : SP_SEED_LOCAL;
  strcpy (seed->commit, commit);
  strcpy (seed->digest, digest);
  if (version == STAGED_VERSION_V1)
    return 0; /* staged before the policy: what it omitted is not known */
  if (version >= 3)
    {
      if (clone == NULL
          || (clone->type != SP_JSON_NULL
              && (clone->type != SP_JSON_STRING || seed->source != SP_SEED_LOCAL
                  || clone->u.string.data[0] != '/' || strlen (clone->u.string.data) != clone->u.string.len
                  || clone->u.string.len >= PATH_MAX)))
        return sp_make_error (err, 0,
                              "%s: seeds[%zu].clone: must be null, or for a local seed an absolute path",
                              SP_STAGED_FILE, i);
      if (clone->type == SP_JSON_STRING && (seed->clone = strdup (clone->u.string.data)) == NULL)
        return sp_make_error (err, ENOMEM, "%s", SP_STAGED_FILE);
    }
  return load_omitted (sp_json_object_get (item, "omitted_submodules"), i, seed, err);
}

int
sp_staged_parse (const char *buf, size_t len, struct sp_staged *out, sp_error_t *err)
{
  cleanup_json struct sp_json *doc = NULL;
  cleanup_error sp_error_t id_err = NULL;
  const struct sp_json *seeds;
  const char *run;
  int64_t version;

  memset (out, 0, sizeof (*out));
  if (sp_json_parse (buf, len, 4, &doc, err) < 0)
    return sp_error_wrap (err, "%s", SP_STAGED_FILE);
  run = string_member (doc, "run");
  seeds = sp_json_object_get (doc, "seeds");
  if (doc->type != SP_JSON_OBJECT || doc->u.object.len != 3
      || sp_json_integer (sp_json_object_get (doc, "version"), STAGED_VERSION_V1, STAGED_VERSION, &version)
             < 0)
    return sp_make_error (err, 0, "%s: must be a version %d to %d object of version, run and seeds",
                          SP_STAGED_FILE, STAGED_VERSION_V1, STAGED_VERSION);
  if (run == NULL || sp_bundle_id_check (run, &id_err) < 0)
    return sp_make_error (err, 0, "%s: run: must be a run id", SP_STAGED_FILE);
  if (seeds == NULL || seeds->type != SP_JSON_ARRAY || seeds->u.array.len == 0
      || seeds->u.array.len > SP_CONFIG_MAX_REPOS)
    return sp_make_error (err, 0, "%s: seeds: must be an array of 1 to %d seeds", SP_STAGED_FILE,
                          SP_CONFIG_MAX_REPOS);

  strcpy (out->run, run);
  out->seeds = calloc (seeds->u.array.len, sizeof (*out->seeds));
  if (out->seeds == NULL)
    return sp_make_error (err, ENOMEM, "%s", SP_STAGED_FILE);
  for (size_t i = 0; i < seeds->u.array.len; i++)
    {
      /* Counted first: a seed that fails halfway is released with the rest.  */
      out->n++;
      if (load_seed (seeds->u.array.items[i], i, version, &out->seeds[i], err) < 0)
        {
          sp_staged_release (out);
          return -1;
        }
      for (size_t j = 0; j < i; j++)
        if (strcmp (out->seeds[j].repo, out->seeds[i].repo) == 0
            || out->seeds[j].index == out->seeds[i].index)
          {
            sp_staged_release (out);
            return sp_make_error (err, 0, "%s: seeds[%zu]: repeats a repository or an index", SP_STAGED_FILE,
                                  i);
          }
    }
  return 0;
}

int
sp_staged_load (int state_dirfd, struct sp_staged *out, sp_error_t *err)
{
  cleanup_close int fd = -1;
  cleanup_free char *text = NULL;
  size_t len;

  memset (out, 0, sizeof (*out));
  fd = openat (state_dirfd, SP_STAGED_FILE, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0)
    return sp_make_error (err, errno, "%s (run `sealed-probe-proxy stage` first)", SP_STAGED_FILE);
  if (sp_read_fd_capped (fd, SP_STAGED_MAX_BYTES, &text, &len, err) < 0)
    return sp_error_wrap (err, "%s", SP_STAGED_FILE);
  return sp_staged_parse (text, len, out, err);
}

const struct sp_seed *
sp_staged_find (const struct sp_staged *staged, const char *repo)
{
  for (size_t i = 0; i < staged->n; i++)
    if (strcmp (staged->seeds[i].repo, repo) == 0)
      return &staged->seeds[i];
  return NULL;
}

void
sp_staged_release (struct sp_staged *staged)
{
  for (size_t i = 0; i < staged->n; i++)
    {
      free (staged->seeds[i].repo);
      free (staged->seeds[i].clone);
      sp_seed_omitted_release (&staged->seeds[i]);
    }
  free (staged->seeds);
  staged->seeds = NULL;
  staged->n = 0;
}

int
sp_seed_open (int state_dirfd, const char *run, unsigned index, sp_error_t *err)
{
  char path[128];
  int fd;

  snprintf (path, sizeof (path), "%s/%s/%u", SP_SEEDS_DIR, run, index);
  fd = sp_open_beneath (state_dirfd, path, O_RDONLY | O_DIRECTORY);
  if (fd < 0)
    return sp_make_error (err, errno, "seed `%s`", path);
  return fd;
}

/* Digests the seed as it is seen through its read-only mount.  */
static int
digest_sealed (int state_dirfd, const char *run, const struct sp_seed *seed, char digest[SP_DIGEST_TEXT_SIZE],
               sp_tree_tick_fn tick, void *tick_ctx, sp_error_t *err)
{
  cleanup_close int fd = sp_seed_open (state_dirfd, run, seed->index, err);
  struct statvfs vfs;

  if (fd < 0)
    return sp_error_wrap (err, "%s", seed->repo);
  if (fstatvfs (fd, &vfs) < 0)
    return sp_make_error (err, errno, "%s: seed: statvfs", seed->repo);
  if (!(vfs.f_flag & ST_RDONLY))
    return sp_make_error (err, 0, "%s: the seed is not on a read-only mount", seed->repo);
  if (sp_tree_digest_counted (fd, digest, tick, tick_ctx, err) < 0)
    return sp_error_wrap (err, "%s: seed", seed->repo);
  return 0;
}

int
sp_seed_measure (int state_dirfd, const char *run, struct sp_seed *seed, sp_tree_tick_fn tick, void *tick_ctx,
                 sp_error_t *err)
{
  return digest_sealed (state_dirfd, run, seed, seed->digest, tick, tick_ctx, err);
}

int
sp_seed_verify (int state_dirfd, const char *run, const struct sp_seed *seed, sp_error_t *err)
{
  char digest[SP_DIGEST_TEXT_SIZE];

  if (digest_sealed (state_dirfd, run, seed, digest, NULL, NULL, err) < 0)
    return -1;
  if (strcmp (digest, seed->digest) != 0)
    return sp_make_error (err, 0, "%s: the seed changed: %s records %s but it digests to %s", seed->repo,
                          SP_STAGED_FILE, seed->digest, digest);
  return 0;
}

/* The path of an fd, for mount(2), which takes paths: the mount lands on the
   very directory the fd names, whatever happens to the path meanwhile.  */
static void
fd_path (int fd, char out[64])
{
  snprintf (out, 64, "/proc/self/fd/%d", fd);
}

int
sp_seed_run_seal (int state_dirfd, const char *run, sp_error_t *err)
{
  cleanup_close int dir = -1;
  cleanup_close int mounted = -1;
  char path[128], proc[64];

  snprintf (path, sizeof (path), "%s/%s", SP_SEEDS_DIR, run);
  dir = sp_open_beneath (state_dirfd, path, O_PATH | O_DIRECTORY);
  if (dir < 0)
    return sp_make_error (err, errno, "%s", path);
  fd_path (dir, proc);
  if (mount (proc, proc, NULL, MS_BIND, NULL) < 0)
    return sp_make_error (err, errno, "%s: bind-mount onto itself", path);
  /* Reopen: the old fd still names the directory under the new mount.  */
  mounted = sp_open_beneath (state_dirfd, path, O_PATH | O_DIRECTORY);
  if (mounted < 0)
    return sp_make_error (err, errno, "%s: reopen", path);
  fd_path (mounted, proc);
  if (mount (NULL, proc, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
    {
      int saved = errno;
      umount2 (proc, MNT_DETACH);
      return sp_make_error (err, saved, "%s: remount read-only", path);
    }
  return 0;
}

/* Unmounts seeds/NAME if it is a mount point (every mount stacked there).  */
static int
unseal (int seeds_fd, const char *name, sp_error_t *err)
{
  char q[SP_QUOTE_BUF_SIZE];

  for (int i = 0; i < 16; i++)
    {
      cleanup_close int fd = openat (seeds_fd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      char proc[64];

      if (fd < 0)
        return errno == ENOENT || errno == ENOTDIR || errno == ELOOP
                   ? 0 /* nothing to unmount: the removal deals with it */
                   : sp_make_error (err, errno, "%s/%s", SP_SEEDS_DIR, sp_quote_name (name, q));
      fd_path (fd, proc);
      if (umount2 (proc, MNT_DETACH) < 0)
        {
          if (errno == EINVAL)
            return 0; /* not a mount point: done */
          return sp_make_error (err, errno, "%s/%s: unmount", SP_SEEDS_DIR, sp_quote_name (name, q));
        }
    }
  return sp_make_error (err, 0, "%s/%s: still mounted after 16 unmounts", SP_SEEDS_DIR,
                        sp_quote_name (name, q));
}

/* Keeps the first failure in *err, every one in report.  */
static void
left_behind (struct sp_reset_report *report, sp_error_t *failure, sp_error_t *err)
{
  if (report != NULL)
    {
      sp_error_t copy = NULL;
      sp_error_t *v = realloc (report->left, (report->n + 1) * sizeof (*v));

      sp_make_error (&copy, 0, "%s", sp_error_message (*failure));
      if (v != NULL)
        {
          report->left = v;
          v[report->n++] = copy;
        }
      else
        sp_error_release (&copy);
    }
  if (*err == NULL)
    *err = get_and_reset (failure);
  else
    sp_error_release (failure);
}

/* Removes seeds/NAME, counting its files on the progress line: a run of a
   big repository is many files, and unstage must not look stalled.  */
static int
remove_run (int seeds_fd, const char *name, struct sp_progress *progress, sp_error_t *err)
{
  char subject[sizeof (SP_SEEDS_DIR) + NAME_MAX + 1];

  /* Raw: sp_progress_repo quotes any name that is not plain (a leftover
     run may be named anything).  */
  snprintf (subject, sizeof (subject), "%s/%s", SP_SEEDS_DIR, name);
  sp_progress_repo (progress, subject);
  sp_progress_phase (progress, "remove", SP_PROGRESS_FILES, 0);
  return sp_tree_remove_counted (seeds_fd, name, sp_progress_count_file, progress, err);
}

int
sp_seed_store_reset (int state_dirfd, struct sp_progress *progress, struct sp_reset_report *report,
                     sp_error_t *err)
{
  cleanup_close int seeds_fd = -1;
  cleanup_dir_names struct sp_dir_names runs = { 0 };
  sp_error_t e = NULL;

  /* First: no reader may take a half-removed run for the current one.  */
  if (unlinkat (state_dirfd, SP_STAGED_FILE, 0) < 0 && errno != ENOENT)
    {
      sp_make_error (&e, errno, "%s: remove", SP_STAGED_FILE);
      left_behind (report, &e, err);
    }
  seeds_fd = openat (state_dirfd, SP_SEEDS_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (seeds_fd < 0)
    {
      if (errno != ENOENT)
        {
          sp_make_error (&e, errno, "%s", SP_SEEDS_DIR);
          left_behind (report, &e, err);
        }
      return *err != NULL ? -1 : 0;
    }
  if (sp_dir_names_read (seeds_fd, &runs, &e) < 0)
    {
      sp_error_wrap (&e, "%s: list", SP_SEEDS_DIR);
      left_behind (report, &e, err);
      return -1;
    }
  /* One run that stays does not stop the others.  */
  for (size_t i = 0; i < runs.len; i++)
    {
      if (unseal (seeds_fd, runs.v[i], &e) < 0)
        left_behind (report, &e, err);
      if (remove_run (seeds_fd, runs.v[i], progress, &e) < 0)
        {
          sp_error_wrap (&e, "%s", SP_SEEDS_DIR);
          left_behind (report, &e, err);
        }
    }
  if (*err == NULL && unlinkat (state_dirfd, SP_SEEDS_DIR, AT_REMOVEDIR) < 0 && errno != ENOENT)
    {
      sp_make_error (&e, errno, "%s: remove", SP_SEEDS_DIR);
      left_behind (report, &e, err);
    }
  return *err != NULL ? -1 : 0;
}

void
sp_reset_report_release (struct sp_reset_report *report)
{
  for (size_t i = 0; i < report->n; i++)
    sp_error_release (&report->left[i]);
  free (report->left);
  report->left = NULL;
  report->n = 0;
}
