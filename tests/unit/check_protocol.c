/* Wire protocol v1 framing.  Frames are built here byte by byte, not with the
   encoder, so that encoder and decoder are each held to the documented
   format (docs/protocol.md) rather than only to each other.  */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/cleanup.h"
#include "base/protocol.h"

#include "sp_check.h"

_Static_assert(SP_REQUEST_BODY_MAX_BYTES == 5 * 5 + 140 + 3 * 64 + 65536, "documented body bound");
_Static_assert(SP_REQUEST_BODY_MIN_BYTES == 5 * 6, "documented smallest body");
_Static_assert(SP_RESPONSE_FRAME_BYTES == 11, "documented response size");

/* Room for the largest request plus stray fields.  */
#define FRAME_CAP (SP_REQUEST_FRAME_MAX_BYTES + 256)

struct frame
{
  uint8_t buf[FRAME_CAP];
  size_t len;
};

static struct frame f; /* large; one per test process is enough */

static void
put (const void *p, size_t n)
{
  ck_assert_uint_le (f.len + n, FRAME_CAP);
  memcpy (f.buf + f.len, p, n);
  f.len += n;
}

static void
put_u8 (uint8_t v)
{
  put (&v, 1);
}

static void
put_u32 (uint32_t v)
{
  uint8_t b[4] = { (uint8_t)(v >> 24), (uint8_t)(v >> 16), (uint8_t)(v >> 8), (uint8_t)v };
  put (b, 4);
}

static void
set_u32 (size_t off, uint32_t v)
{
  f.buf[off] = (uint8_t)(v >> 24);
  f.buf[off + 1] = (uint8_t)(v >> 16);
  f.buf[off + 2] = (uint8_t)(v >> 8);
  f.buf[off + 3] = (uint8_t)v;
}

/* A header whose body_length sync_length() fills in later.  */
static void
start (uint8_t kind)
{
  f.len = 0;
  put ("SPRB", 4);
  put_u8 (0x01);
  put_u8 (kind);
  put_u32 (0);
}

static void
field (uint8_t tag, const void *v, size_t n)
{
  put_u8 (tag);
  put_u32 ((uint32_t)n);
  put (v, n);
}

static void
field_str (uint8_t tag, const char *s)
{
  field (tag, s, strlen (s));
}

static void
sync_length (void)
{
  set_u32 (6, (uint32_t)(f.len - 10));
}

static const char *const fields_text[] = { "acme/widgets", "YES", "NO", "UNKNOWN", "print(1)\n" };
static const uint8_t fields_tag[] = { 0x01, 0x02, 0x02, 0x02, 0x03 };

/* The valid request of docs/protocol.md, with fields [skip] left out and an
   extra field inserted before field [insert_at] (5 = after the script).  */
static void
build_custom (int skip, int insert_at, uint8_t extra_tag, const char *extra_value)
{
  start (0x01);
  for (int i = 0; i <= 5; i++)
    {
      if (i == insert_at)
        field_str (extra_tag, extra_value);
      if (i < 5 && i != skip)
        field_str (fields_tag[i], fields_text[i]);
    }
  sync_length ();
}

static void
build_valid (void)
{
  build_custom (-1, -1, 0, NULL);
}

/* Decodes f from an exactly-sized heap copy, so that ASan catches any read
   past the end, and returns the message when it is rejected.  */
static char *
decode_fails (void)
{
  cleanup_free uint8_t *copy = malloc (f.len ? f.len : 1);
  cleanup_error sp_error_t err = NULL;
  struct sp_request req = { .version = SP_FRAME_VERSION_V1 };

  memcpy (copy, f.buf, f.len);
  ck_assert_int_eq (sp_request_decode (copy, f.len, &req, &err), -1);
  ck_assert_ptr_nonnull (err);
  return strdup (sp_error_message (err));
}

static void
assert_rejected_because (const char *why)
{
  cleanup_free char *msg = decode_fails ();
  ck_assert_msg (strstr (msg, why) != NULL, "message `%s` lacks `%s`", msg, why);
}

static void
decode_ok (struct sp_request *req)
{
  cleanup_error sp_error_t err = NULL;

  if (sp_request_decode (f.buf, f.len, req, &err) < 0)
    ck_abort_msg ("decode: %s", sp_error_message (err));
}

static void
assert_bytes (struct sp_bytes b, const void *want, size_t n)
{
  ck_assert_uint_eq (b.len, n);
  ck_assert_int_eq (memcmp (b.data, want, n), 0);
}

/* The docs' hex example, byte for byte.  */
/* clang-format off */
static const uint8_t documented_request[] = {
  0x53, 0x50, 0x52, 0x42, 0x01, 0x01, 0x00, 0x00, 0x00, 0x3a,                   /* header, body 58 */
  0x01, 0x00, 0x00, 0x00, 0x0c, 'a', 'c', 'm', 'e', '/', 'w', 'i', 'd', 'g', 'e', 't', 's', /* repo */
  0x02, 0x00, 0x00, 0x00, 0x03, 'Y', 'E', 'S',                                  /* outcome 1 */
  0x02, 0x00, 0x00, 0x00, 0x02, 'N', 'O',                                       /* outcome 2 */
  0x02, 0x00, 0x00, 0x00, 0x07, 'U', 'N', 'K', 'N', 'O', 'W', 'N',              /* outcome 3 */
  0x03, 0x00, 0x00, 0x00, 0x09, 'p', 'r', 'i', 'n', 't', '(', '1', ')', '\n',   /* script */
};
/* clang-format on */

START_TEST (valid_frame_decodes_to_its_fields)
{
  struct sp_request req = { .version = SP_FRAME_VERSION_V1 };

  build_valid ();
  decode_ok (&req);
  assert_bytes (req.repo, "acme/widgets", 12);
  assert_bytes (req.outcomes[0], "YES", 3);
  assert_bytes (req.outcomes[1], "NO", 2);
  assert_bytes (req.outcomes[2], "UNKNOWN", 7);
  assert_bytes (req.script, "print(1)\n", 9);
}
END_TEST

START_TEST (documented_example_is_what_the_encoder_writes)
{
  struct sp_request req = { .version = SP_FRAME_VERSION_V1 };
  uint8_t out[256];
  size_t len = 0;
  cleanup_error sp_error_t err = NULL;

  build_valid ();
  ck_assert_uint_eq (f.len, sizeof (documented_request));
  ck_assert_int_eq (memcmp (f.buf, documented_request, f.len), 0);
  decode_ok (&req);
  ck_assert_int_eq (sp_request_encode (&req, out, sizeof (out), &len, &err), 0);
  ck_assert_uint_eq (len, sizeof (documented_request));
  ck_assert_int_eq (memcmp (out, documented_request, len), 0);
  ck_assert_uint_eq (sp_request_frame_size (&req), sizeof (documented_request));
}
END_TEST

/* Encodes req, decodes the result, and checks both directions agree.  */
static void
round_trip (const struct sp_request *req, size_t want_len)
{
  cleanup_free uint8_t *out = malloc (FRAME_CAP);
  cleanup_error sp_error_t err = NULL;
  struct sp_request back;
  size_t len = 0;

  if (sp_request_encode (req, out, FRAME_CAP, &len, &err) < 0)
    ck_abort_msg ("encode: %s", sp_error_message (err));
  ck_assert_uint_eq (len, want_len);
  if (sp_request_decode (out, len, &back, &err) < 0)
    ck_abort_msg ("decode: %s", sp_error_message (err));
  ck_assert (sp_bytes_equal (back.repo, req->repo));
  for (int i = 0; i < SP_OUTCOME_COUNT; i++)
    ck_assert (sp_bytes_equal (back.outcomes[i], req->outcomes[i]));
  ck_assert (sp_bytes_equal (back.script, req->script));
}

START_TEST (round_trip_at_every_maximum_length)
{
  static uint8_t big[SP_SCRIPT_MAX_BYTES];
  struct sp_request req = { .version = SP_FRAME_VERSION_V1 };

  for (size_t i = 0; i < sizeof (big); i++)
    big[i] = (uint8_t)(i * 7);
  req.repo = (struct sp_bytes){ big, SP_REPO_MAX_BYTES };
  for (int i = 0; i < SP_OUTCOME_COUNT; i++)
    req.outcomes[i] = (struct sp_bytes){ big + i, SP_OUTCOME_MAX_BYTES };
  req.script = (struct sp_bytes){ big, SP_SCRIPT_MAX_BYTES };
  round_trip (&req, SP_REQUEST_FRAME_MAX_BYTES);
}
END_TEST

START_TEST (round_trip_at_every_minimum_length)
{
  static const uint8_t one[] = "abcd";
  struct sp_request req = { .version = SP_FRAME_VERSION_V1 };

  req.repo = (struct sp_bytes){ one, 1 };
  for (int i = 0; i < SP_OUTCOME_COUNT; i++)
    req.outcomes[i] = (struct sp_bytes){ one + i, 1 };
  req.script = (struct sp_bytes){ one + 3, 1 };
  round_trip (&req, SP_FRAME_HEADER_BYTES + SP_REQUEST_BODY_MIN_BYTES);
}
END_TEST

START_TEST (decoder_passes_any_value_bytes_through_unjudged)
{
  static const uint8_t odd[] = { 0x00, 0xFF, 0x01, 0x53, 0x50, 0x52, 0x42 };
  struct sp_request req = { .version = SP_FRAME_VERSION_V1 };

  req.repo = (struct sp_bytes){ odd, sizeof (odd) };
  req.outcomes[0] = (struct sp_bytes){ odd, 1 };
  req.outcomes[1] = (struct sp_bytes){ odd, 1 }; /* duplicates are request.h's business */
  req.outcomes[2] = (struct sp_bytes){ (const uint8_t *)"ERROR", 5 };
  req.script = (struct sp_bytes){ odd, sizeof (odd) };
  round_trip (&req, SP_FRAME_HEADER_BYTES + 5 * 5 + 7 + 1 + 1 + 5 + 7);
}
END_TEST

START_TEST (frame_with_bad_magic_is_rejected)
{
  static const char *const bad[] = { "SPRA", "sprb", "\0PRB", "BRPS" };

  for (size_t i = 0; i < sizeof (bad) / sizeof (bad[0]); i++)
    {
      build_valid ();
      memcpy (f.buf, bad[i], 4);
      assert_rejected_because ("bad magic");
    }
}
END_TEST

START_TEST (frame_with_unknown_version_is_rejected)
{
  static const uint8_t bad[] = { 0x00, 0x03, 0x10, 0xFF };

  for (size_t i = 0; i < sizeof (bad); i++)
    {
      build_valid ();
      f.buf[4] = bad[i];
      assert_rejected_because ("unsupported version");
    }
}
END_TEST

START_TEST (frame_of_response_kind_is_rejected_as_request)
{
  build_valid ();
  f.buf[5] = 0x02;
  assert_rejected_because ("kind 2 where 1");
}
END_TEST

START_TEST (frame_of_unknown_kind_is_rejected)
{
  static const uint8_t bad[] = { 0x00, 0x03, 0x81, 0xFF };

  for (size_t i = 0; i < sizeof (bad); i++)
    {
      build_valid ();
      f.buf[5] = bad[i];
      assert_rejected_because ("kind");
    }
}
END_TEST

/* Only the 10 header bytes exist: the verdict must come from them alone.  */
static char *
header_only_fails (uint32_t announced)
{
  cleanup_error sp_error_t err = NULL;
  uint8_t hdr[SP_FRAME_HEADER_BYTES] = { 'S', 'P', 'R', 'B', 0x01, 0x01 };
  size_t body_len = 12345;

  hdr[6] = (uint8_t)(announced >> 24);
  hdr[7] = (uint8_t)(announced >> 16);
  hdr[8] = (uint8_t)(announced >> 8);
  hdr[9] = (uint8_t)announced;
  ck_assert_int_eq (sp_frame_header_decode (hdr, SP_FRAME_KIND_REQUEST, &body_len, &err), -1);
  ck_assert_uint_eq (body_len, 12345); /* untouched */
  return strdup (sp_error_message (err));
}

START_TEST (header_body_length_over_bound_is_rejected_before_allocation)
{
  static const uint32_t bad[] = { SP_REQUEST_BODY_MAX_BYTES + 1, 1u << 20, 0x7FFFFFFF, 0xFFFFFFFF };

  for (size_t i = 0; i < sizeof (bad) / sizeof (bad[0]); i++)
    {
      cleanup_free char *msg = header_only_fails (bad[i]);
      ck_assert_msg (strstr (msg, "above the largest request"), "%s", msg);
    }
  /* The whole-frame decoder reaches the same verdict from the header alone,
     not "truncated": it looks at nothing after it.  */
  start (0x01);
  set_u32 (6, 0xFFFFFFFF);
  assert_rejected_because ("above the largest request");
}
END_TEST

START_TEST (header_body_length_below_smallest_request_is_rejected)
{
  static const uint32_t bad[] = { 0, 1, SP_REQUEST_BODY_MIN_BYTES - 1 };

  for (size_t i = 0; i < sizeof (bad) / sizeof (bad[0]); i++)
    {
      cleanup_free char *msg = header_only_fails (bad[i]);
      ck_assert_msg (strstr (msg, "below the smallest request"), "%s", msg);
    }
}
END_TEST

START_TEST (header_body_length_at_either_bound_is_accepted)
{
  static const uint32_t ok[] = { SP_REQUEST_BODY_MIN_BYTES, SP_REQUEST_BODY_MAX_BYTES };
  uint8_t hdr[SP_FRAME_HEADER_BYTES] = { 'S', 'P', 'R', 'B', 0x01, 0x01 };

  for (size_t i = 0; i < 2; i++)
    {
      cleanup_error sp_error_t err = NULL;
      size_t body_len = 0;

      hdr[6] = (uint8_t)(ok[i] >> 24);
      hdr[7] = (uint8_t)(ok[i] >> 16);
      hdr[8] = (uint8_t)(ok[i] >> 8);
      hdr[9] = (uint8_t)ok[i];
      ck_assert_int_eq (sp_frame_header_decode (hdr, SP_FRAME_KIND_REQUEST, &body_len, &err), 0);
      ck_assert_uint_eq (body_len, ok[i]);
    }
}
END_TEST

START_TEST (header_decoder_rejects_an_unknown_expected_kind)
{
  cleanup_error sp_error_t err = NULL;
  uint8_t hdr[SP_FRAME_HEADER_BYTES] = { 'S', 'P', 'R', 'B', 0x01, 0x07, 0, 0, 0, 40 };
  size_t body_len;

  ck_assert_int_eq (sp_frame_header_decode (hdr, 0x07, &body_len, &err), -1);
}
END_TEST

START_TEST (frame_truncated_anywhere_is_rejected)
{
  size_t full;

  build_valid ();
  full = f.len;
  for (size_t cut = 0; cut < full; cut++)
    {
      cleanup_free char *msg = NULL;

      build_valid ();
      f.len = cut;
      msg = decode_fails ();
      ck_assert_msg (strstr (msg, "truncated"), "cut at %zu: %s", cut, msg);
    }
}
END_TEST

START_TEST (frame_with_trailing_bytes_is_rejected)
{
  build_valid ();
  put_u8 (0x00);
  assert_rejected_because ("1 trailing bytes");
  build_valid ();
  field_str (0x03, "print(2)\n"); /* a second frame's worth of field, unannounced */
  assert_rejected_because ("trailing bytes");
}
END_TEST

START_TEST (body_length_longer_than_the_fields_is_rejected)
{
  build_valid ();
  put_u8 (0x00);
  sync_length ();
  assert_rejected_because ("after the script field");
}
END_TEST

START_TEST (body_length_shorter_than_the_fields_is_rejected)
{
  /* The script claims 9 bytes but the body ends 1 byte early.  */
  build_valid ();
  f.len--;
  sync_length ();
  assert_rejected_because ("runs past the body");
}
END_TEST

START_TEST (field_header_cut_by_body_length_is_rejected)
{
  build_custom (4, -1, 0, NULL); /* no script */
  put_u8 (0x03);
  put_u8 (0x00); /* 2 of the 5 field header bytes */
  sync_length ();
  assert_rejected_because ("field 5 (script): truncated field header");
}
END_TEST

START_TEST (frame_with_unknown_tag_is_rejected)
{
  static const uint8_t tags[] = { 0x00, 0x04, 0x05, 0x10, 0x7F, 0x80, 0xFF };

  for (size_t t = 0; t < sizeof (tags); t++)
    for (int at = 0; at <= 5; at++)
      {
        char why[32];

        build_custom (-1, at, tags[t], "x");
        snprintf (why, sizeof (why), "unknown tag 0x%02x", tags[t]);
        if (at == 5)
          assert_rejected_because ("after the script field");
        else
          assert_rejected_because (why);
      }
}
END_TEST

START_TEST (unknown_tag_replacing_a_field_is_rejected)
{
  for (int i = 0; i < 5; i++)
    {
      build_valid ();
      /* Overwrite field i's tag in place: lengths stay consistent.  */
      size_t off = 10;
      for (int j = 0; j < i; j++)
        off += 5 + strlen (fields_text[j]);
      f.buf[off] = 0x04;
      assert_rejected_because ("unknown tag 0x04");
    }
}
END_TEST

/* v1 has no launch controls.  Whatever tag a sender picks for one, and
   wherever it puts it, the frame is refused.  */
static void
check_launch_control_rejected (const char *value)
{
  for (unsigned tag = 0x04; tag <= 0xFF; tag++)
    for (int at = 0; at <= 5; at++)
      {
        cleanup_free char *msg = NULL;

        build_custom (-1, at, (uint8_t)tag, value);
        msg = decode_fails ();
        ck_assert_ptr_null (strstr (msg, value)); /* never echoed */
      }
  /* Nor can a known tag smuggle it in as a sixth field.  */
  for (uint8_t tag = 0x01; tag <= 0x03; tag++)
    {
      build_custom (-1, 5, tag, value);
      free (decode_fails ());
    }
}

#define LAUNCH_CONTROLS(X)                                                                                   \
  X (frame_carrying_image_field_is_rejected, "image=docker.io/library/python:latest")                        \
  X (frame_carrying_command_field_is_rejected, "command=/bin/sh -c id")                                      \
  X (frame_carrying_env_field_is_rejected, "env=GITHUB_TOKEN=x")                                             \
  X (frame_carrying_mounts_field_is_rejected, "mounts=/:/host:rw")                                           \
  X (frame_carrying_paths_field_is_rejected, "paths=/var/lib/sealed-probe/seeds")                            \
  X (frame_carrying_runtime_field_is_rejected, "runtime=none")                                               \
  X (frame_carrying_timeout_field_is_rejected, "timeout=86400")

#define DEFINE_LAUNCH_CONTROL(name, value)                                                                   \
  START_TEST (name)                                                                                          \
  {                                                                                                          \
    check_launch_control_rejected (value);                                                                   \
  }                                                                                                          \
  END_TEST
LAUNCH_CONTROLS (DEFINE_LAUNCH_CONTROL)

START_TEST (repo_field_over_its_bound_is_rejected)
{
  char repo[SP_REPO_MAX_BYTES + 2];

  memset (repo, 'r', sizeof (repo) - 1);
  repo[sizeof (repo) - 1] = '\0';
  start (0x01);
  field_str (0x01, repo);
  for (int i = 1; i < 5; i++)
    field_str (fields_tag[i], fields_text[i]);
  sync_length ();
  assert_rejected_because ("length 141 above its bound 140");
}
END_TEST

START_TEST (outcome_field_over_its_bound_is_rejected)
{
  char outcome[SP_OUTCOME_MAX_BYTES + 2];

  memset (outcome, 'o', sizeof (outcome) - 1);
  outcome[sizeof (outcome) - 1] = '\0';
  for (int pos = 1; pos <= 3; pos++)
    {
      start (0x01);
      for (int i = 0; i < 5; i++)
        field_str (fields_tag[i], i == pos ? outcome : fields_text[i]);
      sync_length ();
      assert_rejected_because ("length 65 above its bound 64");
    }
}
END_TEST

START_TEST (script_field_over_its_bound_is_rejected)
{
  static char script[SP_SCRIPT_MAX_BYTES + 1];

  memset (script, '#', sizeof (script));
  build_custom (4, -1, 0, NULL);
  field (0x03, script, sizeof (script));
  sync_length ();
  assert_rejected_because ("length 65537 above its bound 65536");

  /* The bound is checked before the value is looked for.  */
  f.len -= 1000;
  sync_length ();
  assert_rejected_because ("length 65537 above its bound 65536");
}
END_TEST

START_TEST (field_length_of_four_gigabytes_is_rejected)
{
  for (int i = 0; i < 5; i++)
    {
      size_t off = 10;

      build_valid ();
      for (int j = 0; j < i; j++)
        off += 5 + strlen (fields_text[j]);
      set_u32 (off + 1, 0xFFFFFFFF);
      assert_rejected_because ("above its bound");
    }
}
END_TEST

START_TEST (empty_field_is_rejected_at_every_position)
{
  for (int pos = 0; pos < 5; pos++)
    {
      char why[32];

      start (0x01);
      for (int i = 0; i < 5; i++)
        field_str (fields_tag[i], i == pos ? "" : fields_text[i]);
      field_str (0x03, "padding-so-the-body-is-not-too-short"); /* rejected earlier anyway */
      f.len -= 5 + 36;
      sync_length ();
      snprintf (why, sizeof (why), "field %d (", pos + 1);
      {
        cleanup_free char *msg = decode_fails ();
        ck_assert_msg (strstr (msg, why) && strstr (msg, "empty"), "%s", msg);
      }
    }
}
END_TEST

START_TEST (fourth_outcome_is_rejected)
{
  build_custom (-1, 4, 0x02, "MAYBE");
  assert_rejected_because ("more than 3 outcomes");
}
END_TEST

START_TEST (fourth_outcome_after_the_script_is_rejected)
{
  build_custom (-1, 5, 0x02, "MAYBE");
  assert_rejected_because ("after the script field");
}
END_TEST

START_TEST (two_outcomes_are_rejected)
{
  build_custom (3, -1, 0, NULL);
  assert_rejected_because ("only 2 outcomes");
}
END_TEST

START_TEST (one_outcome_is_rejected)
{
  start (0x01);
  field_str (0x01, "acme/widgets");
  field_str (0x02, "YES");
  field_str (0x03, "print(1)\n");
  sync_length ();
  assert_rejected_because ("only 1 outcomes");
}
END_TEST

START_TEST (zero_outcomes_are_rejected)
{
  start (0x01);
  field_str (0x01, "acme/widgets");
  field_str (0x03, "print('no outcomes at all')\n");
  sync_length ();
  assert_rejected_because ("only 0 outcomes");
}
END_TEST

START_TEST (missing_script_is_rejected)
{
  build_custom (4, -1, 0, NULL);
  assert_rejected_because ("truncated field header");
}
END_TEST

START_TEST (missing_repo_is_rejected)
{
  build_custom (0, -1, 0, NULL);
  assert_rejected_because ("tag outcome where repo is required");
}
END_TEST

START_TEST (duplicate_repo_field_is_rejected)
{
  build_custom (-1, 1, 0x01, "acme/gadgets");
  assert_rejected_because ("tag repo where outcome is required");
}
END_TEST

START_TEST (duplicate_script_field_is_rejected)
{
  build_custom (-1, 5, 0x03, "print(2)\n");
  assert_rejected_because ("after the script field");
}
END_TEST

START_TEST (script_before_outcomes_is_rejected)
{
  start (0x01);
  field_str (0x01, "acme/widgets");
  field_str (0x03, "print(1)\n");
  for (int i = 1; i < 4; i++)
    field_str (0x02, fields_text[i]);
  sync_length ();
  assert_rejected_because ("only 0 outcomes");
}
END_TEST

START_TEST (repo_after_outcomes_is_rejected)
{
  start (0x01);
  for (int i = 1; i < 4; i++)
    field_str (0x02, fields_text[i]);
  field_str (0x01, "acme/widgets");
  field_str (0x03, "print(1)\n");
  sync_length ();
  assert_rejected_because ("tag outcome where repo is required");
}
END_TEST

START_TEST (repo_between_outcomes_is_rejected)
{
  start (0x01);
  field_str (0x02, "YES");
  field_str (0x01, "acme/widgets");
  field_str (0x02, "NO");
  field_str (0x02, "UNKNOWN");
  field_str (0x03, "print(1)\n");
  sync_length ();
  assert_rejected_because ("where repo is required");
}
END_TEST

START_TEST (rejection_messages_never_echo_field_content)
{
  cleanup_free char *a = NULL;
  cleanup_free char *b = NULL;

  build_custom (-1, 4, 0x02, "CANARY_SECRET_9f3b");
  a = decode_fails ();
  ck_assert_ptr_null (strstr (a, "CANARY"));
  build_custom (-1, 2, 0x09, "CANARY_SECRET_9f3b");
  b = decode_fails ();
  ck_assert_ptr_null (strstr (b, "CANARY"));
}
END_TEST

START_TEST (encoder_refuses_empty_or_oversized_fields)
{
  static uint8_t big[SP_SCRIPT_MAX_BYTES + 1];
  uint8_t out[256];

  for (int which = 0; which < 5; which++)
    for (int oversized = 0; oversized <= 1; oversized++)
      {
        cleanup_error sp_error_t err = NULL;
        struct sp_request req;
        struct sp_bytes *fld;
        size_t len = 0;

        build_valid ();
        decode_ok (&req);
        fld = which == 0 ? &req.repo : which == 4 ? &req.script : &req.outcomes[which - 1];
        fld->data = big;
        fld->len = oversized ? (which == 0   ? SP_REPO_MAX_BYTES + 1
                                : which == 4 ? SP_SCRIPT_MAX_BYTES + 1
                                             : SP_OUTCOME_MAX_BYTES + 1)
                             : 0;
        ck_assert_uint_eq (sp_request_frame_size (&req), 0);
        ck_assert_int_eq (sp_request_encode (&req, out, sizeof (out), &len, &err), -1);
        ck_assert_uint_eq (len, 0);
      }
}
END_TEST

START_TEST (encoder_refuses_a_buffer_one_byte_short)
{
  cleanup_error sp_error_t err = NULL;
  uint8_t out[sizeof (documented_request)];
  struct sp_request req = { .version = SP_FRAME_VERSION_V1 };
  size_t len = 0;

  build_valid ();
  decode_ok (&req);
  ck_assert_int_eq (sp_request_encode (&req, out, sizeof (out) - 1, &len, &err), -1);
  ck_assert_uint_eq (len, 0);
}
END_TEST

/* Responses.  */

static const uint8_t documented_response[]
    = { 0x53, 0x50, 0x52, 0x42, 0x01, 0x02, 0x00, 0x00, 0x00, 0x01, 0x02 };

static char *
response_fails (const uint8_t *buf, size_t len)
{
  cleanup_free uint8_t *copy = malloc (len ? len : 1);
  cleanup_error sp_error_t err = NULL;
  uint8_t index = 0xAA;

  memcpy (copy, buf, len);
  ck_assert_int_eq (sp_response_decode (copy, len, &index, &err), -1);
  ck_assert_uint_eq (index, 0xAA);
  return strdup (sp_error_message (err));
}

START_TEST (response_round_trip_for_every_index)
{
  for (uint8_t i = 0; i <= SP_OUTCOME_COUNT; i++)
    {
      cleanup_error sp_error_t err = NULL;
      uint8_t buf[SP_RESPONSE_FRAME_BYTES];
      uint8_t back = 0xAA;

      ck_assert_int_eq (sp_response_encode (i, buf, &err), 0);
      ck_assert_int_eq (memcmp (buf, documented_response, 10), 0);
      ck_assert_uint_eq (buf[10], i);
      ck_assert_int_eq (sp_response_decode (buf, sizeof (buf), &back, &err), 0);
      ck_assert_uint_eq (back, i);
    }
}
END_TEST

START_TEST (documented_response_is_what_the_encoder_writes)
{
  cleanup_error sp_error_t err = NULL;
  uint8_t buf[SP_RESPONSE_FRAME_BYTES];

  ck_assert_int_eq (sp_response_encode (2, buf, &err), 0);
  ck_assert_int_eq (memcmp (buf, documented_response, sizeof (buf)), 0);
}
END_TEST

START_TEST (response_index_zero_means_error)
{
  cleanup_error sp_error_t err = NULL;
  uint8_t buf[SP_RESPONSE_FRAME_BYTES];
  uint8_t index = 0xAA;

  memcpy (buf, documented_response, sizeof (buf));
  buf[10] = 0x00;
  ck_assert_int_eq (sp_response_decode (buf, sizeof (buf), &index, &err), 0);
  ck_assert_uint_eq (index, SP_RESPONSE_ERROR);
}
END_TEST

START_TEST (response_encoder_refuses_index_above_three)
{
  uint8_t buf[SP_RESPONSE_FRAME_BYTES];

  for (unsigned i = SP_OUTCOME_COUNT + 1; i <= 0xFF; i++)
    {
      cleanup_error sp_error_t err = NULL;
      ck_assert_int_eq (sp_response_encode ((uint8_t)i, buf, &err), -1);
    }
}
END_TEST

START_TEST (response_with_index_above_three_is_rejected)
{
  uint8_t buf[SP_RESPONSE_FRAME_BYTES];

  for (unsigned i = SP_OUTCOME_COUNT + 1; i <= 0xFF; i++)
    {
      cleanup_free char *msg = NULL;

      memcpy (buf, documented_response, sizeof (buf));
      buf[10] = (uint8_t)i;
      msg = response_fails (buf, sizeof (buf));
      ck_assert_ptr_nonnull (strstr (msg, "index"));
    }
}
END_TEST

START_TEST (response_shorter_than_eleven_bytes_is_rejected)
{
  for (size_t len = 0; len < SP_RESPONSE_FRAME_BYTES; len++)
    free (response_fails (documented_response, len));
}
END_TEST

START_TEST (response_with_an_extra_byte_is_rejected)
{
  uint8_t buf[SP_RESPONSE_FRAME_BYTES + 2];

  memcpy (buf, documented_response, SP_RESPONSE_FRAME_BYTES);
  buf[11] = 0x00;
  buf[12] = 0x01;
  free (response_fails (buf, 12));
  free (response_fails (buf, 13));
}
END_TEST

START_TEST (response_with_bad_magic_is_rejected)
{
  uint8_t buf[SP_RESPONSE_FRAME_BYTES];
  cleanup_free char *msg = NULL;

  memcpy (buf, documented_response, sizeof (buf));
  buf[3] = 'A';
  msg = response_fails (buf, sizeof (buf));
  ck_assert_ptr_nonnull (strstr (msg, "bad magic"));
}
END_TEST

START_TEST (response_with_unknown_version_is_rejected)
{
  uint8_t buf[SP_RESPONSE_FRAME_BYTES];
  cleanup_free char *msg = NULL;

  memcpy (buf, documented_response, sizeof (buf));
  buf[4] = 0x02;
  msg = response_fails (buf, sizeof (buf));
  ck_assert_ptr_nonnull (strstr (msg, "version"));
}
END_TEST

START_TEST (response_of_request_kind_is_rejected)
{
  uint8_t buf[SP_RESPONSE_FRAME_BYTES];
  cleanup_free char *msg = NULL;

  memcpy (buf, documented_response, sizeof (buf));
  buf[5] = 0x01;
  msg = response_fails (buf, sizeof (buf));
  ck_assert_ptr_nonnull (strstr (msg, "kind 1 where 2"));
}
END_TEST

START_TEST (response_with_body_length_other_than_one_is_rejected)
{
  static const uint32_t bad[] = { 0, 2, 0x100, 0x01000001, 0xFFFFFFFF };
  uint8_t buf[SP_RESPONSE_FRAME_BYTES];

  for (size_t i = 0; i < sizeof (bad) / sizeof (bad[0]); i++)
    {
      cleanup_free char *msg = NULL;

      memcpy (buf, documented_response, sizeof (buf));
      buf[6] = (uint8_t)(bad[i] >> 24);
      buf[7] = (uint8_t)(bad[i] >> 16);
      buf[8] = (uint8_t)(bad[i] >> 8);
      buf[9] = (uint8_t)bad[i];
      msg = response_fails (buf, sizeof (buf));
      ck_assert_ptr_nonnull (strstr (msg, "body length"));
    }
}
END_TEST

START_TEST (request_frame_is_rejected_as_response)
{
  build_valid ();
  free (response_fails (f.buf, f.len));
  free (response_fails (f.buf, SP_RESPONSE_FRAME_BYTES));
}
END_TEST

/* ---- the handshake (docs/protocol.md, "Handshake") ---------------------- */

static const uint8_t documented_hello[SP_HELLO_FRAME_BYTES]
    = { 0x53, 0x50, 0x52, 0x42, 0x01, 0x03, 0, 0, 0, 0 };
static const uint8_t documented_hello_reply[SP_HELLO_REPLY_FRAME_BYTES]
    = { 0x53, 0x50, 0x52, 0x42, 0x01, 0x04, 0, 0, 0, 0x01, 0x02 };

static char *
hello_fails (const uint8_t *buf, size_t len)
{
  cleanup_error sp_error_t err = NULL;

  ck_assert_int_eq (sp_hello_decode (buf, len, &err), -1);
  return strdup (sp_error_message (err));
}

START_TEST (documented_hello_is_what_the_encoder_writes)
{
  cleanup_error sp_error_t err = NULL;
  uint8_t buf[SP_HELLO_FRAME_BYTES];

  sp_hello_encode (buf);
  ck_assert_int_eq (memcmp (buf, documented_hello, sizeof (buf)), 0);
  ck_assert_int_eq (sp_hello_decode (buf, sizeof (buf), &err), 0);
}
END_TEST

START_TEST (documented_hello_reply_is_what_the_encoder_writes)
{
  cleanup_error sp_error_t err = NULL;
  uint8_t buf[SP_HELLO_REPLY_FRAME_BYTES];
  uint8_t version = 0xAA;

  sp_hello_reply_encode (buf);
  ck_assert_int_eq (memcmp (buf, documented_hello_reply, sizeof (buf)), 0);
  ck_assert_int_eq (sp_hello_reply_decode (buf, sizeof (buf), &version, &err), 0);
  ck_assert_uint_eq (version, SP_FRAME_VERSION_MAX);
}
END_TEST

START_TEST (hello_with_a_body_is_rejected_from_its_header)
{
  cleanup_error sp_error_t err = NULL;
  uint8_t buf[SP_HELLO_FRAME_BYTES + 1];
  size_t body_len;

  memcpy (buf, documented_hello, SP_HELLO_FRAME_BYTES);
  buf[SP_HELLO_FRAME_BYTES] = 0x01;
  buf[9] = 1;
  free (hello_fails (buf, sizeof (buf)));
  ck_assert_int_eq (sp_frame_header_decode (buf, SP_FRAME_KIND_HELLO, &body_len, &err), -1);
  ck_assert_ptr_nonnull (strstr (sp_error_message (err), "hello body length 1"));
}
END_TEST

START_TEST (hello_with_trailing_bytes_is_rejected)
{
  uint8_t buf[SP_HELLO_FRAME_BYTES + 1];
  cleanup_free char *msg = NULL;

  memcpy (buf, documented_hello, SP_HELLO_FRAME_BYTES);
  buf[SP_HELLO_FRAME_BYTES] = 0x00;
  msg = hello_fails (buf, sizeof (buf));
  ck_assert_ptr_nonnull (strstr (msg, "trailing"));
}
END_TEST

START_TEST (hello_truncated_anywhere_is_rejected)
{
  for (size_t len = 0; len < SP_HELLO_FRAME_BYTES; len++)
    free (hello_fails (documented_hello, len));
}
END_TEST

START_TEST (hello_with_bad_magic_version_or_kind_is_rejected)
{
  for (size_t i = 0; i <= 5; i++)
    {
      uint8_t buf[SP_HELLO_FRAME_BYTES];

      memcpy (buf, documented_hello, sizeof (buf));
      buf[i] ^= 0x40;
      free (hello_fails (buf, sizeof (buf)));
    }
}
END_TEST

START_TEST (hello_is_no_request_and_no_response)
{
  cleanup_error sp_error_t err = NULL;
  cleanup_error sp_error_t err2 = NULL;
  struct sp_request req = { .version = SP_FRAME_VERSION_V1 };
  uint8_t index = 0xAA;

  ck_assert_int_eq (sp_request_decode (documented_hello, sizeof (documented_hello), &req, &err), -1);
  ck_assert_int_eq (
      sp_response_decode (documented_hello_reply, sizeof (documented_hello_reply), &index, &err2), -1);
  ck_assert_uint_eq (index, 0xAA);
}
END_TEST

START_TEST (a_response_or_request_is_no_hello_reply)
{
  cleanup_error sp_error_t err = NULL;
  uint8_t version = 0xAA;

  ck_assert_int_eq (sp_hello_reply_decode (documented_response, sizeof (documented_response), &version, &err),
                    -1);
  ck_assert_uint_eq (version, 0xAA);
  sp_error_release (&err);
  build_valid ();
  ck_assert_int_eq (sp_hello_reply_decode (f.buf, f.len, &version, &err), -1);
  sp_error_release (&err);
  ck_assert_int_eq (sp_hello_reply_decode (f.buf, SP_HELLO_REPLY_FRAME_BYTES, &version, &err), -1);
  ck_assert_uint_eq (version, 0xAA);
}
END_TEST

START_TEST (hello_reply_of_another_length_is_rejected)
{
  cleanup_error sp_error_t err = NULL;
  uint8_t buf[SP_HELLO_REPLY_FRAME_BYTES + 1];
  uint8_t version = 0xAA;
  size_t body_len;

  memcpy (buf, documented_hello_reply, SP_HELLO_REPLY_FRAME_BYTES);
  buf[SP_HELLO_REPLY_FRAME_BYTES] = 0x01;
  ck_assert_int_eq (sp_hello_reply_decode (buf, sizeof (buf), &version, &err), -1);
  sp_error_release (&err);
  ck_assert_int_eq (sp_hello_reply_decode (buf, SP_HELLO_REPLY_FRAME_BYTES - 1, &version, &err), -1);
  sp_error_release (&err);
  buf[9] = 2;
  ck_assert_int_eq (sp_frame_header_decode (buf, SP_FRAME_KIND_HELLO_REPLY, &body_len, &err), -1);
  ck_assert_uint_eq (version, 0xAA);
}
END_TEST

/* The proxy reads a frame as a hello only when its kind says so; every
   other kind goes to the request decoder, which refuses all but a request.  */
START_TEST (only_the_hello_kind_is_read_as_a_hello)
{
  uint8_t hdr[SP_FRAME_HEADER_BYTES];

  memcpy (hdr, documented_hello, sizeof (hdr));
  for (unsigned kind = 0; kind <= 0xFF; kind++)
    {
      hdr[5] = (uint8_t)kind;
      ck_assert_uint_eq (sp_frame_client_kind (hdr),
                         kind == SP_FRAME_KIND_HELLO ? SP_FRAME_KIND_HELLO : SP_FRAME_KIND_REQUEST);
    }
}
END_TEST

#define ADD_TEST(name, ...) tcase_add_test (tc, name);

static Suite *
make_suite (void)
{
  Suite *s = suite_create ("check_protocol");
  TCase *tc = tcase_create ("request");

  tcase_add_test (tc, valid_frame_decodes_to_its_fields);
  tcase_add_test (tc, documented_example_is_what_the_encoder_writes);
  tcase_add_test (tc, round_trip_at_every_maximum_length);
  tcase_add_test (tc, round_trip_at_every_minimum_length);
  tcase_add_test (tc, decoder_passes_any_value_bytes_through_unjudged);
  tcase_add_test (tc, frame_with_bad_magic_is_rejected);
  tcase_add_test (tc, frame_with_unknown_version_is_rejected);
  tcase_add_test (tc, frame_of_response_kind_is_rejected_as_request);
  tcase_add_test (tc, frame_of_unknown_kind_is_rejected);
  tcase_add_test (tc, header_body_length_over_bound_is_rejected_before_allocation);
  tcase_add_test (tc, header_body_length_below_smallest_request_is_rejected);
  tcase_add_test (tc, header_body_length_at_either_bound_is_accepted);
  tcase_add_test (tc, header_decoder_rejects_an_unknown_expected_kind);
  tcase_add_test (tc, frame_truncated_anywhere_is_rejected);
  tcase_add_test (tc, frame_with_trailing_bytes_is_rejected);
  tcase_add_test (tc, body_length_longer_than_the_fields_is_rejected);
  tcase_add_test (tc, body_length_shorter_than_the_fields_is_rejected);
  tcase_add_test (tc, field_header_cut_by_body_length_is_rejected);
  tcase_add_test (tc, frame_with_unknown_tag_is_rejected);
  tcase_add_test (tc, unknown_tag_replacing_a_field_is_rejected);
  LAUNCH_CONTROLS (ADD_TEST)
  tcase_add_test (tc, repo_field_over_its_bound_is_rejected);
  tcase_add_test (tc, outcome_field_over_its_bound_is_rejected);
  tcase_add_test (tc, script_field_over_its_bound_is_rejected);
  tcase_add_test (tc, field_length_of_four_gigabytes_is_rejected);
  tcase_add_test (tc, empty_field_is_rejected_at_every_position);
  tcase_add_test (tc, fourth_outcome_is_rejected);
  tcase_add_test (tc, fourth_outcome_after_the_script_is_rejected);
  tcase_add_test (tc, two_outcomes_are_rejected);
  tcase_add_test (tc, one_outcome_is_rejected);
  tcase_add_test (tc, zero_outcomes_are_rejected);
  tcase_add_test (tc, missing_script_is_rejected);
  tcase_add_test (tc, missing_repo_is_rejected);
  tcase_add_test (tc, duplicate_repo_field_is_rejected);
  tcase_add_test (tc, duplicate_script_field_is_rejected);
  tcase_add_test (tc, script_before_outcomes_is_rejected);
  tcase_add_test (tc, repo_after_outcomes_is_rejected);
  tcase_add_test (tc, repo_between_outcomes_is_rejected);
  tcase_add_test (tc, rejection_messages_never_echo_field_content);
  tcase_add_test (tc, encoder_refuses_empty_or_oversized_fields);
  tcase_add_test (tc, encoder_refuses_a_buffer_one_byte_short);
  suite_add_tcase (s, tc);

  tc = tcase_create ("response");
  tcase_add_test (tc, response_round_trip_for_every_index);
  tcase_add_test (tc, documented_response_is_what_the_encoder_writes);
  tcase_add_test (tc, response_index_zero_means_error);
  tcase_add_test (tc, response_encoder_refuses_index_above_three);
  tcase_add_test (tc, response_with_index_above_three_is_rejected);
  tcase_add_test (tc, response_shorter_than_eleven_bytes_is_rejected);
  tcase_add_test (tc, response_with_an_extra_byte_is_rejected);
  tcase_add_test (tc, response_with_bad_magic_is_rejected);
  tcase_add_test (tc, response_with_unknown_version_is_rejected);
  tcase_add_test (tc, response_of_request_kind_is_rejected);
  tcase_add_test (tc, response_with_body_length_other_than_one_is_rejected);
  tcase_add_test (tc, request_frame_is_rejected_as_response);
  suite_add_tcase (s, tc);

  tc = tcase_create ("hello");
  tcase_add_test (tc, documented_hello_is_what_the_encoder_writes);
  tcase_add_test (tc, documented_hello_reply_is_what_the_encoder_writes);
  tcase_add_test (tc, hello_with_a_body_is_rejected_from_its_header);
  tcase_add_test (tc, hello_with_trailing_bytes_is_rejected);
  tcase_add_test (tc, hello_truncated_anywhere_is_rejected);
  tcase_add_test (tc, hello_with_bad_magic_version_or_kind_is_rejected);
  tcase_add_test (tc, hello_is_no_request_and_no_response);
  tcase_add_test (tc, a_response_or_request_is_no_hello_reply);
  tcase_add_test (tc, hello_reply_of_another_length_is_rejected);
  tcase_add_test (tc, only_the_hello_kind_is_read_as_a_hello);
  suite_add_tcase (s, tc);
  return s;
}

SP_CHECK_MAIN (make_suite)
