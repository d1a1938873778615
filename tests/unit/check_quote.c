/* sp_quote_name: the one rule for a name from a tree in an operator message
   (docs/staging.md, "Paths and names").  */
#define _GNU_SOURCE
#include <string.h>

#include "base/bounds.h"
#include "base/quote.h"

#include "sp_check.h"

static const char *
q (const char *name)
{
  static char buf[SP_QUOTE_BUF_SIZE];

  return sp_quote_name (name, buf);
}

/* Only bytes 0x20..0x7e, whatever the input.  */
static void
assert_printable (const char *s)
{
  for (const char *p = s; *p; p++)
    ck_assert_msg ((unsigned char)*p >= 0x20 && (unsigned char)*p <= 0x7e, "byte 0x%02x in `%s`",
                   (unsigned char)*p, s);
}

START_TEST (plain_name_is_unchanged)
{
  ck_assert_str_eq (q ("src/main.c"), "src/main.c");
  ck_assert_str_eq (q (""), "");
}
END_TEST

START_TEST (newline_cannot_start_a_forged_line)
{
  ck_assert_str_eq (q ("a\nsealed-probe-proxy: fine"), "a\\x0asealed-probe-proxy: fine");
  ck_assert_str_eq (q ("a\rb"), "a\\x0db");
}
END_TEST

START_TEST (escape_sequence_cannot_reach_the_terminal)
{
  ck_assert_str_eq (q ("x\x1b[2Jy"), "x\\x1b[2Jy");
  ck_assert_str_eq (q ("\x7f"), "\\x7f");
}
END_TEST

START_TEST (backquote_cannot_close_the_quotes)
{
  ck_assert_str_eq (q ("a`b"), "a\\x60b");
}
END_TEST

START_TEST (backslash_is_escaped_so_the_quoting_is_unambiguous)
{
  /* A literal "\x0a" in a name must not read as an escaped newline.  */
  ck_assert_str_eq (q ("a\\x0a"), "a\\x5cx0a");
}
END_TEST

START_TEST (non_utf8_and_utf8_bytes_are_escaped)
{
  ck_assert_str_eq (q ("\xff\xfe"), "\\xff\\xfe");
  ck_assert_str_eq (q ("caf\xc3\xa9"), "caf\\xc3\\xa9");
}
END_TEST

START_TEST (name_at_the_limit_is_shown_whole)
{
  char name[SP_QUOTE_MAX_CHARS + 1];

  memset (name, 'a', SP_QUOTE_MAX_CHARS);
  name[SP_QUOTE_MAX_CHARS] = '\0';
  ck_assert_str_eq (q (name), name);
}
END_TEST

START_TEST (name_over_the_limit_is_cut_with_an_ellipsis)
{
  char name[SP_QUOTE_MAX_CHARS + 2];
  char want[SP_QUOTE_MAX_CHARS + 4];

  memset (name, 'a', SP_QUOTE_MAX_CHARS + 1);
  name[SP_QUOTE_MAX_CHARS + 1] = '\0';
  memset (want, 'a', SP_QUOTE_MAX_CHARS);
  strcpy (want + SP_QUOTE_MAX_CHARS, "...");
  ck_assert_str_eq (q (name), want);
}
END_TEST

START_TEST (worst_case_fills_the_buffer_exactly)
{
  char name[SP_QUOTE_MAX_CHARS * 2];
  char buf[SP_QUOTE_BUF_SIZE + 1];

  memset (name, '\n', sizeof (name) - 1);
  name[sizeof (name) - 1] = '\0';
  buf[SP_QUOTE_BUF_SIZE] = 'Z';
  sp_quote_name (name, buf);
  ck_assert_uint_eq (strlen (buf), SP_QUOTE_BUF_SIZE - 1);
  ck_assert_int_eq (buf[SP_QUOTE_BUF_SIZE], 'Z');
  ck_assert (strcmp (buf + strlen (buf) - 3, "...") == 0);
  assert_printable (buf);
}
END_TEST

START_TEST (every_byte_quotes_to_printable_ascii)
{
  char name[2] = { 0, 0 };

  for (int c = 1; c < 256; c++)
    {
      name[0] = (char)c;
      assert_printable (q (name));
    }
}
END_TEST

START_TEST (null_name_shows_as_none)
{
  ck_assert_str_eq (q (NULL), "(none)");
}
END_TEST

START_TEST (what_sp_quote_name_writes_reads_back_as_quoted)
{
  char name[SP_QUOTE_MAX_CHARS * 2];

  for (int c = 1; c < 256; c++)
    {
      char one[2] = { (char)c, 0 };
      ck_assert_msg (sp_quote_name_ok (q (one)), "byte 0x%02x: `%s`", c, q (one));
    }
  ck_assert (sp_quote_name_ok (q ("vendor/sha1")));
  memset (name, '\n', sizeof (name) - 1);
  name[sizeof (name) - 1] = '\0';
  ck_assert (sp_quote_name_ok (q (name))); /* cut, with its "..." */
  memset (name, 'a', sizeof (name) - 1);
  ck_assert (sp_quote_name_ok (q (name)));
  name[SP_QUOTE_MAX_CHARS] = '\0';
  ck_assert (sp_quote_name_ok (q (name))); /* at the limit, whole */
}
END_TEST

START_TEST (text_sp_quote_name_cannot_write_is_not_quoted)
{
  char longer[SP_QUOTE_MAX_CHARS + 8];

  ck_assert (!sp_quote_name_ok (""));
  ck_assert (!sp_quote_name_ok (NULL));
  ck_assert (!sp_quote_name_ok ("a\nb"));        /* a raw control byte */
  ck_assert (!sp_quote_name_ok ("a`b"));         /* a raw backquote */
  ck_assert (!sp_quote_name_ok ("a\\b"));        /* a backslash but in \xNN */
  ck_assert (!sp_quote_name_ok ("a\\x0"));       /* a short escape */
  ck_assert (!sp_quote_name_ok ("a\\x0A"));      /* upper-case hex */
  ck_assert (!sp_quote_name_ok ("a\\x41"));      /* 'A' is never escaped */
  ck_assert (!sp_quote_name_ok ("a\\x00"));      /* no name holds a NUL */
  ck_assert (!sp_quote_name_ok ("caf\xc3\xa9")); /* raw UTF-8 */
  memset (longer, 'a', sizeof (longer) - 1);
  longer[sizeof (longer) - 1] = '\0';
  ck_assert (!sp_quote_name_ok (longer)); /* past the limit without "..." */
  memcpy (longer + SP_QUOTE_MAX_CHARS, "...x", 5);
  ck_assert (!sp_quote_name_ok (longer)); /* something after the "..." */
}
END_TEST

static Suite *
make_suite (void)
{
  Suite *s = suite_create ("check_quote");
  TCase *tc = tcase_create ("quote");

  tcase_add_test (tc, plain_name_is_unchanged);
  tcase_add_test (tc, newline_cannot_start_a_forged_line);
  tcase_add_test (tc, escape_sequence_cannot_reach_the_terminal);
  tcase_add_test (tc, backquote_cannot_close_the_quotes);
  tcase_add_test (tc, backslash_is_escaped_so_the_quoting_is_unambiguous);
  tcase_add_test (tc, non_utf8_and_utf8_bytes_are_escaped);
  tcase_add_test (tc, name_at_the_limit_is_shown_whole);
  tcase_add_test (tc, name_over_the_limit_is_cut_with_an_ellipsis);
  tcase_add_test (tc, worst_case_fills_the_buffer_exactly);
  tcase_add_test (tc, every_byte_quotes_to_printable_ascii);
  tcase_add_test (tc, null_name_shows_as_none);
  tcase_add_test (tc, what_sp_quote_name_writes_reads_back_as_quoted);
  tcase_add_test (tc, text_sp_quote_name_cannot_write_is_not_quoted);
  suite_add_tcase (s, tc);
  return s;
}

SP_CHECK_MAIN (make_suite)
