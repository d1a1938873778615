/* The invocation budget ledger: see include/sealed-probe/ledger.h.  */
#define _GNU_SOURCE
#include <sealed-probe/ledger.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/stat.h>

#include <sealed-probe/bounds.h>
#include <sealed-probe/cleanup.h>
#include <sealed-probe/fileio.h>
#include <sealed-probe/json.h>

#define LEDGER_VERSION 1

struct sp_ledger
{
  pthread_mutex_t lock;
  int dirfd;
  int lock_fd;
  uint32_t limit;
  uint32_t used;
  bool poisoned;
};

static int
ledger_store (struct sp_ledger *ledger, uint32_t used, sp_error_t *err)
{
  char text[128];
  int n;

  n = snprintf (text, sizeof (text), "{\"version\":%d,\"limit\":%" PRIu32 ",\"used\":%" PRIu32 "}\n",
                LEDGER_VERSION, ledger->limit, used);
  if (n < 0 || (size_t)n >= sizeof (text))
    return sp_make_error (err, 0, "format the budget ledger");
  return sp_write_file_atomic_at (ledger->dirfd, SP_LEDGER_FILE, text, (size_t)n, 0600, err);
}

static int
ledger_field (const struct sp_json *root, const char *key, int64_t min, int64_t max, int64_t *out,
              sp_error_t *err)
{
  const struct sp_json *v = sp_json_object_get (root, key);

  if (v == NULL)
    return sp_make_error (err, 0, "`%s`: missing key \"%s\"", SP_LEDGER_FILE, key);
  if (sp_json_integer (v, min, max, out) < 0)
    return sp_make_error (err, 0, "`%s`: \"%s\" must be an integer from %" PRId64 " to %" PRId64,
                          SP_LEDGER_FILE, key, min, max);
  return 0;
}

/* Reads an existing ledger strictly: a malformed one is an operator problem,
   and treating it as new would hand out a fresh budget.  */
static int
ledger_load (struct sp_ledger *ledger, int fd, sp_error_t *err)
{
  cleanup_free char *text = NULL;
  cleanup_json struct sp_json *root = NULL;
  int64_t version, limit, used;
  struct stat st;
  size_t len;

  if (fstat (fd, &st) < 0)
    return sp_make_error (err, errno, "stat `%s`", SP_LEDGER_FILE);
  if (!S_ISREG (st.st_mode))
    return sp_make_error (err, 0, "`%s` is not a regular file", SP_LEDGER_FILE);
  if (sp_read_fd_capped (fd, SP_LEDGER_MAX_BYTES, &text, &len, err) < 0)
    return sp_error_wrap (err, "read `%s`", SP_LEDGER_FILE);
  if (sp_json_parse (text, len, 2, &root, err) < 0)
    return sp_error_wrap (err, "parse `%s`", SP_LEDGER_FILE);
  if (root->type != SP_JSON_OBJECT || root->u.object.len != 3)
    return sp_make_error (err, 0, "`%s`: must be an object with exactly version, limit and used",
                          SP_LEDGER_FILE);
  if (ledger_field (root, "version", LEDGER_VERSION, LEDGER_VERSION, &version, err) < 0
      || ledger_field (root, "limit", SP_INVOCATIONS_MIN, SP_INVOCATIONS_MAX, &limit, err) < 0
      || ledger_field (root, "used", 0, limit, &used, err) < 0)
    return -1;
  if ((uint32_t)limit != ledger->limit)
    return sp_make_error (err, 0,
                          "`%s` holds a budget of %" PRId64 " but the config says %" PRIu32
                          "; a run's budget never changes: start a new run with a new state directory",
                          SP_LEDGER_FILE, limit, ledger->limit);
  ledger->used = (uint32_t)used;
  return 0;
}

int
sp_ledger_open (int state_dirfd, uint32_t limit, struct sp_ledger **out, sp_error_t *err)
{
  cleanup_close int dirfd = -1;
  cleanup_close int lock_fd = -1;
  cleanup_close int fd = -1;
  struct sp_ledger *ledger;

  if (limit < SP_INVOCATIONS_MIN || limit > SP_INVOCATIONS_MAX)
    return sp_make_error (err, 0, "budget must be from %d to %d", SP_INVOCATIONS_MIN, SP_INVOCATIONS_MAX);

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
        return sp_make_error (err, 0, "the budget ledger is in use by another process");
      return sp_make_error (err, errno, "lock `%s`", SP_LEDGER_LOCK);
    }

  ledger = calloc (1, sizeof (*ledger));
  if (ledger == NULL)
    return sp_make_error (err, errno, "allocate the ledger");
  pthread_mutex_init (&ledger->lock, NULL);
  ledger->limit = limit;
  ledger->dirfd = get_and_reset_fd (&dirfd);
  ledger->lock_fd = get_and_reset_fd (&lock_fd);

  fd = TEMP_FAILURE_RETRY (
      openat (ledger->dirfd, SP_LEDGER_FILE, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK));
  if (fd < 0 && errno != ENOENT)
    {
      sp_make_error (err, errno, "open `%s`", SP_LEDGER_FILE);
      goto fail;
    }
  if (fd < 0 ? ledger_store (ledger, 0, err) : ledger_load (ledger, fd, err))
    goto fail;

  *out = ledger;
  return 0;

fail:
  sp_ledger_close (ledger);
  return -1;
}

int
sp_ledger_debit (struct sp_ledger *ledger, uint32_t *remaining, sp_error_t *err)
{
  int ret = 0;

  pthread_mutex_lock (&ledger->lock);
  if (ledger->poisoned)
    ret = sp_make_error (err, 0, "the budget ledger failed to persist earlier; refusing to spend more");
  else if (ledger->used >= ledger->limit)
    ret = SP_LEDGER_EXHAUSTED;
  else if (ledger_store (ledger, ledger->used + 1, err) < 0)
    {
      ledger->poisoned = true;
      ret = -1;
    }
  else
    ledger->used++;
  if (remaining)
    *remaining = ledger->limit - ledger->used;
  pthread_mutex_unlock (&ledger->lock);
  return ret;
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
  free (ledger);
}
