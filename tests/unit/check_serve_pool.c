/* The pool of sandboxes made ahead (src/serve/pool.c) without a sandbox:
   pool.c is compiled in with fake versions of what it asks of
   src/serve/sandbox.c (a slot, make, warm, destroy), which count what the
   pool does and fail a make when told to.  What is checked is the pool's
   accounting: how many wait per repository and in all, which one a take
   hands out, the refill, the back-off after a failure, a repository given
   up when its seed is gone, and the stop.  Nothing here needs root.  */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/cause.h"
#include "base/clock.h"
#include "serve/serve.h"

#include "sp_check.h"

#define REPOS_MAX     4
#define SANDBOXES_MAX 256

/* ---- the fake sandbox layer --------------------------------------------- */

static struct
{
  pthread_mutex_t lock;
  unsigned made[REPOS_MAX];      /* makes that succeeded */
  unsigned attempts[REPOS_MAX];  /* every make, failed ones too */
  unsigned destroyed[REPOS_MAX]; /* each destroy of a made sandbox */
  unsigned failing[REPOS_MAX];   /* the next makes that fail */
  int failing_cause[REPOS_MAX];  /* SP_CAUSE_NONE: a plain failure */
  struct sp_serve_sandbox *live[SANDBOXES_MAX];
  size_t n_live;
  size_t peak_live; /* the most that ever existed at once */
  unsigned next_slot;
  unsigned long claims; /* every slot asked for */
} fake = { .lock = PTHREAD_MUTEX_INITIALIZER };

static void
fake_reset (void)
{
  pthread_mutex_lock (&fake.lock);
  for (size_t i = 0; i < fake.n_live; i++)
    {
      free (fake.live[i]->name);
      free (fake.live[i]);
    }
  memset (fake.made, 0, sizeof (fake.made));
  memset (fake.attempts, 0, sizeof (fake.attempts));
  memset (fake.destroyed, 0, sizeof (fake.destroyed));
  memset (fake.failing, 0, sizeof (fake.failing));
  memset (fake.failing_cause, 0, sizeof (fake.failing_cause));
  fake.n_live = 0;
  fake.peak_live = 0;
  fake.next_slot = 0;
  fake.claims = 0;
  pthread_mutex_unlock (&fake.lock);
}

/* As sandbox.c's: none once the proxy is stopping.  */
int
sp_serve_slot_claim (struct sp_serve *s)
{
  bool stopping;
  int slot;

  pthread_mutex_lock (&s->lock);
  stopping = s->stopping;
  pthread_mutex_unlock (&s->lock);
  pthread_mutex_lock (&fake.lock);
  fake.claims++;
  slot = stopping ? -1 : (int)fake.next_slot++;
  pthread_mutex_unlock (&fake.lock);
  return slot;
}

bool
sp_serve_slot_free (struct sp_serve *s, unsigned slot)
{
  (void)s, (void)slot;
  return false;
}

int
sp_serve_sandbox_make (struct sp_serve *s, size_t seed_index, unsigned slot, const char *name, bool ahead,
                       struct sp_serve_sandbox **out, bool *ran, struct sp_run_facts *facts, sp_error_t *err)
{
  struct sp_serve_sandbox *sb;

  (void)s, (void)facts;
  /* What the pool makes is made ahead of its request.  */
  ck_assert (ahead);
  *out = NULL;
  *ran = false;
  pthread_mutex_lock (&fake.lock);
  fake.attempts[seed_index]++;
  if (fake.failing[seed_index] > 0)
    {
      int cause = fake.failing_cause[seed_index];

      fake.failing[seed_index]--;
      pthread_mutex_unlock (&fake.lock);
      sp_make_error (err, 0, "a make that fails");
      if (cause != SP_CAUSE_NONE)
        sp_error_set_cause (err, cause);
      return -1;
    }
  ck_assert_uint_lt (fake.n_live, SANDBOXES_MAX);
  sb = calloc (1, sizeof (*sb));
  ck_assert_ptr_nonnull (sb);
  sb->seed_index = seed_index;
  sb->slot = slot;
  sb->name = strdup (name);
  fake.live[fake.n_live++] = sb;
  if (fake.n_live > fake.peak_live)
    fake.peak_live = fake.n_live;
  fake.made[seed_index]++;
  pthread_mutex_unlock (&fake.lock);
  *out = sb;
  return 0;
}

void
sp_serve_sandbox_warm (struct sp_serve_sandbox *sb, uint64_t max_entries)
{
  (void)sb, (void)max_entries;
}

/* report.c's, which the pool tells how many wait: the last count told per
   repository, under s->lock as the pool tells it.  */
static unsigned told_waiting[8];

void
sp_serve_report_waiting (struct sp_serve *s, size_t seed_index, unsigned waiting)
{
  (void)s;
  if (seed_index < sizeof (told_waiting) / sizeof (told_waiting[0]))
    told_waiting[seed_index] = waiting;
}

int
sp_serve_sandbox_destroy (struct sp_serve *s, struct sp_serve_sandbox *sb, sp_error_t *err)
{
  (void)s, (void)err;
  pthread_mutex_lock (&fake.lock);
  for (size_t i = 0; i < fake.n_live; i++)
    if (fake.live[i] == sb)
      {
        fake.destroyed[sb->seed_index]++;
        fake.live[i] = fake.live[--fake.n_live];
        free (sb->name);
        free (sb);
        pthread_mutex_unlock (&fake.lock);
        return 0;
      }
  pthread_mutex_unlock (&fake.lock);
  ck_abort_msg ("a sandbox destroyed twice, or never made");
  return -1;
}

static unsigned
count (const unsigned *per_repo, size_t i)
{
  pthread_mutex_lock (&fake.lock);
  unsigned n = per_repo[i];
  pthread_mutex_unlock (&fake.lock);
  return n;
}

static unsigned
waiting (size_t i)
{
  pthread_mutex_lock (&fake.lock);
  unsigned n = fake.made[i] - fake.destroyed[i];
  pthread_mutex_unlock (&fake.lock);
  return n;
}

/* What the pool last told the report for repository i, read under the lock
   it is told under.  */
static unsigned
told (struct sp_serve *s, size_t i)
{
  pthread_mutex_lock (&s->lock);
  unsigned n = told_waiting[i];
  pthread_mutex_unlock (&s->lock);
  return n;
}

/* ---- a serve with a pool and nothing else -------------------------------- */

static char *repo_names[REPOS_MAX] = { "acme/a", "acme/b", "acme/c", "acme/d" };

struct fixture
{
  struct sp_serve s;
  struct sp_config config;
  struct sp_serve_options opt;
};

/* Starts the pool's thread on the fake as it stands: reset it first.  */
static void
fixture_start (struct fixture *fx, size_t repos, unsigned per_repo, unsigned pool_slots)
{
  cleanup_error sp_error_t err = NULL;

  memset (fx, 0, sizeof (*fx));
  fx->config.private_repos = repo_names;
  fx->config.n_private_repos = repos;
  fx->opt.pool = per_repo;
  fx->opt.snapshot = SP_SNAPSHOT_OVERLAY;
  fx->s = (struct sp_serve)SP_SERVE_INIT;
  pthread_mutex_init (&fx->s.lock, NULL);
  fx->s.config = &fx->config;
  fx->s.opt = &fx->opt;
  fx->s.pool_slots = pool_slots;
  ck_assert_msg (sp_serve_pool_start (&fx->s, &err) == 0, "%s", sp_error_message (err));
}

static void
fixture_stop (struct fixture *fx)
{
  ck_assert_int_eq (sp_serve_pool_stop (&fx->s), 0);
  pthread_mutex_destroy (&fx->s.lock);
}

/* Polls pred for up to 5 s: the pool's thread works on its own time.  */
static bool
within_5s (bool (*pred) (void *), void *arg)
{
  for (int i = 0; i < 500; i++)
    {
      if (pred (arg))
        return true;
      usleep (10 * 1000);
    }
  return pred (arg);
}

struct want
{
  size_t repos;
  unsigned each;
};

static bool
each_has (void *arg)
{
  const struct want *w = arg;

  for (size_t i = 0; i < w->repos; i++)
    if (waiting (i) != w->each)
      return false;
  return true;
}

/* The pool made nothing more in 200 ms.  Not a race the test can lose on a
   slow machine: a pool that is right makes nothing more however long one
   waits; a wrong one, which makes past its bound, makes the next within
   the few milliseconds a fake make takes.  */
static void
assert_settled (const struct fixture *fx, size_t repos, const char *what)
{
  unsigned before[REPOS_MAX];

  for (size_t i = 0; i < repos; i++)
    before[i] = count (fake.attempts, i);
  usleep (200 * 1000);
  for (size_t i = 0; i < repos; i++)
    ck_assert_msg (count (fake.attempts, i) == before[i], "%s: repository %zu: %u makes, then %u", what, i,
                   before[i], count (fake.attempts, i));
  (void)fx;
}

/* ---- the tests ------------------------------------------------------------ */

START_TEST (it_fills_each_repository_to_its_pool_and_no_further)
{
  struct fixture fx;
  struct want w = { .repos = 2, .each = 2 };

  fake_reset ();
  fixture_start (&fx, 2, 2, 8);
  ck_assert_msg (within_5s (each_has, &w), "not 2 waiting per repository within 5 s: %u and %u", waiting (0),
                 waiting (1));
  assert_settled (&fx, 2, "a full pool");
  ck_assert_uint_eq (count (fake.made, 0), 2);
  ck_assert_uint_eq (count (fake.made, 1), 2);
  ck_assert_uint_eq (waiting (0), 2);
  ck_assert_uint_eq (waiting (1), 2);
  /* What serve.json and STATUS= say (report.c): the waiting ones.  */
  ck_assert_uint_eq (told (&fx.s, 0), 2);
  ck_assert_uint_eq (told (&fx.s, 1), 2);
  fixture_stop (&fx);
  ck_assert_uint_eq (told_waiting[0], 0);
  ck_assert_uint_eq (told_waiting[1], 0);
}
END_TEST

static bool
total_is_4 (void *arg)
{
  (void)arg;
  return waiting (0) + waiting (1) + waiting (2) == 4;
}

START_TEST (its_slots_bound_the_total_across_repositories)
{
  struct fixture fx;

  /* 2 each of 3 would be 6; the slots allow 4, spread fewest first.  */
  fake_reset ();
  fixture_start (&fx, 3, 2, 4);
  ck_assert_msg (within_5s (total_is_4, NULL), "not 4 waiting within 5 s");
  assert_settled (&fx, 3, "a pool at its slots");
  ck_assert_uint_eq (waiting (0) + waiting (1) + waiting (2), 4);
  /* Nothing is destroyed here: every sandbox made still exists, so the
     peak is every one the pool ever held at once.  */
  pthread_mutex_lock (&fake.lock);
  ck_assert_msg (fake.peak_live <= 4, "%zu sandboxes held at once", fake.peak_live);
  pthread_mutex_unlock (&fake.lock);
  for (size_t i = 0; i < 3; i++)
    ck_assert_msg (waiting (i) >= 1 && waiting (i) <= 2, "repository %zu has %u waiting", i, waiting (i));
  fixture_stop (&fx);
}
END_TEST

static unsigned long
age (const struct sp_serve_sandbox *sb)
{
  /* Names count up as the pool makes them (p000000, p000001, ...): the
     oldest has the lowest.  */
  return strtoul (sb->name + 1, NULL, 10);
}

START_TEST (a_take_hands_out_the_oldest_once_and_a_refill_replaces_it)
{
  struct fixture fx;
  struct want w = { .repos = 2, .each = 2 };
  struct sp_serve_sandbox *first, *second, *third;
  unsigned long first_age;

  /* The slots are exactly --pool x repositories, as preflight sets them:
     a take that did not give its slot back would leave no room for the
     replacement.  */
  fake_reset ();
  fixture_start (&fx, 2, 2, 4);
  ck_assert (within_5s (each_has, &w));
  first = sp_serve_pool_take (&fx.s, 1);
  ck_assert_ptr_nonnull (first);
  ck_assert_uint_eq (first->seed_index, 1);
  ck_assert (first->refill_owed);
  first_age = age (first);
  /* Repository 0's are not touched, and nothing was made behind the
     take's back: a take alone does not refill.  */
  ck_assert_uint_eq (waiting (0), 2);
  ck_assert_uint_eq (count (fake.made, 1), 2);
  /* The one taken waits no more, as the report is told at once.  */
  ck_assert_uint_eq (told (&fx.s, 1), 1);
  ck_assert_uint_eq (told (&fx.s, 0), 2);
  /* The taker destroys what it took (sandbox.c, after its one run).  */
  ck_assert_int_eq (sp_serve_sandbox_destroy (&fx.s, first, NULL), 0);
  sp_serve_pool_refill (&fx.s);
  ck_assert (within_5s (each_has, &w));
  assert_settled (&fx, 2, "after a refill");
  ck_assert_uint_eq (count (fake.made, 1), 3);
  ck_assert_uint_eq (count (fake.made, 0), 2);
  /* What waits now: the one made before the take, then its replacement.  */
  second = sp_serve_pool_take (&fx.s, 1);
  third = sp_serve_pool_take (&fx.s, 1);
  ck_assert_ptr_nonnull (second);
  ck_assert_ptr_nonnull (third);
  ck_assert_ptr_ne (second, third);
  ck_assert_uint_eq (second->seed_index, 1);
  ck_assert_uint_eq (third->seed_index, 1);
  ck_assert_msg (first_age < age (second) && age (second) < age (third), "took p%lu, then %s, then %s",
                 first_age, second->name, third->name);
  ck_assert_ptr_null (sp_serve_pool_take (&fx.s, 1));
  ck_assert_int_eq (sp_serve_sandbox_destroy (&fx.s, second, NULL), 0);
  ck_assert_int_eq (sp_serve_sandbox_destroy (&fx.s, third, NULL), 0);
  fixture_stop (&fx);
}
END_TEST

static bool
repo_1_has_2 (void *arg)
{
  (void)arg;
  return waiting (1) == 2;
}

/* runsc finds a container by a prefix of its id: a pool name that is a
   prefix of another (p1 of p11) made the delete of a sandbox that waited
   while a dozen others came and went fail as ambiguous.  Every name is
   "p" and six digits, so none is.  */
START_TEST (pool_names_are_of_one_length_so_none_is_a_prefix_of_another)
{
  enum
  {
    ROUNDS = 14
  };
  struct fixture fx;
  struct want w = { .repos = 2, .each = 1 };
  char *names[ROUNDS + 1];
  size_t n = 0;
  struct sp_serve_sandbox *waited;

  fake_reset ();
  fixture_start (&fx, 2, 1, 2);
  ck_assert (within_5s (each_has, &w));
  /* Repository 1's sandbox waits while repository 0's come and go.  */
  for (int i = 0; i < ROUNDS; i++)
    {
      struct sp_serve_sandbox *sb = sp_serve_pool_take (&fx.s, 0);

      ck_assert_ptr_nonnull (sb);
      names[n++] = strdup (sb->name);
      ck_assert_int_eq (sp_serve_sandbox_destroy (&fx.s, sb, NULL), 0);
      sp_serve_pool_refill (&fx.s);
      ck_assert (within_5s (each_has, &w));
    }
  waited = sp_serve_pool_take (&fx.s, 1);
  ck_assert_ptr_nonnull (waited);
  names[n++] = strdup (waited->name);
  ck_assert_int_eq (sp_serve_sandbox_destroy (&fx.s, waited, NULL), 0);
  for (size_t i = 0; i < n; i++)
    {
      ck_assert_msg (strlen (names[i]) == 7 && names[i][0] == 'p' && strspn (names[i] + 1, "0123456789") == 6,
                     "pool name %s", names[i]);
      for (size_t j = 0; j < n; j++)
        ck_assert_msg (i == j || strncmp (names[i], names[j], strlen (names[i])) != 0, "%s is a prefix of %s",
                       names[i], names[j]);
    }
  /* More than ten were made while the first waited: the case that failed.  */
  ck_assert_uint_gt (n, 11);
  for (size_t i = 0; i < n; i++)
    free (names[i]);
  fixture_stop (&fx);
}
END_TEST

START_TEST (a_failing_repository_backs_off_while_the_others_fill)
{
  struct fixture fx;
  unsigned attempts;

  fake_reset ();
  fake.failing[0] = UINT_MAX; /* before the thread starts: every make of repository 0 fails */
  fixture_start (&fx, 2, 2, 8);
  ck_assert (within_5s (repo_1_has_2, NULL));
  attempts = count (fake.attempts, 0);
  usleep (600 * 1000);
  /* Retries come at least 250 ms after the failure, then 500, then 1000
     (pool.c's POOL_RETRY_FIRST_MS, doubling): any two are 500 ms apart at
     least and three span 1.5 s, so a 600 ms wait sees at most two (three
     would need the sleep to overrun by 0.9 s).  A retry in a loop would be
     thousands; a first wait of 25 ms is four or more.  */
  ck_assert_msg (count (fake.attempts, 0) - attempts <= 2, "%u makes for a failing repository in 600 ms",
                 count (fake.attempts, 0) - attempts);
  ck_assert_uint_eq (waiting (1), 2);
  fixture_stop (&fx);
}
END_TEST

static bool
repo_0_has_2 (void *arg)
{
  (void)arg;
  return waiting (0) == 2;
}

START_TEST (a_repository_whose_seed_is_gone_is_given_up_for_good)
{
  struct fixture fx;
  struct sp_serve_sandbox *sb;

  fake_reset ();
  fixture_start (&fx, 2, 2, 8);
  ck_assert (within_5s (repo_0_has_2, NULL));
  ck_assert (within_5s (repo_1_has_2, NULL));
  pthread_mutex_lock (&fake.lock);
  fake.failing[0] = 1;
  fake.failing_cause[0] = SP_CAUSE_SEED_GONE;
  pthread_mutex_unlock (&fake.lock);
  /* A take makes room; the refill's make finds the seed gone.  */
  sb = sp_serve_pool_take (&fx.s, 0);
  ck_assert_ptr_nonnull (sb);
  ck_assert_int_eq (sp_serve_sandbox_destroy (&fx.s, sb, NULL), 0);
  sp_serve_pool_refill (&fx.s);
  for (int i = 0; i < 500 && waiting (0) > 0; i++)
    usleep (10 * 1000);
  ck_assert_msg (waiting (0) == 0, "%u sandboxes of a gone seed still wait", waiting (0));
  ck_assert_ptr_null (sp_serve_pool_take (&fx.s, 0));
  sp_serve_pool_refill (&fx.s);
  assert_settled (&fx, 2, "a repository given up");
  ck_assert_uint_eq (waiting (0), 0);
  ck_assert_uint_eq (waiting (1), 2);
  fixture_stop (&fx);
}
END_TEST

START_TEST (a_stop_removes_every_waiting_sandbox_and_makes_none_after)
{
  struct fixture fx;
  struct want w = { .repos = 3, .each = 1 };

  fake_reset ();
  fixture_start (&fx, 3, 1, 8);
  ck_assert (within_5s (each_has, &w));
  fixture_stop (&fx);
  for (size_t i = 0; i < 3; i++)
    {
      ck_assert_uint_eq (count (fake.made, i), 1);
      ck_assert_uint_eq (count (fake.destroyed, i), 1);
    }
  ck_assert_uint_eq (fake.n_live, 0);
  ck_assert_ptr_null (fx.s.pool);
  ck_assert_ptr_null (sp_serve_pool_take (&fx.s, 0));
}
END_TEST

static unsigned long
claims (void)
{
  pthread_mutex_lock (&fake.lock);
  unsigned long n = fake.claims;
  pthread_mutex_unlock (&fake.lock);
  return n;
}

START_TEST (a_stopping_proxy_makes_nothing_and_does_not_spin)
{
  struct fixture fx;
  struct sp_serve_sandbox *sb;
  unsigned long before;

  fake_reset ();
  fixture_start (&fx, 1, 2, 2);
  ck_assert (within_5s (repo_0_has_2, NULL));
  sb = sp_serve_pool_take (&fx.s, 0);
  ck_assert_ptr_nonnull (sb);
  ck_assert_int_eq (sp_serve_sandbox_destroy (&fx.s, sb, NULL), 0);
  /* As sp_serve_stop does, with the repository below its pool: from here
     to sp_serve_pool_stop (the kills, the workers' ends) the thread must
     wait, not ask for slots it cannot get.  */
  pthread_mutex_lock (&fx.s.lock);
  fx.s.stopping = true;
  pthread_mutex_unlock (&fx.s.lock);
  before = claims ();
  sp_serve_pool_refill (&fx.s);
  usleep (200 * 1000);
  ck_assert_msg (claims () == before, "%lu slots asked for in 200 ms while the proxy stops",
                 claims () - before);
  ck_assert_uint_eq (waiting (0), 1);
  fixture_stop (&fx);
  ck_assert_uint_eq (waiting (0), 0);
}
END_TEST

START_TEST (no_slots_no_pool)
{
  struct fixture fx;

  fake_reset ();
  fixture_start (&fx, 2, 2, 0);
  ck_assert_ptr_null (fx.s.pool);
  ck_assert_ptr_null (sp_serve_pool_take (&fx.s, 0));
  sp_serve_pool_refill (&fx.s);
  usleep (50 * 1000);
  ck_assert_uint_eq (count (fake.attempts, 0) + count (fake.attempts, 1), 0);
  fixture_stop (&fx);
}
END_TEST

static Suite *
make_suite (void)
{
  Suite *s = suite_create ("serve_pool");
  TCase *tc = tcase_create ("pool");

  tcase_add_test (tc, it_fills_each_repository_to_its_pool_and_no_further);
  tcase_add_test (tc, its_slots_bound_the_total_across_repositories);
  tcase_add_test (tc, a_take_hands_out_the_oldest_once_and_a_refill_replaces_it);
  tcase_add_test (tc, pool_names_are_of_one_length_so_none_is_a_prefix_of_another);
  tcase_add_test (tc, a_failing_repository_backs_off_while_the_others_fill);
  tcase_add_test (tc, a_repository_whose_seed_is_gone_is_given_up_for_good);
  tcase_add_test (tc, a_stop_removes_every_waiting_sandbox_and_makes_none_after);
  tcase_add_test (tc, a_stopping_proxy_makes_nothing_and_does_not_spin);
  tcase_add_test (tc, no_slots_no_pool);
  suite_add_tcase (s, tc);
  return s;
}

SP_CHECK_MAIN (make_suite)
