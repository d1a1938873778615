/* serve's logic without a sandbox (issue 28, "serve is a library that unit
   tests drive"): the releaser's heap and thread, the slots, the queue, the stop
   through a fake runtime that records what serve asks of it, and the
   verdict every end and every failure gets.  Nothing here
   needs root, a runtime binary or a mount.  */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/protocol.h"
#include "serve/release_heap.h"
#include "serve/audit.h"
#include "serve/queue.h"
#include "serve/serve.h"
#include "serve/verdict.h"

#include "sp_check.h"

#define MS 1000000ULL

/* ---- a fake runtime: it only records the kills serve asks for ---------- */

#define FAKE_KILLS_MAX 16

struct fake_runtime
{
  struct sp_runtime_backend base; /* first: serve holds a pointer to it */
  char *killed[FAKE_KILLS_MAX];
  size_t n_killed;
};

static int
fake_kill (struct sp_runtime_backend *rt, const char *container_id, sp_error_t *err)
{
  struct fake_runtime *f = (struct fake_runtime *)rt;

  (void)err;
  ck_assert_uint_lt (f->n_killed, FAKE_KILLS_MAX);
  f->killed[f->n_killed++] = strdup (container_id);
  return 0;
}

static const struct sp_runtime_ops fake_ops = {
  .name = "fake",
  .kill = fake_kill,
};

static void
fake_release (struct fake_runtime *f)
{
  for (size_t i = 0; i < f->n_killed; i++)
    free (f->killed[i]);
}

/* A serve with n slots and nothing else: what the slots, the stop and the
   releaser touch.  */
static void
serve_init (struct sp_serve *s, unsigned n_slots, struct fake_runtime *f)
{
  *s = (struct sp_serve)SP_SERVE_INIT;
  pthread_mutex_init (&s->lock, NULL);
  s->n_slots = n_slots;
  s->slot_taken = calloc (n_slots, sizeof (*s->slot_taken));
  s->active = calloc (n_slots, sizeof (*s->active));
  ck_assert_ptr_nonnull (s->slot_taken);
  ck_assert_ptr_nonnull (s->active);
  if (f != NULL)
    {
      memset (f, 0, sizeof (*f));
      f->base.ops = &fake_ops;
      s->runtime = &f->base;
    }
}

static void
serve_release (struct sp_serve *s)
{
  free (s->slot_taken);
  free (s->active);
  pthread_mutex_destroy (&s->lock);
}

/* ---- the heap ---------------------------------------------------------- */

START_TEST (heap_gives_back_every_entry_in_release_order)
{
  enum
  {
    N = 1000
  };
  struct sp_release_held items[N];
  struct sp_release_heap h = { .items = items, .cap = N };
  bool seen[N] = { false };
  uint64_t x = 88172645463325252ULL, last = 0;

  /* xorshift: a fixed, shuffled order with repeats of the same time.  */
  for (int i = 0; i < N; i++)
    {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      sp_release_heap_push (&h, (struct sp_release_held){ .at_ns = x % 500, .fd = i });
    }
  ck_assert_uint_eq (h.len, N);
  for (int i = 0; i < N; i++)
    {
      struct sp_release_held e = sp_release_heap_pop (&h);

      ck_assert_msg (e.at_ns >= last, "entry %d leaves at %llu, after one due at %llu", i,
                     (unsigned long long)e.at_ns, (unsigned long long)last);
      ck_assert_msg (!seen[e.fd], "fd %d came back twice", e.fd);
      seen[e.fd] = true;
      last = e.at_ns;
    }
  ck_assert_uint_eq (h.len, 0);
}
END_TEST

/* ---- the releaser ------------------------------------------------------ */

/* The protocol version hold_all gives the i-th held answer: both, in
   turn.  */
static uint8_t
version_of (int i)
{
  return i % 2 ? SP_FRAME_VERSION_V2 : SP_FRAME_VERSION_V1;
}

/* What a held answer's client reads: exactly one ERROR frame of its
   request's version, then the end of the stream.  */
static void
expect_error_then_eof (int fd, int flags, uint8_t version)
{
  uint8_t want[SP_RESPONSE_V2_FRAME_MAX_BYTES], got[SP_RESPONSE_V2_FRAME_MAX_BYTES + 1];
  size_t want_len = SP_RESPONSE_FRAME_BYTES;
  sp_error_t err = NULL;
  ssize_t n;

  if (version == SP_FRAME_VERSION_V2)
    ck_assert_int_eq (sp_response_v2_encode (NULL, want, sizeof (want), &want_len, &err), 0);
  else
    ck_assert_int_eq (sp_response_encode (SP_RESPONSE_ERROR, want, &err), 0);
  n = recv (fd, got, want_len + 1, MSG_WAITALL | flags);
  ck_assert_msg (n == (ssize_t)want_len, "read %zd bytes, not one v%u ERROR frame (%s)", n, version,
                 n < 0 ? strerror (errno) : "then more");
  ck_assert_mem_eq (got, want, want_len);
  ck_assert_int_eq (recv (fd, got, 1, flags), 0);
}

/* Hands n answers to the releaser, the i-th due at at[i] and of protocol
   version version_of (i): pairs[i][1] goes to it, pairs[i][0] is the
   client's end.  */
static void
hold_all (struct sp_serve *s, int n, int pairs[][2], const uint64_t at[])
{
  for (int i = 0; i < n; i++)
    {
      ck_assert_int_eq (socketpair (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pairs[i]), 0);
      ck_assert (
          sp_serve_release_later (s, pairs[i][1], version_of (i),
                                  &(struct sp_serve_release){ .mode = SP_RELEASE_BUCKETED, .at_ns = at[i] }));
    }
}

START_TEST (releaser_sends_each_held_error_no_earlier_than_its_time)
{
  enum
  {
    N = 12
  };
  struct sp_serve s;
  sp_error_t err = NULL;
  int pairs[N][2];
  struct pollfd pfd[N];
  uint64_t at[N], now = sp_monotonic_ns ();
  int left = N;

  serve_init (&s, 1, NULL);
  ck_assert_msg (sp_serve_releaser_start (&s, &err) == 0, "%s", sp_error_message (err));
  /* Three release times, handed over out of order.  */
  for (int i = 0; i < N; i++)
    at[i] = now + (uint64_t)(((i * 7) % 3) + 1) * 40 * MS;
  hold_all (&s, N, pairs, at);
  for (int i = 0; i < N; i++)
    pfd[i] = (struct pollfd){ .fd = pairs[i][0], .events = POLLIN };
  /* Every answer is looked at as soon as any arrives: one sent early is
     seen before its time (a loaded machine only makes the look later).  */
  while (left > 0)
    {
      ck_assert_int_gt (poll (pfd, N, 10 * 1000), 0);
      now = sp_monotonic_ns ();
      for (int i = 0; i < N; i++)
        if (pfd[i].fd >= 0 && pfd[i].revents != 0)
          {
            ck_assert_msg (now >= at[i], "answer %d left %llu ms before its release time", i,
                           (unsigned long long)((at[i] - now) / MS));
            expect_error_then_eof (pfd[i].fd, 0, version_of (i));
            close (pfd[i].fd);
            pfd[i].fd = -1;
            left--;
          }
    }
  sp_serve_releaser_stop (&s);
  serve_release (&s);
}
END_TEST

/* A refusal is answered in the version the frame's header names, and in
   v1 whenever the header cannot say (too short, another magic).  */
START_TEST (refusals_answer_in_the_version_the_header_names)
{
  static const uint8_t v2[] = "SPRB\x02\x01\x00\x00\x00\x1e";
  static const uint8_t v1[] = "SPRB\x01\x01\x00\x00\x00\x1e";
  static const uint8_t other[] = "SPRC\x02\x01\x00\x00\x00\x1e";

  ck_assert_uint_eq (sp_serve_frame_version (v2, 10), 2);
  ck_assert_uint_eq (sp_serve_frame_version (v2, 5), 2);
  ck_assert_uint_eq (sp_serve_frame_version (v2, 4), 1);
  ck_assert_uint_eq (sp_serve_frame_version (v1, 10), 1);
  ck_assert_uint_eq (sp_serve_frame_version (other, 10), 1);
  ck_assert_uint_eq (sp_serve_frame_version (NULL, 0), 1);
}
END_TEST

START_TEST (releaser_stop_lets_every_held_error_go_at_once)
{
  enum
  {
    N = 8
  };
  struct sp_serve s;
  sp_error_t err = NULL;
  int pairs[N][2];
  uint64_t in_an_hour = sp_monotonic_ns () + 3600 * 1000 * MS, at[N];

  serve_init (&s, 1, NULL);
  ck_assert_msg (sp_serve_releaser_start (&s, &err) == 0, "%s", sp_error_message (err));
  for (int i = 0; i < N; i++)
    at[i] = in_an_hour;
  hold_all (&s, N, pairs, at);
  ck_assert (sp_serve_release_room (&s));
  sp_serve_releaser_stop (&s);
  /* Already there, without waiting: MSG_DONTWAIT fails on anything held.  */
  for (int i = 0; i < N; i++)
    {
      expect_error_then_eof (pairs[i][0], MSG_DONTWAIT, version_of (i));
      close (pairs[i][0]);
    }
  ck_assert (!sp_serve_release_room (&s));
  ck_assert (!sp_serve_release_later (&s, 0, 1, &(struct sp_serve_release){ .at_ns = in_an_hour }));
  serve_release (&s);
}
END_TEST

/* ---- the slots and the stop -------------------------------------------- */

START_TEST (a_slot_is_taken_once_until_it_is_freed)
{
  struct sp_serve s;
  bool got[3] = { false };

  serve_init (&s, 3, NULL);
  for (int i = 0; i < 3; i++)
    {
      int slot = sp_serve_slot_claim (&s);

      ck_assert_int_ge (slot, 0);
      ck_assert_int_lt (slot, 3);
      ck_assert_msg (!got[slot], "slot %d handed out twice", slot);
      got[slot] = true;
    }
  ck_assert_int_eq (sp_serve_slot_claim (&s), -1);
  ck_assert (!sp_serve_slot_free (&s, 1));
  ck_assert_int_eq (sp_serve_slot_claim (&s), 1);
  ck_assert_int_eq (sp_serve_slot_claim (&s), -1);
  serve_release (&s);
}
END_TEST

START_TEST (stop_kills_each_running_container_once_and_nothing_starts_after)
{
  struct sp_serve s;
  struct fake_runtime f;
  struct sp_serve_sandbox running = { .slot = 0, .container_id = (char *)"sp-run-1" };
  struct sp_serve_sandbox waiting = { .slot = 1, .container_id = (char *)"sp-run-p2" };
  struct sp_serve_sandbox other = { .slot = 2, .container_id = (char *)"sp-run-3" };
  struct sp_serve_sandbox late = { .slot = 3, .container_id = (char *)"sp-run-4" };

  serve_init (&s, 4, &f);
  for (int i = 0; i < 4; i++)
    ck_assert_int_ge (sp_serve_slot_claim (&s), 0);
  /* Made ahead and waiting in the pool: in a slot, never active.  */
  (void)waiting;
  ck_assert (sp_serve_sandbox_activate (&s, &running));
  ck_assert (sp_serve_sandbox_activate (&s, &other));
  ck_assert (!sp_serve_stopping (&s));

  ck_assert_uint_eq (sp_serve_stop (&s), 2);
  ck_assert_uint_eq (f.n_killed, 2);
  ck_assert_str_eq (f.killed[0], "sp-run-1");
  ck_assert_str_eq (f.killed[1], "sp-run-3");
  ck_assert (sp_serve_stopping (&s));
  /* A container registered after the stop would escape its kill: refused.  */
  ck_assert (!sp_serve_sandbox_activate (&s, &late));
  ck_assert (sp_serve_slot_free (&s, 3));
  ck_assert_int_eq (sp_serve_slot_claim (&s), -1);
  fake_release (&f);
  serve_release (&s);
}
END_TEST

START_TEST (a_halt_is_said_once_and_keeps_its_first_reason)
{
  struct sp_serve s;
  char why[sizeof (s.halt_reason)] = "";

  serve_init (&s, 1, NULL);
  ck_assert (!sp_serve_halted (&s, why, sizeof (why)));
  sp_serve_halt (&s, "budget: write the ledger: No space left on device");
  sp_serve_halt (&s, "audit: a second failure");
  ck_assert (sp_serve_halted (&s, why, sizeof (why)));
  ck_assert_str_eq (why, "budget: write the ledger: No space left on device");
  serve_release (&s);
}
END_TEST

/* ---- verdicts: whose each end is --------------------------------------- */

struct end_row
{
  struct sp_run_facts facts;
  int ret;
  const char *status;
  enum sp_cause cause;
  const char *says;
};

START_TEST (each_end_of_a_probe_gets_its_verdict)
{
  static const struct end_row rows[] = {
    { { .stage = SP_RUN_STAGE_PROBE, .exit_code = 0 }, 0, NULL, SP_CAUSE_NONE, NULL },
    { { .stage = SP_RUN_STAGE_PROBE, .exit_code = 3 },
      -1,
      SP_AUDIT_STATUS_PROBE,
      SP_CAUSE_PROBE_EXIT,
      "exited with status 3" },
    { { .stage = SP_RUN_STAGE_PROBE, .exit_code = -1, .signal = 9, .oom = true },
      -1,
      SP_AUDIT_STATUS_PROBE,
      SP_CAUSE_PROBE_SIGNAL,
      "signal 9 (out of memory)" },
    /* A timeout's kill is a signal too: the timeout is what happened.  */
    { { .stage = SP_RUN_STAGE_PROBE, .exit_code = -1, .signal = 9, .timed_out = true },
      -1,
      SP_AUDIT_STATUS_TIMED_OUT,
      SP_CAUSE_TIMEOUT,
      "past the 7 s timeout" },
  };

  for (size_t i = 0; i < sizeof (rows) / sizeof (rows[0]); i++)
    {
      struct sp_verdict v = { NULL, SP_CAUSE_NONE };
      sp_error_t err = NULL;

      ck_assert_int_eq (sp_verdict_of_end (&rows[i].facts, 7, &v, &err), rows[i].ret);
      if (rows[i].ret == 0)
        {
          ck_assert_ptr_null (err);
          continue;
        }
      ck_assert_str_eq (v.status, rows[i].status);
      ck_assert_str_eq (sp_cause_name (v.cause), sp_cause_name (rows[i].cause));
      ck_assert_msg (strstr (sp_error_message (err), rows[i].says) != NULL, "row %zu: \"%s\"", i,
                     sp_error_message (err));
      sp_error_release (&err);
    }
}
END_TEST

struct failure_row
{
  int errno_value;
  enum sp_cause said; /* what the failing step set; SP_CAUSE_NONE: nothing */
  bool ran;
  enum sp_run_stage stage;
  bool rootfs_gone;
  const char *status;
  enum sp_cause cause;
  const char *adds; /* what the verdict adds to the reason, or NULL */
};

START_TEST (each_failure_outside_the_probe_is_blamed_where_it_lies)
{
  static const struct failure_row rows[] = {
    /* The host's, whatever the step said.  */
    { ENOSPC, SP_CAUSE_BUNDLE, false, SP_RUN_STAGE_NONE, false, SP_AUDIT_STATUS_ENVIRONMENT,
      SP_CAUSE_ENVIRONMENT, NULL },
    { EROFS, SP_CAUSE_NONE, true, SP_RUN_STAGE_PROBE, false, SP_AUDIT_STATUS_ENVIRONMENT,
      SP_CAUSE_ENVIRONMENT, NULL },
    { 0, SP_CAUSE_ENVIRONMENT, true, SP_RUN_STAGE_CREATE, false, SP_AUDIT_STATUS_ENVIRONMENT,
      SP_CAUSE_ENVIRONMENT, "cannot be reached" },
    /* The runtime was asked and never ran: its binary or daemon.  */
    { 0, SP_CAUSE_NONE, true, SP_RUN_STAGE_NONE, false, SP_AUDIT_STATUS_ENVIRONMENT, SP_CAUSE_ENVIRONMENT,
      "cannot be reached" },
    { 0, SP_CAUSE_SEED_GONE, true, SP_RUN_STAGE_PROBE, false, SP_AUDIT_STATUS_ENVIRONMENT, SP_CAUSE_SEED_GONE,
      NULL },
    { 0, SP_CAUSE_BUNDLE, false, SP_RUN_STAGE_NONE, true, SP_AUDIT_STATUS_ENVIRONMENT, SP_CAUSE_ENVIRONMENT,
      "is gone" },
    /* The runtime's, once it ran.  */
    { 0, SP_CAUSE_RUNTIME, true, SP_RUN_STAGE_CREATE, false, SP_AUDIT_STATUS_RUNTIME, SP_CAUSE_RUNTIME,
      NULL },
    { 0, SP_CAUSE_NONE, true, SP_RUN_STAGE_CREATE, false, SP_AUDIT_STATUS_RUNTIME, SP_CAUSE_RUNTIME, NULL },
    /* The proxy's own, keeping what its step said.  */
    { 0, SP_CAUSE_BUNDLE, false, SP_RUN_STAGE_NONE, false, SP_AUDIT_STATUS_INTERNAL, SP_CAUSE_BUNDLE, NULL },
    { 0, SP_CAUSE_SNAPSHOT, false, SP_RUN_STAGE_NONE, false, SP_AUDIT_STATUS_INTERNAL, SP_CAUSE_SNAPSHOT,
      NULL },
    { 0, SP_CAUSE_NONE, false, SP_RUN_STAGE_NONE, false, SP_AUDIT_STATUS_INTERNAL, SP_CAUSE_OTHER, NULL },
  };
  char rootfs[] = "/tmp/sp-check-serve-XXXXXX";
  char gone[sizeof (rootfs) + 8];

  ck_assert_ptr_nonnull (mkdtemp (rootfs));
  snprintf (gone, sizeof (gone), "%s/gone", rootfs);
  for (size_t i = 0; i < sizeof (rows) / sizeof (rows[0]); i++)
    {
      const struct failure_row *r = &rows[i];
      struct sp_run_facts facts = { .launched = r->ran, .stage = r->stage, .exit_code = -1 };
      struct sp_verdict v = { NULL, SP_CAUSE_NONE };
      sp_error_t err = NULL;

      sp_make_error (&err, r->errno_value, "the step's own reason");
      if (r->said != SP_CAUSE_NONE)
        sp_error_set_cause (&err, r->said);
      /* No state path: a host whose /tmp is nearly full must not turn
         every row into the host's fault.  */
      sp_verdict_of_failure (r->ran, &facts, NULL, r->rootfs_gone ? gone : rootfs, &err, &v);
      ck_assert_msg (strcmp (v.status, r->status) == 0 && v.cause == r->cause, "row %zu: %s/%s, not %s/%s", i,
                     v.status, sp_cause_name (v.cause), r->status, sp_cause_name (r->cause));
      ck_assert_msg (strstr (sp_error_message (err), "the step's own reason") != NULL,
                     "row %zu lost its reason", i);
      if (r->adds != NULL)
        ck_assert_msg (strstr (sp_error_message (err), r->adds) != NULL, "row %zu: \"%s\"", i,
                       sp_error_message (err));
      sp_error_release (&err);
    }
  ck_assert_int_eq (rmdir (rootfs), 0);
}
END_TEST

/* ---- the queue: order, bound, expiry, close ---------------------------- */

#define SEC 1000000000ULL

/* An entry told apart by its fd, queued at queued_ns.  */
static struct sp_serve_pending
pending (int tag, uint64_t queued_ns)
{
  return (struct sp_serve_pending){ .r = { .fd = tag }, .queued_ns = queued_ns };
}

START_TEST (the_queue_keeps_arrival_order_and_its_bound)
{
  cleanup_error sp_error_t err = NULL;
  struct sp_serve_queue q;
  struct sp_serve_pending p = pending (4, 0), out;

  ck_assert_int_eq (sp_serve_queue_init (&q, 3, &err), 0);
  for (int tag = 1; tag <= 3; tag++)
    {
      struct sp_serve_pending in = pending (tag, 0);

      ck_assert (sp_serve_queue_push (&q, &in));
    }
  ck_assert_msg (!sp_serve_queue_push (&q, &p), "a fourth entry went into a queue of three");
  ck_assert (sp_serve_queue_pop (&q, &out));
  ck_assert_int_eq (out.r.fd, 1);
  /* Room for one again, and it goes last, past the ring's end.  */
  ck_assert (sp_serve_queue_push (&q, &p));
  for (int tag = 2; tag <= 4; tag++)
    {
      ck_assert (sp_serve_queue_pop (&q, &out));
      ck_assert_int_eq (out.r.fd, tag);
    }
  sp_serve_queue_destroy (&q);
}
END_TEST

START_TEST (the_queue_gives_up_exactly_the_entries_that_waited_too_long)
{
  cleanup_error sp_error_t err = NULL;
  const uint64_t limit = 10 * SEC;
  struct sp_serve_queue q;
  struct sp_serve_pending out;
  int wait_ms = 0;

  ck_assert_int_eq (sp_serve_queue_init (&q, 4, &err), 0);
  ck_assert (!sp_serve_queue_take_expired (&q, 50 * SEC, limit, false, &out, &wait_ms));
  ck_assert_int_eq (wait_ms, -1);
  for (int tag = 1; tag <= 3; tag++)
    {
      struct sp_serve_pending in = pending (tag, (uint64_t)tag * SEC);

      ck_assert (sp_serve_queue_push (&q, &in));
    }
  /* The oldest waited 4 s of its 10: none goes, and the loop is told to
     look again once 6 s have passed (one more millisecond than the whole
     ones left).  */
  ck_assert (!sp_serve_queue_take_expired (&q, 5 * SEC, limit, false, &out, &wait_ms));
  ck_assert_int_eq (wait_ms, 6001);
  /* At exactly its limit the oldest goes; the next waited 9 s of 10.  */
  ck_assert (sp_serve_queue_take_expired (&q, 11 * SEC, limit, false, &out, &wait_ms));
  ck_assert_int_eq (out.r.fd, 1);
  ck_assert (!sp_serve_queue_take_expired (&q, 11 * SEC, limit, false, &out, &wait_ms));
  ck_assert_int_eq (wait_ms, 1001);
  /* A clock read before an entry came counts as no wait, not as ages.  */
  ck_assert (!sp_serve_queue_take_expired (&q, 1 * SEC, limit, false, &out, &wait_ms));
  ck_assert_int_eq (wait_ms, 10001);
  /* At shutdown every one goes, oldest first, whatever its age.  */
  for (int tag = 2; tag <= 3; tag++)
    {
      ck_assert (sp_serve_queue_take_expired (&q, 0, limit, true, &out, &wait_ms));
      ck_assert_int_eq (out.r.fd, tag);
    }
  ck_assert (!sp_serve_queue_take_expired (&q, 0, limit, true, &out, &wait_ms));
  ck_assert_int_eq (wait_ms, -1);
  sp_serve_queue_destroy (&q);
}
END_TEST

struct popper
{
  struct sp_serve_queue *q;
  int got[4];
  size_t n;
  int each; /* a pipe's write end: a byte per entry taken */
  int done; /* a pipe's write end, closed when the popper returns */
};

static void *
pop_all (void *arg)
{
  struct popper *w = arg;
  struct sp_serve_pending out;

  while (sp_serve_queue_pop (w->q, &out))
    {
      if (w->n < 4)
        w->got[w->n++] = out.r.fd;
      ck_assert_int_eq (write (w->each, "x", 1), 1);
    }
  close (w->done);
  return NULL;
}

/* Whether fd becomes readable (a byte, or its writer closed) within 5 s.  */
static bool
ends_within_5s (int fd)
{
  struct pollfd pfd = { .fd = fd, .events = POLLIN };

  return poll (&pfd, 1, 5000) == 1;
}

START_TEST (closing_the_queue_hands_out_what_is_left_then_ends_the_workers)
{
  cleanup_error sp_error_t err = NULL;
  struct sp_serve_queue q;
  struct popper w = { .q = &q };
  struct sp_serve_pending in = pending (7, 0);
  pthread_t t;
  int fds[2], each[2];
  char byte;

  ck_assert_int_eq (sp_serve_queue_init (&q, 2, &err), 0);
  ck_assert_int_eq (pipe2 (fds, O_CLOEXEC), 0);
  ck_assert_int_eq (pipe2 (each, O_CLOEXEC), 0);
  w.done = fds[1];
  w.each = each[1];
  /* An idle worker waits, and wakes for an entry.  */
  ck_assert_int_eq (pthread_create (&t, NULL, pop_all, &w), 0);
  ck_assert (sp_serve_queue_push (&q, &in));
  ck_assert_msg (ends_within_5s (each[0]), "a waiting worker did not take an entry within 5 s");
  ck_assert_int_eq (read (each[0], &byte, 1), 1);
  /* Let it go back to waiting on an empty queue, so that only the close can
     wake it (a close that wakes nobody then fails here).  The pause makes
     the check sharper; it is never needed for it to pass.  */
  usleep (100 * 1000);
  sp_serve_queue_close (&q);
  ck_assert_msg (ends_within_5s (fds[0]), "a worker still waits 5 s after the queue closed");
  ck_assert_int_eq (pthread_join (t, NULL), 0);
  ck_assert_uint_eq (w.n, 1);
  ck_assert_int_eq (w.got[0], 7);
  ck_assert_msg (!sp_serve_queue_push (&q, &in), "a closed queue took an entry");
  close (fds[0]);
  close (each[0]);
  close (each[1]);
  sp_serve_queue_destroy (&q);
}
END_TEST

static Suite *
make_suite (void)
{
  Suite *s = suite_create ("serve");
  TCase *tc = tcase_create ("serve");

  tcase_add_test (tc, heap_gives_back_every_entry_in_release_order);
  tcase_add_test (tc, releaser_sends_each_held_error_no_earlier_than_its_time);
  tcase_add_test (tc, releaser_stop_lets_every_held_error_go_at_once);
  tcase_add_test (tc, refusals_answer_in_the_version_the_header_names);
  tcase_add_test (tc, a_slot_is_taken_once_until_it_is_freed);
  tcase_add_test (tc, stop_kills_each_running_container_once_and_nothing_starts_after);
  tcase_add_test (tc, a_halt_is_said_once_and_keeps_its_first_reason);
  tcase_add_test (tc, each_end_of_a_probe_gets_its_verdict);
  tcase_add_test (tc, each_failure_outside_the_probe_is_blamed_where_it_lies);
  tcase_add_test (tc, the_queue_keeps_arrival_order_and_its_bound);
  tcase_add_test (tc, the_queue_gives_up_exactly_the_entries_that_waited_too_long);
  tcase_add_test (tc, closing_the_queue_hands_out_what_is_left_then_ends_the_workers);
  suite_add_tcase (s, tc);
  return s;
}

SP_CHECK_MAIN (make_suite)
