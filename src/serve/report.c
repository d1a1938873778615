/* serve's state as it changes, told two ways (docs/operations.md, "The
   journal" and "status"): a STATUS= line to systemd (sd_notify), which
   `systemctl status` shows, and STATE/serve.json, which `status` reads.
   Both hold numbers and names the operator configured, never anything of
   a request: the STATUS= line only counts (systemctl status is open to
   every user), serve.json also the repositories' names and serve's own
   settings.  What STATUS= shows may change only at moments the agent sees
   anyway (an admission, a release), never when a probe ends or the pool
   refills, which follow the probe's duration: so it counts results when
   they are released, leaves out the waiting sandboxes, and is sent only
   when its text changes.

   The workers and the pool only count here (a lock, a few additions and a
   signal); one thread of its own writes, at most once every
   REPORT_INTERVAL_MS, so that neither a request nor the pool ever waits
   for a file write.  The last state is always written: at stop the thread
   ends after one more write, and the final STATUS= line is sent.  */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "os/fileio.h"
#include "os/log.h"
#include "text/yajl_util.h"

#include "serve/serve.h"

/* Between two writes, at least this long: a burst of requests makes one
   write, not one each.  */
#define REPORT_INTERVAL_MS 200

struct sp_serve_report
{
  struct sp_serve *s;
  struct sp_notify *notify;
  pthread_mutex_t lock;
  pthread_cond_t cv;
  pthread_t thread;
  bool thread_started;
  bool stop;
  bool dirty;
  uint64_t answered, refused, failed;
  unsigned *waiting; /* per repository: sandboxes made ahead, waiting for a request */
  char started[SP_AUDIT_TIME_BYTES];
  char last_status[SP_NOTIFY_STATE_MAX]; /* the STATUS= text last sent */
};

/* What one write says, copied under the lock and written outside it.  */
struct report_view
{
  uint64_t answered, refused, failed;
  unsigned *waiting;
};

static void
view_take (struct sp_serve_report *r, struct report_view *v)
{
  size_t n = r->s->config->n_private_repos;

  v->answered = r->answered;
  v->refused = r->refused;
  v->failed = r->failed;
  for (size_t i = 0; i < n; i++)
    v->waiting[i] = r->waiting[i];
  r->dirty = false;
}

/* "STATUS=2 repositories; 3 answered, 1 refused, 0 failed; budget 96 of
   100 left": counts only, and only when they changed.  */
static void
send_status (struct sp_serve_report *r, const struct report_view *v, const char *prefix)
{
  struct sp_serve *s = r->s;
  uint64_t run_budget = 0, run_carried = 0;
  char text[SP_NOTIFY_STATE_MAX];
  int len;

  sp_ledger_run_totals (s->ledger, &run_budget, &run_carried, NULL);
  len = snprintf (text, sizeof (text),
                  "STATUS=%s%zu repositories; %" PRIu64 " answered, %" PRIu64 " refused, %" PRIu64
                  " failed; budget %" PRIu32 " of %" PRIu32 " left",
                  prefix, s->config->n_private_repos, v->answered, v->refused, v->failed,
                  sp_ledger_remaining (s->ledger), s->config->max_invocations);
  if (len > 0 && (size_t)len < sizeof (text) && run_budget > 0)
    {
      uint64_t left = run_carried < run_budget ? run_budget - run_carried : 0;

      len += snprintf (text + len, sizeof (text) - (size_t)len,
                       "; run bits %" PRIu64 ".%03" PRIu64 " of %" PRIu64 " left", left / 1000, left % 1000,
                       run_budget / 1000);
    }
  if (strcmp (text, r->last_status) == 0)
    return;
  sp_notify_send (r->notify, text);
  snprintf (r->last_status, sizeof (r->last_status), "%s", text);
}

static unsigned
gen_bits_or_null (yajl_gen g, const char *k, uint64_t millibits)
{
  return millibits > 0 ? sp_yajl_gen_key_u64 (g, k, millibits / 1000)
                       : sp_yajl_gen_cstr (g, k) | yajl_gen_null (g);
}

/* STATE/serve.json, replaced by a rename: a reader sees one whole version.  */
static int
write_file (struct sp_serve_report *r, const struct report_view *v, sp_error_t *err)
{
  struct sp_serve *s = r->s;
  cleanup_yajl_gen yajl_gen g = yajl_gen_alloc (NULL);
  const unsigned char *buf;
  size_t len;
  unsigned st;

  if (g == NULL || !yajl_gen_config (g, yajl_gen_validate_utf8, 1))
    return sp_make_error (err, ENOMEM, "%s", SP_SERVE_REPORT_FILE);
  st = yajl_gen_map_open (g) | sp_yajl_gen_key_u64 (g, "version", SP_SERVE_REPORT_VERSION)
       | sp_yajl_gen_key_u64 (g, "pid", (uint64_t)getpid ());
  st |= sp_yajl_gen_cstr (g, "run") | sp_yajl_gen_cstr (g, s->run_id);
  st |= sp_yajl_gen_cstr (g, "started") | sp_yajl_gen_cstr (g, r->started);
  st |= sp_yajl_gen_cstr (g, "backend") | sp_yajl_gen_cstr (g, sp_runtime_name (s->config->runtime));
  st |= sp_yajl_gen_cstr (g, "release") | sp_yajl_gen_cstr (g, sp_release_mode_name (s->opt->release));
  st |= sp_yajl_gen_cstr (g, "snapshot") | sp_yajl_gen_cstr (g, sp_snapshot_mode_name (s->opt->snapshot));
  st |= sp_yajl_gen_cstr (g, "socket") | sp_yajl_gen_cstr (g, s->opt->socket);
  st |= sp_yajl_gen_key_u64 (g, "pool", s->pool_slots > 0 ? s->opt->pool : 0);
  st |= gen_bits_or_null (g, "bit_budget", s->opt->bit_budget_millibits);
  st |= gen_bits_or_null (g, "run_bit_budget", s->opt->run_bit_budget_millibits);
  st |= sp_yajl_gen_key_u64 (g, "answered", v->answered) | sp_yajl_gen_key_u64 (g, "refused", v->refused)
        | sp_yajl_gen_key_u64 (g, "failed", v->failed);
  st |= sp_yajl_gen_cstr (g, "repositories") | yajl_gen_array_open (g);
  for (size_t i = 0; i < s->config->n_private_repos; i++)
    st |= yajl_gen_map_open (g) | sp_yajl_gen_cstr (g, "repo")
          | sp_yajl_gen_cstr (g, s->config->private_repos[i])
          | sp_yajl_gen_key_u64 (g, "waiting", v->waiting[i]) | yajl_gen_map_close (g);
  st |= yajl_gen_array_close (g) | yajl_gen_map_close (g);
  if (st != yajl_gen_status_ok || yajl_gen_get_buf (g, &buf, &len) != yajl_gen_status_ok)
    return sp_make_error (err, 0, "%s: cannot render", SP_SERVE_REPORT_FILE);
  return sp_write_file_atomic_at (s->state_fd, SP_SERVE_REPORT_FILE, buf, len, 0600, err);
}

static void
publish (struct sp_serve_report *r, const struct report_view *v)
{
  cleanup_error sp_error_t err = NULL;

  send_status (r, v, "");
  /* serve goes on without it: status then says what it last read.  */
  if (write_file (r, v, &err) < 0)
    sp_log (SP_LOG_WARNING, "sealed-probe-proxy: serve: %s: not written: %s", SP_SERVE_REPORT_FILE,
            sp_error_message (err));
}

static void
pause_ms (unsigned ms)
{
  struct timespec t = { .tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L };

  while (nanosleep (&t, &t) < 0 && errno == EINTR)
    ;
}

static void *
report_thread (void *arg)
{
  struct sp_serve_report *r = arg;
  cleanup_free unsigned *waiting = calloc (r->s->config->n_private_repos + 1, sizeof (*waiting));
  struct report_view v = { .waiting = waiting };

  if (waiting == NULL)
    return NULL;
  pthread_mutex_lock (&r->lock);
  while (!r->stop)
    {
      if (!r->dirty)
        {
          pthread_cond_wait (&r->cv, &r->lock);
          continue;
        }
      view_take (r, &v);
      pthread_mutex_unlock (&r->lock);
      publish (r, &v);
      pause_ms (REPORT_INTERVAL_MS);
      pthread_mutex_lock (&r->lock);
    }
  pthread_mutex_unlock (&r->lock);
  return NULL;
}

static void
report_free (struct sp_serve_report *r)
{
  if (r == NULL)
    return;
  pthread_cond_destroy (&r->cv);
  pthread_mutex_destroy (&r->lock);
  free (r->waiting);
  free (r);
}

int
sp_serve_report_start (struct sp_serve *s, struct sp_notify *notify, sp_error_t *err)
{
  struct sp_serve_report *r = calloc (1, sizeof (*r));
  cleanup_free unsigned *waiting = calloc (s->config->n_private_repos + 1, sizeof (*waiting));
  struct report_view v = { .waiting = waiting };

  if (r == NULL || waiting == NULL
      || (r->waiting = calloc (s->config->n_private_repos + 1, sizeof (unsigned))) == NULL)
    {
      if (r != NULL)
        free (r->waiting);
      free (r);
      return sp_make_error (err, ENOMEM, "report: allocate");
    }
  r->s = s;
  r->notify = notify;
  pthread_mutex_init (&r->lock, NULL);
  pthread_cond_init (&r->cv, NULL);
  if (sp_audit_format_time (sp_realtime_ns (), r->started) < 0)
    snprintf (r->started, sizeof (r->started), "unknown");
  /* The file's first version before ready is said: status finds it as
     soon as the ready line is there.  The first STATUS= waits for
     sp_serve_report_ready: READY=1 comes first.  */
  view_take (r, &v);
  if (write_file (r, &v, err) < 0)
    {
      report_free (r);
      return sp_error_wrap (err, "report");
    }
  if ((errno = pthread_create (&r->thread, NULL, report_thread, r)) != 0)
    {
      int e = errno;

      (void)unlinkat (s->state_fd, SP_SERVE_REPORT_FILE, 0);
      report_free (r);
      return sp_make_error (err, e, "report: start its thread");
    }
  r->thread_started = true;
  s->report = r;
  return 0;
}

static void
changed (struct sp_serve_report *r)
{
  r->dirty = true;
  pthread_cond_signal (&r->cv);
}

void
sp_serve_report_ready (struct sp_serve *s)
{
  struct sp_serve_report *r = s->report;

  if (r == NULL)
    return;
  pthread_mutex_lock (&r->lock);
  changed (r);
  pthread_mutex_unlock (&r->lock);
}

void
sp_serve_report_result (struct sp_serve *s, const char *status)
{
  struct sp_serve_report *r = s->report;

  if (r == NULL)
    return;
  pthread_mutex_lock (&r->lock);
  if (strcmp (status, SP_AUDIT_STATUS_ANSWERED) == 0)
    r->answered++;
  else if (strcmp (status, SP_AUDIT_STATUS_REFUSED) == 0)
    r->refused++;
  else
    r->failed++;
  changed (r);
  pthread_mutex_unlock (&r->lock);
}

void
sp_serve_report_waiting (struct sp_serve *s, size_t seed_index, unsigned waiting)
{
  struct sp_serve_report *r = s->report;

  if (r == NULL)
    return;
  pthread_mutex_lock (&r->lock);
  if (r->waiting[seed_index] != waiting)
    {
      r->waiting[seed_index] = waiting;
      changed (r);
    }
  pthread_mutex_unlock (&r->lock);
}

void
sp_serve_report_stop (struct sp_serve *s)
{
  struct sp_serve_report *r = s->report;
  cleanup_free unsigned *waiting = NULL;
  struct report_view v = { 0 };

  if (r == NULL)
    return;
  pthread_mutex_lock (&r->lock);
  r->stop = true;
  pthread_cond_signal (&r->cv);
  pthread_mutex_unlock (&r->lock);
  if (r->thread_started)
    pthread_join (r->thread, NULL);
  /* The final counts, for systemctl status after the stop; the file goes,
     since no serve holds the state directory any more.  */
  waiting = calloc (s->config->n_private_repos + 1, sizeof (*waiting));
  if (waiting != NULL)
    {
      v.waiting = waiting;
      view_take (r, &v);
      send_status (r, &v, "stopping: ");
    }
  (void)unlinkat (s->state_fd, SP_SERVE_REPORT_FILE, 0);
  s->report = NULL;
  report_free (r);
}
