/* The audit log: see src/serve/audit.h and docs/audit.md.  */
#define _GNU_SOURCE
#include "base/release_ladder.h"
#include "serve/audit.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/utf8.h"
#include "text/yajl_util.h"

/* What a cut reason ends with: U+2026 then "[cut]".  */
#define CUT_MARK "\xE2\x80\xA6[cut]"

struct sp_audit
{
  pthread_mutex_t lock;
  int fd;
  /* Set by the first failed append, with its message: from then on nothing
     more is written, so that no line can follow a lost one unnoticed.  */
  bool failed;
  char failure[256];
};

int
sp_audit_format_time (uint64_t ns, char out[SP_AUDIT_TIME_BYTES])
{
  time_t secs = (time_t)(ns / 1000000000u);
  unsigned ms = (unsigned)((ns / 1000000u) % 1000u);
  struct tm tm;
  size_t n;

  if (gmtime_r (&secs, &tm) == NULL)
    return -1;
  /* %Y could print more than four digits; the format stays RFC 3339 only for
     years 0..9999, which every uint64_t of nanoseconds is.  */
  n = strftime (out, SP_AUDIT_TIME_BYTES, "%Y-%m-%dT%H:%M:%S", &tm);
  if (n != 19)
    return -1;
  snprintf (out + n, SP_AUDIT_TIME_BYTES - n, ".%03uZ", ms);
  return 0;
}

/* The render state: every yajl status is OR-ed into st (yajl_gen_status_ok
   is 0), and the first string refused names its key in bad_key.  */
struct gen
{
  yajl_gen g;
  unsigned st;
  const char *bad_key;
};

static void
key (struct gen *w, const char *k)
{
  w->st |= yajl_gen_string (w->g, (const unsigned char *)k, strlen (k));
}

/* Strict UTF-8 is checked here as well as by yajl, whose own check is
   looser (it lets surrogates through).  A NUL is refused too: sp_json, and
   many readers, refuse the \u0000 it would become.  */
static void
put_bytes (struct gen *w, const char *k, const void *s, size_t len)
{
  if (!sp_utf8_valid (s, len, NULL) || (len > 0 && memchr (s, '\0', len) != NULL))
    {
      if (w->bad_key == NULL)
        w->bad_key = k;
      w->st |= yajl_gen_invalid_string;
      return;
    }
  w->st |= yajl_gen_string (w->g, len > 0 ? s : (const unsigned char *)"", len);
  if (w->st != yajl_gen_status_ok && w->bad_key == NULL)
    w->bad_key = k;
}

static void
put_str_or_null (struct gen *w, const char *k, const char *s)
{
  key (w, k);
  if (s == NULL)
    w->st |= yajl_gen_null (w->g);
  else
    put_bytes (w, k, s, strlen (s));
}

static void
put_u64 (struct gen *w, const char *k, uint64_t v)
{
  char text[24];
  int n = snprintf (text, sizeof (text), "%" PRIu64, v);

  key (w, k);
  /* yajl_gen_integer takes a long long; the text keeps any uint64_t exact.  */
  w->st |= yajl_gen_number (w->g, text, (size_t)n);
}

static void
put_time (struct gen *w, const char *k, uint64_t ns, bool zero_is_null)
{
  char text[SP_AUDIT_TIME_BYTES];

  key (w, k);
  if (zero_is_null && ns == 0)
    w->st |= yajl_gen_null (w->g);
  else if (sp_audit_format_time (ns, text) < 0)
    w->st |= yajl_gen_invalid_string;
  else
    w->st |= yajl_gen_string (w->g, (const unsigned char *)text, strlen (text));
}

static void
put_bool (struct gen *w, const char *k, bool v)
{
  key (w, k);
  w->st |= yajl_gen_bool (w->g, v);
}

static void
put_null (struct gen *w, const char *k)
{
  key (w, k);
  w->st |= yajl_gen_null (w->g);
}

/* millibits as a number of bits with three decimals: 4808 -> 4.808.  */
static void
put_bits (struct gen *w, const char *k, uint64_t millibits)
{
  char text[32];
  int n = snprintf (text, sizeof (text), "%" PRIu64 ".%03" PRIu64, millibits / 1000, millibits % 1000);

  key (w, k);
  w->st |= yajl_gen_number (w->g, text, (size_t)n);
}

/* One render of rec with reason[0..reason_len) (NULL: null) into a fresh
   allocation ending in "\n".  */
static int
render_once (const struct sp_audit_record *rec, const char *reason, size_t reason_len, char **line,
             size_t *len, sp_error_t *err)
{
  cleanup_yajl_gen yajl_gen g = yajl_gen_alloc (NULL);
  const struct sp_run_facts *f = rec->facts;
  struct gen w = { .g = g };
  const unsigned char *buf;
  size_t buf_len;
  char *out;

  if (g == NULL || !yajl_gen_config (g, yajl_gen_validate_utf8, 1)
      || !yajl_gen_config (g, yajl_gen_beautify, 0))
    return sp_make_error (err, ENOMEM, "allocate the audit renderer");

  w.st |= yajl_gen_map_open (g);
  put_str_or_null (&w, "id", rec->id);
  put_str_or_null (&w, "run", rec->run);
  put_time (&w, "received", rec->received_ns, false);
  if (rec->peer.known)
    {
      put_u64 (&w, "peer_uid", rec->peer.uid);
      put_u64 (&w, "peer_gid", rec->peer.gid);
      put_u64 (&w, "peer_pid", rec->peer.pid);
    }
  else
    {
      put_null (&w, "peer_uid");
      put_null (&w, "peer_gid");
      put_null (&w, "peer_pid");
    }
  put_time (&w, "started", rec->started_ns, true);
  put_time (&w, "finished", rec->finished_ns, rec->admission);
  put_str_or_null (&w, "repo", rec->repo);
  key (&w, "outcomes");
  if (rec->outcomes == NULL)
    w.st |= yajl_gen_null (g);
  else
    {
      w.st |= yajl_gen_array_open (g);
      for (size_t i = 0; i < SP_OUTCOME_COUNT; i++)
        put_bytes (&w, "outcomes", rec->outcomes[i].data, rec->outcomes[i].len);
      w.st |= yajl_gen_array_close (g);
    }
  put_str_or_null (&w, "answer_schema", rec->schema_sha256);
  put_str_or_null (&w, "script_sha256", rec->script_sha256);
  put_str_or_null (&w, "seed_commit", rec->seed_commit);
  put_str_or_null (&w, "seed_digest", rec->seed_digest);
  if (rec->seed_omitted_submodules == NULL)
    put_null (&w, "seed_omitted_submodules");
  else
    put_u64 (&w, "seed_omitted_submodules", *rec->seed_omitted_submodules);
  put_str_or_null (&w, "snapshot", rec->snapshot);
  put_str_or_null (&w, "sandbox", rec->sandbox);
  put_bool (&w, "debited", rec->debited);
  put_u64 (&w, "budget_remaining", rec->budget_remaining);
  key (&w, "result");
  if (rec->admission)
    w.st |= yajl_gen_null (g);
  else if (rec->answer == 0)
    key (&w, "ERROR");
  else if (rec->schema_sha256 != NULL)
    put_bytes (&w, "result", rec->value, rec->value_len);
  else
    put_bytes (&w, "result", rec->outcomes[rec->answer - 1].data, rec->outcomes[rec->answer - 1].len);
  put_str_or_null (&w, "status", rec->status);
  put_str_or_null (&w, "cause", rec->admission ? NULL : sp_cause_name (rec->cause));
  key (&w, "reason");
  if (reason == NULL)
    w.st |= yajl_gen_null (g);
  else
    put_bytes (&w, "reason", reason, reason_len);
  put_bool (&w, "launched", f != NULL && f->launched);
  if (f == NULL)
    {
      static const char *const keys[]
          = { "exit", "signal", "oom", "timed_out", "wall_ms", "cpu_ms", "peak_memory_bytes" };
      for (size_t i = 0; i < sizeof (keys) / sizeof (keys[0]); i++)
        put_null (&w, keys[i]);
    }
  else
    {
      key (&w, "exit");
      if (f->exit_code < 0)
        w.st |= yajl_gen_null (g);
      else
        w.st |= yajl_gen_integer (g, f->exit_code);
      key (&w, "signal");
      w.st |= yajl_gen_integer (g, f->signal);
      put_bool (&w, "oom", f->oom);
      put_bool (&w, "timed_out", f->timed_out);
      put_u64 (&w, "wall_ms", f->wall_ns / 1000000u);
      put_u64 (&w, "cpu_ms", f->cpu_ns / 1000000u);
      put_u64 (&w, "peak_memory_bytes", f->peak_memory_bytes);
    }
  put_str_or_null (&w, "release", rec->release);
  key (&w, "release_ms");
  if (rec->release == NULL || rec->release_ms < 0)
    w.st |= yajl_gen_null (g);
  else
    w.st |= yajl_gen_integer (g, rec->release_ms);
  put_bool (&w, "release_overflow", rec->release_overflow);
  if (!rec->charged)
    {
      put_null (&w, "bits");
      put_null (&w, "content_bits");
      put_null (&w, "timing_bits");
      put_null (&w, "repo_bits");
    }
  else
    {
      put_bits (&w, "bits", rec->millibits);
      /* A call carries at least one content bit: 0 is a record of the
         three outcomes' form that did not say.  */
      uint64_t content = rec->content_millibits ? rec->content_millibits : SP_RELEASE_CONTENT_MILLIBITS;

      put_bits (&w, "content_bits", content);
      if (rec->timing_unbounded)
        put_str_or_null (&w, "timing_bits", "unbounded");
      else
        put_bits (&w, "timing_bits", rec->millibits > content ? rec->millibits - content : 0);
      put_bits (&w, "repo_bits", rec->repo_millibits);
    }
  w.st |= yajl_gen_map_close (g);

  if (w.bad_key != NULL)
    return sp_make_error (err, 0, "audit record: `%s` is not valid UTF-8 without NUL", w.bad_key);
  if (w.st != yajl_gen_status_ok || yajl_gen_get_buf (g, &buf, &buf_len) != yajl_gen_status_ok)
    return sp_make_error (err, 0, "audit record: cannot render");
  /* yajl never beautifies here and escapes every control byte, so the only
     newline is ours; checked anyway, because a second line would be a
     forged record.  */
  if (memchr (buf, '\n', buf_len) != NULL)
    return sp_make_error (err, 0, "audit record: a raw newline in the rendering");

  out = malloc (buf_len + 2);
  if (out == NULL)
    return sp_make_error (err, errno, "allocate the audit line");
  memcpy (out, buf, buf_len);
  out[buf_len] = '\n';
  out[buf_len + 1] = '\0';
  *line = out;
  *len = buf_len + 1;
  return 0;
}

/* The largest offset <= n that starts a UTF-8 sequence in s (valid UTF-8).  */
static size_t
utf8_floor (const char *s, size_t n)
{
  while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80)
    n--;
  return n;
}

/* Renders with reason[0..k) + CUT_MARK.  *fits says whether the line is
   within the bound; on success with fits, *line holds it.  */
static int
render_cut (const struct sp_audit_record *rec, const char *reason, size_t k, bool *fits, char **line,
            size_t *len, sp_error_t *err)
{
  cleanup_free char *cut = malloc (k + sizeof (CUT_MARK));
  cleanup_free char *out = NULL;
  size_t out_len;

  if (cut == NULL)
    return sp_make_error (err, errno, "allocate the cut reason");
  memcpy (cut, reason, k);
  memcpy (cut + k, CUT_MARK, sizeof (CUT_MARK));
  if (render_once (rec, cut, k + sizeof (CUT_MARK) - 1, &out, &out_len, err) < 0)
    return -1;
  *fits = out_len <= SP_AUDIT_LINE_MAX_BYTES;
  if (*fits)
    {
      *line = get_and_reset (&out);
      *len = out_len;
    }
  return 0;
}

int
sp_audit_render (const struct sp_audit_record *rec, char **line, size_t *len, sp_error_t *err)
{
  cleanup_free char *out = NULL;
  const char *reason = rec->reason;
  size_t reason_len = reason ? strlen (reason) : 0;
  size_t out_len, lo, hi;
  bool fits;

  if (rec->schema_sha256 != NULL)
    {
      if (rec->answer > 1 || (rec->answer == 1 && rec->value == NULL))
        return sp_make_error (err, 0, "audit record: answer %u of a schema's request has no value",
                              (unsigned)rec->answer);
    }
  else if (rec->answer > SP_OUTCOME_COUNT || (rec->answer > 0 && rec->outcomes == NULL))
    return sp_make_error (err, 0, "audit record: answer %u names no outcome", (unsigned)rec->answer);
  if (rec->admission && (rec->answer != 0 || rec->facts != NULL))
    return sp_make_error (err, 0, "audit record: an admission record has no answer and no run");
  if (render_once (rec, reason, reason_len, &out, &out_len, err) < 0)
    return -1;
  if (out_len <= SP_AUDIT_LINE_MAX_BYTES)
    {
      *line = get_and_reset (&out);
      *len = out_len;
      return 0;
    }
  if (reason == NULL)
    return sp_make_error (err, 0, "audit record: %zu bytes without a reason, over %d", out_len,
                          SP_AUDIT_LINE_MAX_BYTES);

  /* The longest prefix, cut at a character boundary, whose line fits.  How
     long a prefix renders depends on yajl's escaping, so rather than model
     it, search: fitting is monotone in the prefix, and this is rare.  */
  lo = 0;
  hi = reason_len;
  while (lo < hi)
    {
      size_t mid = lo + (hi - lo + 1) / 2;
      cleanup_free char *probe = NULL;
      size_t probe_len;

      if (render_cut (rec, reason, utf8_floor (reason, mid), &fits, &probe, &probe_len, err) < 0)
        return -1;
      if (fits)
        lo = mid;
      else
        hi = mid - 1;
    }
  if (render_cut (rec, reason, utf8_floor (reason, lo), &fits, line, len, err) < 0)
    return -1;
  if (!fits)
    return sp_make_error (err, 0, "audit record: over %d bytes even with its reason cut",
                          SP_AUDIT_LINE_MAX_BYTES);
  return 0;
}

/* The directory and the file must be root's and closed to group and others:
   the log names repositories and outcomes, which may themselves be
   sensitive.  */
static int
check_private_of (int fd, const char *name, bool want_dir, uid_t owner, sp_error_t *err)
{
  struct stat st;

  if (fstat (fd, &st) < 0)
    return sp_make_error (err, errno, "stat `%s`", name);
  if (want_dir ? !S_ISDIR (st.st_mode) : !S_ISREG (st.st_mode))
    return sp_make_error (err, 0, "`%s` is not a %s", name, want_dir ? "directory" : "regular file");
  if (st.st_uid != owner)
    return owner == 0 ? sp_make_error (err, 0, "`%s` is owned by uid %u, not root", name, (unsigned)st.st_uid)
                      : sp_make_error (err, 0, "`%s` is owned by uid %u, not %u", name, (unsigned)st.st_uid,
                                       (unsigned)owner);
  if (st.st_mode & 077)
    return sp_make_error (err, 0, "`%s` has mode %04o: group or others may use it (want %s)", name,
                          (unsigned)(st.st_mode & 07777), want_dir ? "0700" : "0600");
  return 0;
}

static int
check_private (int fd, const char *name, bool want_dir, sp_error_t *err)
{
  return check_private_of (fd, name, want_dir, 0, err);
}

/* Appends never leave a partial line, but a crash in the middle of one (a
   power cut) can: then the next record would be glued to it.  */
static int
check_whole_lines (int fd, sp_error_t *err)
{
  struct stat st;
  char last;

  if (fstat (fd, &st) < 0)
    return sp_make_error (err, errno, "stat `%s/%s`", SP_AUDIT_DIR, SP_AUDIT_FILE);
  if (st.st_size == 0)
    return 0;
  if (TEMP_FAILURE_RETRY (pread (fd, &last, 1, st.st_size - 1)) != 1)
    return sp_make_error (err, errno, "read the end of `%s/%s`", SP_AUDIT_DIR, SP_AUDIT_FILE);
  if (last != '\n')
    return sp_make_error (err, 0,
                          "`%s/%s` ends in a partial line (its %lld bytes do not end in a newline): "
                          "truncate it after its last newline, then start again",
                          SP_AUDIT_DIR, SP_AUDIT_FILE, (long long)st.st_size);
  return 0;
}

int
sp_audit_open (int state_dirfd, struct sp_audit **out, sp_error_t *err)
{
  cleanup_close int dirfd = -1;
  cleanup_close int fd = -1;
  struct sp_audit *audit;

  if (mkdirat (state_dirfd, SP_AUDIT_DIR, 0700) < 0 && errno != EEXIST)
    return sp_make_error (err, errno, "mkdir `%s`", SP_AUDIT_DIR);
  dirfd = TEMP_FAILURE_RETRY (
      openat (state_dirfd, SP_AUDIT_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (dirfd < 0)
    return sp_make_error (err, errno, "open `%s`", SP_AUDIT_DIR);
  if (check_private (dirfd, SP_AUDIT_DIR, true, err) < 0)
    return -1;

  /* O_NONBLOCK so that a FIFO planted in its place cannot hang the open;
     check_private then refuses it.  Read as well as write: its last byte is
     checked below.  */
  fd = TEMP_FAILURE_RETRY (
      openat (dirfd, SP_AUDIT_FILE,
              O_RDWR | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK, 0600));
  if (fd < 0)
    return sp_make_error (err, errno, "open `%s/%s`", SP_AUDIT_DIR, SP_AUDIT_FILE);
  if (check_private (fd, SP_AUDIT_DIR "/" SP_AUDIT_FILE, false, err) < 0)
    return -1;
  if (check_whole_lines (fd, err) < 0)
    return -1;
  /* A file just made is durable only once its directory entry is.  */
  if (fsync (dirfd) < 0)
    return sp_make_error (err, errno, "fsync `%s`", SP_AUDIT_DIR);

  audit = calloc (1, sizeof (*audit));
  if (audit == NULL)
    return sp_make_error (err, errno, "allocate the audit log");
  pthread_mutex_init (&audit->lock, NULL);
  audit->fd = get_and_reset_fd (&fd);
  *out = audit;
  return 0;
}

int
sp_audit_open_read (int state_dirfd, uid_t owner, int *out, sp_error_t *err)
{
  cleanup_close int dirfd = -1;
  cleanup_close int fd = -1;

  *out = -1;
  dirfd = TEMP_FAILURE_RETRY (
      openat (state_dirfd, SP_AUDIT_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (dirfd < 0)
    return errno == ENOENT ? 0 : sp_make_error (err, errno, "open `%s`", SP_AUDIT_DIR);
  if (check_private_of (dirfd, SP_AUDIT_DIR, true, owner, err) < 0)
    return -1;
  fd = TEMP_FAILURE_RETRY (
      openat (dirfd, SP_AUDIT_FILE, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK));
  if (fd < 0)
    return errno == ENOENT ? 0 : sp_make_error (err, errno, "open `%s/%s`", SP_AUDIT_DIR, SP_AUDIT_FILE);
  if (check_private_of (fd, SP_AUDIT_DIR "/" SP_AUDIT_FILE, false, owner, err) < 0)
    return -1;
  *out = get_and_reset_fd (&fd);
  return 0;
}

/* Writes line[0..len) at the end of the file; a short write's rest is
   tried once more, to learn why (ENOSPC, EFBIG) or to finish it.  */
static int
write_line (int fd, const char *line, size_t len, sp_error_t *err)
{
  size_t done = 0;

  for (int tries = 0; done < len && tries < 2; tries++)
    {
      ssize_t n = TEMP_FAILURE_RETRY (write (fd, line + done, len - done));

      if (n < 0)
        return sp_make_error (err, errno, "write `%s/%s`", SP_AUDIT_DIR, SP_AUDIT_FILE);
      done += (size_t)n;
    }
  if (done < len)
    return sp_make_error (err, 0, "write `%s/%s`: only %zu of %zu bytes", SP_AUDIT_DIR, SP_AUDIT_FILE, done,
                          len);
  if (fdatasync (fd) < 0)
    return sp_make_error (err, errno, "fdatasync `%s/%s`", SP_AUDIT_DIR, SP_AUDIT_FILE);
  return 0;
}

/* After a failed write: back to the size before it, so that no partial
   line stays (nothing to do when nothing was written: an immutable file
   refuses the truncate as well as the write).  */
static void
truncate_back (int fd, off_t size, sp_error_t *err)
{
  struct stat st;

  if (fstat (fd, &st) == 0 && st.st_size == size)
    return;
  if (ftruncate (fd, size) < 0 || fdatasync (fd) < 0)
    sp_error_wrap (err, "and the partial line could not be removed (%s)", strerror (errno));
}

int
sp_audit_append (struct sp_audit *audit, const struct sp_audit_record *rec, sp_error_t *err)
{
  cleanup_free char *line = NULL;
  struct stat st;
  size_t len;
  int ret;

  if (sp_audit_render (rec, &line, &len, err) < 0)
    return -1;

  /* Under the lock, O_APPEND puts the line at the size just read, so that a
     failure can cut the file back to exactly it.  */
  pthread_mutex_lock (&audit->lock);
  if (audit->failed)
    ret = sp_make_error (
        err, 0, "`%s/%s` failed earlier (%s): nothing more is written to it until the proxy restarts",
        SP_AUDIT_DIR, SP_AUDIT_FILE, audit->failure);
  else if (fstat (audit->fd, &st) < 0)
    ret = sp_make_error (err, errno, "stat `%s/%s`", SP_AUDIT_DIR, SP_AUDIT_FILE);
  else if ((ret = write_line (audit->fd, line, len, err)) < 0)
    truncate_back (audit->fd, st.st_size, err);
  if (ret < 0 && !audit->failed)
    {
      audit->failed = true;
      snprintf (audit->failure, sizeof (audit->failure), "%s", sp_error_message (*err));
    }
  pthread_mutex_unlock (&audit->lock);
  return ret;
}

void
sp_audit_close (struct sp_audit *audit)
{
  if (audit == NULL)
    return;
  if (audit->fd >= 0)
    close (audit->fd);
  pthread_mutex_destroy (&audit->lock);
  free (audit);
}
