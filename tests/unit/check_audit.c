/* The audit log: one exact, escaped, bounded JSON line per record; a private
   directory and file, refused when anyone else could read them; whole lines
   under concurrent appends.  */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/utf8.h"
#include "os/fileio.h"
#include "serve/audit.h"
#include "text/json.h"

#include "sp_check.h"
#include "sp_tmpdir.h"

#define OUTCOME(s)                                                                                           \
  {                                                                                                          \
    (const uint8_t *)(s), sizeof (s) - 1                                                                     \
  }

static const struct sp_bytes outcomes[SP_OUTCOME_COUNT]
    = { OUTCOME ("YES"), OUTCOME ("NO"), OUTCOME ("UNKNOWN") };

static const struct sp_run_facts facts = {
  .launched = true,
  .exit_code = 0,
  .signal = 0,
  .oom = false,
  .timed_out = false,
  .wall_ns = 1234567890,
  .cpu_ns = 987654321,
  .peak_memory_bytes = 41943040,
};

/* The seed the good record's probe ran on omits two submodules.  */
static const size_t two_omitted = 2;

/* 2026-11-30T07:01:02.345678901Z and a second and a half later.  */
#define T0 1796022062345678901ULL

static struct sp_audit_record
good_record (void)
{
  return (struct sp_audit_record){
    .id = "r1a2b3-7",
    .run = "r1a2b3",
    .received_ns = T0,
    .peer = { .known = true, .uid = 1000, .gid = 996, .pid = 4242 },
    .started_ns = T0 + 1000000,
    .finished_ns = T0 + 1500000000,
    .repo = "acme/payments",
    .outcomes = outcomes,
    .script_sha256 = "sha256:00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff",
    .seed_commit = "0123456789abcdef0123456789abcdef01234567",
    .seed_digest = "sha256:ffeeddccbbaa99887766554433221100ffeeddccbbaa99887766554433221100",
    .seed_omitted_submodules = &two_omitted,
    .snapshot = "overlay",
    .sandbox = "p3",
    .debited = true,
    .budget_remaining = 93,
    .answer = 2,
    .status = SP_AUDIT_STATUS_ANSWERED,
    .reason = NULL,
    .facts = &facts,
  };
}

static char *
render_ok (const struct sp_audit_record *rec, size_t *len)
{
  cleanup_error sp_error_t err = NULL;
  char *line = NULL;
  size_t n = 0;

  if (sp_audit_render (rec, &line, &n, &err) < 0)
    ck_abort_msg ("sp_audit_render: %s", sp_error_message (err));
  ck_assert_uint_eq (strlen (line), n);
  if (len)
    *len = n;
  return line;
}

static char *
render_fails (const struct sp_audit_record *rec)
{
  cleanup_error sp_error_t err = NULL;
  char *line = NULL;
  size_t n = 0;

  ck_assert_int_eq (sp_audit_render (rec, &line, &n, &err), -1);
  ck_assert_ptr_null (line);
  return strdup (sp_error_message (err));
}

/* One line: exactly one '\n', at the end, and no other byte below 0x20.  */
static void
assert_one_line (const char *line, size_t len)
{
  ck_assert_uint_gt (len, 1);
  ck_assert_int_eq (line[len - 1], '\n');
  for (size_t i = 0; i + 1 < len; i++)
    ck_assert_msg ((unsigned char)line[i] >= 0x20, "byte 0x%02x at %zu", (unsigned char)line[i], i);
}

static struct sp_json *
parse_line (const char *line, size_t len)
{
  cleanup_error sp_error_t err = NULL;
  struct sp_json *root = NULL;

  if (sp_json_parse (line, len, 4, &root, &err) < 0)
    ck_abort_msg ("sp_json_parse: %s", sp_error_message (err));
  ck_assert_int_eq (root->type, SP_JSON_OBJECT);
  return root;
}

START_TEST (fixed_record_renders_exact_line_in_key_order)
{
  struct sp_audit_record rec = good_record ();
  cleanup_free char *line = render_ok (&rec, NULL);

  ck_assert_str_eq (
      line,
      "{\"id\":\"r1a2b3-7\",\"run\":\"r1a2b3\","
      "\"received\":\"2026-11-30T07:01:02.345Z\",\"peer_uid\":1000,\"peer_gid\":996,\"peer_pid\":4242,"
      "\"started\":\"2026-11-30T07:01:02.346Z\","
      "\"finished\":\"2026-11-30T07:01:03.845Z\",\"repo\":\"acme/payments\","
      "\"outcomes\":[\"YES\",\"NO\",\"UNKNOWN\"],\"answer_schema\":null,"
      "\"script_sha256\":\"sha256:00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff\","
      "\"seed_commit\":\"0123456789abcdef0123456789abcdef01234567\","
      "\"seed_digest\":\"sha256:ffeeddccbbaa99887766554433221100ffeeddccbbaa99887766554433221100\","
      "\"seed_omitted_submodules\":2,"
      "\"snapshot\":\"overlay\",\"sandbox\":\"p3\",\"debited\":true,\"budget_remaining\":93,\"result\":"
      "\"NO\","
      "\"status\":\"answered\",\"cause\":\"none\",\"reason\":null,\"launched\":true,\"exit\":0,\"signal\":0,"
      "\"oom\":false,\"timed_out\":false,\"wall_ms\":1234,\"cpu_ms\":987,"
      "\"peak_memory_bytes\":41943040,\"release\":null,\"release_ms\":null,\"release_overflow\":false,"
      "\"bits\":null,\"content_bits\":null,\"timing_bits\":null,\"repo_bits\":null}\n");
}
END_TEST

START_TEST (record_without_request_or_launch_renders_nulls)
{
  struct sp_audit_record rec = {
    .id = "r1-1",
    .run = "r1",
    .received_ns = T0,
    .peer = { .known = true, .uid = 1000, .gid = 996, .pid = 4243 },
    .finished_ns = T0,
    .budget_remaining = 0,
    .answer = 0,
    .status = SP_AUDIT_STATUS_REFUSED,
    .cause = SP_CAUSE_FRAME,
    .reason = "request: unknown tag 0x07",
    .release = "bucketed",
    .release_ms = 1000,
  };
  cleanup_free char *line = render_ok (&rec, NULL);

  ck_assert_str_eq (line,
                    "{\"id\":\"r1-1\",\"run\":\"r1\",\"received\":\"2026-11-30T07:01:02.345Z\","
                    "\"peer_uid\":1000,\"peer_gid\":996,\"peer_pid\":4243,\"started\":null,\"finished\":"
                    "\"2026-11-30T07:01:02.345Z\",\"repo\":null,"
                    "\"outcomes\":null,\"answer_schema\":null,\"script_sha256\":null,\"seed_commit\":null,"
                    "\"seed_digest\":null,"
                    "\"seed_omitted_submodules\":null,\"snapshot\":null,\"sandbox\":null,\"debited\":false,"
                    "\"budget_remaining\":0,\"result\":\"ERROR\","
                    "\"status\":\"refused\",\"cause\":\"frame\",\"reason\":\"request: unknown tag "
                    "0x07\",\"launched\":false,"
                    "\"exit\":null,\"signal\":null,\"oom\":null,\"timed_out\":null,\"wall_ms\":null,"
                    "\"cpu_ms\":null,\"peak_memory_bytes\":null,\"release\":\"bucketed\",\"release_ms\":1000,"
                    "\"release_overflow\":false,\"bits\":null,\"content_bits\":null,\"timing_bits\":null,"
                    "\"repo_bits\":null}\n");
}
END_TEST

START_TEST (charged_record_renders_its_bits)
{
  struct sp_audit_record rec = good_record ();
  cleanup_free char *line = NULL;

  rec.release = "bucketed";
  rec.release_ms = 2000;
  rec.charged = true;
  rec.millibits = 4808;
  rec.repo_millibits = 14424;
  line = render_ok (&rec, NULL);
  ck_assert_ptr_nonnull (strstr (line,
                                 ",\"release\":\"bucketed\",\"release_ms\":2000,\"release_overflow\":false,"
                                 "\"bits\":4.808,\"content_bits\":2.000,\"timing_bits\":2.808,"
                                 "\"repo_bits\":14.424}\n"));
  free (line);
  rec.release = "immediate";
  rec.release_ms = -1;
  rec.millibits = 2000;
  rec.timing_unbounded = true;
  line = render_ok (&rec, NULL);
  ck_assert_ptr_nonnull (strstr (line,
                                 ",\"release\":\"immediate\",\"release_ms\":null,\"release_overflow\":false,"
                                 "\"bits\":2.000,\"content_bits\":2.000,\"timing_bits\":\"unbounded\","
                                 "\"repo_bits\":14.424}\n"));
}
END_TEST

/* A request with an answer schema (wire protocol v2): no outcomes, the
   schema's digest, the canonical value as the result, and its content bits
   apart from the timing bits.  */
START_TEST (schema_record_renders_its_digest_value_and_content_bits)
{
  struct sp_audit_record rec = good_record ();
  cleanup_free char *line = NULL;
  static const char value[] = "{\"found\":true,\"count\":7}";

  rec.outcomes = NULL;
  rec.schema_sha256 = "sha256:aa112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";
  rec.schema_content_bits = 5;
  rec.answer = 1;
  rec.value = value;
  rec.value_len = sizeof (value) - 1;
  rec.release = "bucketed";
  rec.release_ms = 2000;
  rec.charged = true;
  rec.millibits = 8000;
  rec.content_millibits = 5000;
  rec.repo_millibits = 8000;
  line = render_ok (&rec, NULL);
  ck_assert_ptr_nonnull (strstr (line, "\"outcomes\":null,\"answer_schema\":\"sha256:aa1122"));
  ck_assert_ptr_nonnull (
      strstr (line, "\"result\":\"{\\\"found\\\":true,\\\"count\\\":7}\",\"status\":\"answered\""));
  ck_assert_ptr_nonnull (
      strstr (line, "\"bits\":8.000,\"content_bits\":5.000,\"timing_bits\":3.000,\"repo_bits\":8.000}\n"));
  free (line);
  line = NULL;
  /* An answer without its value is refused, never rendered as another.  */
  {
    sp_error_t err = NULL;
    size_t len;

    rec.value = NULL;
    ck_assert_int_eq (sp_audit_render (&rec, &line, &len, &err), -1);
    sp_error_release (&err);
  }
}
END_TEST

START_TEST (killed_probe_has_null_exit_and_its_signal)
{
  struct sp_run_facts killed = facts;
  struct sp_audit_record rec = good_record ();
  cleanup_free char *line = NULL;

  killed.exit_code = -1;
  killed.signal = 9;
  killed.timed_out = true;
  rec.facts = &killed;
  rec.answer = 0;
  rec.status = SP_AUDIT_STATUS_TIMED_OUT;
  rec.cause = SP_CAUSE_TIMEOUT;
  rec.reason = "timeout after 30 s";
  line = render_ok (&rec, NULL);
  ck_assert_ptr_nonnull (strstr (
      line,
      "\"result\":\"ERROR\",\"status\":\"timed_out\",\"cause\":\"timeout\",\"reason\":\"timeout after 30 "
      "s\",\"launched\":true,\"exit\":null,\"signal\":9,\"oom\":false,"
      "\"timed_out\":true,"));
}
END_TEST

START_TEST (every_control_char_quote_and_backslash_in_reason_is_escaped)
{
  char reason[64];
  struct sp_audit_record rec = good_record ();
  cleanup_free char *line = NULL;
  cleanup_json struct sp_json *root = NULL;
  const struct sp_json *v;
  size_t len, n = 0;

  for (int c = 1; c < 0x20; c++)
    reason[n++] = (char)c;
  reason[n++] = 0x7f;
  reason[n++] = '"';
  reason[n++] = '\\';
  reason[n++] = '/';
  reason[n] = '\0';
  rec.reason = reason;
  rec.answer = 0;
  rec.status = SP_AUDIT_STATUS_INTERNAL;
  line = render_ok (&rec, &len);
  assert_one_line (line, len);
  ck_assert_ptr_nonnull (strstr (line, "\\n"));
  ck_assert_ptr_nonnull (strstr (line, "\\r"));
  ck_assert_ptr_nonnull (strstr (line, "\\\""));
  ck_assert_ptr_nonnull (strstr (line, "\\\\"));
  root = parse_line (line, len);
  v = sp_json_object_get (root, "reason");
  ck_assert_ptr_nonnull (v);
  ck_assert_int_eq (v->type, SP_JSON_STRING);
  ck_assert_uint_eq (v->u.string.len, n);
  ck_assert_mem_eq (v->u.string.data, reason, n);
}
END_TEST

START_TEST (invalid_utf8_in_any_string_is_refused)
{
  static const char *const bad[] = { "\xff", "\xc0\xaf", "\xed\xa0\x80", "ok\xe2\x82", "\xf4\x90\x80\x80" };
  static const struct sp_bytes bad_outcomes[SP_OUTCOME_COUNT]
      = { OUTCOME ("YES"), OUTCOME ("N\xffO"), OUTCOME ("UNKNOWN") };
  static const struct sp_bytes nul_outcomes[SP_OUTCOME_COUNT]
      = { OUTCOME ("YES"), OUTCOME ("N\0O"), OUTCOME ("UNKNOWN") };

  for (size_t i = 0; i < sizeof (bad) / sizeof (bad[0]); i++)
    {
      struct sp_audit_record rec = good_record ();
      cleanup_free char *msg = NULL;
      cleanup_free char *msg2 = NULL;

      rec.reason = bad[i];
      msg = render_fails (&rec);
      ck_assert_msg (strstr (msg, "`reason`") != NULL, "%s", msg);
      rec = good_record ();
      rec.repo = bad[i];
      msg2 = render_fails (&rec);
      ck_assert_msg (strstr (msg2, "`repo`") != NULL, "%s", msg2);
    }
  {
    struct sp_audit_record rec = good_record ();
    cleanup_free char *msg = NULL;
    cleanup_free char *msg2 = NULL;

    rec.outcomes = bad_outcomes;
    rec.answer = 1;
    msg = render_fails (&rec);
    ck_assert_msg (strstr (msg, "`outcomes`") != NULL, "%s", msg);
    rec.outcomes = nul_outcomes;
    msg2 = render_fails (&rec);
    ck_assert_msg (strstr (msg2, "`outcomes`") != NULL, "%s", msg2);
  }
}
END_TEST

START_TEST (answer_naming_no_outcome_is_refused)
{
  struct sp_audit_record rec = good_record ();
  cleanup_free char *msg = NULL;
  cleanup_free char *msg2 = NULL;

  rec.answer = SP_OUTCOME_COUNT + 1;
  msg = render_fails (&rec);
  rec = good_record ();
  rec.outcomes = NULL;
  msg2 = render_fails (&rec);
  ck_assert_ptr_nonnull (strstr (msg2, "answer"));
}
END_TEST

/* The cut keeps the longest prefix that fits, at a character boundary, for
   reasons made of 1-, 2-, 3- and 4-byte characters and of control bytes
   (each escaped to six).  */
START_TEST (overlong_reason_is_cut_at_a_boundary_within_the_bound)
{
  static const char *const units[]
      = { "a", "\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80", "\x01", "x\x01\xc3\xa9" };

  for (size_t u = 0; u < sizeof (units) / sizeof (units[0]); u++)
    {
      size_t unit = strlen (units[u]), n = 0, len;
      cleanup_free char *reason = malloc (3 * SP_AUDIT_LINE_MAX_BYTES + 8);
      struct sp_audit_record rec = good_record ();
      cleanup_free char *line = NULL;
      cleanup_json struct sp_json *root = NULL;
      const struct sp_json *v;
      const char *mark = "\xe2\x80\xa6[cut]";
      size_t mark_len = strlen (mark), kept;

      while (n + unit <= 3 * SP_AUDIT_LINE_MAX_BYTES)
        {
          memcpy (reason + n, units[u], unit);
          n += unit;
        }
      reason[n] = '\0';
      rec.reason = reason;
      rec.answer = 0;
      rec.status = SP_AUDIT_STATUS_INTERNAL;
      line = render_ok (&rec, &len);
      ck_assert_uint_le (len, SP_AUDIT_LINE_MAX_BYTES);
      /* Longest: one more unit (at most 6 escaped bytes per byte) would not fit.  */
      ck_assert_uint_gt (len + 6 * unit, SP_AUDIT_LINE_MAX_BYTES);
      assert_one_line (line, len);
      root = parse_line (line, len);
      v = sp_json_object_get (root, "reason");
      ck_assert_ptr_nonnull (v);
      ck_assert_uint_gt (v->u.string.len, mark_len);
      kept = v->u.string.len - mark_len;
      ck_assert_mem_eq (v->u.string.data + kept, mark, mark_len);
      ck_assert_mem_eq (v->u.string.data, reason, kept);
      ck_assert (sp_utf8_valid ((const uint8_t *)reason, kept, NULL));
    }
}
END_TEST

START_TEST (reason_that_fits_is_not_cut)
{
  struct sp_audit_record rec = good_record ();
  cleanup_free char *probe = NULL;
  cleanup_free char *reason = NULL;
  cleanup_free char *line = NULL;
  size_t base, len;

  rec.reason = "";
  probe = render_ok (&rec, &base);
  /* Exactly at the bound.  */
  reason = malloc (SP_AUDIT_LINE_MAX_BYTES);
  memset (reason, 'r', SP_AUDIT_LINE_MAX_BYTES - base);
  reason[SP_AUDIT_LINE_MAX_BYTES - base] = '\0';
  rec.reason = reason;
  line = render_ok (&rec, &len);
  ck_assert_uint_eq (len, SP_AUDIT_LINE_MAX_BYTES);
  ck_assert_ptr_null (strstr (line, "[cut]"));
  free (line);
  /* One byte over is cut.  */
  reason[SP_AUDIT_LINE_MAX_BYTES - base] = 'r';
  reason[SP_AUDIT_LINE_MAX_BYTES - base + 1] = '\0';
  line = render_ok (&rec, &len);
  ck_assert_uint_le (len, SP_AUDIT_LINE_MAX_BYTES);
  ck_assert_ptr_nonnull (strstr (line, "\xe2\x80\xa6[cut]\""));
}
END_TEST

START_TEST (timestamps_are_rfc3339_utc_with_milliseconds)
{
  char t[SP_AUDIT_TIME_BYTES];

  ck_assert_int_eq (sp_audit_format_time (0, t), 0);
  ck_assert_str_eq (t, "1970-01-01T00:00:00.000Z");
  ck_assert_int_eq (sp_audit_format_time (T0, t), 0);
  ck_assert_str_eq (t, "2026-11-30T07:01:02.345Z");
  /* Truncated, never rounded up into the next second.  */
  ck_assert_int_eq (sp_audit_format_time (951868799999999999ULL, t), 0);
  ck_assert_str_eq (t, "2000-02-29T23:59:59.999Z");
  ck_assert_int_eq (sp_audit_format_time (1000000ULL * 7, t), 0);
  ck_assert_str_eq (t, "1970-01-01T00:00:00.007Z");
  ck_assert_int_eq (sp_audit_format_time (UINT64_MAX, t), 0);
  ck_assert_str_eq (t, "2554-07-21T23:34:33.709Z");
}
END_TEST

/* Canary: the outcomes are views into a larger buffer whose other bytes are
   a marker; the line holds the views' bytes and nothing past them.  */
START_TEST (record_holds_nothing_but_its_inputs)
{
  static const char backing[] = "YESCANARY_7f3eNOCANARY_7f3eUNKNOWNCANARY_7f3e";
  const struct sp_bytes views[SP_OUTCOME_COUNT] = {
    { (const uint8_t *)backing, 3 },
    { (const uint8_t *)backing + 14, 2 },
    { (const uint8_t *)backing + 27, 7 },
  };
  struct sp_audit_record rec = good_record ();
  cleanup_free char *line = NULL;
  cleanup_free char *line2 = NULL;
  cleanup_free char *reference = NULL;
  size_t len;

  rec.outcomes = views;
  line = render_ok (&rec, &len);
  ck_assert_ptr_null (strstr (line, "CANARY"));
  rec.outcomes = outcomes;
  reference = render_ok (&rec, NULL);
  ck_assert_str_eq (line, reference);
  /* The same record renders the same bytes: nothing uninitialized leaks in.  */
  line2 = render_ok (&rec, NULL);
  ck_assert_str_eq (line2, reference);
}
END_TEST

START_TEST (admission_record_has_null_result_and_finished)
{
  struct sp_audit_record rec = good_record ();
  cleanup_free char *line = NULL;
  cleanup_error sp_error_t err = NULL;
  char *l2 = NULL;
  size_t len;

  rec.answer = 0;
  rec.facts = NULL;
  rec.reason = NULL;
  rec.finished_ns = 0;
  rec.status = SP_AUDIT_STATUS_ADMITTED;
  rec.admission = true;
  line = render_ok (&rec, NULL);
  ck_assert_msg (strstr (line, "\"finished\":null,") != NULL, "%s", line);
  ck_assert_msg (
      strstr (line,
              "\"result\":null,\"status\":\"admitted\",\"cause\":null,\"reason\":null,\"launched\":false,")
          != NULL,
      "%s", line);
  /* An admission record that claims an answer or a run is a bug: refused.  */
  rec.answer = 1;
  ck_assert_int_eq (sp_audit_render (&rec, &l2, &len, &err), -1);
  ck_assert_ptr_null (l2);
}
END_TEST

/* A record with no client (the kernel gave no credentials) names nobody:
   null, never 0, which is root's uid.  */
START_TEST (unknown_peer_renders_nulls_not_root)
{
  struct sp_audit_record rec = good_record ();
  cleanup_free char *line = NULL;

  rec.peer = (struct sp_audit_peer){ .known = false, .uid = 0, .gid = 0, .pid = 0 };
  line = render_ok (&rec, NULL);
  ck_assert_msg (strstr (line,
                         "\"received\":\"2026-11-30T07:01:02.345Z\",\"peer_uid\":null,\"peer_gid\":null,"
                         "\"peer_pid\":null,\"started\":")
                     != NULL,
                 "%s", line);
}
END_TEST

/* The file system part.  */

static char dir[64];
static int dir_fd = -1;

static void
make_dir (void)
{
  strcpy (dir, "/tmp/sp-audit-XXXXXX");
  dir_fd = sp_tmpdir_make (dir);
}

static void
remove_dir (void)
{
  close (dir_fd);
  dir_fd = -1;
  sp_tmpdir_remove (dir);
}

static char *
open_fails (void)
{
  cleanup_error sp_error_t err = NULL;
  struct sp_audit *audit = NULL;

  ck_assert_int_eq (sp_audit_open (dir_fd, &audit, &err), -1);
  ck_assert_ptr_null (audit);
  return strdup (sp_error_message (err));
}

static struct sp_audit *
open_ok (void)
{
  cleanup_error sp_error_t err = NULL;
  struct sp_audit *audit = NULL;

  if (sp_audit_open (dir_fd, &audit, &err) < 0)
    ck_abort_msg ("sp_audit_open: %s", sp_error_message (err));
  return audit;
}

START_TEST (open_creates_a_private_directory_and_file)
{
  cleanup_audit struct sp_audit *audit = NULL;
  struct stat st;

  if (geteuid () != 0)
    {
      /* Without root the directory it makes is not root's: refused.  */
      cleanup_free char *msg = open_fails ();
      ck_assert_msg (strstr (msg, "not root") != NULL, "%s", msg);
      return;
    }
  audit = open_ok ();
  ck_assert_int_eq (fstatat (dir_fd, SP_AUDIT_DIR, &st, AT_SYMLINK_NOFOLLOW), 0);
  ck_assert (S_ISDIR (st.st_mode));
  ck_assert_uint_eq (st.st_mode & 07777, 0700);
  ck_assert_int_eq (fstatat (dir_fd, SP_AUDIT_DIR "/" SP_AUDIT_FILE, &st, AT_SYMLINK_NOFOLLOW), 0);
  ck_assert (S_ISREG (st.st_mode));
  ck_assert_uint_eq (st.st_mode & 07777, 0600);
  ck_assert_uint_eq (st.st_uid, 0);
  sp_audit_close (get_and_reset (&audit));
  /* A second open appends to the same file.  */
  audit = open_ok ();
}
END_TEST

START_TEST (open_refuses_a_directory_group_or_others_may_read)
{
  static const mode_t modes[] = { 0750, 0705, 0770, 0701 };

  ck_assert_int_eq (mkdirat (dir_fd, SP_AUDIT_DIR, 0700), 0);
  for (size_t i = 0; i < sizeof (modes) / sizeof (modes[0]); i++)
    {
      cleanup_free char *msg = NULL;

      ck_assert_int_eq (fchmodat (dir_fd, SP_AUDIT_DIR, modes[i], 0), 0);
      msg = open_fails ();
      if (geteuid () == 0)
        ck_assert_msg (strstr (msg, "group or others") != NULL, "%s", msg);
    }
}
END_TEST

START_TEST (open_refuses_a_file_group_or_others_may_read)
{
  static const mode_t modes[] = { 0640, 0604, 0660, 0602 };

  ck_assert_int_eq (mkdirat (dir_fd, SP_AUDIT_DIR, 0700), 0);
  for (size_t i = 0; i < sizeof (modes) / sizeof (modes[0]); i++)
    {
      cleanup_free char *msg = NULL;
      cleanup_close int fd
          = openat (dir_fd, SP_AUDIT_DIR "/" SP_AUDIT_FILE, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);

      ck_assert_int_ge (fd, 0);
      ck_assert_int_eq (fchmod (fd, modes[i]), 0);
      msg = open_fails ();
      if (geteuid () == 0)
        ck_assert_msg (strstr (msg, "group or others") != NULL, "%s", msg);
    }
}
END_TEST

START_TEST (open_refuses_a_symlinked_file_or_directory)
{
  cleanup_free char *msg = NULL;
  cleanup_free char *msg2 = NULL;
  struct stat st;

  /* The link's target is a private file: only the link is wrong.  */
  ck_assert_int_eq (mkdirat (dir_fd, SP_AUDIT_DIR, 0700), 0);
  close (openat (dir_fd, "target", O_WRONLY | O_CREAT | O_CLOEXEC, 0600));
  ck_assert_int_eq (symlinkat ("../target", dir_fd, SP_AUDIT_DIR "/" SP_AUDIT_FILE), 0);
  msg = open_fails ();
  ck_assert_int_eq (fstatat (dir_fd, "target", &st, 0), 0);
  ck_assert_int_eq (st.st_size, 0);

  ck_assert_int_eq (unlinkat (dir_fd, SP_AUDIT_DIR "/" SP_AUDIT_FILE, 0), 0);
  ck_assert_int_eq (unlinkat (dir_fd, SP_AUDIT_DIR, AT_REMOVEDIR), 0);
  ck_assert_int_eq (mkdirat (dir_fd, "real", 0700), 0);
  ck_assert_int_eq (symlinkat ("real", dir_fd, SP_AUDIT_DIR), 0);
  msg2 = open_fails ();
  ck_assert_int_eq (fstatat (dir_fd, "real/" SP_AUDIT_FILE, &st, 0), -1);
}
END_TEST

START_TEST (open_refuses_a_directory_or_file_not_roots)
{
  cleanup_free char *msg = NULL;
  cleanup_free char *msg2 = NULL;
  cleanup_close int fd = -1;

  if (geteuid () != 0)
    {
      printf (
          "# open_refuses_a_directory_or_file_not_roots: needs root to chown; only the unowned case ran\n");
      msg = open_fails ();
      ck_assert_msg (strstr (msg, "not root") != NULL, "%s", msg);
      return;
    }
  ck_assert_int_eq (mkdirat (dir_fd, SP_AUDIT_DIR, 0700), 0);
  ck_assert_int_eq (fchownat (dir_fd, SP_AUDIT_DIR, 65534, 65534, 0), 0);
  msg = open_fails ();
  ck_assert_msg (strstr (msg, "not root") != NULL, "%s", msg);

  ck_assert_int_eq (fchownat (dir_fd, SP_AUDIT_DIR, 0, 0, 0), 0);
  fd = openat (dir_fd, SP_AUDIT_DIR "/" SP_AUDIT_FILE, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
  ck_assert_int_ge (fd, 0);
  ck_assert_int_eq (fchown (fd, 65534, 65534), 0);
  msg2 = open_fails ();
  ck_assert_msg (strstr (msg2, "not root") != NULL, "%s", msg2);
}
END_TEST

START_TEST (open_refuses_a_file_that_is_not_regular)
{
  cleanup_free char *msg = NULL;

  ck_assert_int_eq (mkdirat (dir_fd, SP_AUDIT_DIR, 0700), 0);
  ck_assert_int_eq (mkfifoat (dir_fd, SP_AUDIT_DIR "/" SP_AUDIT_FILE, 0600), 0);
  /* Refused either at the open (no reader: ENXIO) or by the type check.  */
  msg = open_fails ();
  ck_assert_msg (strstr (msg, SP_AUDIT_FILE) != NULL, "%s", msg);
}
END_TEST

static char *
read_log (size_t *len)
{
  cleanup_error sp_error_t err = NULL;
  char *text = NULL;
  int fd = openat (dir_fd, SP_AUDIT_DIR "/" SP_AUDIT_FILE, O_RDONLY | O_CLOEXEC);

  ck_assert_int_ge (fd, 0);
  ck_assert_int_eq (sp_read_fd_capped (fd, 16 << 20, &text, len, &err), 0);
  close (fd);
  return text;
}

/* A full disk shows as a short write; RLIMIT_FSIZE makes one without root's
   mounts: the write stops at the limit, and the rest fails with EFBIG.  */
START_TEST (a_short_write_leaves_no_partial_line_and_stops_the_log)
{
  cleanup_audit struct sp_audit *audit = NULL;
  cleanup_free char *before = NULL;
  cleanup_free char *after = NULL;
  struct sp_audit_record rec = good_record ();
  size_t before_len, after_len;
  struct rlimit rl;

  if (geteuid () != 0)
    {
      printf (
          "# a_short_write_leaves_no_partial_line_and_stops_the_log: needs root (the log must be root's)\n");
      return;
    }
  audit = open_ok ();
  for (int i = 0; i < 3; i++)
    {
      cleanup_error sp_error_t err = NULL;
      ck_assert_msg (sp_audit_append (audit, &rec, &err) == 0, "%s", sp_error_message (err));
    }
  before = read_log (&before_len);
  ck_assert_uint_gt (before_len, 300);

  signal (SIGXFSZ, SIG_IGN);
  ck_assert_int_eq (getrlimit (RLIMIT_FSIZE, &rl), 0);
  rl.rlim_cur = before_len + 100; /* room for part of a line only */
  ck_assert_int_eq (setrlimit (RLIMIT_FSIZE, &rl), 0);
  {
    cleanup_error sp_error_t err = NULL;
    /* The first write stops at the limit; the retry of its rest says why.  */
    ck_assert_int_eq (sp_audit_append (audit, &rec, &err), -1);
    ck_assert_msg (err->status == EFBIG, "%s", sp_error_message (err));
  }
  /* The file is exactly what it was: whole lines, nothing of the failed one.  */
  after = read_log (&after_len);
  ck_assert_uint_eq (after_len, before_len);
  ck_assert_int_eq (memcmp (after, before, before_len), 0);

  /* With room again, the log still writes nothing: it failed once, and the
     operator must look before anything more is appended.  */
  rl.rlim_cur = rl.rlim_max;
  ck_assert_int_eq (setrlimit (RLIMIT_FSIZE, &rl), 0);
  {
    cleanup_error sp_error_t err = NULL;
    ck_assert_int_eq (sp_audit_append (audit, &rec, &err), -1);
    ck_assert_msg (strstr (sp_error_message (err), "failed earlier") != NULL, "%s", sp_error_message (err));
  }
  free (after);
  after = read_log (&after_len);
  ck_assert_uint_eq (after_len, before_len);
}
END_TEST

START_TEST (open_refuses_a_log_that_ends_in_a_partial_line)
{
  cleanup_audit struct sp_audit *audit = NULL;
  cleanup_free char *msg = NULL;
  int fd;

  if (geteuid () != 0)
    {
      printf ("# open_refuses_a_log_that_ends_in_a_partial_line: needs root (the log must be root's)\n");
      return;
    }
  ck_assert_int_eq (mkdirat (dir_fd, SP_AUDIT_DIR, 0700), 0);
  fd = openat (dir_fd, SP_AUDIT_DIR "/" SP_AUDIT_FILE, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
  ck_assert_int_ge (fd, 0);
  ck_assert_int_eq (write (fd, "{\"id\":\"a\"}\n{\"id\":", 17), 17);
  close (fd);
  msg = open_fails ();
  ck_assert_msg (strstr (msg, "partial line") != NULL && strstr (msg, "17 bytes") != NULL, "%s", msg);
  /* Cut after its last newline, it opens.  */
  fd = openat (dir_fd, SP_AUDIT_DIR "/" SP_AUDIT_FILE, O_WRONLY | O_CLOEXEC);
  ck_assert_int_eq (ftruncate (fd, 11), 0);
  close (fd);
  audit = open_ok ();
}
END_TEST

#define THREADS     8
#define PER_THREADS 100

struct worker
{
  struct sp_audit *audit;
  int index;
  int failures;
};

static void *
append_many (void *arg)
{
  struct worker *w = arg;
  char id[32], reason[512];

  for (int i = 0; i < PER_THREADS; i++)
    {
      sp_error_t err = NULL;
      struct sp_audit_record rec = good_record ();

      snprintf (id, sizeof (id), "t%d-%d", w->index, i);
      /* Long enough that a torn write would show.  */
      memset (reason, 'a' + w->index, sizeof (reason) - 1);
      reason[sizeof (reason) - 1] = '\0';
      rec.id = id;
      rec.reason = reason;
      if (sp_audit_append (w->audit, &rec, &err) < 0)
        w->failures++;
      sp_error_release (&err);
    }
  return NULL;
}

START_TEST (eight_threads_append_eight_hundred_whole_lines)
{
  cleanup_audit struct sp_audit *audit = NULL;
  cleanup_error sp_error_t err = NULL;
  cleanup_free char *text = NULL;
  struct worker workers[THREADS];
  pthread_t threads[THREADS];
  bool seen[THREADS][PER_THREADS] = { { false } };
  size_t len, lines = 0;
  char *p;
  int fd;

  if (geteuid () != 0)
    {
      printf ("# eight_threads_append_eight_hundred_whole_lines: needs root (the log must be root's)\n");
      return;
    }
  audit = open_ok ();
  for (int i = 0; i < THREADS; i++)
    {
      workers[i] = (struct worker){ .audit = audit, .index = i };
      ck_assert_int_eq (pthread_create (&threads[i], NULL, append_many, &workers[i]), 0);
    }
  for (int i = 0; i < THREADS; i++)
    {
      ck_assert_int_eq (pthread_join (threads[i], NULL), 0);
      ck_assert_int_eq (workers[i].failures, 0);
    }

  fd = openat (dir_fd, SP_AUDIT_DIR "/" SP_AUDIT_FILE, O_RDONLY | O_CLOEXEC);
  ck_assert_int_ge (fd, 0);
  ck_assert_int_eq (sp_read_fd_capped (fd, 16 << 20, &text, &len, &err), 0);
  close (fd);
  for (p = text; p < text + len;)
    {
      char *nl = memchr (p, '\n', (size_t)(text + len - p));
      cleanup_json struct sp_json *root = NULL;
      const struct sp_json *id, *reason;
      int t, i;

      ck_assert_ptr_nonnull (nl);
      root = parse_line (p, (size_t)(nl - p));
      id = sp_json_object_get (root, "id");
      reason = sp_json_object_get (root, "reason");
      ck_assert_ptr_nonnull (id);
      ck_assert_int_eq (sscanf (id->u.string.data, "t%d-%d", &t, &i), 2);
      ck_assert (t >= 0 && t < THREADS && i >= 0 && i < PER_THREADS);
      ck_assert (!seen[t][i]);
      seen[t][i] = true;
      ck_assert_uint_eq (reason->u.string.len, 511);
      for (size_t k = 0; k < reason->u.string.len; k++)
        ck_assert_int_eq (reason->u.string.data[k], 'a' + t);
      lines++;
      p = nl + 1;
    }
  ck_assert_uint_eq (lines, THREADS * PER_THREADS);
}
END_TEST

static Suite *
audit_suite (void)
{
  Suite *s = suite_create ("audit");
  TCase *render = tcase_create ("render");
  TCase *file = tcase_create ("file");

  tcase_add_test (render, fixed_record_renders_exact_line_in_key_order);
  tcase_add_test (render, record_without_request_or_launch_renders_nulls);
  tcase_add_test (render, charged_record_renders_its_bits);
  tcase_add_test (render, schema_record_renders_its_digest_value_and_content_bits);
  tcase_add_test (render, killed_probe_has_null_exit_and_its_signal);
  tcase_add_test (render, every_control_char_quote_and_backslash_in_reason_is_escaped);
  tcase_add_test (render, invalid_utf8_in_any_string_is_refused);
  tcase_add_test (render, answer_naming_no_outcome_is_refused);
  tcase_add_test (render, overlong_reason_is_cut_at_a_boundary_within_the_bound);
  tcase_add_test (render, reason_that_fits_is_not_cut);
  tcase_add_test (render, timestamps_are_rfc3339_utc_with_milliseconds);
  tcase_add_test (render, record_holds_nothing_but_its_inputs);
  tcase_add_test (render, admission_record_has_null_result_and_finished);
  tcase_add_test (render, unknown_peer_renders_nulls_not_root);
  suite_add_tcase (s, render);

  tcase_add_checked_fixture (file, make_dir, remove_dir);
  tcase_add_test (file, open_creates_a_private_directory_and_file);
  tcase_add_test (file, open_refuses_a_directory_group_or_others_may_read);
  tcase_add_test (file, open_refuses_a_file_group_or_others_may_read);
  tcase_add_test (file, open_refuses_a_symlinked_file_or_directory);
  tcase_add_test (file, open_refuses_a_directory_or_file_not_roots);
  tcase_add_test (file, open_refuses_a_file_that_is_not_regular);
  tcase_add_test (file, eight_threads_append_eight_hundred_whole_lines);
  tcase_add_test (file, a_short_write_leaves_no_partial_line_and_stops_the_log);
  tcase_add_test (file, open_refuses_a_log_that_ends_in_a_partial_line);
  suite_add_tcase (s, file);
  return s;
}

SP_CHECK_MAIN (audit_suite)
