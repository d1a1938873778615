/* libFuzzer harness for sp_audit_render.  The input is cut into a record:
   a header of flags and numbers, then length-prefixed strings (one length
   byte each) for id, run, repo, the three outcomes, script_sha256,
   seed_commit, seed_digest, snapshot and status, and the rest as the reason,
   repeated up to 16 times so that the cut is reached.  Invariants:
   - an error sets err and no line; a record whose strings are all valid
     UTF-8 without NUL, whose answer names an outcome and whose other fields
     leave room for a reason always renders;
   - a line is at most SP_AUDIT_LINE_MAX_BYTES, ends in its only newline,
     and parses with sp_json as an object of the keys below, in order;
   - every string comes back as it went in; the reason whole, or a prefix of
     it (at a character boundary) followed by the cut mark.  */
#define _GNU_SOURCE
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/bounds.h"
#include "base/utf8.h"
#include "serve/audit.h"
#include "text/json.h"

#include "fuzz.h"

#define HEADER_BYTES 24
#define N_STRINGS    11 /* id, run, repo, 3 outcomes, sha, commit, digest, snapshot, status */
#define CUT_MARK     "\xE2\x80\xA6[cut]"

static const char *const keys[] = {
  "id",
  "run",
  "received",
  "peer_uid",
  "peer_gid",
  "peer_pid",
  "started",
  "finished",
  "repo",
  "outcomes",
  "answer_schema",
  "script_sha256",
  "seed_commit",
  "seed_digest",
  "seed_omitted_submodules",
  "snapshot",
  "sandbox",
  "debited",
  "budget_remaining",
  "result",
  "status",
  "cause",
  "reason",
  "launched",
  "exit",
  "signal",
  "oom",
  "timed_out",
  "wall_ms",
  "cpu_ms",
  "peak_memory_bytes",
  "release",
  "release_ms",
  "release_overflow",
  "bits",
  "content_bits",
  "timing_bits",
  "repo_bits",
};

static const char *const release_modes[] = { "bucketed", "fixed", "immediate", NULL };

struct cursor
{
  const uint8_t *p;
  size_t left;
};

static uint64_t
take_u64 (const uint8_t *h)
{
  uint64_t v = 0;

  for (int i = 0; i < 8; i++)
    v = v << 8 | h[i];
  return v;
}

/* A string of up to 255 bytes, NUL-terminated (so a NUL in it ends the C
   string early, as it would for the caller).  */
static char *
take_string (struct cursor *c, size_t *len)
{
  size_t n = 0;
  char *s;

  if (c->left > 0)
    {
      n = c->p[0];
      c->p++;
      c->left--;
    }
  if (n > c->left)
    n = c->left;
  s = malloc (n + 1);
  FUZZ_REQUIRE (s != NULL);
  if (n > 0)
    memcpy (s, c->p, n);
  s[n] = '\0';
  c->p += n;
  c->left -= n;
  *len = n;
  return s;
}

static bool
clean (const void *s, size_t len)
{
  return sp_utf8_valid (s, len, NULL) && (len == 0 || memchr (s, '\0', len) == NULL);
}

static bool
json_string_is (const struct sp_json *v, const void *s, size_t len)
{
  return v != NULL && v->type == SP_JSON_STRING && v->u.string.len == len
         && (len == 0 || memcmp (v->u.string.data, s, len) == 0);
}

static void
check_string (const struct sp_json *root, const char *key, const char *s)
{
  const struct sp_json *v = sp_json_object_get (root, key);

  if (s == NULL)
    FUZZ_REQUIRE (v != NULL && v->type == SP_JSON_NULL);
  else
    FUZZ_REQUIRE (json_string_is (v, s, strlen (s)));
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  struct cursor c = { data, size };
  uint8_t h[HEADER_BYTES] = { 0 };
  char *str[N_STRINGS];
  size_t str_len[N_STRINGS], reason_len, reason_one, other_bytes = 0;
  struct sp_bytes outcomes[SP_OUTCOME_COUNT];
  struct sp_run_facts facts;
  struct sp_audit_record rec;
  char *reason = NULL, *line = NULL;
  size_t len = 0, repeat;
  sp_error_t err = NULL;
  bool all_clean = true;
  int ret;

  memcpy (h, data, size < HEADER_BYTES ? size : HEADER_BYTES);
  c.p += size < HEADER_BYTES ? size : HEADER_BYTES;
  c.left -= size < HEADER_BYTES ? size : HEADER_BYTES;
  for (int i = 0; i < N_STRINGS; i++)
    {
      str[i] = take_string (&c, &str_len[i]);
      if (i >= 3 && i <= 5)
        {
          /* Outcomes are byte views: they keep any NUL.  */
          outcomes[i - 3] = (struct sp_bytes){ (const uint8_t *)str[i], str_len[i] };
          all_clean &= clean (str[i], str_len[i]);
        }
      else
        str_len[i] = strlen (str[i]);
      other_bytes += str_len[i];
    }
  all_clean &= clean (str[0], str_len[0]) && clean (str[1], str_len[1]) && clean (str[2], str_len[2]);
  for (int i = 6; i < N_STRINGS; i++)
    all_clean &= clean (str[i], str_len[i]);

  reason_one = strnlen ((const char *)c.p, c.left);
  repeat = 1 + (h[1] & 15);
  reason = malloc (reason_one * repeat + 1);
  FUZZ_REQUIRE (reason != NULL);
  for (size_t r = 0; r < repeat; r++)
    if (reason_one > 0)
      memcpy (reason + r * reason_one, c.p, reason_one);
  reason_len = reason_one * repeat;
  reason[reason_len] = '\0';
  all_clean &= clean (reason, reason_len);

  facts = (struct sp_run_facts){
    .launched = h[0] & 4,
    .exit_code = (int)(int8_t)h[2],
    .signal = h[3],
    .oom = h[0] & 8,
    .timed_out = h[0] & 16,
    .wall_ns = take_u64 (h + 4),
    .cpu_ns = take_u64 (h + 12),
    .peak_memory_bytes = take_u64 (h + 4) ^ take_u64 (h + 16),
  };
  rec = (struct sp_audit_record){
    .id = str[0],
    .run = str[1],
    .received_ns = take_u64 (h + 4),
    .peer = { .known = h[3] & 32,
              .uid = (uint32_t)take_u64 (h + 4),
              .gid = (uint32_t)take_u64 (h + 12),
              .pid = (uint32_t)take_u64 (h + 16) },
    .started_ns = h[0] & 32 ? take_u64 (h + 12) : 0,
    .finished_ns = take_u64 (h + 16),
    .repo = h[0] & 64 ? NULL : str[2],
    .outcomes = h[0] & 128 ? NULL : outcomes,
    .script_sha256 = str[6],
    .seed_commit = str[7],
    .seed_digest = str[8],
    .snapshot = str[9][0] ? str[9] : NULL,
    /* The id's bytes again: a sandbox name is another proxy-made string.  */
    .sandbox = h[3] & 8 ? str[0] : NULL,
    .debited = h[0] & 1,
    .budget_remaining = (uint32_t)take_u64 (h + 16),
    .answer = (uint8_t)(h[0] >> 1 & 3) == 3 ? (uint8_t)(h[2] & 7) : (uint8_t)(h[0] >> 1 & 3),
    .admission = h[3] & 16,
    .status = str[10],
    /* Past the last cause too: the renderer names it "?", never reads past its table.  */
    .cause = (enum sp_cause) ((h[2] ^ h[3]) % (SP_CAUSE_COUNT + 2)),
    .reason = h[1] & 16 ? NULL : reason,
    .facts = h[1] & 32 ? NULL : &facts,
    .release = release_modes[h[1] >> 6 & 3],
    .release_ms = h[1] & 64 ? -1 : (int64_t)(take_u64 (h + 12) >> 1),
    .release_overflow = h[3] & 1,
    .charged = h[3] & 2,
    .millibits = take_u64 (h + 4),
    .timing_unbounded = h[3] & 4,
    .repo_millibits = take_u64 (h + 12),
  };

  ret = sp_audit_render (&rec, &line, &len, &err);
  FUZZ_REQUIRE (ret == 0 || ret == -1);
  FUZZ_REQUIRE ((ret < 0) == (err != NULL));
  if (ret < 0)
    {
      FUZZ_REQUIRE (line == NULL);
      FUZZ_REQUIRE (sp_error_message (err)[0] != '\0');
      /* Refusing is right only for bad strings, a bad answer, an admission
         record with an answer or a run, or other fields too long to leave
         room (each byte escapes to at most 6).  */
      FUZZ_REQUIRE (!all_clean || rec.answer > SP_OUTCOME_COUNT || (rec.answer > 0 && rec.outcomes == NULL)
                    || (rec.admission && (rec.answer != 0 || rec.facts != NULL))
                    || 6 * other_bytes + 1024 > SP_AUDIT_LINE_MAX_BYTES);
      sp_error_release (&err);
    }
  else
    {
      struct sp_json *root = NULL;
      const struct sp_json *v;

      FUZZ_REQUIRE (len >= 2 && len <= SP_AUDIT_LINE_MAX_BYTES);
      FUZZ_REQUIRE (line[len - 1] == '\n' && line[len] == '\0');
      FUZZ_REQUIRE (memchr (line, '\n', len - 1) == NULL);
      FUZZ_REQUIRE (sp_json_parse (line, len, 4, &root, &err) == 0);
      FUZZ_REQUIRE (root->type == SP_JSON_OBJECT && root->u.object.len == sizeof (keys) / sizeof (keys[0]));
      for (size_t i = 0; i < root->u.object.len; i++)
        FUZZ_REQUIRE (strcmp (root->u.object.members[i].key, keys[i]) == 0);
      check_string (root, "id", rec.id);
      check_string (root, "run", rec.run);
      check_string (root, "repo", rec.repo);
      check_string (root, "status", rec.status);
      check_string (root, "snapshot", rec.snapshot);
      check_string (root, "sandbox", rec.sandbox);
      check_string (root, "cause", rec.admission ? NULL : sp_cause_name (rec.cause));
      v = sp_json_object_get (root, "result");
      if (rec.admission)
        FUZZ_REQUIRE (v->type == SP_JSON_NULL);
      else if (rec.answer == 0)
        FUZZ_REQUIRE (json_string_is (v, "ERROR", 5));
      else
        FUZZ_REQUIRE (json_string_is (v, outcomes[rec.answer - 1].data, outcomes[rec.answer - 1].len));
      v = sp_json_object_get (root, "reason");
      if (rec.reason == NULL)
        FUZZ_REQUIRE (v->type == SP_JSON_NULL);
      else if (!json_string_is (v, reason, reason_len))
        {
          size_t mark = sizeof (CUT_MARK) - 1, kept;

          FUZZ_REQUIRE (v->type == SP_JSON_STRING && v->u.string.len >= mark);
          kept = v->u.string.len - mark;
          FUZZ_REQUIRE (kept < reason_len);
          FUZZ_REQUIRE (memcmp (v->u.string.data, reason, kept) == 0);
          FUZZ_REQUIRE (memcmp (v->u.string.data + kept, CUT_MARK, mark) == 0);
          FUZZ_REQUIRE (sp_utf8_valid ((const uint8_t *)reason, kept, NULL));
        }
      /* When it left, and the bits: numbers, null, or the one word.  */
      v = sp_json_object_get (root, "release");
      FUZZ_REQUIRE (rec.release == NULL ? v->type == SP_JSON_NULL
                                        : json_string_is (v, rec.release, strlen (rec.release)));
      v = sp_json_object_get (root, "release_ms");
      FUZZ_REQUIRE (v->type == (rec.release == NULL || rec.release_ms < 0 ? SP_JSON_NULL : SP_JSON_NUMBER));
      FUZZ_REQUIRE (sp_json_object_get (root, "release_overflow")->type == SP_JSON_BOOL);
      /* This harness renders three-outcome records only.  */
      FUZZ_REQUIRE (sp_json_object_get (root, "answer_schema")->type == SP_JSON_NULL);
      v = sp_json_object_get (root, "timing_bits");
      if (!rec.charged)
        FUZZ_REQUIRE (v->type == SP_JSON_NULL && sp_json_object_get (root, "bits")->type == SP_JSON_NULL
                      && sp_json_object_get (root, "content_bits")->type == SP_JSON_NULL
                      && sp_json_object_get (root, "repo_bits")->type == SP_JSON_NULL);
      else
        FUZZ_REQUIRE (
            sp_json_object_get (root, "bits")->type == SP_JSON_NUMBER
            && sp_json_object_get (root, "content_bits")->type == SP_JSON_NUMBER
            && sp_json_object_get (root, "repo_bits")->type == SP_JSON_NUMBER
            && (rec.timing_unbounded ? json_string_is (v, "unbounded", 9) : v->type == SP_JSON_NUMBER));
      sp_json_free (root);
      free (line);
    }

  free (reason);
  for (int i = 0; i < N_STRINGS; i++)
    free (str[i]);
  return 0;
}
