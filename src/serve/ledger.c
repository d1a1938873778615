/* The budget ledger: see src/serve/ledger.h.  */
#define _GNU_SOURCE
#include "serve/ledger.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>

#include "base/bounds.h"
#include "base/cleanup.h"
#include "base/repo_name.h"
#include "os/fileio.h"
#include "os/state_lock.h"
#include "text/json.h"
#include "text/yajl_util.h"

#define LEDGER_VERSION    2
#define LEDGER_VERSION_V1 1
#define LEDGER_VERSION_V3 3 /* version 2 with a run bit budget */
#define LEDGER_MAX_DEPTH  3 /* the root, repositories, one repository */

/* One repository's entry at its largest, less the name: what
   SP_LEDGER_REPO_MAX_BYTES allows beside it.  */
_Static_assert(sizeof ("\"\":{\"millibits\":9007199254740992,\"unbounded_calls\":4294967295},") - 1
                       + SP_REPO_MAX_BYTES
                   <= SP_LEDGER_REPO_MAX_BYTES,
               "a repository entry must fit SP_LEDGER_REPO_MAX_BYTES");
_Static_assert(sizeof ("{\"version\":3,\"limit\":100000,\"used\":100000,\"run_bit_budget\":1000000,"
                       "\"repositories\":{}}\n")
                           - 1
                       <= 128
                   && SP_INVOCATIONS_MAX <= 100000 && SP_RUN_BIT_BUDGET_MAX <= 1000000,
               "the ledger's head must fit the 128 bytes SP_LEDGER_FILE_MAX_BYTES allows");

struct sp_ledger
{
  pthread_mutex_t lock;
  int dirfd;
  int lock_fd;
  uint32_t limit;
  uint32_t used;
  uint64_t run_budget;          /* millibits; 0: none */
  uint64_t run_millibits;       /* the repositories' sum */
  uint64_t run_unbounded_calls; /* the repositories' sum */
  bool poisoned;
  struct sp_ledger_repo *repos; /* sorted by name, bytewise */
  size_t n_repos;
  size_t cap_repos;
};

/* A change not yet persisted: the repository entry as it would be after the
   charge, at index pos of the sorted array, as a new entry when insert.  */
struct ledger_pending
{
  struct sp_ledger_repo repo;
  size_t pos;
  bool insert;
};

/* The index of repo in the sorted array, or where it would go.  */
static size_t
ledger_find (const struct sp_ledger *ledger, const char *repo, bool *found)
{
  size_t lo = 0, hi = ledger->n_repos;

  *found = false;
  while (lo < hi)
    {
      size_t mid = lo + (hi - lo) / 2;
      int c = strcmp (ledger->repos[mid].name, repo);

      if (c == 0)
        {
          *found = true;
          return mid;
        }
      if (c < 0)
        lo = mid + 1;
      else
        hi = mid;
    }
  return lo;
}

static unsigned
gen_str (yajl_gen g, const char *s)
{
  return yajl_gen_string (g, (const unsigned char *)s, strlen (s));
}

static unsigned
gen_repo (yajl_gen g, const struct sp_ledger_repo *r)
{
  unsigned st = 0;

  st |= gen_str (g, r->name) | yajl_gen_map_open (g);
  st |= gen_str (g, "millibits") | yajl_gen_integer (g, (long long)r->millibits);
  st |= gen_str (g, "unbounded_calls") | yajl_gen_integer (g, (long long)r->unbounded_calls);
  return st | yajl_gen_map_close (g);
}

/* Writes the ledger as it would be with `used` and the pending change (none
   when pending is NULL).  Never writes a file that sp_ledger_open could not
   read back.  */
static int
ledger_store (const struct sp_ledger *ledger, uint32_t used, const struct ledger_pending *pending,
              sp_error_t *err)
{
  cleanup_yajl_gen yajl_gen g = yajl_gen_alloc (NULL);
  cleanup_free char *text = NULL;
  const unsigned char *buf;
  unsigned st = 0;
  size_t n;

  if (g == NULL)
    return sp_make_error (err, ENOMEM, "format the budget ledger");
  st |= yajl_gen_map_open (g);
  /* A run without a run bit budget keeps the version 2 file, which older
     binaries read; one with it is version 3, which they refuse.  */
  st |= gen_str (g, "version")
        | yajl_gen_integer (g, ledger->run_budget ? LEDGER_VERSION_V3 : LEDGER_VERSION);
  st |= gen_str (g, "limit") | yajl_gen_integer (g, ledger->limit);
  st |= gen_str (g, "used") | yajl_gen_integer (g, used);
  if (ledger->run_budget)
    st |= gen_str (g, "run_bit_budget") | yajl_gen_integer (g, (long long)(ledger->run_budget / 1000));
  st |= gen_str (g, "repositories") | yajl_gen_map_open (g);
  for (size_t i = 0; i <= ledger->n_repos; i++)
    {
      if (pending && pending->pos == i)
        st |= gen_repo (g, &pending->repo);
      if (i < ledger->n_repos && !(pending && pending->pos == i && !pending->insert))
        st |= gen_repo (g, &ledger->repos[i]);
    }
  st |= yajl_gen_map_close (g) | yajl_gen_map_close (g);
  if (st != yajl_gen_status_ok || yajl_gen_get_buf (g, &buf, &n) != yajl_gen_status_ok)
    return sp_make_error (err, 0, "format the budget ledger");
  if (n + 1 > SP_LEDGER_FILE_MAX_BYTES)
    return sp_make_error (err, 0, "format the budget ledger: %zu bytes is more than %d", n + 1,
                          SP_LEDGER_FILE_MAX_BYTES);
  text = malloc (n + 1);
  if (text == NULL)
    return sp_make_error (err, ENOMEM, "format the budget ledger");
  memcpy (text, buf, n);
  text[n] = '\n';
  return sp_write_file_atomic_at (ledger->dirfd, SP_LEDGER_FILE, text, n + 1, 0600, err);
}

/* parent.key as an integer within [min, max]; parent is NULL at the root.  */
static int
ledger_field (const struct sp_json *obj, const char *parent, const char *key, int64_t min, int64_t max,
              int64_t *out, sp_error_t *err)
{
  const struct sp_json *v = sp_json_object_get (obj, key);
  cleanup_free char *path = sp_json_path_key (parent, key);

  if (path == NULL)
    return sp_make_error (err, ENOMEM, "`%s`", SP_LEDGER_FILE);
  if (v == NULL)
    return sp_make_error (err, 0, "`%s`: %s: missing", SP_LEDGER_FILE, path);
  if (sp_json_integer (v, min, max, out) < 0)
    return sp_make_error (err, 0, "`%s`: %s: must be an integer from %" PRId64 " to %" PRId64, SP_LEDGER_FILE,
                          path, min, max);
  return 0;
}

/* Every key of obj (at parent, NULL for the root) is one of keys[0..n).  */
static int
ledger_known_keys (const struct sp_json *obj, const char *parent, const char *const *keys, size_t n,
                   sp_error_t *err)
{
  for (size_t i = 0; i < obj->u.object.len; i++)
    {
      const char *key = obj->u.object.members[i].key;
      cleanup_free char *path = NULL;
      size_t k = 0;

      while (k < n && strcmp (key, keys[k]) != 0)
        k++;
      if (k < n)
        continue;
      path = sp_json_path_key (parent, key);
      if (path == NULL)
        return sp_make_error (err, ENOMEM, "`%s`", SP_LEDGER_FILE);
      return sp_make_error (err, 0, "`%s`: %s: unknown key", SP_LEDGER_FILE, path);
    }
  return 0;
}

static int
compare_repos (const void *a, const void *b)
{
  return strcmp (((const struct sp_ledger_repo *)a)->name, ((const struct sp_ledger_repo *)b)->name);
}

/* The repositories object of a version 2 ledger, into snap (whose repos
   the caller frees, on failure too).  */
static int
ledger_parse_repos (struct sp_ledger_snapshot *snap, const struct sp_json *repos, sp_error_t *err)
{
  static const char *const entry_keys[] = { "millibits", "unbounded_calls" };
  size_t n;

  if (repos == NULL)
    return sp_make_error (err, 0, "`%s`: repositories: missing", SP_LEDGER_FILE);
  if (repos->type != SP_JSON_OBJECT)
    return sp_make_error (err, 0, "`%s`: repositories: must be an object", SP_LEDGER_FILE);
  n = repos->u.object.len;
  if (n > SP_LEDGER_MAX_REPOS)
    return sp_make_error (err, 0, "`%s`: repositories: must hold at most %d repositories", SP_LEDGER_FILE,
                          SP_LEDGER_MAX_REPOS);
  if (n == 0)
    return 0;
  snap->repos = calloc (n, sizeof (*snap->repos));
  if (snap->repos == NULL)
    return sp_make_error (err, errno, "allocate the ledger");

  for (size_t i = 0; i < n; i++)
    {
      const struct sp_json_member *m = &repos->u.object.members[i];
      struct sp_ledger_repo *r = &snap->repos[i];
      cleanup_free char *path = NULL;
      int64_t millibits, unbounded;

      /* Named by position: a key that is no repository name may carry a
         credential (repo_name.h), so it is never echoed.  */
      if (sp_repo_name_check (m->key, strlen (m->key), err) < 0)
        return sp_error_wrap (err, "`%s`: repositories: the key of member %zu is not a repository name",
                              SP_LEDGER_FILE, i);
      path = sp_json_path_key ("repositories", m->key);
      if (path == NULL)
        return sp_make_error (err, ENOMEM, "`%s`", SP_LEDGER_FILE);
      if (m->value->type != SP_JSON_OBJECT)
        return sp_make_error (err, 0, "`%s`: %s: must be an object", SP_LEDGER_FILE, path);
      if (ledger_known_keys (m->value, path, entry_keys, 2, err) < 0
          || ledger_field (m->value, path, "millibits", 0, (int64_t)SP_LEDGER_MILLIBITS_MAX, &millibits, err)
                 < 0
          || ledger_field (m->value, path, "unbounded_calls", 0, SP_LEDGER_UNBOUNDED_MAX, &unbounded, err)
                 < 0)
        return -1;
      strcpy (r->name, m->key);
      r->millibits = (uint64_t)millibits;
      r->unbounded_calls = (uint64_t)unbounded;
      /* At most 256 x 2^53 and 256 x 2^32: no overflow.  */
      snap->run_millibits += r->millibits;
      snap->run_unbounded_calls += r->unbounded_calls;
    }
  /* The parser refused duplicate keys, so sorting leaves every name once.  */
  qsort (snap->repos, n, sizeof (*snap->repos), compare_repos);
  snap->n_repos = n;
  return 0;
}

/* Reads an existing ledger strictly: a malformed one is an operator problem,
   and treating it as new would hand out a fresh budget.  With want_limit
   (not 0), a ledger of another limit is refused, before its repositories
   are read.  On failure the caller frees snap->repos.  */
static int
ledger_parse (int fd, uint32_t want_limit, struct sp_ledger_snapshot *snap, sp_error_t *err)
{
  static const char *const v1_keys[] = { "version", "limit", "used" };
  static const char *const v2_keys[] = { "version", "limit", "used", "repositories" };
  static const char *const v3_keys[] = { "version", "limit", "used", "run_bit_budget", "repositories" };
  cleanup_free char *text = NULL;
  cleanup_json struct sp_json *root = NULL;
  int64_t version, limit, used, run_budget = 0;
  struct stat st;
  size_t len;

  if (fstat (fd, &st) < 0)
    return sp_make_error (err, errno, "stat `%s`", SP_LEDGER_FILE);
  if (!S_ISREG (st.st_mode))
    return sp_make_error (err, 0, "`%s` is not a regular file", SP_LEDGER_FILE);
  if (sp_read_fd_capped (fd, SP_LEDGER_FILE_MAX_BYTES, &text, &len, err) < 0)
    return sp_error_wrap (err, "read `%s`", SP_LEDGER_FILE);
  if (sp_json_parse (text, len, LEDGER_MAX_DEPTH, &root, err) < 0)
    return sp_error_wrap (err, "parse `%s`", SP_LEDGER_FILE);
  if (root->type != SP_JSON_OBJECT)
    return sp_make_error (err, 0, "`%s`: must be an object", SP_LEDGER_FILE);
  if (ledger_field (root, NULL, "version", LEDGER_VERSION_V1, LEDGER_VERSION_V3, &version, err) < 0)
    return -1;
  if (version == LEDGER_VERSION_V1   ? ledger_known_keys (root, NULL, v1_keys, 3, err)
      : version == LEDGER_VERSION_V3 ? ledger_known_keys (root, NULL, v3_keys, 5, err)
                                     : ledger_known_keys (root, NULL, v2_keys, 4, err))
    return -1;
  if (ledger_field (root, NULL, "limit", SP_INVOCATIONS_MIN, SP_INVOCATIONS_MAX, &limit, err) < 0
      || ledger_field (root, NULL, "used", 0, limit, &used, err) < 0)
    return -1;
  if (version == LEDGER_VERSION_V3
      && ledger_field (root, NULL, "run_bit_budget", 1, SP_RUN_BIT_BUDGET_MAX, &run_budget, err) < 0)
    return -1;
  if (want_limit != 0 && (uint32_t)limit != want_limit)
    return sp_make_error (err, 0,
                          "`%s` holds a budget of %" PRId64 " but the config says %" PRIu32
                          "; a run's budget never changes: start a new run with a new state directory",
                          SP_LEDGER_FILE, limit, want_limit);
  if (version != LEDGER_VERSION_V1
      && ledger_parse_repos (snap, sp_json_object_get (root, "repositories"), err) < 0)
    return -1;
  snap->version = (int)version;
  snap->limit = (uint32_t)limit;
  snap->used = (uint32_t)used;
  snap->run_bit_budget_millibits = (uint64_t)run_budget * 1000;
  return 0;
}

/* The run bit budget this start asks for against the one the file holds:
   pinned once given, so no restart drops or raises it.  */
static int
ledger_check_run_budget (const struct sp_ledger_snapshot *snap, uint64_t want, sp_error_t *err)
{
  const uint64_t have = snap->run_bit_budget_millibits;

  if (have != 0 && want != have)
    {
      char asked[48] = "not given";

      if (want != 0)
        snprintf (asked, sizeof (asked), "%" PRIu64 " bits", want / 1000);
      return sp_make_error (err, 0,
                            "`%s` holds a run bit budget of %" PRIu64
                            " bits but --run-bit-budget is %s; a run's bit budget never changes once set: "
                            "start a new run with a new state directory",
                            SP_LEDGER_FILE, have / 1000, asked);
    }
  if (want != 0 && snap->version == LEDGER_VERSION_V1 && snap->used > 0)
    return sp_make_error (err, 0,
                          "`%s` is a version 1 ledger whose %" PRIu32
                          " calls' bits were never recorded, so no run bit budget can be kept on it: start a "
                          "new run with a new state directory",
                          SP_LEDGER_FILE, snap->used);
  return 0;
}

/* Loads the file; *pin says whether this start gives the run a bit budget
   it did not have, which the caller writes at once.  */
static int
ledger_load (struct sp_ledger *ledger, int fd, bool *pin, sp_error_t *err)
{
  struct sp_ledger_snapshot snap = { 0 };

  if (ledger_parse (fd, ledger->limit, &snap, err) < 0
      || ledger_check_run_budget (&snap, ledger->run_budget, err) < 0)
    {
      free (snap.repos);
      return -1;
    }
  *pin = ledger->run_budget != 0 && snap.run_bit_budget_millibits == 0;
  ledger->repos = snap.repos;
  ledger->n_repos = ledger->cap_repos = snap.n_repos;
  ledger->used = snap.used;
  ledger->run_millibits = snap.run_millibits;
  ledger->run_unbounded_calls = snap.run_unbounded_calls;
  return 0;
}

/* O_NONBLOCK: a FIFO planted in its place cannot hang the open; the parse
   then refuses it.  */
static int
ledger_open_file (int dirfd)
{
  return TEMP_FAILURE_RETRY (openat (dirfd, SP_LEDGER_FILE, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK));
}

int
sp_ledger_read_snapshot (int state_dirfd, struct sp_ledger_snapshot **out, sp_error_t *err)
{
  cleanup_close int fd = ledger_open_file (state_dirfd);
  struct sp_ledger_snapshot *snap;

  *out = NULL;
  if (fd < 0)
    return errno == ENOENT ? 0 : sp_make_error (err, errno, "open `%s`", SP_LEDGER_FILE);
  snap = calloc (1, sizeof (*snap));
  if (snap == NULL)
    return sp_make_error (err, errno, "allocate the ledger");
  if (ledger_parse (fd, 0, snap, err) < 0)
    {
      sp_ledger_snapshot_free (snap);
      return -1;
    }
  *out = snap;
  return 0;
}

void
sp_ledger_snapshot_free (struct sp_ledger_snapshot *snap)
{
  if (snap == NULL)
    return;
  free (snap->repos);
  free (snap);
}

int
sp_ledger_open (int state_dirfd, uint32_t limit, uint64_t run_bit_budget_millibits, struct sp_ledger **out,
                sp_error_t *err)
{
  cleanup_close int dirfd = -1;
  cleanup_close int lock_fd = -1;
  cleanup_close int fd = -1;
  struct sp_ledger *ledger;
  bool pin = false;

  if (limit < SP_INVOCATIONS_MIN || limit > SP_INVOCATIONS_MAX)
    return sp_make_error (err, 0, "budget must be from %d to %d", SP_INVOCATIONS_MIN, SP_INVOCATIONS_MAX);
  if (run_bit_budget_millibits % 1000 != 0
      || run_bit_budget_millibits > (uint64_t)SP_RUN_BIT_BUDGET_MAX * 1000)
    return sp_make_error (err, 0, "run bit budget must be a whole number of bits from 1 to %d",
                          SP_RUN_BIT_BUDGET_MAX);

  dirfd = fcntl (state_dirfd, F_DUPFD_CLOEXEC, 3);
  if (dirfd < 0)
    return sp_make_error (err, errno, "duplicate the state directory fd");

  lock_fd
      = TEMP_FAILURE_RETRY (openat (dirfd, SP_LEDGER_LOCK, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (lock_fd < 0)
    return sp_make_error (err, errno, "open `%s`", SP_LEDGER_LOCK);
  if (flock (lock_fd, LOCK_EX | LOCK_NB) < 0)
    {
      if (errno == EWOULDBLOCK)
        {
          pid_t holder = sp_flock_holder_pid (lock_fd);

          if (holder > 0)
            return sp_make_error (err, 0,
                                  "the budget ledger is in use by pid %ld (it holds `%s`): stop it, or wait "
                                  "for it to end, and try again",
                                  (long)holder, SP_LEDGER_LOCK);
          return sp_make_error (err, 0,
                                "the budget ledger is in use by another process (it holds `%s`; `fuser` "
                                "names it): stop it, or wait for it to end, and try again",
                                SP_LEDGER_LOCK);
        }
      return sp_make_error (err, errno, "lock `%s`", SP_LEDGER_LOCK);
    }

  ledger = calloc (1, sizeof (*ledger));
  if (ledger == NULL)
    return sp_make_error (err, errno, "allocate the ledger");
  pthread_mutex_init (&ledger->lock, NULL);
  ledger->limit = limit;
  ledger->run_budget = run_bit_budget_millibits;
  ledger->dirfd = get_and_reset_fd (&dirfd);
  ledger->lock_fd = get_and_reset_fd (&lock_fd);

  fd = ledger_open_file (ledger->dirfd);
  if (fd < 0 && errno != ENOENT)
    {
      sp_make_error (err, errno, "open `%s`", SP_LEDGER_FILE);
      goto fail;
    }
  if (fd < 0 ? ledger_store (ledger, 0, NULL, err) : ledger_load (ledger, fd, &pin, err))
    goto fail;
  /* Pinned before anything is spent under it.  */
  if (pin && ledger_store (ledger, ledger->used, NULL, err) < 0)
    goto fail;

  *out = ledger;
  return 0;

fail:
  sp_ledger_close (ledger);
  return -1;
}

/* What the charge makes of the repository's entry, or why it cannot be made:
   SP_LEDGER_BITS_EXHAUSTED, or -1 when the file could not hold it.  Leaves
   room in the array for a new entry, so that committing cannot fail.  Called
   with the lock held.  */
static int
ledger_prepare (struct sp_ledger *ledger, const struct sp_ledger_charge *charge, struct ledger_pending *p,
                sp_error_t *err)
{
  const uint64_t budget = charge->bit_budget_millibits;
  struct sp_ledger_repo *r = &p->repo;
  bool found;

  if (charge->repo == NULL)
    return sp_make_error (err, 0, "charge the budget ledger: no repository");
  if (sp_repo_name_check (charge->repo, strlen (charge->repo), err) < 0)
    return sp_error_wrap (err, "charge the budget ledger");
  p->pos = ledger_find (ledger, charge->repo, &found);
  p->insert = !found;
  if (found)
    *r = ledger->repos[p->pos];
  else
    {
      memset (r, 0, sizeof (*r));
      strcpy (r->name, charge->repo);
    }

  /* An unbounded timing channel fits no budget.  A budget lowered since an
     earlier run may already be below the total.  */
  if (budget > 0
      && (charge->timing_unbounded || r->millibits > budget || charge->millibits > budget - r->millibits))
    return SP_LEDGER_BITS_EXHAUSTED;
  /* The run's: what every repository's calls could carry together, since a
     call on one can carry another's data through shared host state.  */
  if (ledger->run_budget > 0
      && (charge->timing_unbounded || ledger->run_millibits > ledger->run_budget
          || charge->millibits > ledger->run_budget - ledger->run_millibits))
    return SP_LEDGER_RUN_BITS_EXHAUSTED;

  if (charge->millibits > SP_LEDGER_MILLIBITS_MAX - r->millibits)
    return sp_make_error (err, 0,
                          "charge the budget ledger: the repository's total would pass %" PRIu64 " millibits",
                          (uint64_t)SP_LEDGER_MILLIBITS_MAX);
  if (charge->timing_unbounded && r->unbounded_calls >= SP_LEDGER_UNBOUNDED_MAX)
    return sp_make_error (err, 0,
                          "charge the budget ledger: the repository's unbounded calls would pass %" PRIu32,
                          (uint32_t)SP_LEDGER_UNBOUNDED_MAX);
  if (p->insert && ledger->n_repos >= SP_LEDGER_MAX_REPOS)
    return sp_make_error (err, 0,
                          "charge the budget ledger: it already holds %d repositories, the most it may",
                          SP_LEDGER_MAX_REPOS);
  if (p->insert && ledger->n_repos == ledger->cap_repos)
    {
      size_t cap = ledger->cap_repos ? ledger->cap_repos * 2 : 8;
      struct sp_ledger_repo *grown;

      if (cap > SP_LEDGER_MAX_REPOS)
        cap = SP_LEDGER_MAX_REPOS;
      grown = realloc (ledger->repos, cap * sizeof (*grown));
      if (grown == NULL)
        return sp_make_error (err, ENOMEM, "charge the budget ledger");
      ledger->repos = grown;
      ledger->cap_repos = cap;
    }

  r->millibits += charge->millibits;
  if (charge->timing_unbounded)
    r->unbounded_calls++;
  return 0;
}

/* Makes the persisted change the ledger's own.  */
static void
ledger_commit (struct sp_ledger *ledger, const struct ledger_pending *p,
               const struct sp_ledger_charge *charge)
{
  ledger->run_millibits += charge->millibits;
  if (charge->timing_unbounded)
    ledger->run_unbounded_calls++;
  if (p->insert)
    {
      memmove (&ledger->repos[p->pos + 1], &ledger->repos[p->pos],
               (ledger->n_repos - p->pos) * sizeof (*ledger->repos));
      ledger->n_repos++;
    }
  ledger->repos[p->pos] = p->repo;
}

int
sp_ledger_debit_call (struct sp_ledger *ledger, const struct sp_ledger_charge *charge, uint32_t *remaining,
                      uint64_t *repo_millibits, sp_error_t *err)
{
  struct ledger_pending pending;
  int ret = 0;

  pthread_mutex_lock (&ledger->lock);
  if (ledger->poisoned)
    ret = sp_make_error (err, 0, "the budget ledger failed to persist earlier; refusing to spend more");
  else if (ledger->used >= ledger->limit)
    ret = SP_LEDGER_EXHAUSTED;
  else if (!charge && ledger->run_budget > 0)
    ret = SP_LEDGER_RUN_BITS_EXHAUSTED; /* a call charging nothing would pass the run's budget unseen */
  else if (charge && (ret = ledger_prepare (ledger, charge, &pending, err)) != 0)
    ; /* refused, nothing written */
  else if (ledger_store (ledger, ledger->used + 1, charge ? &pending : NULL, err) < 0)
    {
      ledger->poisoned = true;
      ret = -1;
    }
  else
    {
      ledger->used++;
      if (charge)
        ledger_commit (ledger, &pending, charge);
    }
  if (remaining)
    *remaining = ledger->limit - ledger->used;
  if (repo_millibits)
    {
      bool found = false;
      size_t pos = charge && charge->repo ? ledger_find (ledger, charge->repo, &found) : 0;

      *repo_millibits = found ? ledger->repos[pos].millibits : 0;
    }
  pthread_mutex_unlock (&ledger->lock);
  return ret;
}

int
sp_ledger_debit (struct sp_ledger *ledger, uint32_t *remaining, sp_error_t *err)
{
  return sp_ledger_debit_call (ledger, NULL, remaining, NULL, err);
}

void
sp_ledger_run_totals (struct sp_ledger *ledger, uint64_t *bit_budget_millibits, uint64_t *millibits,
                      uint64_t *unbounded_calls)
{
  pthread_mutex_lock (&ledger->lock);
  if (bit_budget_millibits)
    *bit_budget_millibits = ledger->run_budget;
  if (millibits)
    *millibits = ledger->run_millibits;
  if (unbounded_calls)
    *unbounded_calls = ledger->run_unbounded_calls;
  pthread_mutex_unlock (&ledger->lock);
}

void
sp_ledger_repo_totals (struct sp_ledger *ledger, const char *repo, uint64_t *millibits,
                       uint64_t *unbounded_calls)
{
  bool found = false;
  size_t pos;

  pthread_mutex_lock (&ledger->lock);
  pos = repo ? ledger_find (ledger, repo, &found) : 0;
  if (millibits)
    *millibits = found ? ledger->repos[pos].millibits : 0;
  if (unbounded_calls)
    *unbounded_calls = found ? ledger->repos[pos].unbounded_calls : 0;
  pthread_mutex_unlock (&ledger->lock);
}

uint32_t
sp_ledger_remaining (struct sp_ledger *ledger)
{
  uint32_t left;

  pthread_mutex_lock (&ledger->lock);
  left = ledger->limit - ledger->used;
  pthread_mutex_unlock (&ledger->lock);
  return left;
}

void
sp_ledger_close (struct sp_ledger *ledger)
{
  if (ledger == NULL)
    return;
  sp_closep (&ledger->dirfd);
  sp_closep (&ledger->lock_fd);
  pthread_mutex_destroy (&ledger->lock);
  free (ledger->repos);
  free (ledger);
}
