/* Request and outcome rules: every rule has a named test, and the tables
   below give each row its own test name.  */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/cleanup.h"
#include "base/outcome.h"
#include "base/request.h"

#include "sp_check.h"

static char *const allowlist[] = { "acme/widgets", "acme/gadgets", "octo/hello-world" };
#define N_ALLOW (sizeof (allowlist) / sizeof (allowlist[0]))

static struct sp_bytes
bytes_n (const void *p, size_t n)
{
  struct sp_bytes b = { (const uint8_t *)p, n };
  return b;
}

static struct sp_bytes
bytes_str (const char *s)
{
  return bytes_n (s, strlen (s));
}

static struct sp_request
valid_request (void)
{
  struct sp_request req = { .version = SP_FRAME_VERSION_V1 };

  req.repo = bytes_str ("acme/widgets");
  req.outcomes[0] = bytes_str ("YES");
  req.outcomes[1] = bytes_str ("NO");
  req.outcomes[2] = bytes_str ("UNKNOWN");
  req.script = bytes_str ("import os\nprint(os.listdir('.'))\n");
  return req;
}

/* The message of a rejected request, or a test failure when it passes.  */
static char *
request_rejected (const struct sp_request *req)
{
  cleanup_error sp_error_t err = NULL;
  int ret = sp_request_validate (req, allowlist, N_ALLOW, &err);

  ck_assert_ptr_nonnull (err);
  /* A repository outside the allowlist is told apart as a value, every
     other broken rule is -1.  */
  ck_assert_int_eq (ret, strstr (sp_error_message (err), "repo: not in the allowlist") != NULL
                             ? SP_REQUEST_REPO_UNKNOWN
                             : -1);
  return strdup (sp_error_message (err));
}

static void
request_accepted (const struct sp_request *req)
{
  cleanup_error sp_error_t err = NULL;

  if (sp_request_validate (req, allowlist, N_ALLOW, &err) < 0)
    ck_abort_msg ("rejected: %s", sp_error_message (err));
}

/* True when the message holds the value's bytes: messages never echo.  */
static bool
echoes (const char *msg, struct sp_bytes value)
{
  return value.len >= 3 && memmem (msg, strlen (msg), value.data, value.len) != NULL;
}

/* An outcome in every position must fail with the rule's words, and say the
   position without echoing the outcome.  */
static void
check_outcome_rejected (const char *lit, size_t len, const char *why)
{
  struct sp_bytes bad = bytes_n (lit, len);

  {
    cleanup_error sp_error_t err = NULL;
    ck_assert_int_eq (sp_outcome_check (bad, &err), -1);
    ck_assert_msg (strstr (sp_error_message (err), why), "message `%s` lacks `%s`", sp_error_message (err),
                   why);
  }
  for (size_t pos = 0; pos < SP_OUTCOME_COUNT; pos++)
    {
      struct sp_request req = valid_request ();
      cleanup_free char *msg = NULL;
      char where[32];

      req.outcomes[pos] = bad;
      msg = request_rejected (&req);
      snprintf (where, sizeof (where), "outcome %zu: ", pos + 1);
      ck_assert_msg (strncmp (msg, where, strlen (where)) == 0, "message `%s` does not start with `%s`", msg,
                     where);
      ck_assert_msg (strstr (msg, why), "message `%s` lacks `%s`", msg, why);
      ck_assert_msg (!echoes (msg, bad), "message `%s` echoes the outcome", msg);
    }
}

static void
check_outcome_accepted (const char *lit, size_t len)
{
  cleanup_error sp_error_t err = NULL;
  struct sp_request req = valid_request ();

  if (sp_outcome_check (bytes_n (lit, len), &err) < 0)
    ck_abort_msg ("rejected: %s", sp_error_message (err));
  req.outcomes[1] = bytes_n (lit, len);
  request_accepted (&req);
}

/* name, bytes (a string literal; sizeof keeps embedded NULs), words the
   message must contain.  */
#define OUTCOME_REJECTED_CASES(X)                                                                            \
  X (empty_outcome_is_rejected, "", "empty")                                                                 \
  X (outcome_of_65_bytes_is_rejected, "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",   \
     "above 64")                                                                                             \
  X (outcome_of_65_bytes_ending_in_multibyte_is_rejected,                                                    \
     "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA\xC3\xA9", "above 64")                  \
  X (outcome_with_overlong_two_byte_form_is_rejected, "A\xC0\xAF", "invalid UTF-8 at byte 1")                \
  X (outcome_with_overlong_three_byte_form_is_rejected, "\xE0\x80\xAF", "invalid UTF-8")                     \
  X (outcome_with_overlong_four_byte_form_is_rejected, "\xF0\x80\x80\xAF", "invalid UTF-8")                  \
  X (outcome_with_overlong_nul_is_rejected, "\xC0\x80", "invalid UTF-8")                                     \
  X (outcome_with_high_surrogate_is_rejected, "\xED\xA0\x80", "invalid UTF-8")                               \
  X (outcome_with_low_surrogate_is_rejected, "\xED\xBF\xBF", "invalid UTF-8")                                \
  X (outcome_above_u10ffff_is_rejected, "\xF4\x90\x80\x80", "invalid UTF-8")                                 \
  X (outcome_with_f5_lead_byte_is_rejected, "\xF5\x80\x80\x80", "invalid UTF-8")                             \
  X (outcome_with_truncated_sequence_is_rejected, "YES\xE2\x82", "invalid UTF-8 at byte 3")                  \
  X (outcome_with_lone_continuation_byte_is_rejected, "\x80YES", "invalid UTF-8 at byte 0")                  \
  X (outcome_with_ff_byte_is_rejected, "YES\xFF", "invalid UTF-8")                                           \
  X (outcome_with_nul_is_rejected, "YES\0NO", "U+0000")                                                      \
  X (outcome_with_newline_is_rejected, "YES\nNO", "U+000A")                                                  \
  X (outcome_with_tab_is_rejected, "\tYES", "U+0009")                                                        \
  X (outcome_with_escape_sequence_is_rejected, "\x1B[31mYES", "U+001B")                                      \
  X (outcome_with_del_is_rejected, "YES\x7F", "U+007F")                                                      \
  X (outcome_with_c1_next_line_is_rejected, "YES\xC2\x85", "U+0085")                                         \
  X (outcome_with_c1_csi_is_rejected,                                                                        \
     "\xC2\x9B"                                                                                              \
     "31mYES",                                                                                               \
     "U+009B")                                                                                               \
  X (outcome_with_c1_first_is_rejected, "\xC2\x80", "U+0080")                                                \
  X (outcome_with_line_separator_is_rejected, "YES\xE2\x80\xA8NO", "U+2028")                                 \
  X (outcome_with_paragraph_separator_is_rejected, "YES\xE2\x80\xA9", "U+2029")                              \
  X (outcome_with_left_to_right_mark_is_rejected, "\xE2\x80\x8EYES", "U+200E")                               \
  X (outcome_with_right_to_left_mark_is_rejected, "\xE2\x80\x8FYES", "U+200F")                               \
  X (outcome_with_arabic_letter_mark_is_rejected, "\xD8\x9CYES", "U+061C")                                   \
  X (outcome_with_bidi_embedding_is_rejected, "\xE2\x80\xAAYES", "U+202A")                                   \
  X (outcome_with_bidi_override_is_rejected, "\xE2\x80\xAESEY", "U+202E")                                    \
  X (outcome_with_bidi_isolate_is_rejected, "\xE2\x81\xA6YES", "U+2066")                                     \
  X (outcome_with_pop_directional_isolate_is_rejected, "YES\xE2\x81\xA9", "U+2069")                          \
  X (outcome_spelled_error_is_rejected, "ERROR", "reserved")

#define OUTCOME_ACCEPTED_CASES(X)                                                                            \
  X (outcome_of_64_bytes_is_accepted, "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA")    \
  X (outcome_of_64_bytes_in_four_byte_characters_is_accepted,                                                \
     "\xF0\x9F\x98\x80\xF0\x9F\x98\x80\xF0\x9F\x98\x80\xF0\x9F\x98\x80\xF0\x9F\x98\x80\xF0\x9F\x98\x80"      \
     "\xF0\x9F\x98\x80\xF0\x9F\x98\x80\xF0\x9F\x98\x80\xF0\x9F\x98\x80\xF0\x9F\x98\x80\xF0\x9F\x98\x80"      \
     "\xF0\x9F\x98\x80\xF0\x9F\x98\x80\xF0\x9F\x98\x80\xF0\x9F\x98\x80")                                     \
  X (outcome_of_one_byte_is_accepted, "Y")                                                                   \
  X (outcome_with_non_ascii_letters_is_accepted, "\xC3\x89T\xC3\x89 \xE6\x98\xAF")                           \
  X (outcome_at_u10ffff_is_accepted, "\xF4\x8F\xBF\xBF")                                                     \
  X (outcome_just_after_c1_is_accepted, "\xC2\xA0YES")                                                       \
  X (outcome_with_quote_and_backslash_is_accepted, "say \"yes\" \\ no")                                      \
  X (outcome_with_spaces_is_accepted, "NOT FOUND")                                                           \
  X (outcome_error_in_lower_case_is_accepted, "error")                                                       \
  X (outcome_containing_error_is_accepted, "ERRORS")

#define DEFINE_REJECTED(name, lit, why)                                                                      \
  START_TEST (name)                                                                                          \
  {                                                                                                          \
    check_outcome_rejected (lit, sizeof (lit) - 1, why);                                                     \
  }                                                                                                          \
  END_TEST
#define DEFINE_ACCEPTED(name, lit)                                                                           \
  START_TEST (name)                                                                                          \
  {                                                                                                          \
    check_outcome_accepted (lit, sizeof (lit) - 1);                                                          \
  }                                                                                                          \
  END_TEST
OUTCOME_REJECTED_CASES (DEFINE_REJECTED)
OUTCOME_ACCEPTED_CASES (DEFINE_ACCEPTED)

START_TEST (every_c0_and_c1_control_and_del_is_rejected)
{
  for (uint32_t cp = 0; cp <= 0x9F; cp++)
    {
      cleanup_error sp_error_t err = NULL;
      uint8_t buf[2];
      size_t len;

      if (cp >= 0x20 && cp < 0x7F)
        continue;
      if (cp < 0x80)
        {
          buf[0] = (uint8_t)cp;
          len = 1;
        }
      else
        {
          buf[0] = (uint8_t)(0xC0 | (cp >> 6));
          buf[1] = (uint8_t)(0x80 | (cp & 0x3F));
          len = 2;
        }
      ck_assert_msg (sp_outcome_check (bytes_n (buf, len), &err) == -1, "U+%04X accepted", cp);
    }
}
END_TEST

START_TEST (every_printable_ascii_character_is_accepted)
{
  for (uint8_t c = 0x20; c < 0x7F; c++)
    {
      cleanup_error sp_error_t err = NULL;
      ck_assert_msg (sp_outcome_check (bytes_n (&c, 1), &err) == 0, "0x%02X rejected", c);
    }
}
END_TEST

static void
check_duplicate (size_t a, size_t b)
{
  struct sp_request req = valid_request ();
  cleanup_free char *msg = NULL;
  char want[64];

  req.outcomes[b] = req.outcomes[a];
  msg = request_rejected (&req);
  snprintf (want, sizeof (want), "outcome %zu: same as outcome %zu", b + 1, a + 1);
  ck_assert_str_eq (msg, want);
}

START_TEST (first_and_second_outcome_equal_is_rejected)
{
  check_duplicate (0, 1);
}
END_TEST

START_TEST (first_and_third_outcome_equal_is_rejected)
{
  check_duplicate (0, 2);
}
END_TEST

START_TEST (second_and_third_outcome_equal_is_rejected)
{
  check_duplicate (1, 2);
}
END_TEST

START_TEST (outcomes_equal_as_bytes_through_distinct_buffers_are_rejected)
{
  struct sp_request req = valid_request ();
  char copy[] = "YES";
  cleanup_free char *msg = NULL;

  req.outcomes[2] = bytes_str (copy);
  msg = request_rejected (&req);
  ck_assert_str_eq (msg, "outcome 3: same as outcome 1");
}
END_TEST

START_TEST (outcomes_differing_only_in_case_are_accepted)
{
  struct sp_request req = valid_request ();

  req.outcomes[0] = bytes_str ("yes");
  req.outcomes[1] = bytes_str ("YES");
  req.outcomes[2] = bytes_str ("Yes");
  request_accepted (&req);
}
END_TEST

START_TEST (outcome_that_is_a_prefix_of_another_is_accepted)
{
  struct sp_request req = valid_request ();

  req.outcomes[0] = bytes_str ("NO");
  req.outcomes[1] = bytes_str ("NONE");
  req.outcomes[2] = bytes_str ("N");
  request_accepted (&req);
}
END_TEST

START_TEST (valid_request_is_accepted)
{
  struct sp_request req = valid_request ();

  request_accepted (&req);
}
END_TEST

START_TEST (every_allowlisted_repo_is_accepted)
{
  for (size_t i = 0; i < N_ALLOW; i++)
    {
      struct sp_request req = valid_request ();

      req.repo = bytes_str (allowlist[i]);
      request_accepted (&req);
    }
}
END_TEST

static void
check_repo_rejected (const char *lit, size_t len, const char *why)
{
  struct sp_request req = valid_request ();
  cleanup_free char *msg = NULL;

  req.repo = bytes_n (lit, len);
  msg = request_rejected (&req);
  ck_assert_msg (strncmp (msg, "repo: ", 6) == 0, "message `%s` does not name the repo", msg);
  ck_assert_msg (strstr (msg, why), "message `%s` lacks `%s`", msg, why);
  ck_assert_msg (!echoes (msg, req.repo), "message `%s` echoes the repo", msg);
}

#define REPO_REJECTED_CASES(X)                                                                               \
  X (repo_not_in_allowlist_is_rejected, "acme/secret", "not in the allowlist")                               \
  X (repo_with_case_variant_of_allowed_is_rejected, "Acme/Widgets", "not in the allowlist")                  \
  X (repo_with_embedded_nul_after_allowed_name_is_rejected, "acme/widgets\0../x", "not in the allowlist")    \
  X (repo_with_trailing_nul_is_rejected, "acme/widgets\0", "not in the allowlist")                           \
  X (repo_that_is_a_prefix_of_allowed_is_rejected, "acme/widget", "not in the allowlist")                    \
  X (repo_extending_allowed_is_rejected, "acme/widgets2", "not in the allowlist")                            \
  X (repo_with_trailing_slash_is_rejected, "acme/widgets/", "not in the allowlist")                          \
  X (repo_with_path_traversal_is_rejected, "acme/../acme/widgets", "not in the allowlist")                   \
  X (empty_repo_is_rejected, "", "0 bytes")

#define DEFINE_REPO_REJECTED(name, lit, why)                                                                 \
  START_TEST (name)                                                                                          \
  {                                                                                                          \
    check_repo_rejected (lit, sizeof (lit) - 1, why);                                                        \
  }                                                                                                          \
  END_TEST
REPO_REJECTED_CASES (DEFINE_REPO_REJECTED)

START_TEST (repo_above_bound_is_rejected_even_when_allowlisted)
{
  static char long_name[SP_REPO_MAX_BYTES + 2];
  char *const long_list[] = { long_name };
  cleanup_error sp_error_t err = NULL;
  struct sp_request req = valid_request ();

  memset (long_name, 'a', SP_REPO_MAX_BYTES + 1);
  req.repo = bytes_str (long_name);
  ck_assert_int_eq (sp_request_validate (&req, long_list, 1, &err), -1);
  ck_assert_ptr_nonnull (strstr (sp_error_message (err), "141 bytes"));
}
END_TEST

START_TEST (empty_allowlist_rejects_every_repo)
{
  cleanup_error sp_error_t err = NULL;
  struct sp_request req = valid_request ();

  ck_assert_int_eq (sp_request_validate (&req, NULL, 0, &err), SP_REQUEST_REPO_UNKNOWN);
}
END_TEST

static void
check_script (size_t len, bool accepted)
{
  cleanup_free uint8_t *script = malloc (len + 1);
  struct sp_request req = valid_request ();

  ck_assert_ptr_nonnull (script);
  memset (script, '#', len);
  req.script = bytes_n (script, len);
  if (accepted)
    request_accepted (&req);
  else
    {
      cleanup_free char *msg = request_rejected (&req);
      ck_assert_msg (strncmp (msg, "script: ", 8) == 0, "message `%s` does not name the script", msg);
    }
}

START_TEST (script_of_0_bytes_is_rejected)
{
  check_script (0, false);
}
END_TEST

START_TEST (script_of_1_byte_is_accepted)
{
  check_script (1, true);
}
END_TEST

START_TEST (script_of_65536_bytes_is_accepted)
{
  check_script (SP_SCRIPT_MAX_BYTES, true);
}
END_TEST

START_TEST (script_of_65537_bytes_is_rejected)
{
  check_script (SP_SCRIPT_MAX_BYTES + 1, false);
}
END_TEST

START_TEST (script_with_any_bytes_is_accepted)
{
  static const uint8_t odd[] = { 0x00, 0xFF, 0xC0, 0x80, '\n', 0x1B };
  struct sp_request req = valid_request ();

  req.script = bytes_n (odd, sizeof (odd));
  request_accepted (&req);
}
END_TEST

START_TEST (rejection_messages_never_echo_request_content)
{
  struct sp_request req = valid_request ();
  cleanup_free char *repo_msg = NULL;
  cleanup_free char *outcome_msg = NULL;
  cleanup_free char *dup_msg = NULL;

  req.repo = bytes_str ("acme/CANARY_SECRET_9f3b");
  repo_msg = request_rejected (&req);
  ck_assert_ptr_null (strstr (repo_msg, "CANARY"));

  req = valid_request ();
  req.outcomes[0] = bytes_str ("CANARY_SECRET_9f3b\n");
  outcome_msg = request_rejected (&req);
  ck_assert_ptr_null (strstr (outcome_msg, "CANARY"));

  req = valid_request ();
  req.outcomes[0] = bytes_str ("CANARY_SECRET_9f3b");
  req.outcomes[1] = bytes_str ("CANARY_SECRET_9f3b");
  dup_msg = request_rejected (&req);
  ck_assert_ptr_null (strstr (dup_msg, "CANARY"));
}
END_TEST

START_TEST (first_broken_rule_is_reported_in_field_order)
{
  struct sp_request req = valid_request ();
  cleanup_free char *msg = NULL;

  req.repo = bytes_str ("acme/secret");
  req.outcomes[0] = bytes_str ("ERROR");
  req.script = bytes_n ("", 0);
  msg = request_rejected (&req);
  ck_assert_str_eq (msg, "repo: not in the allowlist");
}
END_TEST

#define ADD_TEST(name, ...) tcase_add_test (tc, name);

static Suite *
make_suite (void)
{
  Suite *s = suite_create ("check_request");
  TCase *tc = tcase_create ("outcome");

  OUTCOME_REJECTED_CASES (ADD_TEST)
  OUTCOME_ACCEPTED_CASES (ADD_TEST)
  tcase_add_test (tc, every_c0_and_c1_control_and_del_is_rejected);
  tcase_add_test (tc, every_printable_ascii_character_is_accepted);
  tcase_add_test (tc, first_and_second_outcome_equal_is_rejected);
  tcase_add_test (tc, first_and_third_outcome_equal_is_rejected);
  tcase_add_test (tc, second_and_third_outcome_equal_is_rejected);
  tcase_add_test (tc, outcomes_equal_as_bytes_through_distinct_buffers_are_rejected);
  tcase_add_test (tc, outcomes_differing_only_in_case_are_accepted);
  tcase_add_test (tc, outcome_that_is_a_prefix_of_another_is_accepted);
  suite_add_tcase (s, tc);

  tc = tcase_create ("request");
  tcase_add_test (tc, valid_request_is_accepted);
  tcase_add_test (tc, every_allowlisted_repo_is_accepted);
  REPO_REJECTED_CASES (ADD_TEST)
  tcase_add_test (tc, repo_above_bound_is_rejected_even_when_allowlisted);
  tcase_add_test (tc, empty_allowlist_rejects_every_repo);
  tcase_add_test (tc, script_of_0_bytes_is_rejected);
  tcase_add_test (tc, script_of_1_byte_is_accepted);
  tcase_add_test (tc, script_of_65536_bytes_is_accepted);
  tcase_add_test (tc, script_of_65537_bytes_is_rejected);
  tcase_add_test (tc, script_with_any_bytes_is_accepted);
  tcase_add_test (tc, rejection_messages_never_echo_request_content);
  tcase_add_test (tc, first_broken_rule_is_reported_in_field_order);
  suite_add_tcase (s, tc);
  return s;
}

SP_CHECK_MAIN (make_suite)
