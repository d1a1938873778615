/* A run's status from its ledger and audit log: see
   src/status/run_status.h.  */
#define _GNU_SOURCE
#include "status/run_status.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/repo_name.h"
#include "stage/seed_store.h"
#include "text/json.h"

#define AUDIT_PATH      SP_AUDIT_DIR "/" SP_AUDIT_FILE
#define AUDIT_MAX_DEPTH 2 /* the record, its outcomes */
#define SCAN_CHUNK      (64 * 1024)

static const char *const outcome_names[SP_RUN_OUTCOME_COUNT] = {
  [SP_RUN_OUTCOME_ANSWERED] = SP_AUDIT_STATUS_ANSWERED,
  [SP_RUN_OUTCOME_REFUSED] = SP_AUDIT_STATUS_REFUSED,
  [SP_RUN_OUTCOME_PROBE] = SP_AUDIT_STATUS_PROBE,
  [SP_RUN_OUTCOME_TIMED_OUT] = SP_AUDIT_STATUS_TIMED_OUT,
  [SP_RUN_OUTCOME_RUNTIME] = SP_AUDIT_STATUS_RUNTIME,
  [SP_RUN_OUTCOME_ENVIRONMENT] = SP_AUDIT_STATUS_ENVIRONMENT,
  [SP_RUN_OUTCOME_INTERNAL] = SP_AUDIT_STATUS_INTERNAL,
  [SP_RUN_OUTCOME_CANCELLED] = SP_AUDIT_STATUS_CANCELLED,
};

const char *
sp_run_outcome_name (enum sp_run_outcome o)
{
  return o < SP_RUN_OUTCOME_COUNT ? outcome_names[o] : "?";
}

/* ---- one audit line ------------------------------------------------------ */

/* Every check names the line by its byte offset and the key, never a value:
   the log holds the agent's outcomes.  */
#define line_error(err, offset, ...)                                                                         \
  (sp_make_error (err, 0, __VA_ARGS__),                                                                      \
   sp_error_wrap (err, "`%s`: the line at byte %" PRIu64, AUDIT_PATH, (uint64_t)(offset)))

static bool
digits (const char *s, size_t n)
{
  for (size_t i = 0; i < n; i++)
    if (s[i] < '0' || s[i] > '9')
      return false;
  return true;
}

/* "2026-11-30T07:01:02.345Z", as sp_audit_format_time writes it.  */
static bool
is_audit_time (const struct sp_json *v)
{
  const char *s;

  if (v == NULL || v->type != SP_JSON_STRING || v->u.string.len != SP_AUDIT_TIME_BYTES - 1)
    return false;
  s = v->u.string.data;
  return digits (s, 4) && s[4] == '-' && digits (s + 5, 2) && s[7] == '-' && digits (s + 8, 2) && s[10] == 'T'
         && digits (s + 11, 2) && s[13] == ':' && digits (s + 14, 2) && s[16] == ':' && digits (s + 17, 2)
         && s[19] == '.' && digits (s + 20, 3) && s[23] == 'Z';
}

static bool
is_run_id (const char *s, size_t n)
{
  if (n == 0 || n > SP_ID_MAX_CHARS)
    return false;
  for (size_t i = 0; i < n; i++)
    if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'z')))
      return false;
  return true;
}

/* "<run>-<invocation>": the run's id, a dash, a decimal from 1.  */
static bool
is_invocation_id (const struct sp_json *v, const char *run)
{
  size_t n = strlen (run);
  const char *s;

  if (v == NULL || v->type != SP_JSON_STRING || v->u.string.len < n + 2
      || v->u.string.len > 2 * SP_ID_MAX_CHARS + 1)
    return false;
  s = v->u.string.data;
  return memcmp (s, run, n) == 0 && s[n] == '-' && s[n + 1] != '0'
         && digits (s + n + 1, v->u.string.len - n - 1);
}

/* key's value is null (when allowed) or of type; *out the value or NULL.  */
static int
get_typed (const struct sp_json *root, const char *key, enum sp_json_type type, bool nullable,
           const struct sp_json **out, uint64_t offset, sp_error_t *err)
{
  static const char *const type_names[]
      = { "null", "a boolean", "a number", "a string", "an array", "an object" };
  const struct sp_json *v = sp_json_object_get (root, key);

  *out = NULL;
  if (v == NULL)
    return line_error (err, offset, "`%s` is missing", key);
  if (v->type == SP_JSON_NULL && nullable)
    return 0;
  if (v->type != type)
    return line_error (err, offset, "`%s` must be %s%s", key, type_names[type], nullable ? " or null" : "");
  *out = v;
  return 0;
}

/* A nullable integer within [min, max].  */
static int
get_integer (const struct sp_json *root, const char *key, int64_t min, int64_t max, bool *has, int64_t *out,
             uint64_t offset, sp_error_t *err)
{
  const struct sp_json *v;

  if (get_typed (root, key, SP_JSON_NUMBER, true, &v, offset, err) < 0)
    return -1;
  *has = v != NULL;
  *out = 0;
  if (v != NULL && sp_json_integer (v, min, max, out) < 0)
    return line_error (err, offset, "`%s` must be an integer from %" PRId64 " to %" PRId64, key, min, max);
  return 0;
}

/* A nullable boolean as -1 (null), 0 or 1.  */
static int
get_tristate (const struct sp_json *root, const char *key, int *out, uint64_t offset, sp_error_t *err)
{
  const struct sp_json *v;

  if (get_typed (root, key, SP_JSON_BOOL, true, &v, offset, err) < 0)
    return -1;
  *out = v == NULL ? -1 : v->u.boolean;
  return 0;
}

/* What one line says, checked.  */
struct line
{
  const char *run;
  const struct sp_json *id;
  bool admitted;
  enum sp_run_outcome outcome;
  const char *received, *finished; /* finished NULL in an admission record */
  const char *repo;                /* NULL when null */
  bool debited;
  enum sp_cause cause; /* as serve set it; unrecorded in a line older than causes */
  bool has_exit, has_signal;
  int64_t exit_code, signal;
  int oom, timed_out;
  bool release_overflow;
};

static int
parse_status (const struct sp_json *v, struct line *l, uint64_t offset, sp_error_t *err)
{
  if (strcmp (v->u.string.data, SP_AUDIT_STATUS_ADMITTED) == 0)
    {
      l->admitted = true;
      return 0;
    }
  for (int o = 0; o < SP_RUN_OUTCOME_COUNT; o++)
    if (strcmp (v->u.string.data, outcome_names[o]) == 0)
      {
        l->outcome = (enum sp_run_outcome)o;
        return 0;
      }
  return line_error (err, offset, "`status` is none of those docs/audit.md lists");
}

static int
parse_line (const struct sp_json *root, struct line *l, uint64_t offset, sp_error_t *err)
{
  const struct sp_json *run, *status, *received, *finished, *repo, *debited, *reason, *overflow = NULL;
  const struct sp_json *cause = NULL;

  memset (l, 0, sizeof (*l));
  if (root->type != SP_JSON_OBJECT)
    return line_error (err, offset, "not a JSON object");
  if (get_typed (root, "run", SP_JSON_STRING, false, &run, offset, err) < 0
      || get_typed (root, "status", SP_JSON_STRING, false, &status, offset, err) < 0
      || get_typed (root, "received", SP_JSON_STRING, false, &received, offset, err) < 0
      || get_typed (root, "finished", SP_JSON_STRING, true, &finished, offset, err) < 0
      || get_typed (root, "repo", SP_JSON_STRING, true, &repo, offset, err) < 0
      || get_typed (root, "debited", SP_JSON_BOOL, false, &debited, offset, err) < 0
      || get_typed (root, "reason", SP_JSON_STRING, true, &reason, offset, err) < 0
      || get_integer (root, "exit", 0, INT32_MAX, &l->has_exit, &l->exit_code, offset, err) < 0
      || get_integer (root, "signal", 0, INT32_MAX, &l->has_signal, &l->signal, offset, err) < 0
      || get_tristate (root, "oom", &l->oom, offset, err) < 0
      || get_tristate (root, "timed_out", &l->timed_out, offset, err) < 0)
    return -1;
  /* Records written before the release modes have no `release_overflow`:
     nothing was held then, so nothing could overflow.  Present, it is
     checked like every other key.  */
  if (sp_json_object_get (root, "release_overflow") != NULL
      && get_typed (root, "release_overflow", SP_JSON_BOOL, false, &overflow, offset, err) < 0)
    return -1;
  /* Nor do records written before causes were values: theirs is
     `unrecorded`, never guessed from the reason's words.  */
  if (sp_json_object_get (root, "cause") != NULL
      && get_typed (root, "cause", SP_JSON_STRING, true, &cause, offset, err) < 0)
    return -1;
  (void)reason;
  if (!is_run_id (run->u.string.data, run->u.string.len))
    return line_error (err, offset, "`run` is not a run id");
  l->run = run->u.string.data;
  l->id = sp_json_object_get (root, "id");
  if (!is_invocation_id (l->id, l->run))
    return line_error (err, offset, "`id` is not the run's id, a dash and a number");
  if (parse_status (status, l, offset, err) < 0)
    return -1;
  if (!is_audit_time (received))
    return line_error (err, offset, "`received` is not an RFC 3339 time in milliseconds");
  if (l->admitted ? finished != NULL : !is_audit_time (finished))
    return line_error (err, offset,
                       l->admitted ? "`finished` must be null in an admission record"
                                   : "`finished` is not an RFC 3339 time in milliseconds");
  if (repo != NULL)
    {
      cleanup_error sp_error_t why = NULL;

      /* Named, not quoted: a name that fails may hold a credential.  */
      if (sp_repo_name_check (repo->u.string.data, repo->u.string.len, &why) < 0)
        return line_error (err, offset, "`repo` is not a repository name");
    }
  if (l->admitted && (repo == NULL || !debited->u.boolean))
    return line_error (err, offset, "an admission record must name its repository and be debited");
  l->received = received->u.string.data;
  l->finished = finished ? finished->u.string.data : NULL;
  l->repo = repo ? repo->u.string.data : NULL;
  l->debited = debited->u.boolean;
  l->cause = sp_cause_from_name (cause ? cause->u.string.data : NULL);
  l->release_overflow = overflow != NULL && overflow->u.boolean;
  return 0;
}

/* ---- the summary --------------------------------------------------------- */

struct sp_run_status *
sp_run_status_new (void)
{
  return calloc (1, sizeof (struct sp_run_status));
}

/* The repository's entry, inserted in order when missing; NULL past
   SP_RUN_STATUS_MAX_REPOS or when out of memory (err set).  */
static struct sp_run_status_repo *
repo_entry (struct sp_run_status *st, const char *name, sp_error_t *err)
{
  size_t lo = 0, hi = st->n_repos;
  struct sp_run_status_repo *grown;

  while (lo < hi)
    {
      size_t mid = lo + (hi - lo) / 2;
      int c = strcmp (st->repos[mid].name, name);

      if (c == 0)
        return &st->repos[mid];
      if (c < 0)
        lo = mid + 1;
      else
        hi = mid;
    }
  if (st->n_repos >= SP_RUN_STATUS_MAX_REPOS)
    {
      sp_make_error (err, 0, "the ledger and `%s` name more than %d repositories", AUDIT_PATH,
                     SP_RUN_STATUS_MAX_REPOS);
      return NULL;
    }
  grown = realloc (st->repos, (st->n_repos + 1) * sizeof (*grown));
  if (grown == NULL)
    {
      sp_make_error (err, ENOMEM, "allocate the repositories");
      return NULL;
    }
  st->repos = grown;
  memmove (&st->repos[lo + 1], &st->repos[lo], (st->n_repos - lo) * sizeof (*grown));
  st->n_repos++;
  memset (&st->repos[lo], 0, sizeof (*grown));
  strcpy (st->repos[lo].name, name);
  return &st->repos[lo];
}

static uint64_t
unfinished_of (const struct sp_run_counts *c)
{
  return c->admitted > c->completed ? c->admitted - c->completed : 0;
}

/* A run ends where the next begins: runs never overlap, since one ledger
   lock admits one serve at a time.  */
static void
close_run (struct sp_run_status *st)
{
  if (st->latest_run[0] == '\0')
    return;
  st->latest.unfinished = unfinished_of (&st->latest);
  st->all.unfinished += st->latest.unfinished;
}

static void
add_failure (struct sp_run_status *st, const struct line *l)
{
  struct sp_run_failure *f = &st->failures[st->failures_total % SP_RUN_STATUS_FAILURES_MAX];
  size_t id_len = strlen (l->id->u.string.data);

  memset (f, 0, sizeof (*f));
  memcpy (f->time, l->finished, SP_AUDIT_TIME_BYTES);
  memcpy (f->id, l->id->u.string.data, id_len + 1);
  if (l->repo)
    strcpy (f->repo, l->repo);
  f->status = l->outcome;
  f->cause = l->cause;
  f->has_exit = l->has_exit;
  f->exit_code = l->exit_code;
  f->has_signal = l->has_signal;
  f->signal = l->signal;
  f->oom = l->oom;
  f->timed_out = l->timed_out;
  f->release_overflow = l->release_overflow;
  st->causes[f->cause]++;
  st->failures_total++;
  if (st->n_failures < SP_RUN_STATUS_FAILURES_MAX)
    st->n_failures++;
}

int
sp_run_status_add_line (struct sp_run_status *st, const char *text, size_t len, uint64_t offset,
                        sp_error_t *err)
{
  cleanup_json struct sp_json *root = NULL;
  struct line l;

  if (sp_json_parse (text, len, AUDIT_MAX_DEPTH, &root, err) < 0)
    return sp_error_wrap (err, "`%s`: the line at byte %" PRIu64, AUDIT_PATH, offset);
  if (parse_line (root, &l, offset, err) < 0)
    return -1;

  if (strcmp (l.run, st->latest_run) != 0)
    {
      close_run (st);
      memset (&st->latest, 0, sizeof (st->latest));
      strcpy (st->latest_run, l.run);
      memcpy (st->latest_first, l.received, SP_AUDIT_TIME_BYTES);
      st->runs++;
    }
  memcpy (st->latest_last, l.finished ? l.finished : l.received, SP_AUDIT_TIME_BYTES);
  st->records++;

  if (l.admitted)
    {
      struct sp_run_status_repo *r = repo_entry (st, l.repo, err);

      if (r == NULL)
        return -1;
      r->invocations++;
      st->latest.admitted++;
      st->all.admitted++;
      return 0;
    }
  st->latest.outcomes[l.outcome]++;
  st->all.outcomes[l.outcome]++;
  if (l.debited)
    {
      st->latest.completed++;
      st->all.completed++;
    }
  if (l.outcome != SP_RUN_OUTCOME_ANSWERED)
    add_failure (st, &l);
  return 0;
}

int
sp_run_status_finish (struct sp_run_status *st, struct sp_ledger_snapshot *ledger, sp_error_t *err)
{
  close_run (st);
  st->ledger = ledger;
  if (ledger == NULL)
    {
      if (st->all.admitted > 0)
        return sp_make_error (err, 0,
                              "`%s` records %" PRIu64 " debited invocations but there is no `%s`: the "
                              "budget is unknown",
                              AUDIT_PATH, st->all.admitted, SP_LEDGER_FILE);
      return 0;
    }
  /* The log is read before the ledger, and serve debits before it writes
     the admission record, so the ledger can only be ahead.  */
  if (st->all.admitted > ledger->used)
    return sp_make_error (err, 0,
                          "`%s` records %" PRIu64 " debited invocations but `%s` says %" PRIu32
                          " were used: the ledger was reset or replaced",
                          AUDIT_PATH, st->all.admitted, SP_LEDGER_FILE, ledger->used);
  for (size_t i = 0; i < ledger->n_repos; i++)
    {
      struct sp_run_status_repo *r = repo_entry (st, ledger->repos[i].name, err);

      if (r == NULL)
        return -1;
      r->in_ledger = true;
      r->millibits = ledger->repos[i].millibits;
      r->unbounded_calls = ledger->repos[i].unbounded_calls;
    }
  return 0;
}

const struct sp_run_failure *
sp_run_status_failure (const struct sp_run_status *st, size_t i)
{
  /* The next write goes to failures_total % MAX: once the ring is full,
     that is the oldest.  */
  return &st->failures[(st->failures_total - st->n_failures + i) % SP_RUN_STATUS_FAILURES_MAX];
}

void
sp_run_status_free (struct sp_run_status *st)
{
  if (st == NULL)
    return;
  sp_ledger_snapshot_free (st->ledger);
  free (st->repos);
  free (st);
}

/* ---- reading the files --------------------------------------------------- */

/* Streams whole lines of the log's last cap bytes (from the first line that
   begins in them) up to the size it had when opened: serve may append
   meanwhile, and its lines are read next time.  An unterminated end is a
   write under way, or one a crash cut short: it is counted, not read.  */
static int
scan_audit (struct sp_run_status *st, int fd, uint64_t cap, sp_error_t *err)
{
  cleanup_free char *buf = malloc (SCAN_CHUNK);
  cleanup_free char *line = malloc (SP_AUDIT_LINE_MAX_BYTES);
  uint64_t size, pos = 0, line_start = 0;
  size_t line_len = 0;
  bool skip = false;
  struct stat sb;

  if (buf == NULL || line == NULL)
    return sp_make_error (err, ENOMEM, "allocate the audit reader");
  if (fstat (fd, &sb) < 0)
    return sp_make_error (err, errno, "stat `%s`", AUDIT_PATH);
  size = (uint64_t)sb.st_size;
  st->audit_present = true;
  st->audit_bytes = size;
  /* From the byte before the window: a newline there means the window
     begins with a whole line.  */
  if (size > cap)
    {
      pos = size - cap - 1;
      skip = true;
    }
  while (pos < size)
    {
      size_t want = size - pos < SCAN_CHUNK ? (size_t)(size - pos) : SCAN_CHUNK;
      ssize_t n = TEMP_FAILURE_RETRY (pread (fd, buf, want, (off_t)pos));
      const char *p = buf, *end;

      if (n < 0)
        return sp_make_error (err, errno, "read `%s`", AUDIT_PATH);
      if (n == 0)
        break; /* cut short meanwhile (copytruncate) */
      end = buf + n;
      while (p < end)
        {
          const char *nl = memchr (p, '\n', (size_t)(end - p));
          size_t seg = (size_t)((nl ? nl : end) - p);
          uint64_t next = pos + (uint64_t)((nl ? nl + 1 : end) - buf);

          if (skip)
            {
              if (nl)
                {
                  skip = false;
                  line_start = st->read_from = next;
                }
              p = nl ? nl + 1 : end;
              continue;
            }
          /* A rendered line is at most SP_AUDIT_LINE_MAX_BYTES, its newline
             included.  */
          if (seg > SP_AUDIT_LINE_MAX_BYTES - 1 - line_len)
            return sp_make_error (err, 0, "`%s`: the line at byte %" PRIu64 " is longer than %d bytes",
                                  AUDIT_PATH, line_start, SP_AUDIT_LINE_MAX_BYTES);
          memcpy (line + line_len, p, seg);
          line_len += seg;
          p = nl ? nl + 1 : end;
          if (nl == NULL)
            continue;
          if (sp_run_status_add_line (st, line, line_len, line_start, err) < 0)
            return -1;
          line_len = 0;
          line_start = next;
        }
      pos += (uint64_t)n;
    }
  if (skip)
    return sp_make_error (err, 0, "`%s`: its last %" PRIu64 " bytes hold no line end", AUDIT_PATH, cap);
  st->torn_tail_bytes = line_len;
  return 0;
}

int
sp_run_status_read (int state_dirfd, const struct sp_run_status_options *opt, struct sp_run_status **out,
                    sp_error_t *err)
{
  cleanup_run_status struct sp_run_status *st = sp_run_status_new ();
  struct sp_ledger_snapshot *ledger = NULL;
  cleanup_close int fd = -1;
  uint64_t cap = opt->scan_max_bytes ? opt->scan_max_bytes : SP_RUN_STATUS_SCAN_MAX_BYTES;

  /* A window shorter than a line could hold no whole one.  */
  if (cap < SP_AUDIT_LINE_MAX_BYTES)
    cap = SP_AUDIT_LINE_MAX_BYTES;
  if (st == NULL)
    return sp_make_error (err, ENOMEM, "allocate the status");
  /* The log first, then the ledger: the ledger can then only be ahead.  */
  if (sp_audit_open_read (state_dirfd, opt->owner, &fd, err) < 0)
    return -1;
  if (fd >= 0 && scan_audit (st, fd, cap, err) < 0)
    return -1;
  if (sp_ledger_read_snapshot (state_dirfd, &ledger, err) < 0)
    return -1;
  if (ledger == NULL && fd < 0 && faccessat (state_dirfd, SP_STAGED_FILE, F_OK, AT_SYMLINK_NOFOLLOW) < 0)
    return sp_make_error (err, errno == ENOENT ? 0 : errno,
                          "no `%s`, no `%s` and no `%s`: not a state directory that stage or serve made",
                          SP_LEDGER_FILE, AUDIT_PATH, SP_STAGED_FILE);
  if (sp_run_status_finish (st, ledger, err) < 0)
    return -1;
  *out = get_and_reset (&st);
  return 0;
}
