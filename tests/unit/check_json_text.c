/* Strict UTF-8 and the JSON lexical pre-pass: the rules yajl leaves to us.  */
#include <stdbool.h>
#include <string.h>

#include "base/cleanup.h"

#include "base/utf8.h"
#include "text/json_text.h"

#include "sp_check.h"

#define BYTES(s) (const uint8_t *)(s), sizeof (s) - 1

static bool
utf8_ok (const uint8_t *s, size_t len)
{
  return sp_utf8_valid (s, len, NULL);
}

START_TEST (utf8_accepts_every_length_class)
{
  ck_assert (utf8_ok (BYTES ("a\x7f")));
  ck_assert (utf8_ok (BYTES ("\xc2\x80\xdf\xbf")));
  ck_assert (utf8_ok (BYTES ("\xe0\xa0\x80\xef\xbf\xbf")));
  ck_assert (utf8_ok (BYTES ("\xf0\x90\x80\x80\xf4\x8f\xbf\xbf")));
}
END_TEST

START_TEST (utf8_rejects_overlong_forms)
{
  ck_assert (!utf8_ok (BYTES ("\xc0\xaf")));
  ck_assert (!utf8_ok (BYTES ("\xc1\xbf")));
  ck_assert (!utf8_ok (BYTES ("\xe0\x80\xaf")));
  ck_assert (!utf8_ok (BYTES ("\xf0\x80\x80\xaf")));
}
END_TEST

START_TEST (utf8_rejects_encoded_surrogates)
{
  ck_assert (!utf8_ok (BYTES ("\xed\xa0\x80")));
  ck_assert (!utf8_ok (BYTES ("\xed\xbf\xbf")));
}
END_TEST

START_TEST (utf8_rejects_code_points_above_u10ffff)
{
  ck_assert (!utf8_ok (BYTES ("\xf4\x90\x80\x80")));
  ck_assert (!utf8_ok (BYTES ("\xf5\x80\x80\x80")));
  ck_assert (!utf8_ok (BYTES ("\xff")));
}
END_TEST

START_TEST (utf8_rejects_truncated_and_stray_continuations)
{
  size_t bad = 99;

  ck_assert (!utf8_ok (BYTES ("\xe2\x82")));
  ck_assert (!utf8_ok (BYTES ("\x80")));
  ck_assert (!sp_utf8_valid (BYTES ("ab\xe2\x28\xa1"), &bad));
  ck_assert_uint_eq (bad, 2);
}
END_TEST

static int
text_check (const char *s, size_t len, unsigned depth)
{
  cleanup_error sp_error_t err = NULL;
  int ret = sp_json_text_check (s, len, depth, &err);

  ck_assert ((ret < 0) == (err != NULL));
  return ret;
}

#define TEXT_OK(s, depth)  ck_assert_int_eq (text_check (s, sizeof (s) - 1, depth), 0)
#define TEXT_BAD(s, depth) ck_assert_int_eq (text_check (s, sizeof (s) - 1, depth), -1)

START_TEST (json_text_accepts_plain_document)
{
  TEXT_OK ("{\"a\": [1, \"x\\n\\u00e9\\ud83d\\ude00\"]}\r\n\t ", 2);
}
END_TEST

START_TEST (json_text_rejects_empty_document)
{
  TEXT_BAD ("", 2);
}
END_TEST

START_TEST (json_text_rejects_byte_order_mark)
{
  TEXT_BAD ("\xef\xbb\xbf{}", 2);
}
END_TEST

START_TEST (json_text_rejects_vertical_tab_and_form_feed_whitespace)
{
  TEXT_BAD ("{}\v", 2);
  TEXT_BAD ("\f{}", 2);
}
END_TEST

START_TEST (json_text_rejects_nul_outside_strings)
{
  TEXT_BAD ("{}\0", 2);
}
END_TEST

START_TEST (json_text_rejects_non_ascii_outside_strings)
{
  TEXT_BAD ("{}\xc2\xa0", 2);
}
END_TEST

START_TEST (json_text_rejects_raw_control_byte_in_string)
{
  TEXT_BAD ("\"a\x01\"", 2);
  TEXT_BAD ("\"a\0\"", 2);
}
END_TEST

START_TEST (json_text_rejects_escaped_nul)
{
  TEXT_BAD ("\"\\u0000\"", 2);
}
END_TEST

START_TEST (json_text_rejects_lone_surrogate_escapes)
{
  TEXT_BAD ("\"\\ud800\"", 2);
  TEXT_BAD ("\"\\udc00\"", 2);
  TEXT_BAD ("\"\\ud800\\u0041\"", 2);
  TEXT_BAD ("\"\\ud800\\ud800\"", 2);
  TEXT_BAD ("\"\\ud800\\n\"", 2);
}
END_TEST

START_TEST (json_text_rejects_invalid_escapes)
{
  TEXT_BAD ("\"\\x41\"", 2);
  TEXT_BAD ("\"\\u12\"", 2);
  TEXT_BAD ("\"\\u12g4\"", 2);
  TEXT_BAD ("\"\\'\"", 2);
}
END_TEST

START_TEST (json_text_rejects_unterminated_string)
{
  TEXT_BAD ("\"abc", 2);
  TEXT_BAD ("\"abc\\", 2);
}
END_TEST

START_TEST (json_text_rejects_invalid_utf8)
{
  TEXT_BAD ("\"\xc0\xaf\"", 2);
  TEXT_BAD ("\"\xed\xa0\x80\"", 2);
}
END_TEST

START_TEST (json_text_enforces_depth_bound)
{
  TEXT_OK ("[[1]]", 2);
  TEXT_BAD ("[[[1]]]", 2);
  TEXT_OK ("\"[[[[[\"", 2); /* brackets inside strings do not nest */
}
END_TEST

static Suite *
make_suite (void)
{
  Suite *s = suite_create ("json_text");
  TCase *tc = tcase_create ("json_text");

  tcase_add_test (tc, utf8_accepts_every_length_class);
  tcase_add_test (tc, utf8_rejects_overlong_forms);
  tcase_add_test (tc, utf8_rejects_encoded_surrogates);
  tcase_add_test (tc, utf8_rejects_code_points_above_u10ffff);
  tcase_add_test (tc, utf8_rejects_truncated_and_stray_continuations);
  tcase_add_test (tc, json_text_accepts_plain_document);
  tcase_add_test (tc, json_text_rejects_empty_document);
  tcase_add_test (tc, json_text_rejects_byte_order_mark);
  tcase_add_test (tc, json_text_rejects_vertical_tab_and_form_feed_whitespace);
  tcase_add_test (tc, json_text_rejects_nul_outside_strings);
  tcase_add_test (tc, json_text_rejects_non_ascii_outside_strings);
  tcase_add_test (tc, json_text_rejects_raw_control_byte_in_string);
  tcase_add_test (tc, json_text_rejects_escaped_nul);
  tcase_add_test (tc, json_text_rejects_lone_surrogate_escapes);
  tcase_add_test (tc, json_text_rejects_invalid_escapes);
  tcase_add_test (tc, json_text_rejects_unterminated_string);
  tcase_add_test (tc, json_text_rejects_invalid_utf8);
  tcase_add_test (tc, json_text_enforces_depth_bound);
  suite_add_tcase (s, tc);
  return s;
}

SP_CHECK_MAIN (make_suite)
