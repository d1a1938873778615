/* serve's logic without a sandbox (issue 28, "serve is a library that unit
   tests drive"): the releaser's heap and thread, the slots, and the stop,
   through a fake runtime that records what serve asks of it.  Nothing here
   needs root, a runtime binary or a mount.  */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/protocol.h"
#include "serve/release_heap.h"
#include "serve/serve.h"

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

/* What a held answer's client reads: exactly one ERROR frame, then the end
   of the stream.  */
static void
expect_error_then_eof (int fd, int flags)
{
  uint8_t want[SP_RESPONSE_FRAME_BYTES], got[SP_RESPONSE_FRAME_BYTES + 1];
  sp_error_t err = NULL;
  ssize_t n;

  ck_assert_int_eq (sp_response_encode (SP_RESPONSE_ERROR, want, &err), 0);
  n = recv (fd, got, sizeof (got), MSG_WAITALL | flags);
  ck_assert_msg (n == (ssize_t)sizeof (want), "read %zd bytes, not one ERROR frame (%s)", n,
                 n < 0 ? strerror (errno) : "then more");
  ck_assert_mem_eq (got, want, sizeof (want));
  ck_assert_int_eq (recv (fd, got, 1, flags), 0);
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
  uint64_t at[N], now = sp_monotonic_ns ();

  serve_init (&s, 1, NULL);
  ck_assert_msg (sp_serve_releaser_start (&s, &err) == 0, "%s", sp_error_message (err));
  for (int i = 0; i < N; i++)
    {
      /* Three release times, handed over out of order.  */
      at[i] = now + (uint64_t)(((i * 7) % 3) + 1) * 40 * MS;
      ck_assert_int_eq (socketpair (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pairs[i]), 0);
      ck_assert (sp_serve_release_later (
          &s, pairs[i][1], &(struct sp_serve_release){ .mode = SP_RELEASE_BUCKETED, .at_ns = at[i] }));
    }
  for (int i = 0; i < N; i++)
    {
      expect_error_then_eof (pairs[i][0], 0);
      ck_assert_msg (sp_monotonic_ns () >= at[i], "answer %d left before its release time", i);
      close (pairs[i][0]);
    }
  sp_serve_releaser_stop (&s);
  serve_release (&s);
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
  uint64_t in_an_hour = sp_monotonic_ns () + 3600 * 1000 * MS;

  serve_init (&s, 1, NULL);
  ck_assert_msg (sp_serve_releaser_start (&s, &err) == 0, "%s", sp_error_message (err));
  for (int i = 0; i < N; i++)
    {
      ck_assert_int_eq (socketpair (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pairs[i]), 0);
      ck_assert (sp_serve_release_later (
          &s, pairs[i][1], &(struct sp_serve_release){ .mode = SP_RELEASE_BUCKETED, .at_ns = in_an_hour }));
    }
  ck_assert (sp_serve_release_room (&s));
  sp_serve_releaser_stop (&s);
  /* Already there, without waiting: MSG_DONTWAIT fails on anything held.  */
  for (int i = 0; i < N; i++)
    {
      expect_error_then_eof (pairs[i][0], MSG_DONTWAIT);
      close (pairs[i][0]);
    }
  ck_assert (!sp_serve_release_room (&s));
  ck_assert (!sp_serve_release_later (&s, 0, &(struct sp_serve_release){ .at_ns = in_an_hour }));
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

static Suite *
make_suite (void)
{
  Suite *s = suite_create ("serve");
  TCase *tc = tcase_create ("serve");

  tcase_add_test (tc, heap_gives_back_every_entry_in_release_order);
  tcase_add_test (tc, releaser_sends_each_held_error_no_earlier_than_its_time);
  tcase_add_test (tc, releaser_stop_lets_every_held_error_go_at_once);
  tcase_add_test (tc, a_slot_is_taken_once_until_it_is_freed);
  tcase_add_test (tc, stop_kills_each_running_container_once_and_nothing_starts_after);
  tcase_add_test (tc, a_halt_is_said_once_and_keeps_its_first_reason);
  suite_add_tcase (s, tc);
  return s;
}

SP_CHECK_MAIN (make_suite)
