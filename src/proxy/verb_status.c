/* sealed-probe-proxy status [--state DIR] [--json]: whether a serve holds
   the state directory now (its pid, run, backend and release mode, from
   the serve.json it keeps, trusted only while that pid holds the state
   lock), its waiting sandboxes, each seed's commit against its clone's
   HEAD, what each repository's calls and the run's have disclosed against
   their ceilings, and the outcomes and last failures of the state
   directory's runs, read from the ledger and the audit log beside a
   running serve, without its lock.  The summaries are run_status.h's and
   serve_file.h's; this file only prints them.  See docs/operations.md,
   "status".  */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdbool.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "os/state_lock.h"
#include "serve/serve.h"
#include "stage/seed_store.h"
#include "status/run_status.h"
#include "status/serve_file.h"
#include "text/yajl_util.h"

#include "build_config.h"
#include "proxy/options.h"
#include "proxy/verbs.h"

#define USAGE "usage: sealed-probe-proxy status [--state DIR] [--json]"

#define fail(...) (sp_verb_report ("status", __VA_ARGS__), SP_EXIT_FAIL)

/* The omitted submodules a human line names; --json and staged.json give
   every one.  */
#define OMITTED_SHOWN 10

/* millibits as bits with three decimals: 4808 -> "4.808".  */
static void
format_bits (uint64_t millibits, char out[32])
{
  snprintf (out, 32, "%" PRIu64 ".%03" PRIu64, millibits / 1000, millibits % 1000);
}

/* What status knows beyond the ledger and the audit log: the live serve
   (NULL when none holds the state directory, or its serve.json is stale),
   a stale serve.json's pid (0: none), and each staged seed's clone.  */
struct live
{
  const struct sp_serve_file *serve;
  pid_t stale_pid;
};

enum drift
{
  DRIFT_UNKNOWN, /* no clone recorded, or its HEAD unreadable */
  DRIFT_SAME,
  DRIFT_MOVED,
};

struct seed_head
{
  enum drift drift;
  char head[SP_COMMIT_HEX_MAX + 1];
  const char *why; /* DRIFT_UNKNOWN: a fixed phrase */
};

static void
seed_head_read (const struct sp_seed *seed, struct seed_head *h)
{
  cleanup_error sp_error_t err = NULL;

  *h = (struct seed_head){ .drift = DRIFT_UNKNOWN };
  if (seed->source == SP_SEED_GITHUB)
    h->why = "a GitHub seed: no clone";
  else if (seed->clone == NULL)
    h->why = "its clone is not recorded (staged before staged.json version 3)";
  /* Only the commit id is kept: an error reading an untrusted clone may
     name its refs, which are shown nowhere.  */
  else if (sp_clone_head (seed->clone, h->head, &err) < 0)
    h->why = "its clone's HEAD could not be read";
  else
    h->drift = strcmp (h->head, seed->commit) == 0 ? DRIFT_SAME : DRIFT_MOVED;
}

/* ---- human output -------------------------------------------------------- */

static void
print_counts (FILE *f, const char *label, const struct sp_run_counts *c)
{
  fprintf (f, "%-13s", label);
  for (int o = 0; o < SP_RUN_OUTCOME_COUNT; o++)
    fprintf (f, "%s %s %" PRIu64, o ? "," : "", sp_run_outcome_name ((enum sp_run_outcome)o), c->outcomes[o]);
  fprintf (f, "; admitted %" PRIu64 ", unfinished %" PRIu64 "\n", c->admitted, c->unfinished);
}

static void
print_failure (FILE *f, const struct sp_run_failure *x)
{
  fprintf (f, "  %s  %-20s %-24s %-11s %s", x->time, x->id, x->repo[0] ? x->repo : "-",
           sp_run_outcome_name (x->status), sp_cause_name (x->cause));
  if (x->has_exit)
    fprintf (f, " exit=%" PRId64, x->exit_code);
  if (x->has_signal && x->signal != 0)
    fprintf (f, " signal=%" PRId64, x->signal);
  if (x->oom == 1)
    fputs (" oom", f);
  if (x->timed_out == 1)
    fputs (" timed_out", f);
  if (x->release_overflow)
    fputs (" release_overflow", f);
  fputc ('\n', f);
}

/* Who holds the state directory now (state_lock.h): held is 1 or 0.  */
static void
print_owner (FILE *f, int held, const struct sp_state_owner *owner)
{
  if (held == 0)
    fprintf (f, "%-13s none: no serve, stage, unstage or check runs on this state directory now\n", "owner");
  else if (owner->known)
    fprintf (f, "%-13s %s (pid %ld) holds this state directory now\n", "owner", owner->verb,
             (long)owner->pid);
  else
    fprintf (f, "%-13s a process holds this state directory now, and has not yet said which\n", "owner");
}

/* The live serve, as its serve.json says, or why none is shown.  */
static void
print_serve (FILE *f, int held, const struct sp_state_owner *owner, const struct live *live)
{
  const struct sp_serve_file *sv = live->serve;

  if (sv != NULL)
    {
      fprintf (f, "%-13s pid %ld, run %s, backend %s, release %s, snapshot %s, since %s, socket %s\n",
               "serve", (long)sv->pid, sv->run, sv->backend, sv->release, sv->snapshot, sv->started,
               sv->socket);
      fprintf (f, "%-13s %" PRIu64 " answered, %" PRIu64 " refused, %" PRIu64 " failed (this run)\n",
               "requests", sv->answered, sv->refused, sv->failed);
    }
  else if (held == 1 && owner->known && strcmp (owner->verb, "serve") == 0)
    fprintf (f, "%-13s pid %ld holds the state directory and is not ready yet\n", "serve", (long)owner->pid);
  else
    fprintf (f, "%-13s none running\n", "serve");
  if (live->stale_pid > 0)
    fprintf (f,
             "%-13s %s names pid %ld, which does not hold the state directory: stale (a serve killed -9), "
             "ignored\n",
             "serve state", SP_SERVE_REPORT_FILE, (long)live->stale_pid);
}

/* What every repository's calls together could carry, against the run's
   bit budget: the bound on what the agent can have learned, whichever
   repository it came from (docs/threat-model.md).  */
static void
print_run_bits (FILE *f, const struct sp_ledger_snapshot *l)
{
  char bits[32];

  if (l->version == 1)
    {
      fprintf (f, "%-13s not recorded (a version 1 ledger)\n", "run bits");
      return;
    }
  format_bits (l->run_millibits, bits);
  fprintf (f, "%-13s %s carried by every repository's calls together", "run bits", bits);
  if (l->run_unbounded_calls > 0)
    fprintf (f, " + %" PRIu64 " calls of unbounded timing", l->run_unbounded_calls);
  if (l->run_bit_budget_millibits > 0)
    {
      uint64_t left = l->run_millibits < l->run_bit_budget_millibits
                          ? l->run_bit_budget_millibits - l->run_millibits
                          : 0;

      format_bits (left, bits);
      fprintf (f,
               ", %s left, of %" PRIu64 " (--run-bit-budget; the state directory's, kept across restarts)\n",
               bits, l->run_bit_budget_millibits / 1000);
    }
  else
    fputs (", no run bit budget\n", f);
}

/* What each staged seed omits (docs/staging.md, "Submodules"): the paths
   are the repository's, and were recorded quoted (sp_quote_name), which
   the loader checked, so they are shown as they are.  */
static void
print_staged (FILE *f, const struct sp_staged *staged)
{
  if (staged == NULL)
    {
      fprintf (f, "%-13s none: no %s in this state directory\n", "staged", SP_STAGED_FILE);
      return;
    }
  fprintf (f, "%-13s %zu seeds in %s/%s (%s)\n", "staged", staged->n, SP_SEEDS_DIR, staged->run,
           SP_STAGED_FILE);
  for (size_t i = 0; i < staged->n; i++)
    {
      const struct sp_seed *seed = &staged->seeds[i];

      fprintf (f, "%-13s %-24s ", "submodules", seed->repo);
      if (!seed->omitted_known)
        fputs (seed->source == SP_SEED_GITHUB
                   ? "not recorded (a GitHub seed: its tarball does not mark them)\n"
                   : "not recorded (staged before the submodule policy)\n",
               f);
      else if (seed->n_omitted == 0)
        fputs ("none omitted\n", f);
      else
        {
          fprintf (f, "%zu omitted, empty directories in the seed:", seed->n_omitted);
          for (size_t k = 0; k < seed->n_omitted && k < OMITTED_SHOWN; k++)
            fprintf (f, "%s `%s`", k ? "," : "", seed->omitted[k]);
          if (seed->n_omitted > OMITTED_SHOWN)
            fprintf (f, " and %zu more (%s has every one)", seed->n_omitted - OMITTED_SHOWN, SP_STAGED_FILE);
          fputc ('\n', f);
        }
    }
}

static void
print_repo_live (FILE *f, const struct sp_run_status_repo *r, const struct live *live)
{
  const struct sp_serve_file *sv = live->serve;
  uint64_t waiting;
  char bits[32];

  if (sv == NULL)
    {
      if (r->in_ledger)
        fputs (", its ceiling is serve's --bit-budget (no serve runs now to say it)", f);
      return;
    }
  if (r->in_ledger && sv->bit_budget > 0)
    {
      uint64_t ceiling = sv->bit_budget * 1000;

      format_bits (r->millibits < ceiling ? ceiling - r->millibits : 0, bits);
      fprintf (f, ", %s left of %" PRIu64 " (--bit-budget)", bits, sv->bit_budget);
    }
  else if (r->in_ledger)
    fputs (", no bit budget (--bit-budget)", f);
  if (sp_serve_file_waiting (sv, r->name, &waiting))
    fprintf (f, ", %" PRIu64 " sandboxes waiting", waiting);
}

/* Each seed's staged commit against its clone's HEAD now.  */
static void
print_heads (FILE *f, const struct sp_staged *staged, const struct seed_head *heads)
{
  for (size_t i = 0; staged != NULL && i < staged->n; i++)
    {
      const struct sp_seed *seed = &staged->seeds[i];
      const struct seed_head *h = &heads[i];

      fprintf (f, "%-13s %-24s staged %s", "commit", seed->repo, seed->commit);
      if (h->drift == DRIFT_UNKNOWN)
        fprintf (f, "; clone HEAD unknown: %s\n", h->why);
      else if (h->drift == DRIFT_SAME)
        fputs ("; its clone's HEAD is the same\n", f);
      else
        fprintf (f, "; drift: its clone's HEAD is %s now (stage again to serve it)\n", h->head);
    }
}

static void
print_human (FILE *f, const struct sp_run_status *st, const struct sp_staged *staged,
             const struct seed_head *heads, const struct live *live)
{
  const struct sp_ledger_snapshot *l = st->ledger;

  if (l == NULL)
    fprintf (f, "%-13s none yet: serve has not run on this state directory\n", "budget");
  else
    {
      fprintf (f,
               "%-13s %" PRIu32 " used, %" PRIu32 " left, of %" PRIu32
               " (maxInvocations; the state directory's, kept across restarts)\n",
               "budget", l->used, l->limit - l->used, l->limit);
      print_run_bits (f, l);
    }
  for (size_t i = 0; i < st->n_repos; i++)
    {
      const struct sp_run_status_repo *r = &st->repos[i];
      char bits[32];

      fprintf (f, "%-13s %-24s %6" PRIu64 " invocations", "repository", r->name, r->invocations);
      if (r->in_ledger)
        {
          format_bits (r->millibits, bits);
          fprintf (f, ", %s bits carried by its calls", bits);
          if (r->unbounded_calls > 0)
            fprintf (f, " + %" PRIu64 " calls of unbounded timing", r->unbounded_calls);
        }
      else if (l != NULL && l->version == 1)
        fputs (", bits not recorded (a version 1 ledger)", f);
      print_repo_live (f, r, live);
      fputc ('\n', f);
    }
  print_staged (f, staged);
  print_heads (f, staged, heads);

  if (!st->audit_present)
    {
      fprintf (f, "%-13s none yet\n", "audit log");
      return;
    }
  fprintf (f, "%-13s %" PRIu64 " records in %" PRIu64 " runs, ", "audit log", st->records, st->runs);
  if (st->read_from == 0)
    fputs ("read whole", f);
  else
    fprintf (f, "read from byte %" PRIu64 " of %" PRIu64 " (its last %llu MiB)", st->read_from,
             st->audit_bytes, (unsigned long long)((st->audit_bytes - st->read_from) >> 20));
  if (st->torn_tail_bytes > 0)
    fprintf (
        f, "; its last %" PRIu64 " bytes are no whole line (a write under way, or cut by a crash): not read",
        st->torn_tail_bytes);
  fputc ('\n', f);
  if (st->latest_run[0] == '\0')
    return;
  fprintf (f, "%-13s %s, %s to %s (the latest in the audit log)\n", "latest run", st->latest_run,
           st->latest_first, st->latest_last);
  print_counts (f, "  outcomes", &st->latest);
  print_counts (f, "all runs", &st->all);
  if (st->failures_total == 0)
    return;
  fprintf (f, "%-13s %" PRIu64 " in all:", "failures", st->failures_total);
  for (int c = 0, n = 0; c < SP_CAUSE_COUNT; c++)
    if (st->causes[c] > 0)
      fprintf (f, "%s %s %" PRIu64, n++ ? "," : "", sp_cause_name ((enum sp_cause)c), st->causes[c]);
  fprintf (f, "; the last %zu:\n", st->n_failures);
  for (size_t i = 0; i < st->n_failures; i++)
    print_failure (f, sp_run_status_failure (st, i));
}

/* ---- JSON ---------------------------------------------------------------- */

/* Every yajl_gen call's status is OR-ed together: yajl_gen_status_ok is 0.  */
static unsigned
gen_str (yajl_gen g, const char *key, const char *value)
{
  return sp_yajl_gen_cstr (g, key) | (value ? sp_yajl_gen_cstr (g, value) : yajl_gen_null (g));
}

static unsigned
gen_tristate (yajl_gen g, const char *key, int v)
{
  return sp_yajl_gen_cstr (g, key) | (v < 0 ? yajl_gen_null (g) : yajl_gen_bool (g, v));
}

static unsigned
gen_counts (yajl_gen g, const char *key, const struct sp_run_counts *c)
{
  unsigned st = sp_yajl_gen_cstr (g, key) | yajl_gen_map_open (g) | sp_yajl_gen_cstr (g, "outcomes")
                | yajl_gen_map_open (g);

  for (int o = 0; o < SP_RUN_OUTCOME_COUNT; o++)
    st |= sp_yajl_gen_key_u64 (g, sp_run_outcome_name ((enum sp_run_outcome)o), c->outcomes[o]);
  st |= yajl_gen_map_close (g);
  st |= sp_yajl_gen_key_u64 (g, "admitted", c->admitted)
        | sp_yajl_gen_key_u64 (g, "unfinished", c->unfinished);
  return st | yajl_gen_map_close (g);
}

static unsigned
gen_failure (yajl_gen g, const struct sp_run_failure *x)
{
  unsigned st = yajl_gen_map_open (g);

  st |= gen_str (g, "time", x->time) | gen_str (g, "id", x->id)
        | gen_str (g, "repo", x->repo[0] ? x->repo : NULL);
  st |= gen_str (g, "status", sp_run_outcome_name (x->status))
        | gen_str (g, "cause", sp_cause_name (x->cause));
  st |= sp_yajl_gen_cstr (g, "exit") | (x->has_exit ? yajl_gen_integer (g, x->exit_code) : yajl_gen_null (g));
  st |= sp_yajl_gen_cstr (g, "signal")
        | (x->has_signal ? yajl_gen_integer (g, x->signal) : yajl_gen_null (g));
  st |= gen_tristate (g, "oom", x->oom) | gen_tristate (g, "timed_out", x->timed_out);
  st |= sp_yajl_gen_cstr (g, "release_overflow") | yajl_gen_bool (g, x->release_overflow);
  return st | yajl_gen_map_close (g);
}

static unsigned
gen_u64_or_null (yajl_gen g, const char *key, bool known, uint64_t v)
{
  return known ? sp_yajl_gen_key_u64 (g, key, v) : sp_yajl_gen_cstr (g, key) | yajl_gen_null (g);
}

/* null, or {"pid", "run", "started", "backend", "release", "snapshot",
   "socket", "pool", "bit_budget", "run_bit_budget", "answered", "refused",
   "failed"}.  */
static unsigned
gen_serve (yajl_gen g, const struct live *live)
{
  const struct sp_serve_file *sv = live->serve;
  unsigned st = sp_yajl_gen_cstr (g, "serve");

  if (sv == NULL)
    st |= yajl_gen_null (g);
  else
    {
      st |= yajl_gen_map_open (g) | sp_yajl_gen_key_u64 (g, "pid", (uint64_t)sv->pid)
            | gen_str (g, "run", sv->run) | gen_str (g, "started", sv->started)
            | gen_str (g, "backend", sv->backend) | gen_str (g, "release", sv->release)
            | gen_str (g, "snapshot", sv->snapshot) | gen_str (g, "socket", sv->socket)
            | sp_yajl_gen_key_u64 (g, "pool", sv->pool);
      st |= gen_u64_or_null (g, "bit_budget", sv->bit_budget > 0, sv->bit_budget)
            | gen_u64_or_null (g, "run_bit_budget", sv->run_bit_budget > 0, sv->run_bit_budget);
      st |= sp_yajl_gen_key_u64 (g, "answered", sv->answered)
            | sp_yajl_gen_key_u64 (g, "refused", sv->refused) | sp_yajl_gen_key_u64 (g, "failed", sv->failed)
            | yajl_gen_map_close (g);
    }
  return st | gen_u64_or_null (g, "stale_serve_pid", live->stale_pid > 0, (uint64_t)live->stale_pid);
}

/* {"run", "seeds": [{"repo", "source", "omitted_submodules", "commit",
   "clone", "clone_head", "drift"}]}, or null.  */
static unsigned
gen_staged (yajl_gen g, const struct sp_staged *staged, const struct seed_head *heads)
{
  unsigned st = sp_yajl_gen_cstr (g, "staged");

  if (staged == NULL)
    return st | yajl_gen_null (g);
  st |= yajl_gen_map_open (g) | gen_str (g, "run", staged->run) | sp_yajl_gen_cstr (g, "seeds")
        | yajl_gen_array_open (g);
  for (size_t i = 0; i < staged->n; i++)
    {
      const struct sp_seed *seed = &staged->seeds[i];

      st |= yajl_gen_map_open (g) | gen_str (g, "repo", seed->repo)
            | gen_str (g, "source", sp_seed_source_name (seed->source))
            | sp_yajl_gen_cstr (g, "omitted_submodules");
      if (!seed->omitted_known)
        st |= yajl_gen_null (g);
      else
        {
          st |= yajl_gen_array_open (g);
          for (size_t k = 0; k < seed->n_omitted; k++)
            st |= sp_yajl_gen_cstr (g, seed->omitted[k]);
          st |= yajl_gen_array_close (g);
        }
      st |= gen_str (g, "commit", seed->commit) | gen_str (g, "clone", seed->clone)
            | gen_str (g, "clone_head", heads[i].drift != DRIFT_UNKNOWN ? heads[i].head : NULL);
      st |= sp_yajl_gen_cstr (g, "drift")
            | (heads[i].drift == DRIFT_UNKNOWN ? yajl_gen_null (g)
                                               : yajl_gen_bool (g, heads[i].drift == DRIFT_MOVED));
      st |= yajl_gen_map_close (g);
    }
  return st | yajl_gen_array_close (g) | yajl_gen_map_close (g);
}

static int
render_json (yajl_gen g, const char *state, const struct sp_run_status *s, const struct sp_staged *staged,
             const struct seed_head *heads, int held, const struct sp_state_owner *owner,
             const struct live *live)
{
  const struct sp_ledger_snapshot *l = s->ledger;
  unsigned st = yajl_gen_map_open (g) | gen_str (g, "state", state);

  /* null: nobody holds it; {"verb": null, "pid": null}: held, not yet named.  */
  st |= sp_yajl_gen_cstr (g, "owner");
  if (held == 0)
    st |= yajl_gen_null (g);
  else
    st |= yajl_gen_map_open (g) | gen_str (g, "verb", owner->known ? owner->verb : NULL)
          | sp_yajl_gen_cstr (g, "pid")
          | (owner->known ? yajl_gen_integer (g, owner->pid) : yajl_gen_null (g)) | yajl_gen_map_close (g);
  st |= gen_serve (g, live);

  st |= sp_yajl_gen_cstr (g, "budget");
  if (l == NULL)
    st |= yajl_gen_null (g);
  else
    {
      char bits[32];

      format_bits (l->run_millibits, bits);
      st |= yajl_gen_map_open (g) | sp_yajl_gen_key_u64 (g, "limit", l->limit)
            | sp_yajl_gen_key_u64 (g, "used", l->used) | sp_yajl_gen_key_u64 (g, "left", l->limit - l->used)
            | sp_yajl_gen_key_u64 (g, "ledger_version", (uint64_t)l->version);
      st |= sp_yajl_gen_cstr (g, "run_bit_budget")
            | (l->run_bit_budget_millibits
                   ? yajl_gen_integer (g, (long long)(l->run_bit_budget_millibits / 1000))
                   : yajl_gen_null (g));
      st |= sp_yajl_gen_cstr (g, "run_bits_carried")
            | (l->version != 1 ? yajl_gen_number (g, bits, strlen (bits)) : yajl_gen_null (g));
      st |= sp_yajl_gen_cstr (g, "run_unbounded_calls")
            | (l->version != 1 ? yajl_gen_integer (g, (long long)l->run_unbounded_calls) : yajl_gen_null (g));
      format_bits (
          l->run_millibits < l->run_bit_budget_millibits ? l->run_bit_budget_millibits - l->run_millibits : 0,
          bits);
      st |= sp_yajl_gen_cstr (g, "run_bits_left")
            | (l->run_bit_budget_millibits > 0 && l->version != 1 ? yajl_gen_number (g, bits, strlen (bits))
                                                                  : yajl_gen_null (g));
      st |= yajl_gen_map_close (g);
    }

  st |= sp_yajl_gen_cstr (g, "repositories") | yajl_gen_array_open (g);
  for (size_t i = 0; i < s->n_repos; i++)
    {
      const struct sp_run_status_repo *r = &s->repos[i];
      char bits[32];

      format_bits (r->millibits, bits);
      st |= yajl_gen_map_open (g) | gen_str (g, "repo", r->name)
            | sp_yajl_gen_key_u64 (g, "invocations", r->invocations);
      st |= sp_yajl_gen_cstr (g, "bits")
            | (r->in_ledger ? yajl_gen_number (g, bits, strlen (bits)) : yajl_gen_null (g));
      st |= sp_yajl_gen_cstr (g, "unbounded_calls")
            | (r->in_ledger ? yajl_gen_integer (g, (long long)r->unbounded_calls) : yajl_gen_null (g));
      /* The ceiling is serve's --bit-budget: known only while one runs.  */
      {
        const struct sp_serve_file *sv = live->serve;
        uint64_t waiting = 0;
        bool has_waiting = sv != NULL && sp_serve_file_waiting (sv, r->name, &waiting);
        uint64_t ceiling = sv != NULL ? sv->bit_budget * 1000 : 0;

        st |= gen_u64_or_null (g, "bit_budget", ceiling > 0, ceiling / 1000);
        format_bits (r->millibits < ceiling ? ceiling - r->millibits : 0, bits);
        st |= sp_yajl_gen_cstr (g, "bits_left")
              | (ceiling > 0 && r->in_ledger ? yajl_gen_number (g, bits, strlen (bits)) : yajl_gen_null (g));
        st |= gen_u64_or_null (g, "waiting", has_waiting, waiting);
      }
      st |= yajl_gen_map_close (g);
    }
  st |= yajl_gen_array_close (g);

  st |= sp_yajl_gen_cstr (g, "audit") | yajl_gen_map_open (g);
  st |= sp_yajl_gen_cstr (g, "present") | yajl_gen_bool (g, s->audit_present);
  st |= sp_yajl_gen_key_u64 (g, "bytes", s->audit_bytes) | sp_yajl_gen_key_u64 (g, "read_from", s->read_from)
        | sp_yajl_gen_key_u64 (g, "records", s->records)
        | sp_yajl_gen_key_u64 (g, "torn_tail_bytes", s->torn_tail_bytes)
        | sp_yajl_gen_key_u64 (g, "runs", s->runs);
  st |= yajl_gen_map_close (g);

  st |= sp_yajl_gen_cstr (g, "latest_run");
  if (s->latest_run[0] == '\0')
    st |= yajl_gen_null (g);
  else
    {
      st |= yajl_gen_map_open (g) | gen_str (g, "id", s->latest_run) | gen_str (g, "first", s->latest_first)
            | gen_str (g, "last", s->latest_last);
      st |= gen_counts (g, "counts", &s->latest) | yajl_gen_map_close (g);
    }
  st |= gen_counts (g, "all_runs", &s->all);

  st |= sp_yajl_gen_key_u64 (g, "failures_total", s->failures_total);
  st |= sp_yajl_gen_cstr (g, "failure_causes") | yajl_gen_map_open (g);
  for (int c = 0; c < SP_CAUSE_COUNT; c++)
    if (s->causes[c] > 0)
      st |= sp_yajl_gen_key_u64 (g, sp_cause_name ((enum sp_cause)c), s->causes[c]);
  st |= yajl_gen_map_close (g);
  st |= sp_yajl_gen_cstr (g, "failures") | yajl_gen_array_open (g);
  for (size_t i = 0; i < s->n_failures; i++)
    st |= gen_failure (g, sp_run_status_failure (s, i));
  st |= yajl_gen_array_close (g);
  st |= gen_staged (g, staged, heads);

  st |= yajl_gen_map_close (g);
  return st == yajl_gen_status_ok ? 0 : -1;
}

static int
print_json (const char *state, const struct sp_run_status *s, const struct sp_staged *staged,
            const struct seed_head *heads, int held, const struct sp_state_owner *owner,
            const struct live *live)
{
  cleanup_yajl_gen yajl_gen g = yajl_gen_alloc (NULL);
  const unsigned char *buf;
  size_t len;

  if (g == NULL || !yajl_gen_config (g, yajl_gen_validate_utf8, 1)
      || render_json (g, state, s, staged, heads, held, owner, live) < 0
      || yajl_gen_get_buf (g, &buf, &len) != yajl_gen_status_ok)
    return -1;
  return fwrite (buf, 1, len, stdout) == len && putchar ('\n') != EOF ? 0 : -1;
}

int
sp_verb_status (int argc, char **argv)
{
  cleanup_error sp_error_t err = NULL;
  cleanup_run_status struct sp_run_status *st = NULL;
  cleanup_close int state_fd = -1;
  cleanup_free struct seed_head *heads = NULL;
  cleanup_serve_file struct sp_serve_file serve_file = { 0 };
  const char *state = NULL;
  int json = 0;
  const struct sp_option options[] = {
    { .name = "--state", .value = &state },
    { .name = "--json", .flag = &json },
  };
  const struct sp_run_status_options opt = { .owner = 0 };
  struct sp_state_owner owner;
  cleanup_staged struct sp_staged staged = { 0 };
  struct live live = { 0 };
  struct stat st_staged;
  bool has_staged, has_serve_file;
  int held;
  int ret;

  ret = sp_options_parse ("status", USAGE, argc, argv, options, sizeof (options) / sizeof (options[0]));
  if (ret != 0)
    return ret < 0 ? SP_EXIT_OK : ret;
  if (state == NULL)
    state = SP_DEFAULT_STATE;

  state_fd = TEMP_FAILURE_RETRY (open (state, O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (state_fd < 0)
    {
      sp_state_open_error (&err, state, errno);
      return fail ("--state: %s", sp_error_message (err));
    }
  /* The lock first, then serve.json: a serve that held the lock when it
     was asked and wrote the file then is live; a file whose pid does not
     hold it is stale.  */
  held = sp_state_lock_holder (state_fd, &owner, &err);
  if (held < 0)
    return fail ("--state: `%s`: %s", state, sp_error_message (err));
  if (sp_serve_file_read (state_fd, &serve_file, &has_serve_file, &err) < 0)
    return fail ("--state: `%s`: %s", state, sp_error_message (err));
  if (has_serve_file && held == 1 && owner.known && strcmp (owner.verb, "serve") == 0
      && owner.pid == serve_file.pid)
    live.serve = &serve_file;
  else if (has_serve_file)
    live.stale_pid = serve_file.pid;
  if (sp_run_status_read (state_fd, &opt, &st, &err) < 0)
    return fail ("--state: `%s`: %s", state, sp_error_message (err));
  /* What stage recorded, when it has: replaced by a rename, so one read
     sees one whole version, as with the ledger.  */
  has_staged = fstatat (state_fd, SP_STAGED_FILE, &st_staged, AT_SYMLINK_NOFOLLOW) == 0;
  if (!has_staged && errno != ENOENT)
    return fail ("--state: `%s`: %s: %s", state, SP_STAGED_FILE, strerror (errno));
  if (has_staged && sp_staged_load (state_fd, &staged, &err) < 0)
    return fail ("--state: `%s`: %s", state, sp_error_message (err));
  heads = calloc (staged.n + 1, sizeof (*heads));
  if (heads == NULL)
    return fail ("allocate: %s", strerror (errno));
  for (size_t i = 0; i < staged.n; i++)
    seed_head_read (&staged.seeds[i], &heads[i]);

  if (!json)
    {
      /* The owner first: a script reads the first line for it.  */
      print_owner (stdout, held, &owner);
      fprintf (stdout, "%-13s %s\n", "state", state);
      print_serve (stdout, held, &owner, &live);
    }
  if (json ? print_json (state, st, has_staged ? &staged : NULL, heads, held, &owner, &live) < 0
           : (print_human (stdout, st, has_staged ? &staged : NULL, heads, &live), 0))
    return fail ("write the status");
  if (fflush (stdout) != 0 || ferror (stdout))
    return fail ("write the status: %s", strerror (errno));
  return SP_EXIT_OK;
}
