/* When answers leave (base/release_ladder.h): the ladder, the fixed offset, the
   overflow, and the bits a call's release can carry.  */
#include <math.h>
#include <string.h>

#include "base/release_ladder.h"

#include "sp_check.h"

static const uint64_t ladder[SP_RELEASE_LADDER_LEN] = SP_RELEASE_LADDER_MS;

START_TEST (modes_parse_and_name_each_other)
{
  static const char *const names[] = { "bucketed", "fixed", "immediate" };
  enum sp_release_mode m;

  for (size_t i = 0; i < 3; i++)
    {
      ck_assert_int_eq (sp_release_mode_parse (names[i], &m), 0);
      ck_assert_str_eq (sp_release_mode_name (m), names[i]);
    }
  ck_assert_int_eq (sp_release_mode_parse ("Bucketed", &m), -1);
  ck_assert_int_eq (sp_release_mode_parse ("", &m), -1);
}
END_TEST

START_TEST (bucketed_releases_at_the_first_boundary_at_or_after_the_end)
{
  uint64_t at;

  ck_assert (sp_release_at (SP_RELEASE_BUCKETED, 30, 0, &at));
  ck_assert_uint_eq (at, 1000);
  ck_assert (sp_release_at (SP_RELEASE_BUCKETED, 30, 1, &at));
  ck_assert_uint_eq (at, 1000);
  ck_assert (sp_release_at (SP_RELEASE_BUCKETED, 30, 1000, &at));
  ck_assert_uint_eq (at, 1000);
  ck_assert (sp_release_at (SP_RELEASE_BUCKETED, 30, 1001, &at));
  ck_assert_uint_eq (at, 2000);
  /* A 1 ms probe and a 40 ms one, each with ~100 ms of the proxy's own
     work around it, share the first bucket.  */
  uint64_t fast, slow;
  ck_assert (sp_release_at (SP_RELEASE_BUCKETED, 30, 101, &fast));
  ck_assert (sp_release_at (SP_RELEASE_BUCKETED, 30, 140, &slow));
  ck_assert_uint_eq (fast, slow);
}
END_TEST

START_TEST (bucketed_past_the_last_reachable_boundary_overflows)
{
  uint64_t at;

  /* timeout 30 s + 5 s margin: the last reachable boundary is 64 s.  */
  ck_assert (sp_release_at (SP_RELEASE_BUCKETED, 30, 64000, &at));
  ck_assert_uint_eq (at, 64000);
  ck_assert (!sp_release_at (SP_RELEASE_BUCKETED, 30, 64001, &at));
  ck_assert_uint_eq (at, 64001);
  /* timeout 1 s + 5 s: 8 s.  */
  ck_assert (sp_release_at (SP_RELEASE_BUCKETED, 1, 8000, &at));
  ck_assert (!sp_release_at (SP_RELEASE_BUCKETED, 1, 8001, &at));
  /* The longest timeout reaches the ladder's last boundary, and no further.  */
  ck_assert_uint_eq (sp_release_instants (SP_RELEASE_BUCKETED, 300), SP_RELEASE_LADDER_LEN);
  ck_assert (sp_release_at (SP_RELEASE_BUCKETED, 300, ladder[SP_RELEASE_LADDER_LEN - 1], &at));
  ck_assert (!sp_release_at (SP_RELEASE_BUCKETED, 300, ladder[SP_RELEASE_LADDER_LEN - 1] + 1, &at));
}
END_TEST

START_TEST (fixed_releases_every_answer_at_one_offset)
{
  uint64_t a, b, c;

  ck_assert (sp_release_at (SP_RELEASE_FIXED, 2, 0, &a));
  ck_assert (sp_release_at (SP_RELEASE_FIXED, 2, 40, &b));
  ck_assert (sp_release_at (SP_RELEASE_FIXED, 2, 2000 + SP_RELEASE_MARGIN_MS, &c));
  ck_assert_uint_eq (a, 2000 + SP_RELEASE_MARGIN_MS);
  ck_assert_uint_eq (b, a);
  ck_assert_uint_eq (c, a);
  ck_assert (!sp_release_at (SP_RELEASE_FIXED, 2, 2001 + SP_RELEASE_MARGIN_MS, &c));
}
END_TEST

START_TEST (immediate_releases_when_ready)
{
  uint64_t at;

  ck_assert (sp_release_at (SP_RELEASE_IMMEDIATE, 30, 123, &at));
  ck_assert_uint_eq (at, 123);
  ck_assert (sp_release_at (SP_RELEASE_IMMEDIATE, 30, 999999999, &at));
}
END_TEST

START_TEST (timing_bits_are_log2_of_the_reachable_release_times)
{
  bool unbounded;

  for (uint32_t timeout = 1; timeout <= 300; timeout++)
    {
      unsigned n = sp_release_instants (SP_RELEASE_BUCKETED, timeout);
      uint64_t want = (uint64_t)ceil (1000.0 * log2 ((double)n) - 1e-9);
      uint64_t max = (uint64_t)timeout * 1000 + SP_RELEASE_MARGIN_MS;
      unsigned counted = 0;

      /* Every boundary below the expected maximum, and the first at or past it.  */
      for (unsigned i = 0; i < SP_RELEASE_LADDER_LEN; i++)
        if (ladder[i] < max || i == 0 || ladder[i - 1] < max)
          counted++;
      ck_assert_uint_eq (n, counted);
      ck_assert_uint_eq (sp_release_timing_millibits (SP_RELEASE_BUCKETED, timeout, &unbounded), want);
      ck_assert (!unbounded);
    }
  /* The default timeout: 1, 2, 4, 8, 16, 32 and 64 s: log2 7.  */
  ck_assert_uint_eq (sp_release_instants (SP_RELEASE_BUCKETED, 30), 7);
  ck_assert_uint_eq (sp_release_timing_millibits (SP_RELEASE_BUCKETED, 30, &unbounded), 2808);
  ck_assert_uint_eq (sp_release_timing_millibits (SP_RELEASE_FIXED, 30, &unbounded), 0);
  ck_assert (!unbounded);
  ck_assert_uint_eq (sp_release_instants (SP_RELEASE_FIXED, 30), 1);
  sp_release_timing_millibits (SP_RELEASE_IMMEDIATE, 30, &unbounded);
  ck_assert (unbounded);
}
END_TEST

static Suite *
make_suite (void)
{
  Suite *s = suite_create ("release");
  TCase *tc = tcase_create ("release");

  tcase_add_test (tc, modes_parse_and_name_each_other);
  tcase_add_test (tc, bucketed_releases_at_the_first_boundary_at_or_after_the_end);
  tcase_add_test (tc, bucketed_past_the_last_reachable_boundary_overflows);
  tcase_add_test (tc, fixed_releases_every_answer_at_one_offset);
  tcase_add_test (tc, immediate_releases_when_ready);
  tcase_add_test (tc, timing_bits_are_log2_of_the_reachable_release_times);
  suite_add_tcase (s, tc);
  return s;
}

SP_CHECK_MAIN (make_suite)
