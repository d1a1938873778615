/* One invocation, in the order of ARCHITECTURE.md's "One invocation, in
   order" (sp_serve_invocation, one call a step):
     1, 2. the frame decoded and the request validated, off the slots
           (loop.c, reader.c);
     3. the debit, then the admission record (admit);
     4. a sandbox, made ahead for the repository or made now (take_sandbox);
     5. the script put in, the probe started under its timeout (run_script);
     6. how it ended, and /probe/out read and checked (read_answer);
     7. the result record (finish, audit);
     8. the answer at the time the release mode allows (finish), and the
        sandbox removed: before the answer where the release time covers
        it, after it otherwise (remove_sandbox, remove_after_answer).
   Every failure answers the same ERROR bytes; the audit record keeps its
   status, its cause as a value set where it happened, and its reason.  A
   client that goes away before its answer cancels the invocation
   (clients.c): its probe is killed and its sandbox removed at once.  The
   canary runs the same steps; a refusal off the slots (refuse.c) is
   recorded here too.  */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "os/log.h"
#include "base/bounds.h"
#include "base/cleanup.h"
#include "base/protocol.h"
#include "base/request.h"
#include "base/sha256.h"
#include "bundle/bundle.h"
#include "serve/probe_out.h"
#include "text/answer_schema.h"
#include "text/result.h"

#include "serve/serve.h"
#include "serve/verdict.h"

/* The canary's worker: it has no client.  */
#define NO_CLIENT UINT32_MAX

/* What one invocation has learned, for its answer and its audit record.  */
struct invocation
{
  struct sp_serve *s;
  char inv[24];
  char id[2 * SP_ID_MAX_CHARS + 2];
  const struct sp_serve_seed *seed;
  const void *script;
  size_t script_len;
  const struct sp_bytes *outcomes;
  /* The protocol version it is answered in; a v2 request's schema (the
     request's, not owned), its content bits, and once answered the
     canonical value (owned).  */
  uint8_t version;
  const struct sp_answer_schema *schema;
  uint64_t content_millibits;
  char *value;
  size_t value_len;
  char sandbox[24]; /* the name of the sandbox it was given, or "" */
  struct sp_run_facts facts;
  bool ran;
  unsigned worker; /* whose client it answers (clients.c); NO_CLIENT for the canary */
  int client_fd;   /* that client's connection, or -1 */
  const char *status;
  enum sp_cause cause;
};

void
sp_serve_answer (int fd, uint8_t version, uint8_t index, const char *value, size_t value_len)
{
  uint8_t frame[SP_RESPONSE_V2_FRAME_MAX_BYTES];
  size_t len = SP_RESPONSE_FRAME_BYTES;
  sp_error_t err = NULL;

  if (version == 2)
    {
      struct sp_bytes answer = { (const uint8_t *)value, value_len };

      if (sp_response_v2_encode (index == SP_RESPONSE_ERROR || value == NULL ? NULL : &answer, frame,
                                 sizeof (frame), &len, &err)
          < 0)
        {
          sp_error_release (&err);
          if (sp_response_v2_encode (NULL, frame, sizeof (frame), &len, &err) < 0)
            {
              sp_error_release (&err);
              return;
            }
        }
    }
  else if (sp_response_encode (index, frame, &err) < 0)
    {
      sp_error_release (&err);
      sp_response_encode (SP_RESPONSE_ERROR, frame, &err);
    }
  /* The client may be gone; its answer is then lost, never retried.  A
     fresh connection's buffer holds the largest frame.  */
  (void)send (fd, frame, len, MSG_NOSIGNAL | MSG_DONTWAIT);
}

/* Sets the invocation's verdict and cause, and returns -1 for a caller
   that fails with them.  */
static int
verdict (struct invocation *inv, const char *status, enum sp_cause cause)
{
  inv->status = status;
  inv->cause = cause;
  return -1;
}

/* Whether the invocation's client has gone (never, for the canary).  */
static bool
client_gone (struct invocation *inv)
{
  return inv->worker != NO_CLIENT && sp_serve_client_gone (inv->s, inv->worker, inv->client_fd);
}

/* An end that is neither the probe's nor a failure: its client went away,
   or the proxy stopped.  */
static int
cancelled (struct invocation *inv, const char *when, sp_error_t *err)
{
  bool gone = client_gone (inv);

  sp_error_release (err);
  verdict (inv, SP_AUDIT_STATUS_CANCELLED, gone ? SP_CAUSE_CLIENT_GONE : SP_CAUSE_STOPPED);
  return sp_make_error (err, 0, "%s %s", gone ? "the client went away" : "the proxy stopped", when);
}

/* Whose a failure outside the probe is (verdict.c).  */
static void
classify_failure (struct invocation *inv, const char *rootfs_root, sp_error_t *err)
{
  struct sp_verdict v;

  sp_verdict_of_failure (inv->ran, &inv->facts, inv->s->state_path, rootfs_root, err, &v);
  verdict (inv, v.status, v.cause);
}

/* Puts the sandbox's container on the list the stop and the cancellation
   kill from: false once the proxy stops or the client has gone.  */
static bool
activate (struct invocation *inv, struct sp_serve_sandbox *sb)
{
  if (inv->worker == NO_CLIENT)
    return sp_serve_sandbox_activate (inv->s, sb);
  return sp_serve_client_activate (inv->s, inv->worker, sb);
}

/* Whose a failure of steps 4 to 6 is, when its step did not say.  */
static void
classify (struct invocation *inv, int ret, sp_error_t *err)
{
  if (ret < 0 && inv->status == NULL)
    classify_failure (inv, inv->s->rootfs.root_path, err);
}

/* Step 8, before the answer, for the result ret of steps 4 to 6: nothing
   of the invocation may outlive its answer (in immediate release, an
   answered probe's sandbox goes after it: remove_after_answer), and a
   failure to remove it is itself a failure.  Returns the invocation's
   result.  */
static int
remove_sandbox (struct invocation *inv, struct sp_serve_sandbox *sb, int ret, uint8_t *index, sp_error_t *err)
{
  sp_error_t cleanup_err = NULL;

  if (sp_serve_sandbox_destroy (inv->s, sb, &cleanup_err) < 0)
    {
      *index = SP_RESPONSE_ERROR;
      if (ret == 0)
        {
          verdict (inv, SP_AUDIT_STATUS_INTERNAL, SP_CAUSE_CLEANUP);
          *err = cleanup_err;
          ret = sp_error_wrap (err, "clean up the workspace");
        }
      else
        sp_error_release (&cleanup_err);
    }
  classify (inv, ret, err);
  return ret;
}

/* Step 8, after the answer, in immediate release only: the answer has
   left, and the sandbox goes now.
   Its answer can no longer turn to ERROR: a sandbox that stays is said on
   stderr, by name, and the run's own removal at stop (or the next start's,
   after a crash) takes it, as it takes any leftover of the run.  Its slot
   is free again, as after any failed removal.  */
static void
remove_after_answer (struct invocation *inv, struct sp_serve_sandbox *sb)
{
  cleanup_error sp_error_t err = NULL;
  char container[2 * SP_ID_MAX_CHARS + 8];

  snprintf (container, sizeof (container), "%s", sb->container_id);
  if (sp_serve_sandbox_destroy (inv->s, sb, &err) < 0)
    sp_log (
        SP_LOG_WARNING,
        "sealed-probe-proxy: serve: invocation %s: its sandbox `%s` could not be removed after its answer "
        "left: %s; the run's removal at stop takes it",
        inv->id, container, sp_error_message (err));
}

/* What an audit record needs beyond the invocation itself.  */
struct audit_facts
{
  const struct sp_request *req;
  const char *script_sha256;
  const char *schema_sha256; /* a v2 request's, else NULL */
  bool debited;
  uint32_t remaining;
  const struct sp_serve_arrival *arrival; /* NULL for the canary */
  /* Monotonic: what the release counts from.  A request that a worker
     took up: that moment, so that a queued request's wait is a sum of
     released durations and its own release is its own run's bucket; one
     refused off the slots: its acceptance.  */
  uint64_t release_from_ns;
  uint64_t started_ns;
  /* What the call could disclose, once charged to its repository.  */
  uint64_t millibits;
  bool timing_unbounded;
  uint64_t repo_millibits;
  const struct sp_serve_release *release; /* NULL until it is known */
};

/* Appends the invocation's record: its admission record before anything is
   launched (admission), or its result record before the answer.  A record
   that cannot be written halts the proxy, exactly as a failed debit does:
   the operator sees why on stderr (with the id only), and the caller
   answers ERROR.  */
static int
audit (struct invocation *inv, const struct audit_facts *a, bool admission, uint8_t index, const char *reason,
       sp_error_t *err)
{
  struct sp_audit_record rec = {
    .id = inv->id,
    .run = inv->s->run_id,
    .received_ns = a->arrival != NULL ? a->arrival->received_ns : 0,
    .peer = a->arrival != NULL ? a->arrival->peer : (struct sp_audit_peer){ .known = false },
    .started_ns = a->started_ns,
    .finished_ns = admission ? 0 : sp_realtime_ns (),
    .script_sha256 = a->script_sha256,
    .debited = a->debited,
    .budget_remaining = a->remaining,
    .answer = admission ? SP_RESPONSE_ERROR : index,
    .status = admission ? SP_AUDIT_STATUS_ADMITTED : inv->status,
    .cause = inv->cause,
    .reason = admission ? NULL : reason,
    .facts = inv->ran && inv->facts.launched && !admission ? &inv->facts : NULL,
    .admission = admission,
    .release = sp_release_mode_name (inv->s->opt->release),
    .release_ms = a->release != NULL && !a->release->overflow && a->release->mode != SP_RELEASE_IMMEDIATE
                      ? (int64_t)a->release->release_ms
                      : -1,
    .release_overflow = a->release != NULL && a->release->overflow,
    .charged = a->debited,
    .millibits = a->millibits,
    .content_millibits = inv->content_millibits,
    .timing_unbounded = a->timing_unbounded,
    .repo_millibits = a->repo_millibits,
  };
  cleanup_free char *repo = NULL;

  if (inv->outcomes != NULL || inv->schema != NULL)
    {
      repo = strndup ((const char *)a->req->repo.data, a->req->repo.len);
      rec.repo = repo;
      rec.outcomes = inv->outcomes;
    }
  if (inv->schema != NULL)
    {
      rec.schema_sha256 = a->schema_sha256;
      rec.schema_content_bits = sp_answer_schema_content_bits (inv->schema);
      if (!admission && index != SP_RESPONSE_ERROR)
        {
          rec.value = inv->value;
          rec.value_len = inv->value_len;
        }
    }
  if (inv->seed != NULL)
    {
      rec.seed_commit = inv->seed->seed->commit;
      rec.seed_digest = inv->seed->seed->digest;
      rec.seed_omitted_submodules = inv->seed->seed->omitted_known ? &inv->seed->seed->n_omitted : NULL;
      rec.snapshot = inv->ran && !admission ? sp_snapshot_mode_name (inv->s->opt->snapshot) : NULL;
      rec.sandbox = inv->sandbox[0] && !admission ? inv->sandbox : NULL;
    }
  if (sp_audit_append (inv->s->audit, &rec, err) < 0)
    {
      sp_log (SP_LOG_ERR, "sealed-probe-proxy: serve: audit %s: not written: %s", inv->id,
              sp_error_message (*err));
      sp_error_wrap (err, "audit");
      sp_serve_halt (inv->s, sp_error_message (*err));
      return -1;
    }
  if (!admission)
    {
      /* At debug only, and only what the audit log holds of it that is
         the operator's: never the script, an outcome or the answer.  */
      sp_log (SP_LOG_DEBUG, "sealed-probe-proxy: serve: request %s: %s, cause %s, repository %s", inv->id,
              rec.status, sp_cause_name (rec.cause), rec.repo != NULL ? rec.repo : "(none valid)");
    }
  return 0;
}

/* The result record, then the answer at its release time (releaser.c): an
   answer whose record could not be written is ERROR, and so is one ready
   past its last possible release.  The worker, and so its slot, waits,
   whatever ended the invocation: a cancelled one too, so that what queues
   behind it waits for a released duration, never for how long its kill
   and removal took.  A client that has gone is sent nothing.  */
static void
finish (struct invocation *inv, int fd, struct audit_facts *a, uint8_t index, const char *reason)
{
  cleanup_error sp_error_t err = NULL;
  cleanup_free char *late = NULL;
  struct sp_serve_release release;

  sp_serve_release_plan (inv->s, a->release_from_ns, &release);
  a->release = &release;
  if (release.overflow)
    {
      if (asprintf (&late,
                    "%s%sready %" PRIu64 " ms after its start, past its last release: released at once as "
                    "ERROR",
                    reason ? reason : "", reason ? "; " : "", release.release_ms)
          < 0)
        late = NULL;
      reason = late ? late : "ready past its last release: released at once as ERROR";
      index = SP_RESPONSE_ERROR;
      /* The agent gets ERROR, not the outcome: no longer `answered`.  */
      if (strcmp (inv->status, SP_AUDIT_STATUS_ANSWERED) == 0)
        verdict (inv, SP_AUDIT_STATUS_INTERNAL, SP_CAUSE_RELEASE_OVERFLOW);
    }
  if (audit (inv, a, false, index, reason, &err) < 0)
    index = SP_RESPONSE_ERROR;
  sp_serve_release_wait (inv->s, &release);
  if (inv->cause != SP_CAUSE_CLIENT_GONE)
    sp_serve_answer (fd, inv->version, index, inv->value, inv->value_len);
  /* Counted once released, not when the record is written: STATUS= is
     open to every user, and a count that moved when the probe ended would
     tell its duration past the release ladder.  */
  sp_serve_report_result (inv->s, inv->status);
}

static void
invocation_init (struct invocation *inv, struct sp_serve *s, unsigned worker, int client_fd)
{
  uint64_t n = atomic_fetch_add (&s->next_invocation, 1);

  memset (inv, 0, sizeof (*inv));
  inv->s = s;
  inv->worker = worker;
  inv->client_fd = client_fd;
  inv->facts.exit_code = -1;
  inv->status = SP_AUDIT_STATUS_REFUSED;
  inv->cause = SP_CAUSE_OTHER;
  inv->version = 1;
  inv->content_millibits = SP_RELEASE_CONTENT_MILLIBITS;
  snprintf (inv->inv, sizeof (inv->inv), "%" PRIu64, n);
  snprintf (inv->id, sizeof (inv->id), "%s-%s", s->run_id, inv->inv);
}

static const struct sp_serve_seed *
find_seed (const struct sp_serve *s, const struct sp_bytes *repo)
{
  for (size_t i = 0; i < s->config->n_private_repos; i++)
    {
      const char *name = s->config->private_repos[i];

      if (strlen (name) == repo->len && memcmp (name, repo->data, repo->len) == 0)
        return &s->seeds[i];
    }
  return NULL;
}

/* Step 3: the debit, spent before anything runs, never refunded, with the
   bits the call could carry charged to its repository, and so to the run,
   in the same write.  A ledger that cannot persist halts the proxy.  Returns 0 when
   debited; -1 with the verdict set otherwise.  */
static int
debit (struct invocation *inv, struct audit_facts *a, sp_error_t *err)
{
  struct sp_serve *s = inv->s;
  size_t repo_index = (size_t)(inv->seed - s->seeds);
  struct sp_ledger_charge charge = {
    .repo = s->config->private_repos[repo_index],
    .millibits
    = inv->content_millibits
      + sp_release_timing_millibits (s->opt->release, s->config->timeout_seconds, &a->timing_unbounded),
    .bit_budget_millibits = sp_serve_repo_bit_budget_millibits (s, repo_index),
  };
  int ret;

  charge.timing_unbounded = a->timing_unbounded;
  ret = sp_ledger_debit_call (s->ledger, &charge, &a->remaining, &a->repo_millibits, err);
  if (ret == SP_LEDGER_EXHAUSTED)
    {
      verdict (inv, SP_AUDIT_STATUS_REFUSED, SP_CAUSE_BUDGET_SPENT);
      return sp_make_error (err, 0, "the invocation budget is spent");
    }
  if (ret == SP_LEDGER_BITS_EXHAUSTED)
    {
      verdict (inv, SP_AUDIT_STATUS_REFUSED, SP_CAUSE_BIT_BUDGET_SPENT);
      return sp_make_error (err, 0,
                            "the repository's bit budget (%" PRIu64
                            " bits) is spent: this call could carry %" PRIu64 ".%03" PRIu64 " bits",
                            charge.bit_budget_millibits / 1000, charge.millibits / 1000,
                            charge.millibits % 1000);
    }
  if (ret == SP_LEDGER_RUN_BITS_EXHAUSTED)
    {
      verdict (inv, SP_AUDIT_STATUS_REFUSED, SP_CAUSE_RUN_BIT_BUDGET_SPENT);
      return sp_make_error (err, 0, "the run's bit budget is spent");
    }
  a->millibits = charge.millibits;
  if (ret < 0)
    {
      classify_failure (inv, NULL, err);
      if (inv->cause != SP_CAUSE_ENVIRONMENT)
        verdict (inv, SP_AUDIT_STATUS_INTERNAL, SP_CAUSE_LEDGER_WRITE);
      sp_error_wrap (err, "budget");
      sp_serve_halt (s, sp_error_message (*err));
      return -1;
    }
  a->debited = true;
  return 0;
}

/* Steps 1 and 2, decoding the frame and validating the request, were done
   off the slots (loop.c, reader.c): only a whole, valid request reaches
   one.  This sets the invocation up, and from here on its client is
   watched: one that goes away cancels it.  */
static void
begin (struct invocation *inv, struct sp_serve *s, const struct sp_request *req,
       const struct sp_answer_schema *schema, unsigned worker, int fd, struct audit_facts *a,
       char script_sha256[SP_DIGEST_TEXT_SIZE], char schema_sha256[SP_DIGEST_TEXT_SIZE])
{
  uint8_t digest[SP_SHA256_BYTES];

  sp_serve_client_watch (s, worker, fd);
  invocation_init (inv, s, worker, fd);
  inv->version = req->version;
  if (req->version == 2)
    {
      uint8_t schema_digest[SP_SHA256_BYTES];

      inv->schema = schema;
      inv->content_millibits = (uint64_t)sp_answer_schema_content_bits (schema) * 1000;
      sp_sha256 (req->schema.data, req->schema.len, schema_digest);
      sp_sha256_digest_text (schema_digest, schema_sha256);
      a->schema_sha256 = schema_sha256;
    }
  else
    inv->outcomes = req->outcomes;
  inv->script = req->script.data;
  inv->script_len = req->script.len;
  inv->seed = find_seed (s, &req->repo);
  sp_sha256 (req->script.data, req->script.len, digest);
  sp_sha256_digest_text (digest, script_sha256);
  a->script_sha256 = script_sha256;
}

/* Step 3: a request for a staged repository, while the proxy is not halted
   and its client is still there, is debited, and its admission record
   lands before anything is copied or launched, or nothing is: no sandbox
   ever runs unpaid or unaudited.  Returns -1 with the verdict set when the
   request goes no further.  */
static int
admit (struct invocation *inv, struct audit_facts *a, sp_error_t *err)
{
  char why[sizeof (inv->s->halt_reason)];

  /* A sealed repository funds no call: refused before its seed is looked
     at, debited or copied.  */
  if (inv->seed != NULL && sp_serve_repo_sealed (inv->s, (size_t)(inv->seed - inv->s->seeds)))
    {
      verdict (inv, SP_AUDIT_STATUS_REFUSED, SP_CAUSE_SEALED);
      return sp_make_error (err, 0, "the repository is sealed: it never runs");
    }
  if (inv->seed == NULL)
    {
      verdict (inv, SP_AUDIT_STATUS_REFUSED, SP_CAUSE_NO_SEED);
      return sp_make_error (err, 0, "the repository has no staged seed");
    }
  if (sp_serve_halted (inv->s, why, sizeof (why)))
    {
      verdict (inv, SP_AUDIT_STATUS_REFUSED, SP_CAUSE_HALTED);
      return sp_make_error (err, 0, "the proxy is halted until the operator restarts it (%s)", why);
    }
  /* Gone while it queued: nothing is spent on it.  */
  if (client_gone (inv))
    return cancelled (inv, "before its request was admitted", err);
  if (debit (inv, a, err) < 0)
    return -1;
  if (audit (inv, a, true, SP_RESPONSE_ERROR, NULL, err) < 0)
    {
      classify_failure (inv, NULL, err);
      if (inv->cause != SP_CAUSE_ENVIRONMENT)
        verdict (inv, SP_AUDIT_STATUS_INTERNAL, SP_CAUSE_AUDIT_WRITE);
      return -1;
    }
  return 0;
}

/* Step 4: a sandbox for the repository, one made ahead for it (unless
   cold, as for the canary) or one made now.  *sandbox is what is left to
   remove, or NULL.  From here until the verdict, a failure whose step does
   not say whose it is is classify_failure's to say.  */
static int
take_sandbox (struct invocation *inv, bool cold, struct sp_serve_sandbox **sandbox, sp_error_t *err)
{
  struct sp_serve *s = inv->s;
  size_t seed_index = (size_t)(inv->seed - s->seeds);
  struct sp_serve_sandbox *sb = NULL;

  *sandbox = NULL;
  inv->status = NULL;
  if (!cold)
    sb = sp_serve_pool_take (s, seed_index);
  if (sb == NULL)
    {
      /* The slot first: it decides who the probe is on the host.  */
      int slot = sp_serve_slot_claim (s);

      if (slot < 0)
        return cancelled (inv, "before its sandbox was made", err);
      if (sp_serve_sandbox_make (s, seed_index, (unsigned)slot, inv->inv, false, &sb, &inv->ran, &inv->facts,
                                 err)
          < 0)
        {
          sp_serve_slot_free (s, (unsigned)slot);
          if (sp_serve_stopping (s))
            return cancelled (inv, "while its sandbox was made", err);
          return -1;
        }
    }
  *sandbox = sb;
  snprintf (inv->sandbox, sizeof (inv->sandbox), "%s", sb->name);
  inv->ran = true;
  inv->facts = sb->facts;
  if (!activate (inv, sb))
    return cancelled (inv, "before its probe started", err);
  return 0;
}

/* Step 5: the script in; then the pool is told to make the repository's
   next sandbox, since the one taken is the request's now whether or not
   its script went in; then the probe is started and waited for under the
   timeout, which counts from its start.  */
static int
run_script (struct invocation *inv, struct sp_serve_sandbox *sb, sp_error_t *err)
{
  struct sp_serve *s = inv->s;
  int ret = sp_serve_sandbox_put_script (s, sb, inv->script, inv->script_len, err);

  if (sb->refill_owed)
    {
      sb->refill_owed = false;
      sp_serve_pool_refill (s);
    }
  if (ret == 0)
    ret = sp_serve_sandbox_start (s, sb, s->config->timeout_seconds, err);
  inv->facts = sb->facts;
  /* A kill, not the runtime or the probe, ended it.  */
  if (client_gone (inv) || sp_serve_stopping (s))
    return cancelled (inv, "while the probe ran", err);
  /* A seed that changed under the run makes its answer worthless, whatever
     else happened: the host's, said as it is.  */
  if (ret < 0 && sp_error_cause (*err) == SP_CAUSE_SEED_GONE)
    return -1;
  if (ret < 0)
    return sp_error_wrap (err, "runtime");
  return 0;
}

/* Step 6: how the probe ended, then /probe/out, read from the host side
   and checked strictly against the request's outcomes.  Returns 0 with
   *index the answer (1-based), or -1 with the verdict set.  */
static int
read_answer (struct invocation *inv, struct sp_serve_sandbox *sb, uint8_t *index, sp_error_t *err)
{
  struct sp_verdict end;
  char out[SP_ANSWER_OUTPUT_MAX_BYTES + 1];
  size_t out_len = 0;
  int ret;

  if (sp_verdict_of_end (&inv->facts, inv->s->config->timeout_seconds, &end, err) < 0)
    return verdict (inv, end.status, end.cause);
  verdict (inv, SP_AUDIT_STATUS_PROBE, SP_CAUSE_PROBE_OUTPUT);
  /* Each form reads at most one byte past its own bound, so that a longer
     file is refused as too long, never cut.  */
  if (sp_probe_out_read (sb->ws.bundle_dirfd, SP_BUNDLE_OUT, out,
                         (inv->schema != NULL ? SP_ANSWER_OUTPUT_MAX_BYTES : SP_RESULT_MAX_BYTES) + 1,
                         &out_len, err)
      < 0)
    return sp_error_wrap (err, "/probe/out");
  if (inv->schema != NULL)
    {
      if (sp_answer_schema_validate_result (inv->schema, out, out_len, &inv->value, &inv->value_len, err) < 0)
        return sp_error_wrap (err, "/probe/out");
      ret = 1;
    }
  else if ((ret = sp_result_validate (out, out_len, inv->outcomes, err)) < 0)
    return sp_error_wrap (err, "/probe/out");
  *index = (uint8_t)ret;
  verdict (inv, SP_AUDIT_STATUS_ANSWERED, SP_CAUSE_NONE);
  return 0;
}

/* The request's steps, in ARCHITECTURE.md's order; every step's failure
   skips to the ones that must still happen (the removal, the record, the
   answer).  */
void
sp_serve_invocation (struct sp_serve *s, struct sp_serve_request *r, uint64_t started_ns, unsigned worker)
{
  cleanup_close int fd = r->fd;
  cleanup_free uint8_t *frame = r->frame;
  cleanup_error sp_error_t err = NULL;
  char script_sha256[SP_DIGEST_TEXT_SIZE], schema_sha256[SP_DIGEST_TEXT_SIZE];
  cleanup_answer_schema struct sp_answer_schema *schema = r->schema;
  const struct sp_request req = r->req;
  struct audit_facts a = {
    .req = &req, .arrival = &r->arrival, .release_from_ns = sp_monotonic_ns (), .started_ns = started_ns
  };
  struct sp_serve_sandbox *sb = NULL;
  struct invocation inv;
  uint8_t index = SP_RESPONSE_ERROR;
  int ret;

  /* 1, 2. Decoded and validated off the slots; the client watched from now.  */
  begin (&inv, s, &req, schema, worker, fd, &a, script_sha256, schema_sha256);
  /* 3. The debit, then the admission record.  */
  if (admit (&inv, &a, &err) < 0)
    goto answer;
  /* 4. A sandbox made ahead for the repository, or one made now.  */
  ret = take_sandbox (&inv, false, &sb, &err);
  /* 5. The script in, the probe started: its timeout counts from here.  */
  if (ret == 0)
    ret = run_script (&inv, sb, &err);
  /* 6. How the probe ended, and /probe/out read and checked.  */
  if (ret == 0)
    ret = read_answer (&inv, sb, &index, &err);
  /* 8, before the answer: the sandbox goes now wherever the release time
     covers its removal (SP_RELEASE_MARGIN_MS: every mode but immediate),
     and after any failure, so that the record says everything that failed
     and a cancelled probe's sandbox goes at once.  In immediate release an
     answer's time is its run's own, and its sandbox goes after it.  */
  if (s->opt->release != SP_RELEASE_IMMEDIATE || ret < 0)
    {
      ret = remove_sandbox (&inv, sb, ret, &index, &err);
      sb = NULL;
    }
  if (ret == 0)
    sp_error_release (&err);

answer:
  if (!a.debited)
    a.remaining = sp_ledger_remaining (s->ledger);
  /* 7. The result record; 8. the answer, when the release mode allows.  */
  finish (&inv, fd, &a, index, err ? sp_error_message (err) : NULL);
  sp_serve_client_unwatch (s, worker, fd);
  /* 8, after the answer (immediate release): the sandbox goes.  */
  if (sb != NULL)
    {
      /* The client reads to the end of the stream: it ends now, not after
         the removal.  */
      sp_closep (&fd);
      remove_after_answer (&inv, sb);
    }
  free (inv.value);
}

void
sp_serve_record_refusal (struct sp_serve *s, const struct sp_serve_arrival *arrival,
                         const struct sp_serve_release *release, enum sp_cause cause, const char *reason)
{
  cleanup_error sp_error_t err = NULL;
  struct invocation inv;
  struct audit_facts a = {
    .remaining = sp_ledger_remaining (s->ledger),
    .arrival = arrival,
    .release_from_ns = arrival->accepted_ns,
    .release = release,
  };

  invocation_init (&inv, s, NO_CLIENT, -1);
  inv.cause = cause;
  /* A record that cannot be written has halted the proxy (audit).  */
  (void)audit (&inv, &a, false, SP_RESPONSE_ERROR, reason, &err);
}

/* The confinement canary (canary.py): the proxy's own probe, run cold
   through steps 4 to 6 and 8 like any request, before serve is ready.  It
   answers CONFINED only when it sees, from inside, every property
   docs/runtimes.md lists, and KERNEL-MISMATCH when the kernel it runs on
   is not the one the backend promises (runtime.h, sp_sandbox_kernel): a
   runc renamed runsc is refused, never used.  Its first lines,
   EXPECT_GVISOR, EXPECT_VM, NO_USER_NS and PROBE_IDS, are set per
   backend.  */
int
sp_serve_canary (struct sp_serve *s, sp_error_t *err)
{
  static const struct sp_bytes outcomes[SP_OUTCOME_COUNT] = {
    { (const uint8_t *)"CONFINED", 8 },
    { (const uint8_t *)"UNCONFINED", 10 },
    { (const uint8_t *)"KERNEL-MISMATCH", 15 },
  };
  bool gvisor = s->runtime->ops->kernel == SP_SANDBOX_KERNEL_GVISOR;
  bool vm = s->runtime->ops->kernel == SP_SANDBOX_KERNEL_MICROVM;
  uint32_t ids_low = SP_PROBE_UID, ids_high = SP_PROBE_UID + 1;
  cleanup_free char *script = NULL;
  struct sp_serve_sandbox *sb = NULL;
  struct invocation inv;
  uint8_t index;
  int len, ret;

  if (s->config->n_private_repos == 0)
    return sp_make_error (err, 0, "canary: no repository to snapshot");
  /* Who the probe is inside: 65534, or under docker (no user namespace) its
     slot's host id, one of the range's.  */
  if (s->rules.host_ids_direct)
    {
      ids_low = s->opt->probe_id_base;
      ids_high = s->opt->probe_id_base + SP_PROBE_ID_RANGE;
    }
  len = asprintf (
      &script,
      "EXPECT_GVISOR = %s\nEXPECT_VM = %s\nNO_USER_NS = %s\nPROBE_IDS = (%" PRIu32 ", %" PRIu32 ")\n%s",
      gvisor ? "True" : "False", vm ? "True" : "False", ids_low != SP_PROBE_UID ? "True" : "False", ids_low,
      ids_high, (const char *)sp_serve_canary_py);
  if (len < 0)
    {
      script = NULL;
      return sp_make_error (err, ENOMEM, "canary: allocate");
    }
  invocation_init (&inv, s, NO_CLIENT, -1);
  /* The first repository that may run: a sealed one's seed is never
     copied, not even for the proxy's own probe.  */
  for (size_t i = 0; i < s->config->n_private_repos && inv.seed == NULL; i++)
    if (!sp_serve_repo_sealed (s, i))
      inv.seed = &s->seeds[i];
  if (inv.seed == NULL)
    return sp_make_error (err, 0, "canary: every repository is sealed");
  inv.outcomes = outcomes;
  inv.script = script;
  inv.script_len = (size_t)len;
  index = SP_RESPONSE_ERROR;
  ret = take_sandbox (&inv, true, &sb, err);
  if (ret == 0)
    ret = run_script (&inv, sb, err);
  if (ret == 0)
    ret = read_answer (&inv, sb, &index, err);
  if (remove_sandbox (&inv, sb, ret, &index, err) < 0)
    return sp_error_wrap (err, "canary");
  /* Answers are numbered from 1 (protocol.h); 0 is ERROR.  */
  if (index == 3)
    return sp_make_error (
        err, 0,
        gvisor ? "canary: runtime `%s` ran the sandbox, but not on gVisor: its kernel showed "
                 "none of gVisor's evidence (docs/runtimes.md)"
        : vm   ? "canary: runtime `%s` ran the sandbox on gVisor, not on a microVM's Linux kernel "
                 "(docs/runtimes.md)"
               : "canary: runtime `%s` ran the sandbox, but not on the host's kernel "
                 "(docs/runtimes.md)",
        s->runtime->ops->name);
  if (index != 1)
    return sp_make_error (err, 0, "canary: the sandbox is not confined as required (it answered %s)",
                          index == 2 ? "UNCONFINED" : "something else");
  return 0;
}
